/* Fuzzes the informer's compact-object scanner (src/informer/cobj.c), which
 * reads list responses and watch events from the network, against jansson.
 *
 * The first byte picks the options (bit 0: keep managedFields, bit 1:
 * metadata only) and, in its upper bits, the chunk size the streaming list
 * decoder is fed with; the rest is the JSON text, in a buffer of exactly
 * its length so ASan catches any read past the end.
 *
 * Invariants checked (abort on violation):
 *  - ckube__cobj_parse accepts exactly when json_loadb (no flags: duplicate
 *    keys allowed, the last one wins) accepts a JSON object, except that it
 *    refuses the NUL byte jansson lets through after a number or literal;
 *  - then the block's tree equals jansson's with what the options drop
 *    taken out (metadata.managedFields; everything but apiVersion, kind
 *    and metadata), and its key, namespace, resourceVersion and generation
 *    are the tree's;
 *  - as a watch event, the text is refused as invalid exactly when jansson
 *    refuses it, and an accepted event's object (or ERROR status) is
 *    jansson's "object" member, options applied;
 *  - the same text as a list body decodes to the same items, the same
 *    resourceVersion and continue token and the same result code whether
 *    it is scanned whole (ckube__cobj_parse_list) or fed to the streaming
 *    decoder in chunks.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/informer.h"
#include "ckube/json.h"
#include "informer/informer_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what, const char *text, size_t len)
{
    if (cond)
        return;
    fprintf(stderr, "fuzz_cobj: %s (%zu bytes)\n", what, len);
    fwrite(text, 1, len < 400 ? len : 400, stderr);
    fputc('\n', stderr);
    abort();
}

/* jansson's tree with what the options drop taken out (in place). */
static void apply_opts(json_t *t, const ckube__cobj_opts *o)
{
    json_t *meta = json_object_get(t, "metadata");
    if (!o->keep_managed_fields && json_is_object(meta))
        json_object_del(meta, "managedFields");
    if (o->metadata_only) {
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe(t, tmp, k, v)
        {
            if (strcmp(k, "apiVersion") && strcmp(k, "kind") && strcmp(k, "metadata"))
                json_object_del(t, k);
        }
    }
}

static void check_object(const char *text, size_t len, const ckube__cobj_opts *o)
{
    char *err = NULL;
    ckube__cobj *c = ckube__cobj_parse(text, len, o, &err);
    json_error_t jerr;
    json_t *ref = json_loadb(text, len, 0, &jerr);
    int ref_ok = ref && json_is_object(ref);
    /* jansson skips one NUL byte right after a number or literal (it loses
     * a pushed-back NUL: "[1\0]" loads); src/common/json_parse.c copies
     * that to stay a drop-in, the informer's scanner refuses NUL bytes
     * outright, which is what RFC 8259 says. */
    if (!c && ref_ok && memchr(text, '\0', len))
        ref_ok = 0;
    check(!c == !ref_ok, c ? "accepted what jansson rejects" : "rejected what jansson accepts",
          text, len);
    check(c || err, "rejected without an error", text, len);
    free(err);
    if (c) {
        apply_opts(ref, o);
        json_t *t = ckube__cobj_tree(c);
        check(t && json_equal(t, ref), "tree differs from jansson's", text, len);
        json_decref(t);
        check(strlen(ckube__cobj_json(c)) == c->json_len, "block text length", text, len);
        char *key = ckube_meta_namespace_key(ref);
        check(!strcmp(ckube__cobj_key(c), key ? key : ""), "key", text, len);
        free(key);
        const char *ns = ckube_obj_namespace(ref);
        check(!strcmp(ckube__cobj_namespace(c), ns ? ns : ""), "namespace", text, len);
        const char *rv = ckube_obj_resource_version(ref);
        const char *crv = ckube__cobj_rv(c);
        check(rv && *rv ? crv && !strcmp(crv, rv) : !crv, "resourceVersion", text, len);
        json_t *g = ckube_json_get_path(ref, "metadata.generation");
        check(c->generation == (json_is_integer(g) ? json_integer_value(g) : 0), "generation", text,
              len);
        ckube__cobj_unref(c);
    }
    json_decref(ref);
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static int push_item(void *ud, ckube__cobj *c)
{
    return ckube__clist_push(ud, ckube__cobj_ref(c));
}

/* The same list through on_item and the builder thread (started at
 * once): the same verdict, and the same items when it is a list. */
static void check_list_builder(const char *text, size_t len, const ckube__cobj_opts *o,
                               size_t chunk, int r1, const ckube__clist *whole)
{
    ckube__clist items = {0}, meta = {0};
    char *e = NULL;
    ckube__clist_stream *st = ckube__clist_stream_new(o);
    if (!st)
        return;
    ckube__clist_stream_on_item(st, push_item, &items);
    ckube__clist_stream_builder_from(st, 0);
    for (size_t off = 0; off < len; off += chunk)
        ckube__clist_stream_feed(st, text + off, len - off < chunk ? len - off : chunk);
    int r = ckube__clist_stream_finish(st, &meta, &e);
    ckube__clist_stream_free(st);
    check(r == r1, "list through the builder: another result", text, len);
    if (r1 == 0) {
        check(items.n == whole->n && meta.n == 0, "list through the builder: another item count",
              text, len);
        for (size_t i = 0; i < whole->n && i < items.n; i++)
            check(!strcmp(ckube__cobj_json(whole->items[i]), ckube__cobj_json(items.items[i])) &&
                      !strcmp(ckube__cobj_key(whole->items[i]), ckube__cobj_key(items.items[i])) &&
                      whole->items[i]->generation == items.items[i]->generation,
                  "list through the builder: another item", text, len);
    }
    ckube__clist_clear(&items);
    ckube__clist_clear(&meta);
    free(e);
}

static void check_list(const char *text, size_t len, const ckube__cobj_opts *o, size_t chunk)
{
    ckube__clist whole = {0}, fed = {0};
    char *e1 = NULL, *e2 = NULL;
    int r1 = ckube__cobj_parse_list(text, len, o, &whole, &e1);
    ckube__clist_stream *st = ckube__clist_stream_new(o);
    if (!st) {
        ckube__clist_clear(&whole);
        free(e1);
        return;
    }
    for (size_t off = 0; off < len; off += chunk)
        ckube__clist_stream_feed(st, text + off, len - off < chunk ? len - off : chunk);
    int r2 = ckube__clist_stream_finish(st, &fed, &e2);
    ckube__clist_stream_free(st);
    check_list_builder(text, len, o, chunk, r1, &whole);
    if (r1 != r2)
        fprintf(stderr, "whole: %d (%s), streamed in %zu-byte chunks: %d (%s)\n", r1, e1 ? e1 : "-",
                chunk, r2, e2 ? e2 : "-");
    check(r1 == r2, "streamed list: another result", text, len);
    if (r1 == 0) {
        check(whole.n == fed.n, "streamed list: another item count", text, len);
        for (size_t i = 0; i < whole.n && i < fed.n; i++)
            check(!strcmp(ckube__cobj_json(whole.items[i]), ckube__cobj_json(fed.items[i])) &&
                      !strcmp(ckube__cobj_key(whole.items[i]), ckube__cobj_key(fed.items[i])),
                  "streamed list: another item", text, len);
        if (!same_str(whole.resource_version, fed.resource_version) ||
            !same_str(whole.continue_token, fed.continue_token) || whole.skipped != fed.skipped)
            fprintf(stderr, "whole: rv %s continue %s skipped %zu; streamed: %s %s %zu\n",
                    whole.resource_version ? whole.resource_version : "-",
                    whole.continue_token ? whole.continue_token : "-", whole.skipped,
                    fed.resource_version ? fed.resource_version : "-",
                    fed.continue_token ? fed.continue_token : "-", fed.skipped);
        check(same_str(whole.resource_version, fed.resource_version) &&
                  same_str(whole.continue_token, fed.continue_token) &&
                  whole.skipped == fed.skipped,
              "streamed list: other list metadata", text, len);
    }
    ckube__clist_clear(&whole);
    ckube__clist_clear(&fed);
    free(e1);
    free(e2);
}

/* The same text as one watch event. */
static void check_event(const char *text, size_t len, const ckube__cobj_opts *o)
{
    ckube__cevent ev;
    char *err = NULL;
    int rc = ckube__cobj_parse_event(text, len, o, &ev, &err);
    json_error_t jerr;
    json_t *ref = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    int ref_ok = ref != NULL;
    if (rc == -1 && ref_ok && memchr(text, '\0', len))
        ref_ok = 0; /* jansson's NUL quirk, as above */
    check((rc == -1) == !ref_ok,
          rc == -1 ? "event: rejected what jansson accepts"
                   : "event: accepted what jansson rejects",
          text, len);
    check(rc == 0 || err, "event: refused without an error", text, len);
    if (rc == 0) {
        json_t *want = json_object_get(ref, "object");
        check(!ev.obj != !ev.status, "event: neither or both of object and status", text, len);
        if (ev.obj) {
            json_t *copy = json_deep_copy(want);
            apply_opts(copy, o);
            json_t *t = ckube__cobj_tree(ev.obj);
            check(t && json_equal(t, copy), "event: object differs from jansson's", text, len);
            json_decref(t);
            json_decref(copy);
        } else {
            check(json_equal(ev.status, want), "event: status differs from jansson's", text, len);
        }
    }
    ckube__cobj_unref(ev.obj);
    json_decref(ev.status);
    json_decref(ref);
    free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    ckube__cobj_opts o = {.keep_managed_fields = data[0] & 1, .metadata_only = (data[0] & 2) != 0};
    size_t chunk = (size_t)(data[0] >> 2) + 1; /* 1..64 bytes */
    size_t len = size - 1;
    char *text = malloc(len ? len : 1);
    if (!text)
        return 0;
    memcpy(text, data + 1, len);
    check_object(text, len, &o);
    check_list(text, len, &o, chunk);
    check_event(text, len, &o);
    free(text);
    return 0;
}
