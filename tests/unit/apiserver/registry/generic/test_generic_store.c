/* The generic store (registry/generic/store.h) over the memory backend and
 * a real watch cache: create, update and delete with their server-owned
 * fields, preconditions, finalizers, dry runs, size limits and the retry of
 * a write that lost a race.
 *
 * (Named test_generic_store.c, not test_store.c: tests/unit/informer/
 * already has a test_store.c, and CMake names every unit test's target
 * after its file.) */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "apiserver/cacher/cacher.h"
#include "apiserver/registry/generic/store.h"
#include "apiserver/registry/rest/registry.h"
#include "ckube/json.h"
#include "ckube/status.h"
#include "storage/storage.h"
#include "storage/memory/memory.h"

#define NS_PREFIX "/registry/core/namespaces/"
#define W_PREFIX "/registry/example.com/widgets/ns/"

/* ---- fixture ------------------------------------------------------------- */

typedef struct fixture {
    storage *st;
    cacher *c;
    store *s;
    resource_type *t;   /* widgets.example.com, namespaced */
    resource_type *nst; /* namespaces, cluster-scoped */
} fixture;

/* JSON from a literal written with ' for " (a new reference). */
static json_t *js(const char *fmt, ...)
{
    char *s;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t err;
    json_t *v = json_loads(s, 0, &err);
    if (!v)
        fail_msg("bad test JSON %s: %s", s, err.text);
    free(s);
    return v;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (at most 5 s) until the cache has applied every committed write. */
static void sync_cache(fixture *f)
{
    int64_t want = storage_current_rev(f->st);
    for (int i = 0; i < 5000 && cacher_rev(f->c) < want; i++)
        sleep_ms(1);
    assert_true(cacher_rev(f->c) >= want);
}

typedef struct sync_op {
    storage_op op;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} sync_op;

static void sync_op_done(storage_op *op, void *arg)
{
    (void)op;
    sync_op *s = arg;
    pthread_mutex_lock(&s->mu);
    s->done = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* A storage write behind the store's back, waited for (and for the cache
 * to see it). Returns the storage result; *rev the write's revision. */
static int raw_write(fixture *f, storage_op_type type, const char *key, const json_t *obj,
                     int64_t expect, int64_t *rev)
{
    size_t len = 0;
    char *value = obj ? ckube_json_dumps(obj, &len) : NULL;
    sync_op s = {.op = {.type = type,
                        .key = key,
                        .value = value,
                        .value_len = len,
                        .expect_mod_rev = expect,
                        .done = sync_op_done}};
    s.op.arg = &s;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    assert_int_equal(storage_submit(f->st, &s.op), 0);
    pthread_mutex_lock(&s.mu);
    while (!s.done)
        pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
    free(value);
    if (rev)
        *rev = s.op.rev;
    sync_cache(f);
    return s.op.result;
}

/* The stored object at key (new reference) and its mod revision, or NULL
 * when the key is absent. */
static json_t *stored(fixture *f, const char *key, int64_t *mod_rev)
{
    storage_kv kv;
    if (storage_get(f->st, key, &kv) != STORAGE_OK)
        return NULL;
    json_t *v = json_loadb(kv.value, kv.value_len, 0, NULL);
    assert_non_null(v);
    if (mod_rev)
        *mod_rev = kv.mod_rev;
    storage_kv_release(&kv);
    return v;
}

/* The cached object at key (new reference) and its revision, or NULL. */
static json_t *cached(fixture *f, const char *key, int64_t *rev)
{
    cobj *o = cacher_get(f->c, key);
    if (!o)
        return NULL;
    json_t *v = cobj_decode(o);
    if (rev)
        *rev = o->rev;
    cobj_unref(o);
    return v;
}

static const char *sget(const json_t *obj, const char *path)
{
    return json_string_value(ckube_json_get_path(obj, path));
}

static json_int_t iget(const json_t *obj, const char *path)
{
    return json_integer_value(ckube_json_get_path(obj, path));
}

static int64_t rv_of(const json_t *obj)
{
    const char *rv = ckube_obj_resource_version(obj);
    assert_non_null(rv);
    return strtoll(rv, NULL, 10);
}

static resource_type *new_type(const char *group, const char *resource, const char *kind,
                               bool namespaced)
{
    resource_type *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->group = (char *)group;
    t->version = (char *)"v1";
    t->resource = (char *)resource;
    t->kind = (char *)kind;
    t->namespaced = namespaced;
    t->verbs = VERB_ALL;
    return t;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->st = storage_memory_open();
    assert_non_null(f->st);
    f->c = cacher_new(f->st, 64);
    assert_non_null(f->c);
    /* As the server configures namespaces (their selectable field): the
     * store reads a namespace's phase from the cache. */
    static const cacher_field ns_fields[] = {{"status.phase", "status.phase"}, {NULL, NULL}};
    cacher_configure_bucket(f->c, NS_PREFIX, ns_fields);
    assert_int_equal(cacher_start(f->c), 0);
    f->s = store_new(f->st, f->c);
    assert_non_null(f->s);
    assert_ptr_equal(store_cache(f->s), f->c);
    f->t = new_type("example.com", "widgets", "Widget", true);
    f->t->tracks_generation = true;
    f->nst = new_type("", "namespaces", "Namespace", false);
    /* The namespace the widgets live in, written behind the store. */
    json_t *ns = js("{'apiVersion':'v1','kind':'Namespace','metadata':{'name':'ns'}}");
    assert_int_equal(raw_write(f, STORAGE_OP_CREATE, NS_PREFIX "ns", ns, 0, NULL), STORAGE_OK);
    json_decref(ns);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    store_free(f->s);
    storage_close(f->st);
    cacher_free(f->c);
    free(f->t);
    free(f->nst);
    free(f);
    return 0;
}

/* ---- driving a write synchronously --------------------------------------- */

typedef struct twrite twrite;
struct twrite {
    store_write sw; /* first: the hooks get &w->sw */
    store_hooks hooks;
    fixture *f;
    /* What transform returns: a copy of body, or edit(old). */
    json_t *body; /* owned */
    json_t *(*edit)(twrite *w, const json_t *old);
    ckube_status *fail_transform; /* transform fails with it (taken) */
    ckube_status *fail_validate;  /* validate returns it (taken) */
    int transforms, validates, decorates;
    bool validate_old, decorate_old; /* the hook was given an old object */
    char validate_uid[64];           /* metadata.uid at validation */
    char log[32];                    /* the hooks in the order they ran */
    /* admission (h_admit): the stage it waits at (store_admit_resume by
     * the test) or refuses at (-1: neither), whether it was given an
     * object at each stage it ran */
    int admit_wait, admit_refuse;
    bool waiting, admit_obj[2], admit_old[2];
    const char *edit_arg;
    /* done */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    store_result r;
};

static void logc(twrite *w, char c)
{
    size_t n = strlen(w->log);
    if (n + 1 < sizeof w->log)
        w->log[n] = c;
}

/* The hooks run on the test's thread or, for a retry, on the storage
 * thread: no cmocka assertions in them. */
static json_t *h_transform(store_write *sw, const json_t *old, ckube_status **st)
{
    twrite *w = (twrite *)sw;
    w->transforms++;
    logc(w, 'T');
    if (w->fail_transform) {
        *st = w->fail_transform;
        w->fail_transform = NULL;
        return NULL;
    }
    if (w->edit)
        return w->edit(w, old);
    return json_deep_copy(w->body);
}

static ckube_status *h_validate(store_write *sw, json_t *obj, const json_t *old)
{
    twrite *w = (twrite *)sw;
    w->validates++;
    logc(w, 'V');
    w->validate_old = old != NULL;
    const char *uid = ckube_obj_uid(obj);
    snprintf(w->validate_uid, sizeof w->validate_uid, "%s", uid ? uid : "");
    ckube_status *st = w->fail_validate;
    w->fail_validate = NULL;
    return st;
}

static void h_decorate(store_write *sw, const json_t *old, json_t *obj)
{
    twrite *w = (twrite *)sw;
    w->decorates++;
    logc(w, 'D');
    w->decorate_old = old != NULL;
    json_t *ann =
        ckube_json_object_ensure(ckube_json_object_ensure(obj, "metadata"), "annotations");
    json_object_set_new(ann, "decorated", json_string("yes"));
}

/* Admission: 'M' (mutating) or 'A' (validating) in the log. */
static bool h_admit(store_write *sw, store_admit_stage stage, json_t *obj, const json_t *old,
                    ckube_status **st)
{
    twrite *w = (twrite *)sw;
    logc(w, stage == STORE_ADMIT_MUTATE ? 'M' : 'A');
    w->admit_obj[stage] = obj != NULL;
    w->admit_old[stage] = old != NULL;
    if ((int)stage == w->admit_wait) {
        w->waiting = true;
        return false;
    }
    if ((int)stage == w->admit_refuse)
        *st = ckube_status_new(403, CKUBE_REASON_FORBIDDEN, "refused at %d", (int)stage);
    return true;
}

static const char *h_no_precondition(store_write *sw, const json_t *obj)
{
    (void)sw;
    (void)obj;
    return NULL;
}

static void h_done(store_write *sw, store_result *r)
{
    twrite *w = (twrite *)sw;
    pthread_mutex_lock(&w->mu);
    w->r = *r;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void tw_init(twrite *w, fixture *f, store_verb verb, const char *name)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->hooks.transform = h_transform;
    w->hooks.done = h_done;
    w->sw.store = f->s;
    w->sw.type = f->t;
    w->sw.verb = verb;
    w->sw.hooks = &w->hooks;
    w->sw.ns = "ns";
    w->sw.name = name;
}

/* Starts the write (tw_end waits for it). */
static void tw_begin(twrite *w)
{
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->done = false;
    store_write_start(&w->sw);
}

/* Waits for the write's end, then for the cache to catch up. */
static void tw_end(twrite *w)
{
    pthread_mutex_lock(&w->mu);
    while (!w->done)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    sync_cache(w->f);
}

/* Runs the write to its end, then waits for the cache to catch up. */
static void tw_run(twrite *w)
{
    tw_begin(w);
    tw_end(w);
}

/* tw_run for a write whose admission waits: the test answers it (st
 * taken) once the write is waiting, as a webhook's answer would. */
static void tw_run_admitted_later(twrite *w, ckube_status *st)
{
    tw_begin(w);
    assert_true(w->waiting);
    assert_false(w->done);
    store_admit_resume(&w->sw, st);
    tw_end(w);
}

static void tw_release(twrite *w)
{
    ckube_status_free(w->r.st);
    json_decref(w->r.obj);
    free(w->r.value);
    json_decref(w->body);
    ckube_status_free(w->fail_transform);
    ckube_status_free(w->fail_validate);
    memset(&w->r, 0, sizeof w->r);
    w->body = NULL;
    w->fail_transform = w->fail_validate = NULL;
}

static void assert_ok(const twrite *w, int code)
{
    if (w->r.st)
        fail_msg("write failed: %d %s", w->r.st->code,
                 w->r.st->message ? w->r.st->message : "(no message)");
    assert_int_equal(w->r.code, code);
    assert_non_null(w->r.obj);
}

static void assert_failed(const twrite *w, int code, const char *reason, const char *message)
{
    assert_non_null(w->r.st);
    assert_int_equal(w->r.code, 0);
    assert_null(w->r.obj);
    assert_null(w->r.value);
    assert_false(w->r.deleted);
    assert_int_equal(w->r.st->code, code);
    assert_string_equal(w->r.st->reason, reason);
    if (message)
        assert_string_equal(w->r.st->message, message);
}

/* Creates widget `name` in "ns" from `body` (taken) through the store;
 * returns its resourceVersion. */
static int64_t create_widget(fixture *f, const char *name, json_t *body)
{
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.body = body;
    tw_run(&w);
    assert_ok(&w, 201);
    int64_t rev = w.r.rev;
    assert_string_equal(ckube_obj_name(w.r.obj), name);
    tw_release(&w);
    return rev;
}

static json_t *widget(const char *name)
{
    return js("{'apiVersion':'example.com/v1','kind':'Widget','metadata':{'name':'%s'},"
              "'spec':{'size':1}}",
              name);
}

/* Runs an update of widget `name` with `edit`; the result stays in *w
 * (tw_release it). */
static void update_widget(twrite *w, fixture *f, const char *name,
                          json_t *(*edit)(twrite *, const json_t *), const char *arg)
{
    tw_init(w, f, STORE_UPDATE, name);
    w->edit = edit;
    w->edit_arg = arg;
    tw_run(w);
}

static void delete_widget(twrite *w, fixture *f, const char *name)
{
    tw_init(w, f, STORE_DELETE, name);
    tw_run(w);
}

/* ---- edits ----------------------------------------------------------------- */

static json_t *meta(json_t *obj)
{
    return ckube_json_object_ensure(obj, "metadata");
}

static json_t *edit_identity(twrite *w, const json_t *old)
{
    (void)w;
    return json_deep_copy(old);
}

/* spec.size = atoi(arg) */
static json_t *edit_size(twrite *w, const json_t *old)
{
    json_t *obj = json_deep_copy(old);
    json_object_set_new(ckube_json_object_ensure(obj, "spec"), "size",
                        json_integer(atoi(w->edit_arg)));
    return obj;
}

/* metadata.labels.l = arg */
static json_t *edit_label(twrite *w, const json_t *old)
{
    json_t *obj = json_deep_copy(old);
    json_object_set_new(ckube_json_object_ensure(meta(obj), "labels"), "l",
                        json_string(w->edit_arg));
    return obj;
}

/* metadata.finalizers = arg (a JSON array, ' for ") */
static json_t *edit_finalizers(twrite *w, const json_t *old)
{
    json_t *obj = json_deep_copy(old);
    json_object_set_new(meta(obj), "finalizers", js("%s", w->edit_arg));
    return obj;
}

/* metadata.resourceVersion = arg */
static json_t *edit_rv(twrite *w, const json_t *old)
{
    json_t *obj = json_deep_copy(old);
    json_object_set_new(meta(obj), "resourceVersion", json_string(w->edit_arg));
    json_object_set_new(ckube_json_object_ensure(obj, "spec"), "size", json_integer(99));
    return obj;
}

/* ---- create ---------------------------------------------------------------- */

static void test_create_sets_server_fields(void **state)
{
    fixture *f = *state;
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    /* Everything the server owns is given wrong in the body. */
    w.body = js("{'apiVersion':'example.com/v1','kind':'Widget','metadata':{'name':'a',"
                "'uid':'not-mine','resourceVersion':'12345','generation':7,"
                "'creationTimestamp':'2000-01-01T00:00:00Z',"
                "'deletionTimestamp':'2000-01-01T00:00:00Z','deletionGracePeriodSeconds':30,"
                "'selfLink':'/x'},'spec':{'size':3}}");
    int64_t before = storage_current_rev(f->st);
    tw_run(&w);
    assert_ok(&w, 201);
    assert_false(w.r.deleted);
    assert_int_equal(w.transforms, 1);
    json_t *o = w.r.obj;
    const char *uid = ckube_obj_uid(o);
    assert_non_null(uid);
    assert_string_not_equal(uid, "not-mine");
    assert_int_equal(strlen(uid), 36);
    const char *ct = sget(o, "metadata.creationTimestamp");
    assert_non_null(ct);
    int64_t t = ckube_parse_rfc3339(ct);
    assert_true(t > 0);
    int64_t now = (int64_t)time(NULL);
    assert_true(t >= now - 60 && t <= now + 1);
    assert_int_equal(iget(o, "metadata.generation"), 1);
    assert_string_equal(ckube_obj_namespace(o), "ns");
    assert_null(ckube_json_get_path(o, "metadata.deletionTimestamp"));
    assert_null(ckube_json_get_path(o, "metadata.deletionGracePeriodSeconds"));
    assert_null(ckube_json_get_path(o, "metadata.selfLink"));
    assert_int_equal(iget(o, "spec.size"), 3);
    /* The revision of the write is the object's resourceVersion. */
    assert_int_equal(w.r.rev, before + 1);
    assert_int_equal(rv_of(o), w.r.rev);

    /* value: the stored bytes, the object without its resourceVersion. */
    assert_non_null(w.r.value);
    assert_int_equal(strlen(w.r.value), w.r.value_len);
    int64_t mod;
    json_t *s = stored(f, W_PREFIX "a", &mod);
    assert_non_null(s);
    assert_int_equal(mod, w.r.rev);
    assert_null(ckube_obj_resource_version(s));
    json_t *vj = json_loadb(w.r.value, w.r.value_len, 0, NULL);
    assert_true(json_equal(vj, s));
    json_decref(vj);
    json_t *oc = json_deep_copy(o);
    json_object_del(meta(oc), "resourceVersion");
    assert_true(json_equal(oc, s));
    json_decref(oc);
    json_decref(s);

    /* The cache serves it at the write's revision. */
    int64_t crev;
    json_t *c = cached(f, W_PREFIX "a", &crev);
    assert_non_null(c);
    assert_int_equal(crev, w.r.rev);
    assert_string_equal(ckube_obj_uid(c), uid);
    json_decref(c);
    tw_release(&w);

    /* A type that does not track generation has none. */
    f->t->tracks_generation = false;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.body = js("{'metadata':{'name':'b','generation':7}}");
    tw_run(&w);
    assert_ok(&w, 201);
    assert_null(ckube_json_get_path(w.r.obj, "metadata.generation"));
    /* Two creates, two uids. */
    json_t *a = stored(f, W_PREFIX "a", NULL);
    assert_string_not_equal(ckube_obj_uid(a), ckube_obj_uid(w.r.obj));
    json_decref(a);
    tw_release(&w);
}

static void test_create_namespace_from_request(void **state)
{
    fixture *f = *state;
    twrite w;
    /* The body's namespace may be the request's... */
    tw_init(&w, f, STORE_CREATE, NULL);
    w.body = js("{'metadata':{'name':'same','namespace':'ns'}}");
    tw_run(&w);
    assert_ok(&w, 201);
    assert_string_equal(ckube_obj_namespace(w.r.obj), "ns");
    tw_release(&w);

    /* ...or another one: 400, nothing stored. */
    int64_t before = storage_current_rev(f->st);
    tw_init(&w, f, STORE_CREATE, NULL);
    w.body = js("{'metadata':{'name':'other','namespace':'elsewhere'}}");
    tw_run(&w);
    assert_failed(&w, 400, CKUBE_REASON_BAD_REQUEST,
                  "the namespace of the provided object does not match the namespace sent on "
                  "the request");
    assert_int_equal(storage_current_rev(f->st), before);
    assert_null(stored(f, W_PREFIX "other", NULL));
    assert_null(stored(f, "/registry/example.com/widgets/elsewhere/other", NULL));
    tw_release(&w);
}

static void test_create_cluster_scoped(void **state)
{
    fixture *f = *state;
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.sw.type = f->nst;
    w.sw.ns = NULL;
    w.body = js("{'apiVersion':'v1','kind':'Namespace','metadata':{'name':'made',"
                "'namespace':'junk'}}");
    tw_run(&w);
    assert_ok(&w, 201);
    /* A cluster-scoped object has no namespace, and a key without one. */
    assert_null(ckube_json_get_path(w.r.obj, "metadata.namespace"));
    json_t *s = stored(f, NS_PREFIX "made", NULL);
    assert_non_null(s);
    assert_null(ckube_json_get_path(s, "metadata.namespace"));
    json_decref(s);
    tw_release(&w);

    char key[STORE_KEY_MAX];
    store_object_key(f->nst, NULL, "made", key, sizeof key);
    assert_string_equal(key, NS_PREFIX "made");
    store_object_key(f->t, "made", "w", key, sizeof key);
    assert_string_equal(key, "/registry/example.com/widgets/made/w");

    /* The namespace the store made is one widgets can be created in. */
    tw_init(&w, f, STORE_CREATE, NULL);
    w.sw.ns = "made";
    w.body = widget("w");
    tw_run(&w);
    assert_ok(&w, 201);
    assert_string_equal(ckube_obj_namespace(w.r.obj), "made");
    tw_release(&w);
    json_t *c = cached(f, "/registry/example.com/widgets/made/w", NULL);
    assert_non_null(c);
    json_decref(c);
}

static bool in_alphabet(const char *s)
{
    for (; *s; s++)
        if (!strchr("bcdfghjklmnpqrstvwxz2456789", *s))
            return false;
    return true;
}

static void test_create_generate_name(void **state)
{
    fixture *f = *state;
    char names[2][64];
    for (int i = 0; i < 2; i++) {
        twrite w;
        tw_init(&w, f, STORE_CREATE, NULL);
        w.body = js("{'metadata':{'generateName':'gen-'},'spec':{}}");
        tw_run(&w);
        assert_ok(&w, 201);
        const char *name = ckube_obj_name(w.r.obj);
        assert_non_null(name);
        assert_int_equal(strlen(name), strlen("gen-") + 5);
        assert_memory_equal(name, "gen-", 4);
        assert_true(in_alphabet(name + 4));
        assert_string_equal(sget(w.r.obj, "metadata.generateName"), "gen-");
        snprintf(names[i], sizeof names[i], "%s", name);
        char key[STORE_KEY_MAX];
        store_object_key(f->t, "ns", name, key, sizeof key);
        json_t *s = stored(f, key, NULL);
        assert_non_null(s);
        assert_string_equal(ckube_obj_name(s), name);
        json_decref(s);
        tw_release(&w);
    }
    assert_string_not_equal(names[0], names[1]);

    /* A given name wins over generateName. */
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.body = js("{'metadata':{'name':'given','generateName':'gen-'}}");
    tw_run(&w);
    assert_ok(&w, 201);
    assert_string_equal(ckube_obj_name(w.r.obj), "given");
    tw_release(&w);

    /* A long generateName is cut to 58 characters before the suffix. */
    char base[71];
    memset(base, 'a', 70);
    base[70] = 0;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.body = js("{'metadata':{'generateName':'%s'}}", base);
    tw_run(&w);
    assert_ok(&w, 201);
    const char *name = ckube_obj_name(w.r.obj);
    assert_int_equal(strlen(name), 63);
    assert_memory_equal(name, base, 58);
    assert_true(in_alphabet(name + 58));
    tw_release(&w);
}

static void test_create_already_exists(void **state)
{
    fixture *f = *state;
    int64_t rev = create_widget(f, "dup", widget("dup"));
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.body = widget("dup");
    tw_run(&w);
    assert_failed(&w, 409, CKUBE_REASON_ALREADY_EXISTS,
                  "widgets.example.com \"dup\" already exists");
    assert_string_equal(w.r.st->name, "dup");
    assert_string_equal(w.r.st->group, "example.com");
    assert_string_equal(w.r.st->kind, "widgets");
    assert_int_equal(storage_current_rev(f->st), rev);
    tw_release(&w);
}

static void test_create_namespace_missing(void **state)
{
    fixture *f = *state;
    int64_t before = storage_current_rev(f->st);
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.sw.ns = "nope";
    w.body = widget("a");
    tw_run(&w);
    assert_failed(&w, 404, CKUBE_REASON_NOT_FOUND, "namespaces \"nope\" not found");
    assert_string_equal(w.r.st->name, "nope");
    assert_int_equal(storage_current_rev(f->st), before);
    tw_release(&w);
}

/* What core.c does to a namespace a delete keeps for its finalizers. */
static void ns_terminating(const resource_type *t, json_t *obj)
{
    (void)t;
    json_object_set_new(ckube_json_object_ensure(obj, "status"), "phase",
                        json_string("Terminating"));
}

static void test_create_namespace_terminating(void **state)
{
    fixture *f = *state;
    /* Written behind the store, in a form of its own (spaces). */
    const char *raw = "{ \"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": { "
                      "\"name\": \"gone\", \"deletionTimestamp\": \"2024-01-01T00:00:00Z\" }, "
                      "\"status\": { \"phase\": \"Terminating\" } }";
    json_t *ns = json_loads(raw, 0, NULL);
    assert_int_equal(raw_write(f, STORAGE_OP_CREATE, NS_PREFIX "gone", ns, 0, NULL), STORAGE_OK);
    json_decref(ns);
    int64_t before = storage_current_rev(f->st);
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.sw.ns = "gone";
    w.body = widget("a");
    tw_run(&w);
    assert_failed(&w, 403, CKUBE_REASON_FORBIDDEN,
                  "widgets.example.com \"a\" is forbidden: unable to create new content in "
                  "namespace gone because it is being terminated");
    assert_string_equal(w.r.st->name, "a");
    /* upstream's cause, which clients (client-go's event sink) look for */
    assert_int_equal(w.r.st->ncauses, 1);
    assert_string_equal(w.r.st->causes[0].type, "NamespaceTerminating");
    assert_string_equal(w.r.st->causes[0].field, "metadata.namespace");
    assert_string_equal(w.r.st->causes[0].message, "namespace gone is being terminated");
    assert_int_equal(storage_current_rev(f->st), before);
    tw_release(&w);

    /* A namespace the store itself put into deletion (phase Terminating,
     * as core.c's hook sets it) refuses new content too. */
    f->nst->prepare_delete = ns_terminating;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.sw.type = f->nst;
    w.sw.ns = NULL;
    w.body = js("{'apiVersion':'v1','kind':'Namespace','metadata':{'name':'closing',"
                "'finalizers':['keep']}}");
    tw_run(&w);
    assert_ok(&w, 201);
    tw_release(&w);
    tw_init(&w, f, STORE_DELETE, "closing");
    w.sw.type = f->nst;
    w.sw.ns = NULL;
    tw_run(&w);
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    tw_release(&w);
    tw_init(&w, f, STORE_CREATE, NULL);
    w.sw.ns = "closing";
    w.body = js("{'metadata':{'generateName':'x-'}}");
    tw_run(&w);
    assert_non_null(w.r.st);
    assert_int_equal(w.r.st->code, 403);
    assert_non_null(strstr(w.r.st->message, "unable to create new content in namespace closing "
                                            "because it is being terminated"));
    tw_release(&w);
}

static void test_create_dry_run(void **state)
{
    fixture *f = *state;
    int64_t before = storage_current_rev(f->st);
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.sw.dry_run = true;
    w.hooks.validate = h_validate;
    w.hooks.decorate = h_decorate;
    w.body = widget("dry");
    tw_run(&w);
    assert_ok(&w, 201);
    /* The object as it would be, with everything but the storage op. */
    assert_string_equal(ckube_obj_name(w.r.obj), "dry");
    assert_non_null(ckube_obj_uid(w.r.obj));
    assert_int_equal(iget(w.r.obj, "metadata.generation"), 1);
    assert_string_equal(sget(w.r.obj, "metadata.annotations.decorated"), "yes");
    assert_int_equal(w.validates, 1);
    assert_int_equal(w.decorates, 1);
    assert_false(w.r.deleted);
    assert_null(w.r.value);
    assert_int_equal(w.r.rev, 0);
    assert_int_equal(storage_current_rev(f->st), before);
    assert_null(stored(f, W_PREFIX "dry", NULL));
    assert_null(cached(f, W_PREFIX "dry", NULL));
    tw_release(&w);

    /* A dry run still checks the namespace. */
    tw_init(&w, f, STORE_CREATE, NULL);
    w.sw.dry_run = true;
    w.sw.ns = "nope";
    w.body = widget("dry");
    tw_run(&w);
    assert_failed(&w, 404, CKUBE_REASON_NOT_FOUND, "namespaces \"nope\" not found");
    tw_release(&w);
}

static void test_create_validate_fails(void **state)
{
    fixture *f = *state;
    int64_t before = storage_current_rev(f->st);
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.hooks.validate = h_validate;
    w.hooks.decorate = h_decorate;
    ckube_status *st = ckube_status_invalid_begin("example.com", "Widget", "bad");
    ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, "spec.size", "Invalid value: 1: no");
    ckube_status_invalid_finish(st);
    w.fail_validate = st;
    w.body = widget("bad");
    tw_run(&w);
    /* The hook's Status is the write's, as it is. */
    assert_ptr_equal(w.r.st, st);
    assert_failed(&w, 422, CKUBE_REASON_INVALID,
                  "Widget.example.com \"bad\" is invalid: spec.size: Invalid value: 1: no");
    assert_int_equal(w.validates, 1);
    assert_false(w.validate_old);
    /* Validation sees the prepared object (the server's fields set). */
    assert_int_equal(strlen(w.validate_uid), 36);
    assert_int_equal(w.decorates, 0);
    assert_int_equal(storage_current_rev(f->st), before);
    assert_null(stored(f, W_PREFIX "bad", NULL));
    tw_release(&w);

    /* A transform that fails ends the write with its Status. */
    tw_init(&w, f, STORE_CREATE, NULL);
    w.hooks.validate = h_validate;
    w.fail_transform = ckube_status_bad_request("no body");
    tw_run(&w);
    assert_failed(&w, 400, CKUBE_REASON_BAD_REQUEST, "no body");
    assert_int_equal(w.validates, 0);
    assert_int_equal(storage_current_rev(f->st), before);
    tw_release(&w);
}

static void prep_create_label(const resource_type *t, json_t *obj)
{
    (void)t;
    json_t *labels = ckube_json_object_ensure(meta(obj), "labels");
    json_object_set_new(labels, "prepared", json_string("yes"));
    /* The server's fields are set before the strategy runs. */
    json_object_set_new(labels, "had-uid", json_boolean(ckube_obj_uid(obj) != NULL));
}

static void test_create_hooks_run(void **state)
{
    fixture *f = *state;
    f->t->prepare_create = prep_create_label;
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.hooks.validate = h_validate;
    w.hooks.decorate = h_decorate;
    w.body = widget("hooked");
    tw_run(&w);
    assert_ok(&w, 201);
    /* transform, validate, decorate, in that order, once each. */
    assert_string_equal(w.log, "TVD");
    assert_false(w.validate_old);
    assert_false(w.decorate_old);
    json_t *s = stored(f, W_PREFIX "hooked", NULL);
    assert_non_null(s);
    assert_string_equal(sget(s, "metadata.labels.prepared"), "yes");
    assert_true(json_is_true(ckube_json_get_path(s, "metadata.labels.had-uid")));
    assert_string_equal(sget(s, "metadata.annotations.decorated"), "yes");
    assert_string_equal(sget(w.r.obj, "metadata.annotations.decorated"), "yes");
    json_decref(s);
    tw_release(&w);
}

/* ---- admission ------------------------------------------------------------ */

static void tw_admitted(twrite *w, fixture *f, store_verb verb, const char *name)
{
    tw_init(w, f, verb, name);
    w->hooks.validate = h_validate;
    w->hooks.decorate = h_decorate;
    w->hooks.admit = h_admit;
    w->admit_wait = w->admit_refuse = -1;
}

/* The phases in upstream's order: mutating admission before validation,
 * validating admission after; a delete asks both, with no new object;
 * a create in a missing namespace asks neither (NamespaceLifecycle comes
 * first); a refusal at either stage stores nothing. */
static void test_admission_stages(void **state)
{
    fixture *f = *state;
    twrite w;
    tw_admitted(&w, f, STORE_CREATE, NULL);
    w.body = widget("adm");
    tw_run(&w);
    assert_ok(&w, 201);
    assert_string_equal(w.log, "TMVAD");
    assert_true(w.admit_obj[STORE_ADMIT_MUTATE] && w.admit_obj[STORE_ADMIT_VALIDATE]);
    assert_false(w.admit_old[STORE_ADMIT_MUTATE] || w.admit_old[STORE_ADMIT_VALIDATE]);
    tw_release(&w);

    tw_admitted(&w, f, STORE_UPDATE, "adm");
    w.edit = edit_label; /* sets a label from edit_arg */
    w.edit_arg = "x";
    tw_run(&w);
    assert_ok(&w, 200);
    assert_string_equal(w.log, "TMVAD");
    assert_true(w.admit_old[STORE_ADMIT_MUTATE] && w.admit_old[STORE_ADMIT_VALIDATE]);
    tw_release(&w);

    /* a delete: mutating then validating, both with the object as old */
    int64_t before = storage_current_rev(f->st);
    tw_admitted(&w, f, STORE_DELETE, "adm");
    w.admit_refuse = STORE_ADMIT_MUTATE;
    tw_run(&w);
    assert_failed(&w, 403, CKUBE_REASON_FORBIDDEN, "refused at 0");
    assert_string_equal(w.log, "M");
    assert_false(w.admit_obj[STORE_ADMIT_MUTATE]);
    assert_true(w.admit_old[STORE_ADMIT_MUTATE]);
    assert_int_equal(storage_current_rev(f->st), before);
    tw_release(&w);
    tw_admitted(&w, f, STORE_DELETE, "adm");
    w.admit_refuse = STORE_ADMIT_VALIDATE;
    tw_run(&w);
    assert_failed(&w, 403, CKUBE_REASON_FORBIDDEN, "refused at 1");
    assert_string_equal(w.log, "MA");
    assert_int_equal(storage_current_rev(f->st), before);
    tw_release(&w);
    /* the mutating phase waits (a webhook called): the answer goes on to
     * the validating phase, then the delete */
    tw_admitted(&w, f, STORE_DELETE, "adm");
    w.admit_wait = STORE_ADMIT_MUTATE;
    tw_run_admitted_later(&w, NULL);
    assert_ok(&w, 200);
    assert_true(w.r.deleted);
    assert_string_equal(w.log, "MA");
    assert_false(w.admit_obj[STORE_ADMIT_VALIDATE]);
    assert_true(w.admit_old[STORE_ADMIT_VALIDATE]);
    tw_release(&w);

    /* a missing namespace: refused before admission and validation */
    tw_admitted(&w, f, STORE_CREATE, NULL);
    w.sw.ns = "nope";
    w.body = widget("adm2");
    tw_run(&w);
    assert_failed(&w, 404, CKUBE_REASON_NOT_FOUND, "namespaces \"nope\" not found");
    assert_string_equal(w.log, "T");
    tw_release(&w);
}

/* ---- size limits ----------------------------------------------------------- */

/* A widget with spec.blob of n bytes. */
static json_t *blob_widget(const char *name, size_t n)
{
    char *blob = malloc(n + 1);
    memset(blob, 'x', n);
    blob[n] = 0;
    json_t *o = widget(name);
    json_object_set_new(json_object_get(o, "spec"), "blob", json_stringn_nocheck(blob, n));
    free(blob);
    return o;
}

static void test_create_too_large(void **state)
{
    fixture *f = *state;
    /* How long the encoding of a widget with an empty blob is: a dry run
     * gives the object as stored, less its resourceVersion. */
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.sw.dry_run = true;
    w.body = blob_widget("big", 0);
    tw_run(&w);
    assert_ok(&w, 201);
    json_object_del(meta(w.r.obj), "resourceVersion");
    size_t base;
    char *enc = ckube_json_dumps(w.r.obj, &base);
    free(enc);
    tw_release(&w);

    /* Exactly the limit is stored... */
    tw_init(&w, f, STORE_CREATE, NULL);
    w.body = blob_widget("big", STORE_MAX_OBJECT - base);
    tw_run(&w);
    assert_ok(&w, 201);
    assert_int_equal(w.r.value_len, STORE_MAX_OBJECT);
    tw_release(&w);

    /* ...a byte more is a 413, and nothing is stored. */
    int64_t before = storage_current_rev(f->st);
    tw_init(&w, f, STORE_CREATE, NULL);
    w.body = blob_widget("bog", STORE_MAX_OBJECT - base + 1); /* a name as long */
    tw_run(&w);
    assert_failed(&w, 413, CKUBE_REASON_TOO_LARGE,
                  "Request entity too large: object exceeds the limit of 1572864 bytes");
    assert_int_equal(storage_current_rev(f->st), before);
    assert_null(stored(f, W_PREFIX "bog", NULL));
    tw_release(&w);

    /* A dry run is held to the same limit. */
    tw_init(&w, f, STORE_CREATE, NULL);
    w.sw.dry_run = true;
    w.body = blob_widget("bigger", STORE_MAX_OBJECT);
    tw_run(&w);
    assert_failed(&w, 413, CKUBE_REASON_TOO_LARGE,
                  "Request entity too large: object exceeds the limit of 1572864 bytes");
    tw_release(&w);

    /* An object small in bytes but too big a tree to decode: 200,000
     * empty objects (3 bytes each encoded, a few hundred in memory). */
    tw_init(&w, f, STORE_CREATE, NULL);
    w.body = widget("wide");
    json_t *arr = json_array();
    for (int i = 0; i < 200000; i++)
        json_array_append_new(arr, json_object());
    json_object_set_new(json_object_get(w.body, "spec"), "items", arr);
    tw_run(&w);
    assert_failed(&w, 413, CKUBE_REASON_TOO_LARGE,
                  "Request entity too large: the object would take more than 33554432 bytes of "
                  "memory to decode");
    assert_int_equal(storage_current_rev(f->st), before);
    tw_release(&w);

    /* An update is held to the limit too. */
    tw_init(&w, f, STORE_UPDATE, "big");
    w.body = blob_widget("big", STORE_MAX_OBJECT);
    w.hooks.precondition_rv = h_no_precondition;
    tw_run(&w);
    assert_failed(&w, 413, CKUBE_REASON_TOO_LARGE, NULL);
    assert_int_equal(storage_current_rev(f->st), before);
    tw_release(&w);
}

/* ---- update ---------------------------------------------------------------- */

static void test_update_transform_stored(void **state)
{
    fixture *f = *state;
    int64_t r1 = create_widget(f, "u", widget("u"));
    json_t *before = stored(f, W_PREFIX "u", NULL);
    twrite w;
    tw_init(&w, f, STORE_UPDATE, "u");
    w.edit = edit_size;
    w.edit_arg = "5";
    w.hooks.validate = h_validate;
    w.hooks.decorate = h_decorate;
    tw_run(&w);
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    assert_string_equal(w.log, "TVD");
    assert_true(w.validate_old);
    assert_true(w.decorate_old);
    assert_int_equal(w.r.rev, r1 + 1);
    assert_int_equal(rv_of(w.r.obj), r1 + 1);
    assert_int_equal(iget(w.r.obj, "spec.size"), 5);
    assert_non_null(w.r.value);
    int64_t mod;
    json_t *s = stored(f, W_PREFIX "u", &mod);
    assert_int_equal(mod, r1 + 1);
    assert_int_equal(iget(s, "spec.size"), 5);
    assert_string_equal(sget(s, "metadata.annotations.decorated"), "yes");
    assert_string_equal(ckube_obj_uid(s), ckube_obj_uid(before));
    json_t *vj = json_loadb(w.r.value, w.r.value_len, 0, NULL);
    assert_true(json_equal(vj, s));
    json_decref(vj);
    json_decref(s);
    int64_t crev;
    json_t *c = cached(f, W_PREFIX "u", &crev);
    assert_int_equal(crev, r1 + 1);
    assert_int_equal(iget(c, "spec.size"), 5);
    json_decref(c);
    json_decref(before);
    tw_release(&w);

    /* A failed validation stores nothing. */
    tw_init(&w, f, STORE_UPDATE, "u");
    w.edit = edit_size;
    w.edit_arg = "6";
    w.hooks.validate = h_validate;
    w.hooks.decorate = h_decorate;
    w.fail_validate = ckube_status_bad_request("not 6");
    tw_run(&w);
    assert_failed(&w, 400, CKUBE_REASON_BAD_REQUEST, "not 6");
    assert_int_equal(w.decorates, 0);
    assert_int_equal(storage_current_rev(f->st), r1 + 1);
    tw_release(&w);

    /* A failed transform too. */
    tw_init(&w, f, STORE_UPDATE, "u");
    w.fail_transform = ckube_status_bad_request("bad patch");
    tw_run(&w);
    assert_failed(&w, 400, CKUBE_REASON_BAD_REQUEST, "bad patch");
    assert_int_equal(storage_current_rev(f->st), r1 + 1);
    tw_release(&w);
}

static void test_update_stale_rv(void **state)
{
    fixture *f = *state;
    int64_t r1 = create_widget(f, "c", widget("c"));
    twrite w;
    update_widget(&w, f, "c", edit_size, "2");
    assert_ok(&w, 200);
    tw_release(&w);
    int64_t r2 = storage_current_rev(f->st);
    assert_int_equal(r2, r1 + 1);

    /* The resourceVersion of the first write is no longer current. */
    char rv[32];
    snprintf(rv, sizeof rv, "%" PRId64, r1);
    update_widget(&w, f, "c", edit_rv, rv);
    assert_failed(&w, 409, CKUBE_REASON_CONFLICT,
                  "Operation cannot be fulfilled on widgets.example.com \"c\": the object has been "
                  "modified; please apply your changes to the latest version and try again");
    assert_string_equal(w.r.st->name, "c");
    /* The caller named it: the conflict is the caller's, not retried. */
    assert_int_equal(w.transforms, 1);
    assert_int_equal(storage_current_rev(f->st), r2);
    tw_release(&w);

    /* The current one is accepted. */
    snprintf(rv, sizeof rv, "%" PRId64, r2);
    update_widget(&w, f, "c", edit_rv, rv);
    assert_ok(&w, 200);
    assert_int_equal(iget(w.r.obj, "spec.size"), 99);
    assert_int_equal(w.r.rev, r2 + 1);
    tw_release(&w);

    /* A resourceVersion that is no number is a 400. */
    update_widget(&w, f, "c", edit_rv, "abc");
    assert_failed(&w, 400, CKUBE_REASON_BAD_REQUEST, "invalid resourceVersion \"abc\"");
    tw_release(&w);
    update_widget(&w, f, "c", edit_rv, "-3");
    assert_failed(&w, 400, CKUBE_REASON_BAD_REQUEST, "invalid resourceVersion \"-3\"");
    tw_release(&w);
    assert_int_equal(storage_current_rev(f->st), r2 + 1);
}

/* The precondition hook: the resourceVersion in edit_arg. */
static const char *h_rv_from_arg(store_write *sw, const json_t *obj)
{
    (void)obj;
    return ((twrite *)sw)->edit_arg;
}

static void test_update_precondition_hook(void **state)
{
    fixture *f = *state;
    int64_t r1 = create_widget(f, "p", widget("p"));
    /* The hook, not the object's resourceVersion, names the precondition:
     * the object's (current) one is ignored... */
    twrite w;
    tw_init(&w, f, STORE_UPDATE, "p");
    w.edit = edit_label;
    w.edit_arg = "1";
    w.hooks.precondition_rv = h_rv_from_arg;
    tw_run(&w);
    assert_failed(&w, 409, CKUBE_REASON_CONFLICT, NULL);
    tw_release(&w);
    /* ...and "" means none. */
    tw_init(&w, f, STORE_UPDATE, "p");
    w.edit = edit_label;
    w.edit_arg = "";
    w.hooks.precondition_rv = h_rv_from_arg;
    tw_run(&w);
    assert_ok(&w, 200);
    assert_string_equal(sget(w.r.obj, "metadata.labels.l"), "");
    assert_int_equal(w.r.rev, r1 + 1);
    tw_release(&w);
}

/* A PUT body: the widget with spec.size = arg and no resourceVersion. */
static json_t *edit_put_no_rv(twrite *w, const json_t *old)
{
    json_t *obj = edit_size(w, old);
    json_object_del(meta(obj), "resourceVersion");
    return obj;
}

static void test_update_require_rv(void **state)
{
    fixture *f = *state;
    int64_t r1 = create_widget(f, "r", widget("r"));
    twrite w;
    tw_init(&w, f, STORE_UPDATE, "r");
    w.sw.require_rv = true;
    w.edit = edit_put_no_rv;
    w.edit_arg = "4";
    tw_run(&w);
    assert_failed(&w, 422, CKUBE_REASON_INVALID,
                  "Widget.example.com \"r\" is invalid: metadata.resourceVersion: Invalid value: "
                  "0x0: must be specified for an update");
    assert_int_equal(w.r.st->ncauses, 1);
    assert_string_equal(w.r.st->causes[0].field, "metadata.resourceVersion");
    assert_string_equal(w.r.st->causes[0].type, CKUBE_CAUSE_FIELD_INVALID);
    assert_int_equal(storage_current_rev(f->st), r1);
    tw_release(&w);

    /* A type that allows unconditional updates takes it. */
    f->t->allow_unconditional_update = true;
    tw_init(&w, f, STORE_UPDATE, "r");
    w.sw.require_rv = true;
    w.edit = edit_put_no_rv;
    w.edit_arg = "4";
    tw_run(&w);
    assert_ok(&w, 200);
    assert_int_equal(iget(w.r.obj, "spec.size"), 4);
    assert_int_equal(w.r.rev, r1 + 1);
    tw_release(&w);

    /* And without require_rv (a PATCH, an internal write) none is needed. */
    f->t->allow_unconditional_update = false;
    tw_init(&w, f, STORE_UPDATE, "r");
    w.edit = edit_put_no_rv;
    w.edit_arg = "8";
    tw_run(&w);
    assert_ok(&w, 200);
    assert_int_equal(iget(w.r.obj, "spec.size"), 8);
    tw_release(&w);
}

static json_t *edit_status(twrite *w, const json_t *old)
{
    json_t *obj = json_deep_copy(old);
    json_object_set_new(obj, "status", js("{'phase':'%s'}", w->edit_arg));
    return obj;
}

static void test_update_generation(void **state)
{
    fixture *f = *state;
    create_widget(f, "g", widget("g"));
    twrite w;
    /* A spec change moves the generation... */
    update_widget(&w, f, "g", edit_size, "2");
    assert_ok(&w, 200);
    assert_int_equal(iget(w.r.obj, "metadata.generation"), 2);
    tw_release(&w);
    /* ...a metadata change is written but does not. */
    int64_t before = storage_current_rev(f->st);
    update_widget(&w, f, "g", edit_label, "x");
    assert_ok(&w, 200);
    assert_int_equal(w.r.rev, before + 1);
    assert_int_equal(iget(w.r.obj, "metadata.generation"), 2);
    json_t *s = stored(f, W_PREFIX "g", NULL);
    assert_int_equal(iget(s, "metadata.generation"), 2);
    assert_string_equal(sget(s, "metadata.labels.l"), "x");
    json_decref(s);
    tw_release(&w);
    /* Without a status subresource, status is like the spec. */
    update_widget(&w, f, "g", edit_status, "Up");
    assert_ok(&w, 200);
    assert_int_equal(iget(w.r.obj, "metadata.generation"), 3);
    assert_string_equal(sget(w.r.obj, "status.phase"), "Up");
    tw_release(&w);
    /* A generation in the body is the server's to set. */
    tw_init(&w, f, STORE_UPDATE, "g");
    w.body = js("{'apiVersion':'example.com/v1','kind':'Widget',"
                "'metadata':{'name':'g','generation':40},'spec':{'size':2},"
                "'status':{'phase':'Up'}}");
    tw_run(&w);
    assert_ok(&w, 200);
    assert_int_equal(iget(w.r.obj, "metadata.generation"), 3);
    tw_release(&w);
}

static void test_update_noop(void **state)
{
    fixture *f = *state;
    int64_t r1 = create_widget(f, "n", widget("n"));
    twrite w;
    update_widget(&w, f, "n", edit_identity, NULL);
    assert_ok(&w, 200);
    assert_null(w.r.value);
    assert_int_equal(w.r.value_len, 0);
    assert_int_equal(w.r.rev, 0);
    assert_false(w.r.deleted);
    /* Nothing written: the resourceVersion stays. */
    assert_int_equal(rv_of(w.r.obj), r1);
    assert_int_equal(storage_current_rev(f->st), r1);
    int64_t mod;
    json_t *s = stored(f, W_PREFIX "n", &mod);
    assert_int_equal(mod, r1);
    json_decref(s);
    tw_release(&w);

    /* A body equal to the object but for what the server keeps (no uid,
     * no creationTimestamp, no generation) is a no-op as well. */
    tw_init(&w, f, STORE_UPDATE, "n");
    w.body = js("{'apiVersion':'example.com/v1','kind':'Widget','metadata':{'name':'n'},"
                "'spec':{'size':1}}");
    tw_run(&w);
    assert_ok(&w, 200);
    assert_null(w.r.value);
    assert_int_equal(storage_current_rev(f->st), r1);
    tw_release(&w);
}

/* spec.size = 7, status.phase = arg, a label: everything changes. */
static json_t *edit_everything(twrite *w, const json_t *old)
{
    json_t *obj = json_deep_copy(old);
    json_object_set_new(ckube_json_object_ensure(obj, "spec"), "size", json_integer(7));
    json_object_set_new(obj, "status", js("{'phase':'%s'}", w->edit_arg));
    json_object_set_new(ckube_json_object_ensure(meta(obj), "labels"), "l", json_string("new"));
    return obj;
}

/* status.phase = arg and a label (what /status gets after the REST layer
 * projected the body onto the current object, plus a label it may not
 * set). */
static json_t *edit_status_and_label(twrite *w, const json_t *old)
{
    json_t *obj = edit_status(w, old);
    json_object_set_new(ckube_json_object_ensure(meta(obj), "labels"), "l", json_string("sneaked"));
    return obj;
}

static void test_update_status_subresource(void **state)
{
    fixture *f = *state;
    f->t->status_subresource = true;
    create_widget(f, "s",
                  js("{'metadata':{'name':'s'},'spec':{'size':1},'status':{'phase':'Old'}}"));
    twrite w;
    /* A main update keeps the old status. */
    update_widget(&w, f, "s", edit_everything, "Main");
    assert_ok(&w, 200);
    assert_string_equal(sget(w.r.obj, "status.phase"), "Old");
    assert_int_equal(iget(w.r.obj, "spec.size"), 7);
    assert_string_equal(sget(w.r.obj, "metadata.labels.l"), "new");
    assert_int_equal(iget(w.r.obj, "metadata.generation"), 2);
    json_t *s = stored(f, W_PREFIX "s", NULL);
    assert_string_equal(sget(s, "status.phase"), "Old");
    json_decref(s);
    tw_release(&w);

    /* /status changes the status, and neither the metadata nor the
     * generation. */
    int64_t before = storage_current_rev(f->st);
    tw_init(&w, f, STORE_UPDATE, "s");
    w.sw.status_only = true;
    w.edit = edit_status_and_label;
    w.edit_arg = "New";
    tw_run(&w);
    assert_ok(&w, 200);
    assert_int_equal(w.r.rev, before + 1);
    s = stored(f, W_PREFIX "s", NULL);
    assert_string_equal(sget(s, "status.phase"), "New");
    assert_int_equal(iget(s, "spec.size"), 7);
    assert_int_equal(iget(s, "metadata.generation"), 2);
    assert_string_equal(sget(s, "metadata.labels.l"), "new");
    json_decref(s);
    tw_release(&w);

    tw_init(&w, f, STORE_UPDATE, "s");
    w.sw.status_only = true;
    w.edit = edit_label;
    w.edit_arg = "relabelled";
    tw_run(&w);
    /* Only a label changed, and /status ignores it: a no-op. */
    assert_ok(&w, 200);
    assert_null(w.r.value);
    assert_int_equal(storage_current_rev(f->st), before + 1);
    assert_string_equal(sget(w.r.obj, "metadata.labels.l"), "new");
    tw_release(&w);

    /* A /status write without a status removes it. */
    tw_init(&w, f, STORE_UPDATE, "s");
    w.sw.status_only = true;
    w.body = js("{'metadata':{'name':'s'},'spec':{'size':7}}");
    tw_run(&w);
    assert_ok(&w, 200);
    assert_null(json_object_get(w.r.obj, "status"));
    tw_release(&w);
}

static void test_update_keeps_server_metadata(void **state)
{
    fixture *f = *state;
    create_widget(f, "k", widget("k"));
    json_t *old = stored(f, W_PREFIX "k", NULL);
    twrite w;
    /* A PUT body that leaves out or changes what the server owns. */
    tw_init(&w, f, STORE_UPDATE, "k");
    w.body = js("{'metadata':{'name':'k','creationTimestamp':'2001-01-01T00:00:00Z',"
                "'deletionTimestamp':'2001-01-01T00:00:00Z','deletionGracePeriodSeconds':5,"
                "'selfLink':'/x','generation':9},'spec':{'size':2}}");
    tw_run(&w);
    assert_ok(&w, 200);
    json_t *s = stored(f, W_PREFIX "k", NULL);
    assert_string_equal(ckube_obj_uid(s), ckube_obj_uid(old));
    assert_string_equal(sget(s, "metadata.creationTimestamp"),
                        sget(old, "metadata.creationTimestamp"));
    assert_string_equal(ckube_obj_namespace(s), "ns");
    assert_null(ckube_json_get_path(s, "metadata.deletionTimestamp"));
    assert_null(ckube_json_get_path(s, "metadata.deletionGracePeriodSeconds"));
    assert_null(ckube_json_get_path(s, "metadata.selfLink"));
    assert_int_equal(iget(s, "metadata.generation"), 2);
    assert_int_equal(iget(s, "spec.size"), 2);
    json_decref(s);
    tw_release(&w);

    /* The name and namespace are the request's. */
    int64_t before = storage_current_rev(f->st);
    tw_init(&w, f, STORE_UPDATE, "k");
    w.body = js("{'metadata':{'name':'other'},'spec':{'size':3}}");
    tw_run(&w);
    assert_failed(&w, 400, CKUBE_REASON_BAD_REQUEST,
                  "the name of the object (other) does not match the name on the URL (k)");
    tw_release(&w);
    tw_init(&w, f, STORE_UPDATE, "k");
    w.body = js("{'metadata':{'name':'k','namespace':'elsewhere'},'spec':{'size':3}}");
    tw_run(&w);
    assert_failed(&w, 400, CKUBE_REASON_BAD_REQUEST,
                  "the namespace of the provided object does not match the namespace sent on "
                  "the request");
    tw_release(&w);
    /* A body without name or namespace gets them. */
    tw_init(&w, f, STORE_UPDATE, "k");
    w.body = js("{'spec':{'size':3}}");
    tw_run(&w);
    assert_ok(&w, 200);
    assert_string_equal(ckube_obj_name(w.r.obj), "k");
    assert_string_equal(ckube_obj_namespace(w.r.obj), "ns");
    assert_string_equal(ckube_obj_uid(w.r.obj), ckube_obj_uid(old));
    assert_int_equal(w.r.rev, before + 1);
    tw_release(&w);
    json_decref(old);
}

static void test_update_missing(void **state)
{
    fixture *f = *state;
    int64_t before = storage_current_rev(f->st);
    twrite w;
    update_widget(&w, f, "ghost", edit_size, "1");
    assert_failed(&w, 404, CKUBE_REASON_NOT_FOUND, "widgets.example.com \"ghost\" not found");
    assert_string_equal(w.r.st->name, "ghost");
    assert_int_equal(w.transforms, 0);
    assert_int_equal(storage_current_rev(f->st), before);
    tw_release(&w);
}

/* Apply-like: the body on a create, else the current object with
 * spec.size = 2. */
static json_t *edit_apply(twrite *w, const json_t *old)
{
    if (!old)
        return widget(w->sw.name);
    json_t *obj = json_deep_copy(old);
    json_object_set_new(ckube_json_object_ensure(obj, "spec"), "size", json_integer(2));
    return obj;
}

static void test_update_create_on_missing(void **state)
{
    fixture *f = *state;
    twrite w;
    tw_init(&w, f, STORE_UPDATE, "applied");
    w.sw.create_on_missing = true;
    w.edit = edit_apply;
    tw_run(&w);
    assert_ok(&w, 201);
    assert_int_equal(w.transforms, 1);
    assert_string_equal(ckube_obj_name(w.r.obj), "applied");
    assert_string_equal(ckube_obj_namespace(w.r.obj), "ns");
    assert_int_equal(strlen(ckube_obj_uid(w.r.obj)), 36);
    assert_int_equal(iget(w.r.obj, "metadata.generation"), 1);
    assert_int_equal(rv_of(w.r.obj), w.r.rev);
    json_t *s = stored(f, W_PREFIX "applied", NULL);
    assert_non_null(s);
    assert_int_equal(iget(s, "spec.size"), 1);
    json_decref(s);
    tw_release(&w);

    /* Once there, the same write updates it: 200. */
    tw_init(&w, f, STORE_UPDATE, "applied");
    w.sw.create_on_missing = true;
    w.edit = edit_apply;
    tw_run(&w);
    assert_ok(&w, 200);
    assert_int_equal(iget(w.r.obj, "spec.size"), 2);
    assert_int_equal(iget(w.r.obj, "metadata.generation"), 2);
    tw_release(&w);

    /* Creating still needs the namespace. */
    tw_init(&w, f, STORE_UPDATE, "applied");
    w.sw.create_on_missing = true;
    w.sw.ns = "nope";
    w.edit = edit_apply;
    tw_run(&w);
    assert_failed(&w, 404, CKUBE_REASON_NOT_FOUND, "namespaces \"nope\" not found");
    tw_release(&w);
}

static int prepare_update_calls;

static void prep_update_count(const resource_type *t, json_t *obj, const json_t *old)
{
    (void)t;
    (void)obj;
    (void)old;
    prepare_update_calls++;
}

static void test_update_finalize_skips_prepare_update(void **state)
{
    fixture *f = *state;
    f->t->prepare_update = prep_update_count;
    prepare_update_calls = 0;
    create_widget(f, "pf", widget("pf"));
    twrite w;
    update_widget(&w, f, "pf", edit_size, "2");
    assert_ok(&w, 200);
    assert_int_equal(prepare_update_calls, 1);
    tw_release(&w);
    tw_init(&w, f, STORE_UPDATE, "pf");
    w.sw.finalize = true;
    w.edit = edit_size;
    w.edit_arg = "3";
    tw_run(&w);
    assert_ok(&w, 200);
    assert_int_equal(iget(w.r.obj, "spec.size"), 3);
    assert_int_equal(prepare_update_calls, 1);
    tw_release(&w);
}

static void test_update_no_new_finalizers_when_deleting(void **state)
{
    fixture *f = *state;
    create_widget(f, "fin", js("{'metadata':{'name':'fin','finalizers':['a/one']}}"));
    twrite w;
    /* Before deletion, finalizers may be added. */
    update_widget(&w, f, "fin", edit_finalizers, "['a/one','a/two']");
    assert_ok(&w, 200);
    tw_release(&w);
    delete_widget(&w, f, "fin");
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    tw_release(&w);
    int64_t before = storage_current_rev(f->st);

    update_widget(&w, f, "fin", edit_finalizers, "['a/one','a/two','a/three']");
    assert_failed(&w, 422, CKUBE_REASON_INVALID, NULL);
    assert_int_equal(w.r.st->ncauses, 1);
    assert_string_equal(w.r.st->causes[0].field, "metadata.finalizers");
    assert_string_equal(w.r.st->causes[0].type, CKUBE_CAUSE_FIELD_FORBIDDEN);
    assert_string_equal(w.r.st->message,
                        "Widget.example.com \"fin\" is invalid: metadata.finalizers: Forbidden: "
                        "no new finalizers can be added if the object is being deleted, found new "
                        "finalizers []string{\"a/three\"}");
    assert_int_equal(storage_current_rev(f->st), before);
    tw_release(&w);

    /* Removing one (or reordering) is fine; the object stays. */
    update_widget(&w, f, "fin", edit_finalizers, "['a/two']");
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    assert_non_null(ckube_json_get_path(w.r.obj, "metadata.deletionTimestamp"));
    tw_release(&w);
}

static bool spec_finalizers_pending(const json_t *obj)
{
    return json_array_size(ckube_json_get_path(obj, "spec.finalizers")) > 0;
}

static json_t *edit_drop_spec_finalizers(twrite *w, const json_t *old)
{
    (void)w;
    json_t *obj = json_deep_copy(old);
    json_object_del(json_object_get(obj, "spec"), "finalizers");
    return obj;
}

static void test_update_last_finalizer_deletes(void **state)
{
    fixture *f = *state;
    create_widget(f, "last", js("{'metadata':{'name':'last','finalizers':['a/one']}}"));
    twrite w;
    delete_widget(&w, f, "last");
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    tw_release(&w);

    update_widget(&w, f, "last", edit_finalizers, "[]");
    assert_ok(&w, 200);
    assert_true(w.r.deleted);
    assert_null(w.r.value);
    assert_int_equal(json_array_size(ckube_json_get_path(w.r.obj, "metadata.finalizers")), 0);
    /* The object as it was deleted, at the deletion's revision. */
    assert_int_equal(rv_of(w.r.obj), storage_current_rev(f->st));
    assert_null(stored(f, W_PREFIX "last", NULL));
    assert_null(cached(f, W_PREFIX "last", NULL));
    tw_release(&w);

    /* Finalizers kept outside metadata hold the object as well. */
    f->t->pending_finalizers = spec_finalizers_pending;
    create_widget(f, "held",
                  js("{'metadata':{'name':'held','finalizers':['a/one']},"
                     "'spec':{'finalizers':['kube']}}"));
    delete_widget(&w, f, "held");
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    tw_release(&w);
    update_widget(&w, f, "held", edit_finalizers, "[]");
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    json_t *s = stored(f, W_PREFIX "held", NULL);
    assert_non_null(s);
    assert_non_null(ckube_json_get_path(s, "metadata.deletionTimestamp"));
    json_decref(s);
    tw_release(&w);
    update_widget(&w, f, "held", edit_drop_spec_finalizers, NULL);
    assert_ok(&w, 200);
    assert_true(w.r.deleted);
    assert_null(stored(f, W_PREFIX "held", NULL));
    tw_release(&w);
}

/* spec.mine = true; on the first call, another writer first sets
 * spec.theirs behind the store's back (and the cache sees it), so the
 * store's conditional write loses. */
static json_t *edit_racing(twrite *w, const json_t *old)
{
    if (w->transforms == 1) {
        json_t *theirs = json_deep_copy(old);
        json_object_del(meta(theirs), "resourceVersion");
        json_object_set_new(ckube_json_object_ensure(theirs, "spec"), "theirs", json_true());
        int rc = raw_write(w->f, STORAGE_OP_UPDATE, W_PREFIX "race", theirs, 0, NULL);
        json_decref(theirs);
        if (rc != STORAGE_OK)
            return NULL;
    }
    json_t *obj = json_deep_copy(old);
    json_object_set_new(ckube_json_object_ensure(obj, "spec"), "mine", json_true());
    return obj;
}

static void test_update_conflict_retry(void **state)
{
    fixture *f = *state;
    int64_t r1 = create_widget(f, "race", widget("race"));
    twrite w;
    tw_init(&w, f, STORE_UPDATE, "race");
    w.edit = edit_racing;
    w.hooks.precondition_rv = h_no_precondition;
    tw_run(&w);
    assert_ok(&w, 200);
    /* Lost once, then built again from the newer object. */
    assert_int_equal(w.transforms, 2);
    assert_int_equal(w.r.rev, r1 + 2);
    json_t *s = stored(f, W_PREFIX "race", NULL);
    assert_true(json_is_true(ckube_json_get_path(s, "spec.theirs")));
    assert_true(json_is_true(ckube_json_get_path(s, "spec.mine")));
    assert_int_equal(iget(s, "spec.size"), 1);
    assert_int_equal(iget(s, "metadata.generation"), 2);
    json_decref(s);
    assert_true(json_is_true(ckube_json_get_path(w.r.obj, "spec.theirs")));
    tw_release(&w);
}

static void test_update_named_rv_race_not_retried(void **state)
{
    fixture *f = *state;
    int64_t r1 = create_widget(f, "race", widget("race"));
    /* The object's own resourceVersion (the one read) is the
     * precondition: it matched, then lost the race; the caller gets the
     * 409. */
    twrite w;
    tw_init(&w, f, STORE_UPDATE, "race");
    w.edit = edit_racing;
    tw_run(&w);
    assert_failed(&w, 409, CKUBE_REASON_CONFLICT,
                  "Operation cannot be fulfilled on widgets.example.com \"race\": the object has "
                  "been modified; please apply your changes to the latest version and try again");
    assert_int_equal(w.transforms, 1);
    assert_int_equal(storage_current_rev(f->st), r1 + 1);
    json_t *s = stored(f, W_PREFIX "race", NULL);
    assert_true(json_is_true(ckube_json_get_path(s, "spec.theirs")));
    assert_null(ckube_json_get_path(s, "spec.mine"));
    json_decref(s);
    tw_release(&w);
}

static void test_update_dry_run(void **state)
{
    fixture *f = *state;
    int64_t r1 = create_widget(f, "d", widget("d"));
    twrite w;
    tw_init(&w, f, STORE_UPDATE, "d");
    w.sw.dry_run = true;
    w.edit = edit_size;
    w.edit_arg = "9";
    tw_run(&w);
    assert_ok(&w, 200);
    assert_int_equal(iget(w.r.obj, "spec.size"), 9);
    assert_int_equal(iget(w.r.obj, "metadata.generation"), 2);
    assert_int_equal(rv_of(w.r.obj), r1);
    assert_null(w.r.value);
    assert_int_equal(storage_current_rev(f->st), r1);
    json_t *s = stored(f, W_PREFIX "d", NULL);
    assert_int_equal(iget(s, "spec.size"), 1);
    json_decref(s);
    tw_release(&w);
}

/* ---- delete ---------------------------------------------------------------- */

static void test_delete_plain(void **state)
{
    fixture *f = *state;
    int64_t r1 = create_widget(f, "del", widget("del"));
    twrite w;
    delete_widget(&w, f, "del");
    assert_ok(&w, 200);
    assert_true(w.r.deleted);
    assert_null(w.r.value);
    assert_string_equal(ckube_obj_name(w.r.obj), "del");
    assert_int_equal(rv_of(w.r.obj), r1 + 1);
    assert_int_equal(storage_current_rev(f->st), r1 + 1);
    assert_null(stored(f, W_PREFIX "del", NULL));
    assert_null(cached(f, W_PREFIX "del", NULL));
    tw_release(&w);

    /* Deleting it again: 404. */
    delete_widget(&w, f, "del");
    assert_failed(&w, 404, CKUBE_REASON_NOT_FOUND, "widgets.example.com \"del\" not found");
    tw_release(&w);
}

static void test_delete_preconditions(void **state)
{
    fixture *f = *state;
    int64_t r1 = create_widget(f, "pre", widget("pre"));
    json_t *s = stored(f, W_PREFIX "pre", NULL);
    char uid[64];
    snprintf(uid, sizeof uid, "%s", ckube_obj_uid(s));
    json_decref(s);

    twrite w;
    tw_init(&w, f, STORE_DELETE, "pre");
    w.sw.pre_uid = "wrong-uid";
    tw_run(&w);
    char want[256];
    snprintf(want, sizeof want,
             "Precondition failed: UID in precondition: wrong-uid, UID in object meta: %s", uid);
    assert_failed(&w, 409, CKUBE_REASON_CONFLICT, want);
    assert_string_equal(w.r.st->name, "pre");
    tw_release(&w);

    tw_init(&w, f, STORE_DELETE, "pre");
    w.sw.pre_rv = "1";
    tw_run(&w);
    snprintf(want, sizeof want,
             "Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in "
             "object meta: %" PRId64,
             r1);
    assert_failed(&w, 409, CKUBE_REASON_CONFLICT, want);
    tw_release(&w);
    assert_int_equal(storage_current_rev(f->st), r1);
    s = stored(f, W_PREFIX "pre", NULL);
    assert_non_null(s);
    json_decref(s);

    /* Both matching: deleted. */
    char rv[32];
    snprintf(rv, sizeof rv, "%" PRId64, r1);
    tw_init(&w, f, STORE_DELETE, "pre");
    w.sw.pre_uid = uid;
    w.sw.pre_rv = rv;
    tw_run(&w);
    assert_ok(&w, 200);
    assert_true(w.r.deleted);
    assert_null(stored(f, W_PREFIX "pre", NULL));
    tw_release(&w);
}

static void prep_delete_phase(const resource_type *t, json_t *obj)
{
    (void)t;
    json_object_set_new(obj, "status", js("{'phase':'Terminating'}"));
}

static void test_delete_with_finalizers(void **state)
{
    fixture *f = *state;
    f->t->prepare_delete = prep_delete_phase;
    int64_t r1 = create_widget(f, "fz", js("{'metadata':{'name':'fz','finalizers':['a/x']}}"));
    twrite w;
    delete_widget(&w, f, "fz");
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    assert_int_equal(w.r.rev, r1 + 1);
    assert_non_null(w.r.value);
    char dt[64];
    assert_non_null(sget(w.r.obj, "metadata.deletionTimestamp"));
    snprintf(dt, sizeof dt, "%s", sget(w.r.obj, "metadata.deletionTimestamp"));
    assert_true(ckube_parse_rfc3339(dt) > 0);
    assert_true(
        json_is_integer(ckube_json_get_path(w.r.obj, "metadata.deletionGracePeriodSeconds")));
    assert_int_equal(iget(w.r.obj, "metadata.deletionGracePeriodSeconds"), 0);
    assert_string_equal(sget(w.r.obj, "status.phase"), "Terminating");
    json_t *s = stored(f, W_PREFIX "fz", NULL);
    assert_non_null(s);
    assert_string_equal(sget(s, "metadata.deletionTimestamp"), dt);
    assert_int_equal(iget(s, "metadata.deletionGracePeriodSeconds"), 0);
    assert_string_equal(sget(s, "metadata.finalizers[0]"), "a/x");
    /* Not a spec change: the generation stays. */
    assert_int_equal(iget(s, "metadata.generation"), 1);
    json_decref(s);
    json_t *c = cached(f, W_PREFIX "fz", NULL);
    assert_string_equal(sget(c, "metadata.deletionTimestamp"), dt);
    json_decref(c);
    tw_release(&w);

    /* Deleting it again changes nothing. */
    delete_widget(&w, f, "fz");
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    assert_null(w.r.value);
    assert_int_equal(storage_current_rev(f->st), r1 + 1);
    assert_string_equal(sget(w.r.obj, "metadata.deletionTimestamp"), dt);
    tw_release(&w);

    /* Only finalizers outside metadata: graceful too. */
    f->t->pending_finalizers = spec_finalizers_pending;
    create_widget(f, "fs", js("{'metadata':{'name':'fs'},'spec':{'finalizers':['kube']}}"));
    delete_widget(&w, f, "fs");
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    assert_non_null(ckube_json_get_path(w.r.obj, "metadata.deletionTimestamp"));
    tw_release(&w);
}

static void delete_with_policy(twrite *w, fixture *f, const char *name, const char *policy)
{
    tw_init(w, f, STORE_DELETE, name);
    w->sw.propagation = policy;
    tw_run(w);
}

static void test_delete_propagation(void **state)
{
    fixture *f = *state;
    create_widget(f, "o", widget("o"));
    twrite w;
    delete_with_policy(&w, f, "o", "Orphan");
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    json_t *s = stored(f, W_PREFIX "o", NULL);
    assert_non_null(s);
    json_t *fins = ckube_json_get_path(s, "metadata.finalizers");
    assert_int_equal(json_array_size(fins), 1);
    assert_string_equal(json_string_value(json_array_get(fins, 0)), "orphan");
    assert_non_null(ckube_json_get_path(s, "metadata.deletionTimestamp"));
    assert_int_equal(iget(s, "metadata.deletionGracePeriodSeconds"), 0);
    json_decref(s);
    tw_release(&w);

    /* Foreground next: its finalizer replaces orphan (written, though the
     * object is already being deleted). */
    int64_t before = storage_current_rev(f->st);
    delete_with_policy(&w, f, "o", "Foreground");
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    assert_int_equal(w.r.rev, before + 1);
    s = stored(f, W_PREFIX "o", NULL);
    fins = ckube_json_get_path(s, "metadata.finalizers");
    assert_int_equal(json_array_size(fins), 1);
    assert_string_equal(json_string_value(json_array_get(fins, 0)), "foregroundDeletion");
    json_decref(s);
    tw_release(&w);

    /* The same policy again: nothing to write. */
    delete_with_policy(&w, f, "o", "Foreground");
    assert_ok(&w, 200);
    assert_null(w.r.value);
    assert_int_equal(storage_current_rev(f->st), before + 1);
    tw_release(&w);

    /* Background removes the GC finalizer: none left, so it goes. */
    delete_with_policy(&w, f, "o", "Background");
    assert_ok(&w, 200);
    assert_true(w.r.deleted);
    assert_null(stored(f, W_PREFIX "o", NULL));
    tw_release(&w);

    /* Foreground on a fresh object keeps its other finalizers. */
    create_widget(f, "fg", js("{'metadata':{'name':'fg','finalizers':['a/x']}}"));
    delete_with_policy(&w, f, "fg", "Foreground");
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    fins = ckube_json_get_path(w.r.obj, "metadata.finalizers");
    assert_int_equal(json_array_size(fins), 2);
    assert_string_equal(json_string_value(json_array_get(fins, 0)), "a/x");
    assert_string_equal(json_string_value(json_array_get(fins, 1)), "foregroundDeletion");
    tw_release(&w);

    /* Background with no finalizers: a plain delete. */
    create_widget(f, "bg", widget("bg"));
    delete_with_policy(&w, f, "bg", "Background");
    assert_ok(&w, 200);
    assert_true(w.r.deleted);
    tw_release(&w);
}

static void test_delete_by_key(void **state)
{
    fixture *f = *state;
    create_widget(f, "bykey", widget("bykey"));
    twrite w;
    tw_init(&w, f, STORE_DELETE, NULL);
    w.sw.ns = NULL;
    snprintf(w.sw.key, sizeof w.sw.key, "%s", W_PREFIX "bykey");
    tw_run(&w);
    assert_ok(&w, 200);
    assert_true(w.r.deleted);
    assert_string_equal(ckube_obj_name(w.r.obj), "bykey");
    assert_null(stored(f, W_PREFIX "bykey", NULL));
    tw_release(&w);

    /* A key that is not there: 404 naming its last segment. */
    tw_init(&w, f, STORE_DELETE, NULL);
    w.sw.ns = NULL;
    snprintf(w.sw.key, sizeof w.sw.key, "%s", W_PREFIX "bykey");
    tw_run(&w);
    assert_failed(&w, 404, CKUBE_REASON_NOT_FOUND, "widgets.example.com \"bykey\" not found");
    assert_string_equal(w.r.st->name, "bykey");
    tw_release(&w);
}

static void test_delete_missing(void **state)
{
    fixture *f = *state;
    int64_t before = storage_current_rev(f->st);
    twrite w;
    delete_widget(&w, f, "ghost");
    assert_failed(&w, 404, CKUBE_REASON_NOT_FOUND, "widgets.example.com \"ghost\" not found");
    assert_string_equal(w.r.st->name, "ghost");
    assert_string_equal(w.r.st->group, "example.com");
    assert_string_equal(w.r.st->kind, "widgets");
    assert_int_equal(storage_current_rev(f->st), before);
    tw_release(&w);
}

static void test_delete_dry_run(void **state)
{
    fixture *f = *state;
    int64_t r1 = create_widget(f, "dd", widget("dd"));
    twrite w;
    tw_init(&w, f, STORE_DELETE, "dd");
    w.sw.dry_run = true;
    tw_run(&w);
    assert_ok(&w, 200);
    assert_true(w.r.deleted); /* would be */
    assert_null(w.r.value);
    assert_int_equal(rv_of(w.r.obj), r1);
    assert_int_equal(storage_current_rev(f->st), r1);
    json_t *s = stored(f, W_PREFIX "dd", NULL);
    assert_non_null(s);
    json_decref(s);
    json_t *c = cached(f, W_PREFIX "dd", NULL);
    assert_non_null(c);
    json_decref(c);
    tw_release(&w);

    /* With finalizers: the deletionTimestamp it would get, not stored. */
    int64_t r2 = create_widget(f, "ddf", js("{'metadata':{'name':'ddf','finalizers':['a/x']}}"));
    tw_init(&w, f, STORE_DELETE, "ddf");
    w.sw.dry_run = true;
    w.sw.propagation = "Orphan";
    tw_run(&w);
    assert_ok(&w, 200);
    assert_false(w.r.deleted);
    assert_null(w.r.value);
    assert_non_null(ckube_json_get_path(w.r.obj, "metadata.deletionTimestamp"));
    assert_int_equal(json_array_size(ckube_json_get_path(w.r.obj, "metadata.finalizers")), 2);
    assert_int_equal(storage_current_rev(f->st), r2);
    s = stored(f, W_PREFIX "ddf", NULL);
    assert_null(ckube_json_get_path(s, "metadata.deletionTimestamp"));
    assert_int_equal(json_array_size(ckube_json_get_path(s, "metadata.finalizers")), 1);
    json_decref(s);
    tw_release(&w);
}

/* ---- fixed bugs -------------------------------------------------------------
 *
 * What store.c did differently from what store.h (or kube-apiserver)
 * promises, found by these tests and fixed. */

/* Upstream's dry-run create looks the key up first (DryRunnableStorage.
 * Create) and answers AlreadyExists; the store never asks the storage. */
static void test_bug_dry_run_create_of_existing(void **state)
{
    fixture *f = *state;
    create_widget(f, "dup", widget("dup"));
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.sw.dry_run = true;
    w.body = widget("dup");
    tw_run(&w);
    assert_failed(&w, 409, CKUBE_REASON_ALREADY_EXISTS,
                  "widgets.example.com \"dup\" already exists");
    tw_release(&w);
}

/* store.h: "status_only: only .status of the new object counts". The
 * store resets only the metadata: a spec change through /status is
 * stored (and moves the generation). The REST handler projects the body
 * itself, so only other callers of the store see this. */
static void test_bug_status_only_keeps_spec(void **state)
{
    fixture *f = *state;
    f->t->status_subresource = true;
    create_widget(f, "s", widget("s"));
    twrite w;
    tw_init(&w, f, STORE_UPDATE, "s");
    w.sw.status_only = true;
    w.edit = edit_everything;
    w.edit_arg = "New";
    tw_run(&w);
    assert_ok(&w, 200);
    assert_string_equal(sget(w.r.obj, "status.phase"), "New");
    assert_int_equal(iget(w.r.obj, "spec.size"), 1);
    assert_int_equal(iget(w.r.obj, "metadata.generation"), 1);
    tw_release(&w);
}

/* Upstream parses resourceVersion "0" to 0, which is "not given": an
 * unconditional update where the type allows it, else the 422. The
 * store takes it as a precondition that never holds: 409. */
static void test_bug_rv_zero_is_no_precondition(void **state)
{
    fixture *f = *state;
    create_widget(f, "z", widget("z"));
    f->t->allow_unconditional_update = true;
    twrite w;
    tw_init(&w, f, STORE_UPDATE, "z");
    w.sw.require_rv = true;
    w.edit = edit_rv;
    w.edit_arg = "0";
    tw_run(&w);
    assert_ok(&w, 200);
    tw_release(&w);
    f->t->allow_unconditional_update = false;
    tw_init(&w, f, STORE_UPDATE, "z");
    w.sw.require_rv = true;
    w.edit = edit_rv;
    w.edit_arg = "0";
    tw_run(&w);
    assert_failed(&w, 422, CKUBE_REASON_INVALID, NULL);
    tw_release(&w);
}

/* create_object keeps a pointer to metadata.name from before the
 * type's prepare_create (and validate) ran; a hook that sets the name
 * frees that string, and the key is then built from freed memory
 * (AddressSanitizer: heap-use-after-free in store_object_key), or at
 * best from the old name. */
static void prep_create_rename(const resource_type *t, json_t *obj)
{
    (void)t;
    json_object_set_new(meta(obj), "name", json_string("renamed"));
}

static void test_bug_prepare_create_renames(void **state)
{
    fixture *f = *state;
    f->t->prepare_create = prep_create_rename;
    twrite w;
    tw_init(&w, f, STORE_CREATE, NULL);
    w.body = widget("original");
    tw_run(&w);
    assert_ok(&w, 201);
    assert_string_equal(ckube_obj_name(w.r.obj), "renamed");
    json_t *s = stored(f, W_PREFIX "renamed", NULL);
    assert_non_null(s);
    json_decref(s);
    tw_release(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_sets_server_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_namespace_from_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_cluster_scoped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_generate_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_already_exists, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_namespace_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_namespace_terminating, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_dry_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_validate_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_hooks_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_too_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_transform_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_stale_rv, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_precondition_hook, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_require_rv, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_generation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_noop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_status_subresource, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_keeps_server_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_create_on_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_finalize_skips_prepare_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_no_new_finalizers_when_deleting, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_update_last_finalizer_deletes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_conflict_retry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_named_rv_race_not_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_dry_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_plain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_preconditions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_with_finalizers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_propagation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_by_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_dry_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bug_dry_run_create_of_existing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bug_status_only_keeps_spec, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bug_rv_zero_is_no_precondition, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bug_prepare_create_renames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admission_stages, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
