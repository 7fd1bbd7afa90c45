/* The watch cache; see cacher.h for the model and the locking rules. */
#include "apiserver/cacher/cacher.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "apiserver/codec/jscan.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "common/json_parse.h"
#include "common/xalloc.h"

static int cobj_cmp(const cobj *a, const cobj *b)
{
    return strcmp(a->key, b->key);
}

RB_HEAD(ctree, cobj);
RB_GENERATE_STATIC(ctree, cobj, node, cobj_cmp)

typedef struct cevent {
    cevent_type type;
    int64_t rev;
    cobj *obj;  /* new state; for DELETED the last state at the delete revision */
    cobj *prev; /* previous state (NULL for ADDED) */
} cevent;

typedef struct bucket {
    char *prefix;
    size_t prefix_len;
    struct ctree tree;
    size_t count;
    size_t bytes;
    cevent *ring;
    size_t ring_cap, ring_head, ring_len;
    size_t ring_max;   /* ring_cap grows (doubling) up to this */
    int64_t start_rev; /* watches from a revision >= this can be served */
    const cacher_field *fields;
    cacher_field *merged; /* owned: fields when several types configured it */
    struct bucket *next;
} bucket;

typedef struct listener {
    char *prefix;
    cacher_event_fn fn;
    void *arg;
    bool changes_only; /* no replay of the loaded objects */
    struct listener *next;
} listener;

struct cacher {
    storage *st;
    pthread_rwlock_t lock;
    bucket *buckets;
    size_t nbuckets;
    size_t ring_capacity;
    int64_t rev;       /* newest applied revision; guarded by lock */
    int64_t start_rev; /* revision of the initial list */
    void (*notify)(void *);
    void *notify_arg;
    listener *listeners;
    fresh *fresh; /* waits for revisions; only on a shared storage */
};

/* ---- objects ---------------------------------------------------------- */

/* Memory layout. A cobj is one allocation: the struct, its label pointer
 * array, then the bytes of json, key, nsname and the label strings, so a
 * cached object costs one malloc (start-up with 100k objects is dominated
 * by per-object work) and one chunk header. Selectable fields, which only
 * some resources have, are a second block (pointer array and strings) in
 * o->fields. cobj_unref frees both blocks and nothing else. The first
 * comes from obj_alloc (cacher_set_object_allocator), the second from
 * malloc. */

static void *(*obj_alloc)(size_t) = malloc;
static void (*obj_release)(void *) = free;

void cacher_set_object_allocator(void *(*alloc)(size_t), void (*release)(void *))
{
    obj_alloc = alloc;
    obj_release = release;
}

cobj *cobj_ref(cobj *o)
{
    if (o)
        atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
    return o;
}

void cobj_unref(cobj *o)
{
    if (!o || atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) != 1)
        return;
    free(o->fields);
    obj_release(o);
}

static const char *pairs_lookup(char **v, size_t n, const char *key)
{
    /* Pairs are sorted by key: binary search. */
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(v[mid * 2], key);
        if (!c)
            return v[mid * 2 + 1];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *cobj_label(void *ctx, const char *key)
{
    const cobj *o = ctx;
    return pairs_lookup(o->labels, o->nlabels, key);
}

const char *cobj_field(void *ctx, const char *key)
{
    const cobj *o = ctx;
    if (!strcmp(key, "metadata.name"))
        return o->name;
    if (!strcmp(key, "metadata.namespace"))
        return o->ns;
    return pairs_lookup(o->fields, o->nfields, key);
}

json_t *cobj_decode(const cobj *o)
{
    return ckube__json_loadb(o->json, o->len, 0, NULL);
}

static int pair_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts an array of (key, value) pairs by key. */
static void sort_pairs(char **v, size_t npairs)
{
    /* Sort pairs as 2-element records. */
    struct pr {
        char *k, *v;
    };
    if (npairs > 1)
        qsort(v, npairs, sizeof(struct pr), pair_cmp);
}

static void free_pairs(char **v, size_t npairs)
{
    for (size_t i = 0; v && i < npairs * 2; i++)
        free(v[i]);
    free(v);
}

/* One block holding `npairs` pairs: the pointer array, then the strings
 * (copied from v). NULL if npairs is 0 or on allocation failure. */
static char **pack_pairs(char **v, size_t npairs)
{
    size_t bytes = 0;
    for (size_t i = 0; i < npairs * 2; i++)
        bytes += strlen(v[i]) + 1;
    char **out = npairs ? xmalloc(npairs * 2 * sizeof *out + bytes) : NULL;
    if (!out)
        return NULL;
    char *s = (char *)(out + npairs * 2);
    for (size_t i = 0; i < npairs * 2; i++) {
        size_t n = strlen(v[i]) + 1;
        out[i] = memcpy(s, v[i], n);
        s += n;
    }
    return out;
}

/* Allocates a cobj with room for `json_len` bytes of JSON plus a NUL at
 * o->json (left unwritten; o->len is set), `nlabels` label pairs (o->labels
 * points at that many NULL pairs, o->nlabels is 0) and `label_bytes` bytes
 * of label strings, NULs included, starting at *strings. Sets key, ns,
 * name, rev and create_rev. NULL on allocation failure. */
static cobj *cobj_alloc(const char *key, size_t prefix_len, int64_t rev, int64_t create_rev,
                        size_t json_len, size_t nlabels, size_t label_bytes, char **strings)
{
    size_t keylen = strlen(key), nslen = keylen - prefix_len;
    size_t size = sizeof(cobj) + nlabels * 2 * sizeof(char *) + json_len + 1 + keylen + 1 + nslen +
                  1 + label_bytes;
    cobj *o = obj_alloc(size);
    if (!o)
        xalloc_die();
    memset(o, 0, sizeof *o);
    atomic_init(&o->refs, 1);
    o->rev = rev;
    o->create_rev = create_rev;
    o->labels = nlabels ? (char **)(o + 1) : NULL;
    for (size_t i = 0; i < nlabels * 2; i++)
        o->labels[i] = NULL;
    char *p = (char *)(o + 1) + nlabels * 2 * sizeof(char *);
    o->json = p;
    o->len = json_len;
    p += json_len + 1;
    o->key = memcpy(p, key, keylen + 1);
    p += keylen + 1;
    o->nsname = memcpy(p, key + prefix_len, nslen + 1);
    p += nslen + 1;
    *strings = p;
    char *slash = strchr(o->nsname, '/');
    if (slash) {
        *slash = 0;
        o->ns = o->nsname;
        o->name = slash + 1;
    } else {
        o->ns = "";
        o->name = o->nsname;
    }
    return o;
}

cobj *cobj_with_json(const cobj *o, const char *json, size_t len)
{
    char *strings;
    size_t prefix_len = strlen(o->key) - strlen(o->ns) - (*o->ns ? 1 : 0) - strlen(o->name);
    cobj *c = cobj_alloc(o->key, prefix_len, o->rev, o->create_rev, len, 0, 0, &strings);
    memcpy(c->json, json, len);
    c->json[len] = 0;
    return c;
}

/* ---- the slow path: a jansson tree ---------------------------------- */

static char **extract_labels(const json_t *obj, size_t *n)
{
    json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    *n = 0;
    if (!json_is_object(labels) || !json_object_size(labels))
        return NULL;
    char **v = xcalloc(json_object_size(labels) * 2, sizeof *v);
    const char *k;
    json_t *val;
    json_object_foreach(labels, k, val)
    {
        if (!json_is_string(val))
            continue;
        v[*n * 2] = xstrdup(k);
        v[*n * 2 + 1] = xstrdup(json_string_value(val));
        (*n)++;
        if (!v[*n * 2 - 2] || !v[*n * 2 - 1]) {
            free_pairs(v, *n);
            *n = 0;
            return NULL;
        }
    }
    sort_pairs(v, *n);
    return v;
}

static char *scalar_string(const json_t *v)
{
    char buf[64];
    if (json_is_string(v))
        return xstrdup(json_string_value(v));
    if (json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return xstrdup(buf);
    }
    if (json_is_boolean(v))
        return xstrdup(json_is_true(v) ? "true" : "false");
    return xstrdup("");
}

static size_t count_fields(const cacher_field *fields)
{
    size_t cnt = 0;
    while (fields && fields[cnt].field)
        cnt++;
    return cnt;
}

/* Sets o->fields from a tree. Returns 0, or -1 on allocation failure. */
/* A field's value as text (malloc'd; "" when absent), or NULL on OOM. */
typedef char *(*field_value_fn)(const void *src, const char *path);

/* Sets o->fields from `src`, each value as value_of reads it there.
 * Returns 0, or -1 on allocation failure. */
static int set_fields(cobj *o, const cacher_field *fields, field_value_fn value_of, const void *src)
{
    size_t cnt = count_fields(fields);
    if (!cnt)
        return 0;
    char **v = xcalloc(cnt * 2, sizeof *v);
    bool ok = true;
    for (size_t i = 0; i < cnt; i++) {
        v[i * 2] = xstrdup(fields[i].field);
        v[i * 2 + 1] = value_of(src, fields[i].path);
        ok = ok && v[i * 2] && v[i * 2 + 1];
    }
    if (ok) {
        sort_pairs(v, cnt);
        o->fields = pack_pairs(v, cnt);
        o->nfields = o->fields ? cnt : 0;
    }
    free_pairs(v, cnt);
    return o->fields ? 0 : -1;
}

static char *tree_value(const void *obj, const char *path)
{
    return scalar_string(ckube_json_get_path(obj, path));
}

/* Decodes, sets metadata.resourceVersion, encodes again. Returns the
 * object, or NULL with *err = 0 if the bytes are not a JSON object, -1 on
 * allocation failure. */
static cobj *cobj_decoded(const char *key, size_t prefix_len, const char *value, size_t len,
                          int64_t rev, int64_t create_rev, const char *rv,
                          const cacher_field *fields, int *err)
{
    *err = 0;
    json_t *obj = ckube__json_loadb(value, len, 0, NULL);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return NULL;
    }
    *err = -1;
    json_t *meta = ckube_json_object_ensure(obj, "metadata");
    json_object_set_new(meta, "resourceVersion", json_string(rv));
    size_t jlen = 0, nlabels = 0, lbytes = 0;
    char *json = ckube_json_dumps(obj, &jlen);
    char **labels = extract_labels(obj, &nlabels);
    for (size_t i = 0; i < nlabels * 2; i++)
        lbytes += strlen(labels[i]) + 1;
    char *s;
    cobj *o = json ? cobj_alloc(key, prefix_len, rev, create_rev, jlen, nlabels, lbytes, &s) : NULL;
    if (o) {
        memcpy(o->json, json, jlen + 1);
        for (size_t i = 0; i < nlabels * 2; i++) {
            size_t n = strlen(labels[i]) + 1;
            o->labels[i] = memcpy(s, labels[i], n);
            s += n;
        }
        o->nlabels = nlabels; /* already sorted */
        if (set_fields(o, fields, tree_value, obj)) {
            cobj_unref(o);
            o = NULL;
        }
    }
    free(json);
    free_pairs(labels, nlabels);
    json_decref(obj);
    return o;
}

/* ---- the fast path: canonical bytes --------------------------------- */

/* The field at `path` of a cobj's canonical bytes, as tree_value reads
 * it from a tree. */
static char *scan_value(const void *src, const char *path)
{
    const cobj *o = src;
    jspan val;
    return jscan_path(o->json, o->len, 0, path, &val) ? jscan_scalar_dup(o->json, val)
                                                      : xstrdup("");
}

/* For bytes in the canonical form ckube stores (see jscan.h): splices
 * metadata.resourceVersion in and reads labels and fields without building
 * a tree; the result is byte for byte what cobj_decoded gives. Returns the
 * object, or NULL with *err = 0 if the bytes do not qualify (a top-level
 * object with an object metadata), -1 on allocation failure. */
static cobj *cobj_scanned(const char *key, size_t prefix_len, const char *value, size_t len,
                          int64_t rev, int64_t create_rev, const char *rv,
                          const cacher_field *fields, const jscan_meta *known, int *err)
{
    jscan_meta m;
    *err = 0;
    if (!len || value[0] != '{')
        return NULL;
    if (known) /* the writer made these bytes with jscan_dump: canonical */
        m = *known;
    else if (!jscan_canonical(value, len, &m))
        return NULL;
    if (!m.metadata)
        return NULL;
    *err = -1;
    /* Labels: string values of metadata.labels, read from `value` (their
     * bytes are the same in the result). */
    size_t nlabels = 0, lbytes = 0, pos = m.labels;
    jspan k, v;
    bool lobj = m.labels && value[m.labels] == '{';
    while (lobj && jscan_next_member(value, len, &pos, &k, &v)) {
        if (jscan_kind(value, v) == '"') {
            nlabels++;
            lbytes += k.len + 1 + v.len - 1; /* unescaped sizes are at most these */
        }
    }
    size_t jlen = jscan_set_rv(value, len, &m, rv, NULL);
    char *s;
    cobj *o = cobj_alloc(key, prefix_len, rev, create_rev, jlen, nlabels, lbytes, &s);
    if (!o)
        return NULL;
    jscan_set_rv(value, len, &m, rv, o->json);
    pos = m.labels;
    while (lobj && o->nlabels < nlabels && jscan_next_member(value, len, &pos, &k, &v)) {
        if (jscan_kind(value, v) != '"')
            continue;
        o->labels[o->nlabels * 2] = s;
        s += jscan_str_copy(value, k, s) + 1;
        o->labels[o->nlabels * 2 + 1] = s;
        s += jscan_str_copy(value, (jspan){v.off + 1, v.len - 2}, s) + 1;
        o->nlabels++;
    }
    sort_pairs(o->labels, o->nlabels);
    if (set_fields(o, fields, scan_value, o)) {
        cobj_unref(o);
        return NULL;
    }
    *err = 0;
    return o;
}

/* Builds the cached form of a stored value: the served JSON with
 * metadata.resourceVersion = rev, labels and selectable fields. NULL if
 * the value is not a JSON object or on allocation failure (both logged).
 * `known`: the value's positions from the writer (a storage event's hint,
 * see store.c), which spares the scan; NULL: the value is scanned. */
static cobj *cobj_from_stored(const char *key, size_t prefix_len, const char *value, size_t len,
                              int64_t rev, int64_t create_rev, const cacher_field *fields,
                              const jscan_meta *known)
{
    char rv[32];
    snprintf(rv, sizeof rv, "%" PRId64, rev);
    int err;
    cobj *o = cobj_scanned(key, prefix_len, value, len, rev, create_rev, rv, fields, known, &err);
    if (!o && !err)
        o = cobj_decoded(key, prefix_len, value, len, rev, create_rev, rv, fields, &err);
    if (o)
        return o;
    if (err)
        CKUBE_ERROR("cacher: out of memory at %s", key);
    else
        CKUBE_ERROR("cacher: undecodable value at %s rev %" PRId64 "; skipped", key, rev);
    return NULL;
}

/* ---- buckets ---------------------------------------------------------- */

/* Length of the bucket prefix of a key: up to and including the fourth
 * '/' ("/registry/<group>/<resource>/"). 0 if the key has none. */
static size_t key_prefix_len(const char *key)
{
    int slashes = 0;
    for (size_t i = 0; key[i]; i++) {
        if (key[i] == '/' && ++slashes == 4)
            return i + 1;
    }
    return 0;
}

static bucket *find_bucket_n(cacher *c, const char *prefix, size_t len)
{
    for (bucket *b = c->buckets; b; b = b->next) {
        if (b->prefix_len == len && !memcmp(b->prefix, prefix, len))
            return b;
    }
    return NULL;
}

/* Caller holds the write lock (or is single-threaded set-up). */
static bucket *get_bucket_locked(cacher *c, const char *prefix, size_t len)
{
    bucket *b = find_bucket_n(c, prefix, len);
    if (b)
        return b;
    b = xcalloc(1, sizeof *b);
    b->prefix = xstrndup(prefix, len);
    b->prefix_len = len;
    RB_INIT(&b->tree);
    /* The ring grows on demand up to c->ring_capacity: most resources
     * see few writes, and 4096 events per resource type preallocated
     * would be most of an idle server's heap. */
    b->ring_max = c->ring_capacity;
    b->start_rev = c->start_rev;
    b->next = c->buckets;
    c->buckets = b;
    c->nbuckets++;
    return b;
}

/* Doubles the ring (at most to ring_max), unrolling it so the oldest
 * event is first. Returns false when it is at its maximum or out of
 * memory (the caller then evicts the oldest event instead). */
static bool ring_grow(bucket *b)
{
    if (b->ring_cap >= b->ring_max)
        return false;
    size_t cap = b->ring_cap ? b->ring_cap * 2 : 16;
    if (cap > b->ring_max)
        cap = b->ring_max;
    cevent *r = xmalloc(cap * sizeof *r);
    for (size_t i = 0; i < b->ring_len; i++)
        r[i] = b->ring[(b->ring_head + i) % b->ring_cap];
    free(b->ring);
    b->ring = r;
    b->ring_cap = cap;
    b->ring_head = 0;
    return true;
}

static void ring_push(bucket *b, cevent ev)
{
    if (b->ring_cap == 0 && !ring_grow(b)) {
        /* Out of memory before the first event: drop it, and make
         * watchers that needed it relist (410) rather than miss it. */
        b->start_rev = ev.rev;
        cobj_unref(ev.obj);
        cobj_unref(ev.prev);
        return;
    }
    if (b->ring_len == b->ring_cap && !ring_grow(b)) {
        cevent *old = &b->ring[b->ring_head];
        b->start_rev = old->rev;
        cobj_unref(old->obj);
        cobj_unref(old->prev);
        b->ring_head = (b->ring_head + 1) % b->ring_cap;
        b->ring_len--;
    }
    b->ring[(b->ring_head + b->ring_len) % b->ring_cap] = ev;
    b->ring_len++;
}

static cevent *ring_at(bucket *b, size_t i)
{
    return &b->ring[(b->ring_head + i) % b->ring_cap];
}

/* Index of the first event with rev > after. */
static size_t ring_find(bucket *b, int64_t after)
{
    size_t lo = 0, hi = b->ring_len;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ring_at(b, mid)->rev <= after)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- applying storage events --------------------------------------- */

typedef struct pending {
    bucket *b; /* NULL until phase 2 if the bucket did not exist */
    size_t prefix_len;
    cevent ev;
    const char *key;
} pending;

static void apply_batch(void *arg, const storage_event *evs, size_t n)
{
    cacher *c = arg;
    pending *p = xcalloc(n, sizeof *p);
    /* Phase 1: decode and encode outside the write lock. Only this thread
     * mutates trees, so reading previous objects under the read lock is
     * enough; several events of a batch may touch one key, so the newest
     * pending state wins over the tree. */
    pthread_rwlock_rdlock(&c->lock);
    for (size_t i = 0; i < n; i++) {
        const storage_event *e = &evs[i];
        size_t plen = e->type == STORAGE_EVENT_PROGRESS ? 0 : key_prefix_len(e->key);
        if (!plen)
            continue; /* progress (only the revision moves) or not an object's key */
        p[i].prefix_len = plen;
        p[i].key = e->key;
        p[i].b = find_bucket_n(c, e->key, plen);
        const cacher_field *fields = p[i].b ? p[i].b->fields : NULL;
        cobj *prev = NULL;
        for (size_t j = i; j-- > 0;) {
            if (p[j].key && !strcmp(p[j].key, e->key)) {
                prev = p[j].ev.type == CEV_DELETED ? NULL : cobj_ref(p[j].ev.obj);
                goto found;
            }
        }
        if (p[i].b) {
            cobj probe = {.key = (char *)e->key};
            prev = cobj_ref(RB_FIND(ctree, &p[i].b->tree, &probe));
        }
    found:
        p[i].ev.rev = e->rev;
        p[i].ev.prev = prev;
        if (e->type == STORAGE_EVENT_PUT) {
            p[i].ev.obj = cobj_from_stored(e->key, plen, e->value, e->value_len, e->rev,
                                           e->create_rev, fields, e->hint);
            p[i].ev.type = prev ? CEV_MODIFIED : CEV_ADDED;
        } else if (prev) {
            /* The last state, at the deletion revision. */
            p[i].ev.obj = cobj_from_stored(e->key, plen, prev->json, prev->len, e->rev,
                                           prev->create_rev, fields, NULL);
            p[i].ev.type = CEV_DELETED;
        }
        if (!p[i].ev.obj) {
            cobj_unref(prev);
            p[i].ev.prev = NULL;
        }
    }
    pthread_rwlock_unlock(&c->lock);

    /* Phase 2: link everything in under the write lock. */
    pthread_rwlock_wrlock(&c->lock);
    for (size_t i = 0; i < n; i++) {
        if (!p[i].ev.obj)
            continue;
        bucket *b = p[i].b ? p[i].b : get_bucket_locked(c, p[i].key, p[i].prefix_len);
        cobj *cur = RB_FIND(ctree, &b->tree, p[i].ev.obj);
        if (cur) {
            RB_REMOVE(ctree, &b->tree, cur);
            b->count--;
            b->bytes -= cur->len;
            cobj_unref(cur);
        }
        if (p[i].ev.type != CEV_DELETED) {
            RB_INSERT(ctree, &b->tree, cobj_ref(p[i].ev.obj));
            b->count++;
            b->bytes += p[i].ev.obj->len;
        }
        ring_push(b, p[i].ev);
    }
    if (n && evs[n - 1].rev > c->rev)
        c->rev = evs[n - 1].rev;
    pthread_rwlock_unlock(&c->lock);

    /* Listeners see the events after they are visible to readers. The ring
     * holds references, but a later batch could evict them, so hold our
     * own while calling out. */
    for (listener *l = c->listeners; l; l = l->next) {
        for (size_t i = 0; i < n; i++) {
            if (p[i].ev.obj && !strncmp(p[i].key, l->prefix, strlen(l->prefix)))
                l->fn(l->arg, p[i].ev.type, p[i].ev.obj);
        }
    }
    free(p);
    fresh_poke(c->fresh);
    if (c->notify)
        c->notify(c->notify_arg);
}

/* ---- life cycle ------------------------------------------------------ */

cacher *cacher_new(storage *st, size_t ring_capacity)
{
    cacher *c = xcalloc(1, sizeof *c);
    c->st = st;
    c->ring_capacity = ring_capacity ? ring_capacity : 4096;
    pthread_rwlock_init(&c->lock, NULL);
    return c;
}

static bool has_field(const cacher_field *fields, const char *name)
{
    for (size_t i = 0; fields && fields[i].field; i++)
        if (!strcmp(fields[i].field, name))
            return true;
    return false;
}

void cacher_configure_bucket(cacher *c, const char *prefix, const cacher_field *fields)
{
    pthread_rwlock_wrlock(&c->lock);
    bucket *b = get_bucket_locked(c, prefix, strlen(prefix));
    if (!b->fields) {
        b->fields = fields;
    } else if (fields) {
        /* another type kept in this bucket (events.k8s.io Events in core
         * Events'): the union, the first's entries first; the entries are
         * borrowed from the callers' arrays, which outlive the cacher */
        size_t n = count_fields(b->fields), m = count_fields(fields), k = n;
        cacher_field *u = xcalloc(n + m + 1, sizeof *u);
        memcpy(u, b->fields, n * sizeof *u);
        for (size_t i = 0; i < m; i++)
            if (!has_field(b->fields, fields[i].field))
                u[k++] = fields[i];
        free(b->merged);
        b->fields = b->merged = u;
    }
    pthread_rwlock_unlock(&c->lock);
}

void cacher_set_notify(cacher *c, void (*fn)(void *), void *arg)
{
    c->notify = fn;
    c->notify_arg = arg;
}

static void add_listener(cacher *c, const char *prefix, cacher_event_fn fn, void *arg,
                         bool changes_only)
{
    listener *l = xcalloc(1, sizeof *l);
    l->prefix = xstrdup(prefix);
    l->fn = fn;
    l->arg = arg;
    l->changes_only = changes_only;
    l->next = c->listeners;
    c->listeners = l;
}

void cacher_add_listener(cacher *c, const char *prefix, cacher_event_fn fn, void *arg)
{
    add_listener(c, prefix, fn, arg, false);
}

void cacher_add_change_listener(cacher *c, const char *prefix, cacher_event_fn fn, void *arg)
{
    add_listener(c, prefix, fn, arg, true);
}

/* Links a loaded object into bucket b (taking the reference). Caller
 * holds the write lock. */
static void link_loaded(bucket *b, cobj *o)
{
    if (RB_INSERT(ctree, &b->tree, o)) {
        cobj_unref(o); /* a key twice: a load gives each once */
        return;
    }
    b->count++;
    b->bytes += o->len;
}

/* Adds one stored object to its bucket. Caller holds the write lock. */
static void load_one(cacher *c, const char *key, const char *value, size_t len, int64_t mod_rev,
                     int64_t create_rev)
{
    size_t plen = key_prefix_len(key);
    if (!plen)
        return;
    bucket *b = get_bucket_locked(c, key, plen);
    cobj *o = cobj_from_stored(key, plen, value, len, mod_rev, create_rev, b->fields, NULL);
    if (o) /* else logged; the rest of the store still loads */
        link_loaded(b, o);
}

static int load_kv(void *arg, const storage_kv *kv)
{
    load_one(arg, kv->key, kv->value, kv->value_len, kv->mod_rev, kv->create_rev);
    return 0;
}

/* ---- the start-up list, in parallel ----------------------------------- *
 *
 * A million stored objects are seconds of work, most of it building their
 * cobjs (validating and splicing the bytes, and the kernel faulting in the
 * gigabytes they take), so start-up runs in three stages: a reader thread
 * runs storage_load and copies rows into batches; `nbuild` builder threads
 * (one per CPU, at most LOAD_MAX_BUILDERS) turn a batch's rows into cobjs;
 * the calling thread links the built objects into the buckets, so only it
 * touches them. storage_load gives every key once and in no particular
 * order, so batches may be built and linked in any order. At most
 * LOAD_BATCHES batches exist; their buffers are mmap'd, so that memory
 * goes back to the system when the load ends rather than staying in the
 * heap. Builders read only the buckets configured before the load (their
 * selectable fields); one created for another prefix has none.
 *
 * A batch is up to 2,048 rows or 2 MiB (a thousand or so 1.5 KB objects):
 * every hand-over wakes the other stages, and at 256 rows and 256 KiB a
 * million-object start spent a tenth of its CPU time and more of its wall
 * time switching between four threads on two CPUs (start-up 3.0-4.4 s,
 * 2.5-2.7 s with the larger batches, same machine and data). Ten batches
 * are at most 20 MiB, 1 % of those objects' memory. */

#define LOAD_MAX_BUILDERS 4
#define LOAD_BATCHES (2 * LOAD_MAX_BUILDERS + 2)
#define LOAD_BATCH_ROWS 2048 /* rows of a batch, at most */
#define LOAD_BATCH_BYTES (2048 * 1024)

typedef struct load_row {
    size_t key, value; /* offsets into the batch buffer (NUL-terminated) */
    size_t value_len;
    size_t prefix_len; /* of the key's bucket; 0: no bucket, skipped */
    int64_t mod_rev, create_rev;
} load_row;

typedef struct load_batch {
    load_row rows[LOAD_BATCH_ROWS];
    cobj *objs[LOAD_BATCH_ROWS]; /* built; NULL for a skipped row */
    size_t n;
    char *buf; /* mmap'd, cap bytes */
    size_t used, cap;
    struct load_batch *next;
} load_batch;

typedef struct loader {
    storage *st;
    bucket **known; /* the buckets configured before the load (read-only) */
    size_t nknown;
    pthread_mutex_t mu;
    pthread_cond_t cv;            /* any change below */
    load_batch *full, *full_tail; /* read, to build; FIFO; guarded by mu */
    load_batch *built;            /* to link; guarded by mu */
    load_batch *empty;            /* free batches; guarded by mu */
    size_t nbatches;              /* allocated; guarded by mu */
    bool done;                    /* the reader finished; guarded by mu */
    size_t building;              /* builder threads running; guarded by mu */
    int rc;                       /* the reader's result, once done */
    int64_t rev;
    load_batch *cur; /* the reader's batch being filled (reader only) */
} loader;

static void batch_free(load_batch *b)
{
    if (b && b->buf)
        munmap(b->buf, b->cap);
    free(b);
}

/* Makes room for `need` bytes in b's buffer (only when b is empty or the
 * buffer is too small for one row). False on allocation failure. */
static bool batch_reserve(load_batch *b, size_t need)
{
    if (b->buf && need <= b->cap)
        return true;
    size_t cap = need > LOAD_BATCH_BYTES ? need : LOAD_BATCH_BYTES;
    char *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return false;
    if (b->buf)
        munmap(b->buf, b->cap);
    b->buf = p;
    b->cap = cap;
    return true;
}

/* Reader: hands the current batch over (if it holds rows). */
static void loader_flush(loader *L)
{
    load_batch *b = L->cur;
    if (!b || !b->n)
        return;
    L->cur = NULL;
    pthread_mutex_lock(&L->mu);
    if (L->full_tail)
        L->full_tail->next = b;
    else
        L->full = b;
    L->full_tail = b;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
}

/* Reader: an empty batch, waiting while LOAD_BATCHES are in use. NULL on
 * allocation failure. */
static load_batch *loader_take(loader *L)
{
    pthread_mutex_lock(&L->mu);
    while (!L->empty && L->nbatches == LOAD_BATCHES)
        pthread_cond_wait(&L->cv, &L->mu);
    load_batch *b = L->empty;
    if (b)
        L->empty = b->next;
    else if ((b = xcalloc(1, sizeof *b)))
        L->nbatches++;
    pthread_mutex_unlock(&L->mu);
    if (b) {
        b->next = NULL;
        b->n = b->used = 0;
    }
    return b;
}

/* Reader: storage_load callback copying one row into the batch. */
static int loader_copy(void *arg, const storage_kv *kv)
{
    loader *L = arg;
    size_t klen = strlen(kv->key), need = klen + 1 + kv->value_len + 1;
    load_batch *b = L->cur;
    if (b && (b->n == LOAD_BATCH_ROWS || b->used + need > b->cap)) {
        loader_flush(L);
        b = NULL;
    }
    if (!b)
        b = L->cur = loader_take(L);
    if (!b || !batch_reserve(b, need)) {
        L->rc = STORAGE_ERR_NOMEM;
        return 1;
    }
    load_row *r = &b->rows[b->n++];
    r->key = b->used;
    memcpy(b->buf + b->used, kv->key, klen + 1);
    r->value = b->used + klen + 1;
    memcpy(b->buf + r->value, kv->value, kv->value_len);
    b->buf[r->value + kv->value_len] = 0;
    r->value_len = kv->value_len;
    r->mod_rev = kv->mod_rev;
    r->create_rev = kv->create_rev;
    b->used += need;
    return 0;
}

static void *loader_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-cacheload"); /* top -H, perf, gdb */
    loader *L = arg;
    int64_t rev = 0;
    int rc = storage_load(L->st, "/registry/", loader_copy, L, &rev);
    loader_flush(L);
    batch_free(L->cur); /* only if allocation failed midway */
    L->cur = NULL;
    pthread_mutex_lock(&L->mu);
    L->rc = L->rc ? L->rc : rc;
    L->rev = rev;
    L->done = true;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

/* The selectable fields of the bucket with this prefix among those known
 * before the load; *last caches the previous answer (rows of one resource
 * tend to come together). */
static const cacher_field *known_fields(const loader *L, const char *key, size_t plen,
                                        bucket **last)
{
    bucket *b = *last;
    if (b && b->prefix_len == plen && !memcmp(b->prefix, key, plen))
        return b->fields;
    for (size_t i = 0; i < L->nknown; i++) {
        b = L->known[i];
        if (b->prefix_len == plen && !memcmp(b->prefix, key, plen)) {
            *last = b;
            return b->fields;
        }
    }
    return NULL;
}

/* Builder (or the calling thread when there is none): the cobjs of b's
 * rows. Undecodable values are logged and skipped, as are keys with no
 * bucket. */
static void batch_build(const loader *L, load_batch *b)
{
    bucket *last = NULL;
    for (size_t i = 0; i < b->n; i++) {
        load_row *r = &b->rows[i];
        const char *key = b->buf + r->key;
        r->prefix_len = key_prefix_len(key);
        b->objs[i] = NULL;
        if (!r->prefix_len)
            continue;
        const cacher_field *fields = known_fields(L, key, r->prefix_len, &last);
        b->objs[i] = cobj_from_stored(key, r->prefix_len, b->buf + r->value, r->value_len,
                                      r->mod_rev, r->create_rev, fields, NULL);
    }
}

static void *builder_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-cachebld");
    loader *L = arg;
    pthread_mutex_lock(&L->mu);
    for (;;) {
        while (!L->full && !L->done)
            pthread_cond_wait(&L->cv, &L->mu);
        load_batch *b = L->full;
        if (!b)
            break; /* read and drained */
        L->full = b->next;
        if (!L->full)
            L->full_tail = NULL;
        pthread_mutex_unlock(&L->mu);
        batch_build(L, b);
        pthread_mutex_lock(&L->mu);
        b->next = L->built;
        L->built = b;
        pthread_cond_broadcast(&L->cv);
    }
    L->building--;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

/* The calling thread: links b's objects into their buckets. Caller holds
 * the write lock. Rows of one resource tend to come together, so the
 * bucket of the previous row is tried first (a search of the bucket list
 * per object was 1 % of a start's CPU). */
static void batch_link(cacher *c, load_batch *b)
{
    bucket *last = NULL;
    for (size_t i = 0; i < b->n; i++) {
        cobj *o = b->objs[i];
        if (!o)
            continue;
        size_t plen = b->rows[i].prefix_len;
        if (!last || last->prefix_len != plen || memcmp(last->prefix, o->key, plen))
            last = get_bucket_locked(c, o->key, plen);
        link_loaded(last, o);
    }
}

/* The number of builder threads: one per online CPU, 1 to
 * LOAD_MAX_BUILDERS. */
static size_t builder_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > LOAD_MAX_BUILDERS ? LOAD_MAX_BUILDERS : (size_t)n;
}

/* Lists the store into the trees; caller holds the write lock. Returns 0
 * or a STORAGE_ERR_*, and the list's revision in *rev. */
static int load_all(cacher *c, int64_t *rev)
{
    loader L = {.st = c->st};
    L.known = xcalloc(c->nbuckets + 1, sizeof *L.known);
    for (bucket *b = c->buckets; b && L.known; b = b->next)
        L.known[L.nknown++] = b;
    pthread_mutex_init(&L.mu, NULL);
    pthread_cond_init(&L.cv, NULL);
    pthread_t th, builders[LOAD_MAX_BUILDERS];
    if (!L.known || pthread_create(&th, NULL, loader_main, &L) != 0) {
        CKUBE_WARN("cacher: no loader thread; listing on one thread");
        pthread_mutex_destroy(&L.mu);
        pthread_cond_destroy(&L.cv);
        free(L.known);
        return storage_load(c->st, "/registry/", load_kv, c, rev);
    }
    size_t want = builder_count(), nb = 0;
    pthread_mutex_lock(&L.mu);
    for (; nb < want; nb++) {
        if (pthread_create(&builders[nb], NULL, builder_main, &L) != 0)
            break; /* fewer builders; with none this thread builds */
        L.building++;
    }
    for (;;) {
        while (!L.built && L.building && !(L.full && !nb))
            pthread_cond_wait(&L.cv, &L.mu);
        load_batch *b = L.built;
        if (b) {
            L.built = b->next;
        } else if (!nb && (b = L.full)) {
            L.full = b->next;
            if (!L.full)
                L.full_tail = NULL;
            pthread_mutex_unlock(&L.mu);
            batch_build(&L, b);
            pthread_mutex_lock(&L.mu);
        } else if (!nb && !L.done) {
            pthread_cond_wait(&L.cv, &L.mu);
            continue;
        } else {
            break; /* read, built and drained */
        }
        pthread_mutex_unlock(&L.mu);
        batch_link(c, b);
        pthread_mutex_lock(&L.mu);
        b->next = L.empty;
        L.empty = b;
        pthread_cond_broadcast(&L.cv);
    }
    pthread_mutex_unlock(&L.mu);
    for (size_t i = 0; i < nb; i++)
        pthread_join(builders[i], NULL);
    pthread_join(th, NULL);
    while (L.empty) {
        load_batch *b = L.empty;
        L.empty = b->next;
        batch_free(b);
    }
    pthread_mutex_destroy(&L.mu);
    pthread_cond_destroy(&L.cv);
    free(L.known);
    *rev = L.rev;
    return L.rc;
}

static int64_t fresh_rev(void *c)
{
    return cacher_rev(c);
}

int cacher_start(cacher *c)
{
    int64_t rev = 0;
    pthread_rwlock_wrlock(&c->lock);
    int rc = load_all(c, &rev);
    c->rev = c->start_rev = rev;
    for (bucket *b = c->buckets; b; b = b->next)
        b->start_rev = rev;
    pthread_rwlock_unlock(&c->lock);
    if (rc)
        return rc;
    /* Initial objects reach listeners as ADDED, as if they were new: those
     * of every key the listener's prefix covers, as live events reach it
     * (apply_batch matches keys). A list reads one bucket, and a prefix
     * may span several (RBAC's listener takes its whole group: roles,
     * bindings and their cluster kinds), so each bucket it covers is
     * listed, with the narrower of the two prefixes. */
    for (listener *l = c->listeners; l; l = l->next) {
        if (l->changes_only)
            continue;
        size_t lp = strlen(l->prefix), np = 0;
        pthread_rwlock_rdlock(&c->lock);
        char **prefixes = xcalloc(c->nbuckets + 1, sizeof *prefixes);
        for (bucket *b = c->buckets; b; b = b->next) {
            if (b->prefix_len >= lp && !memcmp(b->prefix, l->prefix, lp))
                prefixes[np++] = xstrdup(b->prefix); /* a bucket under the prefix */
            else if (b->prefix_len < lp && !memcmp(l->prefix, b->prefix, b->prefix_len))
                prefixes[np++] = xstrdup(l->prefix); /* part of a bucket */
        }
        pthread_rwlock_unlock(&c->lock);
        for (size_t k = 0; k < np; k++) {
            size_t n;
            int64_t r;
            size_t more;
            cobj **objs = cacher_list(c, prefixes[k], NULL, NULL, 0, &n, &r, &more);
            for (size_t i = 0; i < n; i++)
                l->fn(l->arg, CEV_ADDED, objs[i]);
            cacher_objs_free(objs, n);
            free(prefixes[k]);
        }
        free(prefixes);
    }
    if (storage_shared(c->st) && !(c->fresh = fresh_new(c->st, fresh_rev, c)))
        return STORAGE_ERR_NOMEM; /* no thread */
    return storage_watch(c->st, rev, apply_batch, c);
}

bool cacher_shared(cacher *c)
{
    return c->fresh != NULL;
}

bool cacher_wait(cacher *c, int64_t rev, int timeout_ms, fresh_fn fn, void *arg)
{
    if (!c->fresh || (rev >= 0 && rev <= cacher_rev(c)))
        return true;
    fresh_wait(c->fresh, rev, timeout_ms, fn, arg);
    return false;
}

void cacher_free(cacher *c)
{
    if (!c)
        return;
    fresh_free(c->fresh);
    bucket *b = c->buckets;
    while (b) {
        bucket *nb = b->next;
        cobj *o, *tmp;
        RB_FOREACH_SAFE(o, ctree, &b->tree, tmp)
        {
            RB_REMOVE(ctree, &b->tree, o);
            cobj_unref(o);
        }
        for (size_t i = 0; i < b->ring_len; i++) {
            cobj_unref(ring_at(b, i)->obj);
            cobj_unref(ring_at(b, i)->prev);
        }
        free(b->ring);
        free(b->prefix);
        free(b->merged);
        free(b);
        b = nb;
    }
    listener *l = c->listeners;
    while (l) {
        listener *nl = l->next;
        free(l->prefix);
        free(l);
        l = nl;
    }
    pthread_rwlock_destroy(&c->lock);
    free(c);
}

/* ---- reads ---------------------------------------------------------- */

int64_t cacher_rev(cacher *c)
{
    pthread_rwlock_rdlock(&c->lock);
    int64_t r = c->rev;
    pthread_rwlock_unlock(&c->lock);
    return r;
}

cobj *cacher_get(cacher *c, const char *key)
{
    size_t plen = key_prefix_len(key);
    cobj *o = NULL;
    pthread_rwlock_rdlock(&c->lock);
    bucket *b = plen ? find_bucket_n(c, key, plen) : NULL;
    if (b) {
        cobj probe = {.key = (char *)key};
        o = cobj_ref(RB_FIND(ctree, &b->tree, &probe));
    }
    pthread_rwlock_unlock(&c->lock);
    return o;
}

/* Field values for a field selector: those the cacher keeps (built-in
 * types' selectable fields, name and namespace), else read from the
 * object's bytes at the field's path: a custom resource's selectableFields
 * (the request was checked against them), which may change with its CRD
 * and so are not kept. What is read lives until the match ends. */
typedef struct field_reader {
    const cobj *o;
    char **read;
    size_t nread, cap;
} field_reader;

static const char *read_field(void *ctx, const char *key)
{
    field_reader *fr = ctx;
    const char *v = cobj_field((void *)fr->o, key);
    if (v || fr->nread == fr->cap)
        return v;
    char *s = scan_value(fr->o, key);
    fr->read[fr->nread++] = s;
    return s;
}

static bool fields_match(const ckube_selector *sel, const cobj *o)
{
    /* one value read per requirement at most */
    char *stack[8];
    field_reader fr = {o, stack, 0, sel->nreqs};
    if (fr.cap > 8 && !(fr.read = xmalloc(fr.cap * sizeof *fr.read)))
        return false;
    bool ok = ckube_selector_matches(sel, read_field, &fr);
    for (size_t i = 0; i < fr.nread; i++)
        free(fr.read[i]);
    if (fr.read != stack)
        free(fr.read);
    return ok;
}

bool cfilter_matches(const cfilter *f, const cobj *o)
{
    if (!f)
        return true;
    if (f->ns && *f->ns && strcmp(f->ns, o->ns))
        return false;
    if (f->name && *f->name && strcmp(f->name, o->name))
        return false;
    if (f->labels && !ckube_selector_matches(f->labels, cobj_label, (void *)o))
        return false;
    if (f->fields && !fields_match(f->fields, o))
        return false;
    return true;
}

/* A key's state at an earlier revision: NULL when it did not exist. */
typedef struct past_state {
    const char *key;
    cobj *obj;    /* borrowed from the ring */
    size_t order; /* the event's place in the ring: the earliest wins */
} past_state;

static int cmp_past(const void *a, const void *b)
{
    const past_state *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* The keys under prefix (after after_key) that changed after at_rev, each
 * with its state at at_rev, from the ring (which holds every event after
 * b->start_rev): the earliest event after at_rev tells it, its previous
 * state (an ADDED one: the key did not exist). Sorted by key, one entry
 * per key. Called with the lock held; NULL with *n = 0 when none. */
static past_state *past_states(const bucket *b, const char *prefix, size_t prefix_len,
                               const char *after_key, int64_t at_rev, size_t *n)
{
    *n = 0;
    size_t cnt = 0;
    for (size_t i = b->ring_len; i-- > 0 && b->ring[(b->ring_head + i) % b->ring_cap].rev > at_rev;)
        cnt++;
    past_state *ps = cnt ? xmalloc(cnt * sizeof *ps) : NULL;
    if (!ps)
        return NULL;
    size_t k = 0;
    for (size_t j = b->ring_len - cnt; j < b->ring_len; j++) {
        const cevent *e = &b->ring[(b->ring_head + j) % b->ring_cap];
        const char *key = e->obj->key;
        if (strncmp(key, prefix, prefix_len) || (after_key && strcmp(key, after_key) <= 0))
            continue;
        ps[k++] = (past_state){key, e->type == CEV_ADDED ? NULL : e->prev, j};
    }
    qsort(ps, k, sizeof *ps, cmp_past);
    size_t u = 0;
    for (size_t j = 0; j < k; j++)
        if (!u || strcmp(ps[u - 1].key, ps[j].key))
            ps[u++] = ps[j];
    *n = u;
    return ps;
}

int cacher_list_at(cacher *c, const char *prefix, const char *after_key, const cfilter *f,
                   size_t limit, int64_t at_rev, cobj ***objs, size_t *n, int64_t *rev,
                   size_t *more, int64_t *oldest)
{
    size_t plen = key_prefix_len(prefix);
    size_t cap = 64, cnt = 0, left = 0, npast = 0, pi = 0;
    cobj **out = xmalloc(cap * sizeof *out);
    past_state *past = NULL;
    *objs = NULL;
    *n = *more = 0;
    pthread_rwlock_rdlock(&c->lock);
    *rev = c->rev;
    bucket *b = plen ? find_bucket_n(c, prefix, plen) : NULL;
    size_t prefix_len = strlen(prefix);
    if (at_rev > 0 && at_rev < c->rev) {
        if (b && at_rev < b->start_rev) {
            *oldest = b->start_rev;
            pthread_rwlock_unlock(&c->lock);
            free(out);
            return -1;
        }
        if (b)
            past = past_states(b, prefix, prefix_len, after_key, at_rev, &npast);
        *rev = at_rev;
    }
    if (b && prefix_len == plen) {
        /* The whole resource: its count (and the keys changed since
         * at_rev) bounds the answer, so one allocation instead of a
         * doubling series. At a million objects the doublings' copies
         * had the old and new arrays live at once: 8 MiB more peak RSS
         * per list under mimalloc, which cannot grow a mapped block in
         * place as glibc's realloc does. */
        size_t bound = b->count + npast;
        if (limit && limit < bound)
            bound = limit;
        if (bound > cap) {
            cap = bound;
            out = xrealloc(out, cap * sizeof *out);
        }
    }
    if (b && out) {
        cobj probe = {.key = (char *)(after_key ? after_key : prefix)};
        cobj *o = RB_NFIND(ctree, &b->tree, &probe);
        if (o && after_key && !strcmp(o->key, after_key))
            o = RB_NEXT(ctree, &b->tree, o);
        if (o && strncmp(o->key, prefix, prefix_len))
            o = NULL;
        /* Merge, in key order, the live objects with the keys that changed
         * since at_rev, whose state then replaces theirs. */
        while (o || pi < npast) {
            int cmp = !o ? 1 : pi == npast ? -1 : strcmp(o->key, past[pi].key);
            cobj *state = cmp < 0 ? o : past[pi].obj;
            if (cmp >= 0)
                pi++;
            if (cmp <= 0) {
                o = RB_NEXT(ctree, &b->tree, o);
                if (o && strncmp(o->key, prefix, prefix_len))
                    o = NULL;
            }
            if (!state || !cfilter_matches(f, state))
                continue;
            if (limit && cnt == limit) {
                left++;
                continue;
            }
            if (cnt == cap) {
                cap *= 2;
                cobj **nn = xrealloc(out, cap * sizeof *out);
                out = nn;
            }
            out[cnt++] = cobj_ref(state);
        }
    }
    pthread_rwlock_unlock(&c->lock);
    free(past);
    *objs = out;
    *n = cnt;
    *more = left;
    return 0;
}

cobj **cacher_list(cacher *c, const char *prefix, const char *after_key, const cfilter *f,
                   size_t limit, size_t *n, int64_t *rev, size_t *more)
{
    cobj **out;
    int64_t oldest;
    cacher_list_at(c, prefix, after_key, f, limit, 0, &out, n, rev, more, &oldest);
    return out;
}

void cacher_objs_free(cobj **objs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cobj_unref(objs[i]);
    free(objs);
}

size_t cacher_count(cacher *c, const char *prefix)
{
    size_t plen = key_prefix_len(prefix), cnt = 0;
    pthread_rwlock_rdlock(&c->lock);
    bucket *b = plen ? find_bucket_n(c, prefix, plen) : NULL;
    if (b) {
        if (strlen(prefix) == plen) {
            cnt = b->count;
        } else {
            cobj probe = {.key = (char *)prefix};
            for (cobj *o = RB_NFIND(ctree, &b->tree, &probe); o; o = RB_NEXT(ctree, &b->tree, o)) {
                if (strncmp(o->key, prefix, strlen(prefix)))
                    break;
                cnt++;
            }
        }
    }
    pthread_rwlock_unlock(&c->lock);
    return cnt;
}

/* ---- watch ---------------------------------------------------------- */

static void push_out(cevent_out **out, size_t *n, size_t *cap, cevent_type t, cobj *o)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *out = xrealloc(*out, *cap * sizeof **out);
    }
    (*out)[*n].type = t;
    (*out)[*n].obj = cobj_ref(o);
    (*n)++;
}

int cacher_watch_begin(cacher *c, cwatch *w, int64_t from_rev, cevent_out **initial,
                       size_t *ninitial, int64_t *oldest)
{
    *initial = NULL;
    *ninitial = 0;
    size_t plen = strlen(w->bucket);
    pthread_rwlock_wrlock(&c->lock);
    bucket *b = get_bucket_locked(c, w->bucket, plen);
    if (from_rev == 0) {
        size_t cap = 0;
        char prefix[512];
        snprintf(prefix, sizeof prefix, "%s%s%s", w->bucket,
                 w->filter.ns && *w->filter.ns ? w->filter.ns : "",
                 w->filter.ns && *w->filter.ns ? "/" : "");
        cobj probe = {.key = prefix};
        for (cobj *o = RB_NFIND(ctree, &b->tree, &probe); o; o = RB_NEXT(ctree, &b->tree, o)) {
            if (strncmp(o->key, prefix, strlen(prefix)))
                break;
            if (cfilter_matches(&w->filter, o))
                push_out(initial, ninitial, &cap, CEV_ADDED, o);
        }
        w->rev = c->rev;
    } else if (from_rev < b->start_rev) {
        *oldest = b->start_rev;
        pthread_rwlock_unlock(&c->lock);
        return -1;
    } else {
        w->rev = from_rev;
    }
    pthread_rwlock_unlock(&c->lock);
    return 0;
}

int cacher_watch_collect(cacher *c, cwatch *w, cevent_out **out, size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    pthread_rwlock_rdlock(&c->lock);
    bucket *b = find_bucket_n(c, w->bucket, strlen(w->bucket));
    if (!b) {
        w->rev = c->rev;
        pthread_rwlock_unlock(&c->lock);
        return 0;
    }
    if (w->rev < b->start_rev) {
        pthread_rwlock_unlock(&c->lock);
        return -1;
    }
    for (size_t i = ring_find(b, w->rev); i < b->ring_len; i++) {
        cevent *e = ring_at(b, i);
        bool cur = e->type != CEV_DELETED && cfilter_matches(&w->filter, e->obj);
        bool prev = e->prev && cfilter_matches(&w->filter, e->prev);
        if (e->type == CEV_DELETED) {
            if (prev)
                push_out(out, n, &cap, CEV_DELETED, e->obj);
        } else if (cur && prev) {
            push_out(out, n, &cap, CEV_MODIFIED, e->obj);
        } else if (cur) {
            push_out(out, n, &cap, CEV_ADDED, e->obj);
        } else if (prev) {
            push_out(out, n, &cap, CEV_DELETED, e->obj);
        }
    }
    w->rev = c->rev;
    pthread_rwlock_unlock(&c->lock);
    return 0;
}

void cacher_events_free(cevent_out *evs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cobj_unref(evs[i].obj);
    free(evs);
}

void cacher_get_stats(cacher *c, cacher_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_rwlock_rdlock(&c->lock);
    for (bucket *b = c->buckets; b; b = b->next) {
        out->objects += b->count;
        out->bytes += b->bytes;
        out->buckets++;
    }
    pthread_rwlock_unlock(&c->lock);
}
