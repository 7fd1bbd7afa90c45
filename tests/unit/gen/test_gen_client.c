/* test_gen_client.c - ckube-gen's typed clients (ckube/typed_client.h and
 * the generated PKG_VERSION_PLURAL_* wrappers) against a real API server
 * run in-process (util/inproc_server.h, so TSan runs this too): every verb
 * on a namespaced kind with status and scale subresources (kitchen's Sink)
 * and a cluster-scoped one (Pantry), the server's defaults seen through the
 * struct, watches, and the server's errors as its Status; an answer that
 * does not decode into the struct is a local error (code 0). Informers
 * and listers: handlers that only map keys decode nothing, a typed view
 * is decoded once per version and shared by handlers and lister reads.
 * Built-in kinds generated from the server's own OpenAPI documents
 * (tests/unit/gen/openapi/): objects the server returns round-trip, and
 * the typed clients work on them; the live documents build a model. */
#include "util/inproc_server.h"

#include "ckube/client.h"
#include "ckube/fake.h"
#include "ckube/informer.h"
#include "ckube/selector.h"
#include "ckube/typed_client.h"
#include "informer/informer_internal.h"
#include "ckube/yaml.h"
#include "util/json_same.h"
#include "gen/model.h"
#include "k8s.h"
#include "kitchen.h"
#include "up.h"

static const ckube_gvr CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"};

typedef struct fixture {
    ips s;
    ckube_client *c;
} fixture;

static void must(int rc, ckube_status *err, const char *what)
{
    if (rc)
        fail_msg("%s: %s", what, err && err->message ? err->message : "?");
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || ips_start(&f->s, 0))
        return -1;
    char host[64];
    snprintf(host, sizeof host, "http://127.0.0.1:%d", f->s.port);
    ckube_config cfg = {.host = host, .qps = -1};
    ckube_status *err = NULL;
    f->c = ckube_client_new(&cfg, &err);
    must(!f->c, err, "client");
    /* the kitchen CRDs, then wait until Sinks are served */
    char path[4096];
    const char *src = getenv("CKUBE_SRC");
    snprintf(path, sizeof path, "%s/tests/unit/gen/crds/kitchen.yaml", src ? src : ".");
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    char *buf = NULL;
    size_t n = 0;
    assert_true(getdelim(&buf, &n, 0, in) > 0);
    fclose(in);
    json_t *docs = NULL;
    char *yerr = NULL;
    assert_int_equal(ckube_yaml_load_all(buf, strlen(buf), &docs, &yerr), 0);
    free(buf);
    size_t i;
    json_t *doc;
    json_array_foreach(docs, i, doc)
    {
        must(ckube_create(f->c, &CRDS, NULL, doc, NULL, NULL, &err), err, "create CRD");
    }
    json_decref(docs);
    for (int tries = 0;; tries++) {
        ckube_typed_list *l = NULL;
        int rc = kitchen_v1_sinks_list(f->c, "default", NULL, &l, &err);
        ckube_typed_list_free(l);
        ckube_typed_list *p = NULL;
        int rc2 = rc ? -1 : kitchen_v1_pantries_list(f->c, NULL, &p, rc ? NULL : &err);
        ckube_typed_list_free(p);
        if (!rc && !rc2)
            break;
        ckube_status_free(err);
        err = NULL;
        assert_true(tries < 500);
        ips_sleep_ms(10);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (!f)
        return 0;
    ckube_client_free(f->c);
    ips_stop(&f->s);
    free(f);
    return 0;
}

static kitchen_v1_sink *new_sink(const char *name, int64_t replicas)
{
    kitchen_v1_sink *o = kitchen_v1_sink_new();
    assert_non_null(o);
    ckube_set_string(&o->api_version, "kitchen.example.com/v1");
    ckube_set_string(&o->kind, "Sink");
    ckube_set_string(&o->metadata.name, name);
    o->spec = kitchen_v1_sink_spec_new();
    ckube_set_string(&o->spec->name, "n");
    o->spec->replicas = replicas;
    o->spec->has_replicas = true;
    o->spec->ports = calloc(1, sizeof *o->spec->ports);
    o->spec->n_ports = 1;
    o->spec->ports[0].port = 80;
    o->spec->ports[0].has_port = true;
    return o;
}

static void test_namespaced_verbs(void **state)
{
    fixture *f = *state;
    ckube_status *err = NULL;
    kitchen_v1_sink *in = new_sink("a", 2), *out = NULL;
    must(kitchen_v1_sinks_create(f->c, "default", in, NULL, &out, &err), err, "create");
    kitchen_v1_sink_free(in);
    assert_string_equal(out->metadata.name, "a");
    assert_string_equal(out->metadata.namespace_, "default");
    assert_non_null(out->metadata.uid);
    assert_int_equal(out->metadata.generation, 1);
    /* the server's defaults (v1's schema), read through the struct */
    assert_true(out->spec->has_ratio && out->spec->ratio == 0.5);
    assert_string_equal(out->spec->mode, KITCHEN_V1_SINK_SPEC_MODE_SLOW);
    assert_string_equal(out->spec->ports[0].protocol, "TCP");
    assert_int_equal(out->spec->nested->level->depth, 3);

    kitchen_v1_sink *got = NULL;
    must(kitchen_v1_sinks_get(f->c, "default", "a", &got, &err), err, "get");
    assert_string_equal(got->metadata.resource_version, out->metadata.resource_version);
    kitchen_v1_sink_free(got);

    /* update: a changed spec bumps the generation */
    out->spec->replicas = 3;
    kitchen_v1_sink *upd = NULL;
    must(kitchen_v1_sinks_update(f->c, "default", out, NULL, &upd, &err), err, "update");
    assert_int_equal(upd->metadata.generation, 2);
    assert_int_equal(upd->spec->replicas, 3);
    /* a stale resourceVersion: the server's 409 as its Status */
    assert_int_equal(kitchen_v1_sinks_update(f->c, "default", out, NULL, NULL, &err), -1);
    assert_int_equal(err->code, 409);
    assert_string_equal(err->reason, "Conflict");
    assert_non_null(strstr(err->message, "the object has been modified"));
    ckube_status_free(err);
    err = NULL;
    kitchen_v1_sink_free(out);

    /* status: the object's namespace when ns is NULL */
    upd->status = kitchen_v1_sink_status_new();
    ckube_set_string(&upd->status->phase, "Ready");
    upd->status->replicas = 3;
    upd->status->has_replicas = true;
    kitchen_v1_sink *st = NULL;
    must(kitchen_v1_sinks_update_status(f->c, NULL, upd, NULL, &st, &err), err, "status");
    assert_string_equal(st->status->phase, "Ready");
    assert_int_equal(st->metadata.generation, 2); /* status writes do not bump it */
    kitchen_v1_sink_free(upd);
    kitchen_v1_sink_free(st);

    /* scale */
    ckube_scale *sc = NULL;
    must(kitchen_v1_sinks_get_scale(f->c, "default", "a", &sc, &err), err, "get scale");
    assert_string_equal(sc->kind, "Scale");
    assert_int_equal(sc->spec->replicas, 3);
    assert_int_equal(sc->status->replicas, 3);
    sc->spec->replicas = 5;
    ckube_scale *sc2 = NULL;
    must(kitchen_v1_sinks_update_scale(f->c, "default", sc, NULL, &sc2, &err), err, "scale");
    assert_int_equal(sc2->spec->replicas, 5);
    ckube_typed_free(&sc->base);
    ckube_typed_free(&sc2->base);
    must(kitchen_v1_sinks_get(f->c, "default", "a", &got, &err), err, "get after scale");
    assert_int_equal(got->spec->replicas, 5);
    kitchen_v1_sink_free(got);

    /* patch */
    const char *mp = "{\"spec\":{\"tags\":[\"x\",\"y\"]}}";
    kitchen_v1_sink *pt = NULL;
    must(kitchen_v1_sinks_patch(f->c, "default", "a", CKUBE_PATCH_MERGE, mp, strlen(mp), NULL, &pt,
                                &err),
         err, "patch");
    assert_int_equal(pt->spec->n_tags, 2);
    assert_string_equal(pt->spec->tags[1], "y");
    kitchen_v1_sink_free(pt);

    /* list */
    in = new_sink("b", 1);
    must(kitchen_v1_sinks_create(f->c, "default", in, NULL, NULL, &err), err, "create b");
    ckube_typed_list *l = NULL;
    must(kitchen_v1_sinks_list(f->c, "default", NULL, &l, &err), err, "list");
    assert_int_equal(l->n_items, 2);
    assert_non_null(l->metadata.resource_version);
    assert_string_equal(kitchen_v1_sink_list_at(l, 0)->metadata.name, "a");
    assert_string_equal(kitchen_v1_sink_list_at(l, 1)->metadata.name, "b");
    ckube_typed_list_free(l);
    /* a page */
    ckube_list_opts lo = {.limit = 1};
    must(kitchen_v1_sinks_list(f->c, "default", &lo, &l, &err), err, "list page");
    assert_int_equal(l->n_items, 1);
    assert_non_null(l->metadata.continue_);
    ckube_typed_list_free(l);

    /* errors */
    assert_int_equal(kitchen_v1_sinks_create(f->c, "default", in, NULL, NULL, &err), -1);
    assert_int_equal(err->code, 409);
    assert_string_equal(err->message, "sinks.kitchen.example.com \"b\" already exists");
    ckube_status_free(err);
    assert_int_equal(kitchen_v1_sinks_get(f->c, "default", "zzz", &got, &err), -1);
    assert_null(got);
    assert_int_equal(err->code, 404);
    assert_string_equal(err->message, "sinks.kitchen.example.com \"zzz\" not found");
    ckube_status_free(err);
    ckube_set_string(&in->metadata.name, "Bad_Name");
    assert_int_equal(kitchen_v1_sinks_create(f->c, "default", in, NULL, NULL, &err), -1);
    assert_int_equal(err->code, 422);
    ckube_status_free(err);
    kitchen_v1_sink_free(in);

    /* delete, delete collection */
    must(kitchen_v1_sinks_delete(f->c, "default", "a", NULL, &err), err, "delete");
    must(kitchen_v1_sinks_delete_collection(f->c, "default", NULL, NULL, &err), err, "deletecol");
    must(kitchen_v1_sinks_list(f->c, "default", NULL, &l, &err), err, "list after");
    assert_int_equal(l->n_items, 0);
    ckube_typed_list_free(l);
}

static void test_watch(void **state)
{
    fixture *f = *state;
    ckube_status *err = NULL;
    ckube_typed_list *l = NULL;
    must(kitchen_v1_sinks_list(f->c, "default", NULL, &l, &err), err, "list");
    ckube_list_opts lo = {.resource_version = l->metadata.resource_version,
                          .timeout_seconds = {true, 10}};
    ckube_watch *w = NULL;
    must(kitchen_v1_sinks_watch(f->c, "default", &lo, &w, &err), err, "watch");
    ckube_typed_list_free(l);
    kitchen_v1_sink *in = new_sink("w", 1);
    must(kitchen_v1_sinks_create(f->c, "default", in, NULL, NULL, &err), err, "create");
    kitchen_v1_sink_free(in);
    must(kitchen_v1_sinks_delete(f->c, "default", "w", NULL, &err), err, "delete");
    ckube_watch_event_type type;
    kitchen_v1_sink *obj = NULL;
    assert_int_equal(kitchen_v1_sinks_watch_next(w, &type, &obj, &err), 1);
    assert_int_equal(type, CKUBE_WATCH_ADDED);
    assert_string_equal(obj->metadata.name, "w");
    assert_int_equal(obj->spec->ports[0].port, 80);
    kitchen_v1_sink_free(obj);
    assert_int_equal(kitchen_v1_sinks_watch_next(w, &type, &obj, &err), 1);
    assert_int_equal(type, CKUBE_WATCH_DELETED);
    assert_string_equal(obj->metadata.name, "w");
    kitchen_v1_sink_free(obj);
    ckube_watch_close(w);
}

static void test_cluster_scoped(void **state)
{
    fixture *f = *state;
    ckube_status *err = NULL;
    kitchen_v1_pantry *p = kitchen_v1_pantry_new();
    ckube_set_string(&p->api_version, "kitchen.example.com/v1");
    ckube_set_string(&p->kind, "Pantry");
    ckube_set_string(&p->metadata.name, "main");
    p->shelves = 4;
    p->has_shelves = true;
    p->unknown = json_pack("{s:s}", "aisle", "7"); /* kept: the root preserves unknown fields */
    kitchen_v1_pantry *out = NULL;
    must(kitchen_v1_pantries_create(f->c, p, NULL, &out, &err), err, "create");
    assert_null(out->metadata.namespace_);
    assert_int_equal(out->shelves, 4);
    assert_string_equal(json_string_value(json_object_get(out->unknown, "aisle")), "7");
    kitchen_v1_pantry_free(out);
    kitchen_v1_pantry_free(p);
    kitchen_v1_pantry *got = NULL;
    must(kitchen_v1_pantries_get(f->c, "main", &got, &err), err, "get");
    assert_int_equal(got->shelves, 4);
    kitchen_v1_pantry_free(got);
    ckube_typed_list *l = NULL;
    must(kitchen_v1_pantries_list(f->c, NULL, &l, &err), err, "list");
    assert_int_equal(l->n_items, 1);
    ckube_typed_list_free(l);
    must(kitchen_v1_pantries_delete(f->c, "main", NULL, &err), err, "delete");
    assert_int_equal(kitchen_v1_pantries_get(f->c, "main", &got, &err), -1);
    assert_int_equal(err->code, 404);
    ckube_status_free(err);
}

/* A struct that cannot hold what the server sends (spec as a string): the
 * error says so, with code 0 (no server refused anything). */
static const ckube_struct_info WRONG_INFO;
static const ckube_type_info WRONG_TYPE = {.group = "kitchen.example.com",
                                           .version = "v1",
                                           .kind = "Sink",
                                           .plural = "sinks",
                                           .namespaced = true,
                                           .object = &WRONG_INFO};
typedef struct wrong {
    ckube_typed base;
    ckube_object_meta metadata;
    bool has_metadata;
    char *spec;
    json_t *unknown;
} wrong;
static const ckube_struct_info WRONG_INFO = {
    .name = "wrong",
    .size = sizeof(wrong),
    .fields =
        (const ckube_field_info[]){
            {.json_name = "metadata",
             .value = {.kind = CKUBE_VALUE_OBJECT, .object = &ckube_object_meta_info},
             .inline_object = true,
             .offset = offsetof(wrong, metadata),
             .has_offset = offsetof(wrong, has_metadata),
             .n_offset = CKUBE_NO_MEMBER,
             .keys_offset = CKUBE_NO_MEMBER,
             .null_offset = CKUBE_NO_MEMBER},
            {.json_name = "spec",
             .value = {.kind = CKUBE_VALUE_STRING},
             .offset = offsetof(wrong, spec),
             .has_offset = CKUBE_NO_MEMBER,
             .n_offset = CKUBE_NO_MEMBER,
             .keys_offset = CKUBE_NO_MEMBER,
             .null_offset = CKUBE_NO_MEMBER},
        },
    .nfields = 2,
    .unknown_offset = offsetof(wrong, unknown),
    .type = &WRONG_TYPE,
};

static void test_undecodable_answer(void **state)
{
    fixture *f = *state;
    ckube_status *err = NULL;
    kitchen_v1_sink *in = new_sink("odd", 1);
    must(kitchen_v1_sinks_create(f->c, "default", in, NULL, NULL, &err), err, "create");
    kitchen_v1_sink_free(in);
    ckube_typed *t = NULL;
    assert_int_equal(ckube_typed_get(f->c, &WRONG_TYPE, "default", "odd", &t, &err), -1);
    assert_null(t);
    assert_int_equal(err->code, 0);
    assert_string_equal(err->message,
                        "decoding the server's answer as Sink: Sink.kitchen.example.com \"odd\" is "
                        "invalid: spec: Invalid value: \"object\": spec in body must be of type "
                        "string: \"object\"");
    ckube_status_free(err);
    ckube_typed_list *l = NULL;
    assert_int_equal(ckube_typed_list_page(f->c, &WRONG_TYPE, "default", NULL, &l, &err), -1);
    assert_null(l);
    assert_int_equal(err->code, 0);
    ckube_status_free(err);
    /* ckube_typed_meta finds the metadata of any kind */
    kitchen_v1_sink *s = kitchen_v1_sink_new();
    assert_ptr_equal(ckube_typed_meta(&s->base), &s->metadata);
    kitchen_v1_sink_free(s);
    must(kitchen_v1_sinks_delete(f->c, "default", "odd", NULL, &err), err, "delete");
}

/* What the handlers saw (under mu). */
typedef struct seen {
    pthread_mutex_t mu;
    int keys;                       /* handler A: keys only */
    const kitchen_v1_sink *typed_a; /* handler B: the typed view of "a" */
    ckube_object *held_a;           /* (a reference, so the view stays valid) */
    int64_t replicas_a;
    int typed_events;
} seen;

static void keys_only(void *ud, const ckube_object *obj, bool initial)
{
    (void)initial;
    seen *sn = ud;
    pthread_mutex_lock(&sn->mu);
    if (*ckube_object_key(obj))
        sn->keys++;
    pthread_mutex_unlock(&sn->mu);
}

static void typed_view(seen *sn, const ckube_object *obj)
{
    ckube_status *err = NULL;
    const kitchen_v1_sink *s = kitchen_v1_sink_of(obj, &err);
    assert_non_null(s);
    pthread_mutex_lock(&sn->mu);
    sn->typed_events++;
    if (!strcmp(s->metadata.name, "a")) {
        ckube_object_unref(sn->held_a);
        sn->held_a = ckube_object_ref(obj);
        sn->typed_a = s;
        sn->replicas_a = s->spec->replicas;
    }
    pthread_mutex_unlock(&sn->mu);
}

static void typed_add(void *ud, const ckube_object *obj, bool initial)
{
    (void)initial;
    typed_view(ud, obj);
}

static void typed_update(void *ud, const ckube_object *old, const ckube_object *obj)
{
    (void)old;
    typed_view(ud, obj);
}

static bool wait_until(seen *sn, int keys, int typed_events, int64_t replicas)
{
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&sn->mu);
        bool ok =
            sn->keys >= keys && sn->typed_events >= typed_events && sn->replicas_a == replicas;
        pthread_mutex_unlock(&sn->mu);
        if (ok)
            return true;
        ips_sleep_ms(10);
    }
    return false;
}

static void test_informer_and_lister(void **state)
{
    fixture *f = *state;
    ckube_status *err = NULL;
    kitchen_v1_sink *a = new_sink("a", 2), *b = new_sink("b", 1);
    ckube_string_map_set(&b->metadata.labels_keys, &b->metadata.labels, &b->metadata.n_labels,
                         &b->metadata.has_labels, "app", "web");
    must(kitchen_v1_sinks_create(f->c, "default", a, NULL, NULL, &err), err, "create a");
    must(kitchen_v1_sinks_create(f->c, "default", b, NULL, NULL, &err), err, "create b");
    kitchen_v1_sink_free(b);

    ckube_informer_factory_opts fo = {.namespace_ = "default"};
    ckube_informer_factory *fac = ckube_informer_factory_new(f->c, &fo);
    assert_non_null(fac);
    ckube_shared_informer *inf = kitchen_v1_sinks_informer(fac);
    assert_non_null(inf);
    assert_ptr_equal(kitchen_v1_sinks_informer(fac), inf); /* one per kind */
    seen sn = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ckube_event_handler ha = {.ud = &sn, .on_add_object = keys_only};
    ckube_event_handler hb = {
        .ud = &sn, .on_add_object = typed_add, .on_update_object = typed_update};
    size_t trees0 = __atomic_load_n(&ckube__cobj_trees_built, __ATOMIC_RELAXED);
    assert_non_null(ckube_shared_informer_add_handler(inf, &ha));
    assert_int_equal(ckube_informer_factory_start(fac), 0);
    assert_true(ckube_informer_factory_wait_for_cache_sync(fac, CKUBE_SEC(10)));
    assert_true(wait_until(&sn, 2, 0, 0));
    /* keys only: no tree was built for anyone */
    assert_int_equal(__atomic_load_n(&ckube__cobj_trees_built, __ATOMIC_RELAXED), trees0);

    /* lister reads as objects build nothing either */
    ckube_lister l = ckube_shared_informer_lister(inf);
    ckube_object **v = NULL;
    size_t n = 0;
    assert_int_equal(ckube_lister_list_objects(&l, "default", NULL, &v, &n), 0);
    assert_int_equal(n, 2);
    ckube_object_list_free(v, n);
    ckube_selector *sel = NULL;
    assert_int_equal(ckube_label_selector_parse("app=web", &sel, NULL), 0);
    assert_int_equal(ckube_lister_list_objects(&l, NULL, sel, &v, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(ckube_object_name(v[0]), "b");
    ckube_object_list_free(v, n);
    ckube_selector_free(sel);
    assert_int_equal(ckube_lister_by_index_objects(&l, CKUBE_INDEX_NAMESPACE, "default", &v, &n),
                     0);
    assert_int_equal(n, 2);
    ckube_object_list_free(v, n);
    assert_int_equal(__atomic_load_n(&ckube__cobj_trees_built, __ATOMIC_RELAXED), trees0);
    assert_null(ckube_lister_get_object(&l, "default", "none"));

    /* a typed handler, added later, gets the contents; its view of "a" is
     * the lister's: one decoding per version, shared */
    assert_non_null(ckube_shared_informer_add_handler(inf, &hb));
    assert_true(wait_until(&sn, 2, 2, 2));
    ckube_object *oa = ckube_lister_get_object(&l, "default", "a");
    assert_non_null(oa);
    const kitchen_v1_sink *ta = kitchen_v1_sink_of(oa, &err);
    assert_non_null(ta);
    pthread_mutex_lock(&sn.mu);
    assert_ptr_equal(ta, sn.typed_a);
    pthread_mutex_unlock(&sn.mu);
    assert_int_equal(ta->spec->replicas, 2);
    assert_string_equal(ta->spec->mode, "Slow"); /* the server's default */
    /* the same object as another kind: refused, not decoded twice */
    assert_null(ckube_object_typed(oa, &kitchen_v2_sink_type, &err));
    assert_string_equal(err->message, "default/a is already decoded as kitchen.example.com/v1 "
                                      "Sink, not as kitchen.example.com/v2 Sink");
    ckube_status_free(err);
    err = NULL;
    ckube_object_unref(oa);

    /* a new version is a new decoding */
    kitchen_v1_sink *cur = NULL;
    must(kitchen_v1_sinks_get(f->c, "default", "a", &cur, &err), err, "get");
    cur->spec->replicas = 7;
    must(kitchen_v1_sinks_update(f->c, "default", cur, NULL, NULL, &err), err, "update");
    kitchen_v1_sink_free(cur);
    assert_true(wait_until(&sn, 2, 3, 7));
    oa = ckube_lister_get_object(&l, "default", "a");
    ta = kitchen_v1_sink_of(oa, NULL);
    assert_int_equal(ta->spec->replicas, 7);
    pthread_mutex_lock(&sn.mu);
    assert_ptr_equal(ta, sn.typed_a);
    ckube_object_unref(sn.held_a);
    sn.held_a = NULL;
    pthread_mutex_unlock(&sn.mu);
    ckube_object_unref(oa);
    ckube_informer_factory_free(fac);
    kitchen_v1_sink_free(a);
}

/* The typed fake: objects in as structs, out as structs, and an informer
 * on it hands out typed views (of objects the fake keeps as trees: the
 * view then lives with the notification's object). */
static void test_typed_fake(void **state)
{
    (void)state;
    ckube_fake_lw_opts fo = {.resource = "sinks.kitchen.example.com",
                             .api_version = "kitchen.example.com/v1",
                             .kind = "Sink"};
    ckube_fake_lw *fake = ckube_fake_lw_new(&fo);
    kitchen_v1_sink *a = new_sink("a", 3);
    ckube_set_string(&a->metadata.namespace_, "default");
    assert_true(kitchen_v1_sinks_fake_add(fake, a) > 0);
    assert_int_equal(kitchen_v1_sinks_fake_add(fake, a), 0); /* exists */
    a->spec->replicas = 4;
    assert_true(kitchen_v1_sinks_fake_update(fake, a) > 0);
    kitchen_v1_sink *got = kitchen_v1_sinks_fake_get(fake, "default", "a");
    assert_non_null(got);
    assert_int_equal(got->spec->replicas, 4);
    assert_non_null(got->metadata.resource_version); /* the fake's */
    kitchen_v1_sink_free(got);
    assert_null(kitchen_v1_sinks_fake_get(fake, "default", "none"));
    kitchen_v1_pantry *p = kitchen_v1_pantry_new();
    ckube_set_string(&p->metadata.name, "pp");
    ckube_fake_lw *pf = ckube_fake_lw_new(NULL);
    assert_true(kitchen_v1_pantries_fake_apply(pf, p) > 0);
    kitchen_v1_pantry *pg = kitchen_v1_pantries_fake_get(pf, "pp");
    assert_non_null(pg);
    kitchen_v1_pantry_free(pg);
    kitchen_v1_pantry_free(p);
    ckube_fake_lw_unref(pf);

    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), NULL);
    seen sn = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ckube_event_handler hb = {
        .ud = &sn, .on_add_object = typed_add, .on_update_object = typed_update};
    assert_non_null(ckube_shared_informer_add_handler(inf, &hb));
    assert_int_equal(ckube_shared_informer_start(inf), 0);
    assert_true(wait_until(&sn, 0, 1, 4));
    a->spec->replicas = 9;
    assert_true(kitchen_v1_sinks_fake_update(fake, a) > 0);
    assert_true(wait_until(&sn, 0, 2, 9));
    ckube_lister l = ckube_shared_informer_lister(inf);
    ckube_object *o = ckube_lister_get_object(&l, "default", "a");
    const kitchen_v1_sink *v = kitchen_v1_sink_of(o, NULL);
    assert_non_null(v);
    assert_int_equal(v->spec->replicas, 9);
    assert_ptr_equal(kitchen_v1_sink_of(o, NULL), v); /* once per object */
    ckube_object_unref(o);
    ckube_shared_informer_free(inf);
    pthread_mutex_lock(&sn.mu);
    ckube_object_unref(sn.held_a);
    sn.held_a = NULL;
    pthread_mutex_unlock(&sn.mu);
    kitchen_v1_sink_free(a);
    ckube_fake_lw_unref(fake);
}

/* Many workers reading one cached object at once, as a controller's
 * workers do: each gets it, decodes it as a Sink and encodes it again,
 * and must see the object as it was read alone. Two stores: one filled
 * through the json_t calls (no compact form: every reader shares its
 * tree), and an informer's (compact objects: every reader shares one
 * decoding). Under TSan (this test's label), also that no thread changes
 * a shared tree's or decoding's counts unsynchronised. */
typedef struct sink_reader {
    ckube_lister l;
    const char *name;
    char *want; /* the object's JSON, keys sorted; NULL: read it alone first */
    int bad;
} sink_reader;

static char *read_sink_once(const sink_reader *r)
{
    ckube_object *o = ckube_lister_get_object(&r->l, "default", r->name);
    const kitchen_v1_sink *t = o ? kitchen_v1_sink_of(o, NULL) : NULL;
    json_t *j = t ? kitchen_v1_sink_to_json(t) : NULL;
    char *got = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    ckube_object_unref(o);
    return got;
}

static void *read_sinks(void *arg)
{
    sink_reader *r = arg;
    for (int i = 0; i < 200; i++) {
        char *got = read_sink_once(r);
        if (!got || strcmp(got, r->want))
            r->bad++;
        free(got);
    }
    return NULL;
}

static void readers_agree(ckube_lister l, const char *name)
{
    enum { N = 4 };
    sink_reader r[N];
    pthread_t th[N];
    sink_reader alone = {.l = l, .name = name};
    char *want = read_sink_once(&alone);
    assert_non_null(want);
    assert_non_null(strstr(want, "\"unknownField\":{\"kept\":[1,2]}"));
    for (int i = 0; i < N; i++) {
        r[i] = (sink_reader){.l = l, .name = name, .want = want};
        assert_int_equal(pthread_create(&th[i], NULL, read_sinks, &r[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++)
        assert_int_equal(r[i].bad, 0);
    free(want);
}

static void test_shared_tree_readers(void **state)
{
    (void)state;
    /* a json_t store */
    ckube_store *s = ckube_store_new(NULL);
    json_t *obj =
        json_loads("{\"apiVersion\":\"kitchen.example.com/v1\",\"kind\":\"Sink\",\"metadata\":"
                   "{\"managedFields\":[{\"manager\":\"m\",\"operation\":\"Update\"}],"
                   "\"name\":\"shared\",\"namespace\":\"default\"},\"spec\":{\"name\":\"n\","
                   "\"replicas\":2},\"unknownField\":{\"kept\":[1,2]}}",
                   0, NULL);
    assert_non_null(obj);
    assert_int_equal(ckube_store_put(s, obj, NULL), 0);
    json_decref(obj);
    readers_agree((ckube_lister){.store = s}, "shared");
    ckube_store_free(s);

    /* an informer's store of compact objects, from the typed fake */
    ckube_fake_lw_opts fo = {.resource = "sinks.kitchen.example.com",
                             .api_version = "kitchen.example.com/v1",
                             .kind = "Sink"};
    ckube_fake_lw *fake = ckube_fake_lw_new(&fo);
    kitchen_v1_sink *a = new_sink("a", 3);
    ckube_set_string(&a->metadata.namespace_, "default");
    a->unknown = json_loads("{\"unknownField\":{\"kept\":[1,2]}}", 0, NULL);
    assert_true(kitchen_v1_sinks_fake_add(fake, a) > 0);
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), NULL);
    assert_int_equal(ckube_shared_informer_start(inf), 0);
    ckube_lister l = ckube_shared_informer_lister(inf);
    json_t *got = NULL;
    for (int i = 0; i < 300 && !(got = ckube_lister_get(&l, "default", "a")); i++)
        ips_sleep_ms(10);
    assert_non_null(got);
    ckube_obj_unref(got);
    readers_agree(l, "a");
    ckube_shared_informer_free(inf);
    kitchen_v1_sink_free(a);
    ckube_fake_lw_unref(fake);
}

static json_t *must_json(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j)
        fail_msg("test JSON: %s", e.text);
    return j;
}

/* Built-in objects created through the dynamic client and read back: each
 * decodes into its generated struct (through the scheme) and encodes to
 * what the server sent. */
static void test_builtin_round_trip(void **state)
{
    fixture *f = *state;
    ckube_status *err = NULL;
    ckube_scheme *sch = ckube_scheme_new();
    assert_int_equal(k8s_add_to_scheme(sch), 0);
    struct {
        ckube_gvr r;
        const char *ns;
        const char *body;
    } objs[] = {
        {{"", "v1", "configmaps"},
         "default",
         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm\","
         "\"labels\":{\"a\":\"b\"},\"annotations\":{\"x\":\"y\"}},\"data\":{\"k\":\"v\"},"
         "\"binaryData\":{\"b\":\"AAE=\"}}"},
        {{"", "v1", "secrets"},
         "default",
         "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\"},"
         "\"type\":\"Opaque\",\"stringData\":{\"p\":\"w\"}}"},
        {{"", "v1", "services"},
         "default",
         "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"svc\"},"
         "\"spec\":{\"selector\":{\"app\":\"web\"},\"ports\":[{\"port\":80,"
         "\"targetPort\":\"http\"},{\"name\":\"m\",\"port\":9090,\"targetPort\":9091}]}}"},
        {{"", "v1", "namespaces"},
         NULL,
         "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"ns1\"}}"},
        {{"", "v1", "pods"},
         "default",
         "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},"
         "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\",\"args\":[\"sleep\","
         "\"1\"],\"ports\":[{\"containerPort\":8080}],\"resources\":{\"limits\":{\"cpu\":"
         "\"500m\",\"memory\":\"64Mi\"}},\"env\":[{\"name\":\"A\",\"value\":\"1\"}]}],"
         "\"restartPolicy\":\"Never\"}}"},
        {{"apps", "v1", "deployments"},
         "default",
         "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"d\"},"
         "\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
         "\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{"
         "\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}}}"},
    };
    for (size_t i = 0; i < sizeof objs / sizeof *objs; i++) {
        json_t *body = must_json(objs[i].body), *stored = NULL;
        must(ckube_create(f->c, &objs[i].r, objs[i].ns, body, NULL, &stored, &err), err,
             objs[i].body);
        json_decref(body);
        char *text = json_dumps(stored, JSON_COMPACT);
        ckube_typed *t = NULL;
        if (ckube_scheme_decode(sch, text, strlen(text), &t, &err))
            fail_msg("%s: %s", text, err ? err->message : "?");
        json_t *back = ckube_typed_to_json(t);
        if (!json_same(stored, back)) {
            char *b = json_dumps(back, JSON_COMPACT);
            fail_msg("round trip:\nwant %s\ngot  %s", text, b);
        }
        json_decref(back);
        ckube_typed_free(t);
        free(text);
        json_decref(stored);
    }
    ckube_scheme_free(sch);

    /* typed access and typed clients on built-in kinds */
    k8s_v1_service *svc = NULL;
    must(k8s_v1_services_get(f->c, "default", "svc", &svc, &err), err, "get service");
    assert_int_equal(svc->spec->n_ports, 2);
    assert_int_equal(svc->spec->ports[0].target_port.type, CKUBE_IOS_STRING);
    assert_int_equal(svc->spec->ports[1].target_port.int_value, 9091);
    k8s_v1_service_free(svc);
    k8s_v1_pod *pod = NULL;
    must(k8s_v1_pods_get(f->c, "default", "p", &pod, &err), err, "get pod");
    const k8s_v1_container *c = &pod->spec->containers[0];
    assert_string_equal(c->image, "busybox");
    assert_string_equal(ckube_string_map_get(c->resources->limits_keys, c->resources->limits,
                                             c->resources->n_limits, "memory"),
                        "64Mi");
    k8s_v1_pod_free(pod);
    k8s_v1_namespace *ns = NULL;
    must(k8s_v1_namespaces_get(f->c, "ns1", &ns, &err), err, "get namespace");
    assert_string_equal(ns->metadata.name, "ns1");
    k8s_v1_namespace_free(ns);
    ckube_typed_list *dl = NULL;
    must(k8s_v1_deployments_list(f->c, "default", NULL, &dl, &err), err, "list deployments");
    assert_int_equal(dl->n_items, 1);
    const k8s_v1_deployment *d = k8s_v1_deployment_list_at(dl, 0);
    assert_int_equal(d->spec->replicas, 2);
    assert_string_equal(ckube_string_map_get(d->spec->template_->metadata->labels_keys,
                                             d->spec->template_->metadata->labels,
                                             d->spec->template_->metadata->n_labels, "app"),
                        "web");
    assert_true(k8s_v1_deployment_type.namespaced);
    ckube_typed_list_free(dl);
    /* a Deployment's scale, through the generated client */
    ckube_scale *sc = NULL;
    must(k8s_v1_deployments_get_scale(f->c, "default", "d", &sc, &err), err, "scale");
    assert_int_equal(sc->spec->replicas, 2);
    ckube_typed_free(&sc->base);
}

/* A Lease through the struct generated from kube-apiserver 1.32's own
 * document for coordination.k8s.io/v1: the upstream form ($ref beside
 * default and description, MicroTime) reads what ckube serves. */
static void test_upstream_document(void **state)
{
    fixture *f = *state;
    ckube_status *err = NULL;
    const ckube_gvr leases = {"coordination.k8s.io", "v1", "leases"};
    json_t *body = must_json("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                             "\"metadata\":{\"name\":\"l1\"},\"spec\":{\"holderIdentity\":"
                             "\"me\",\"leaseDurationSeconds\":15,\"acquireTime\":"
                             "\"2026-11-27T10:00:00.000000Z\",\"renewTime\":"
                             "\"2026-11-27T10:00:05.123456Z\",\"leaseTransitions\":2}}");
    json_t *stored = NULL;
    must(ckube_create(f->c, &leases, "default", body, NULL, &stored, &err), err, "lease");
    json_decref(body);
    up_v1_lease *l = up_v1_lease_from_json(stored, &err);
    if (!l)
        fail_msg("%s", err ? err->message : "?");
    json_t *back = up_v1_lease_to_json(l);
    assert_true(json_same(stored, back));
    assert_string_equal(l->spec->holder_identity, "me");
    assert_string_equal(l->spec->renew_time, "2026-11-27T10:00:05.123456Z");
    assert_int_equal(l->spec->lease_duration_seconds, 15);
    json_decref(back);
    json_decref(stored);
    up_v1_lease_free(l);
    must(up_v1_leases_get(f->c, "default", "l1", &l, &err), err, "typed get");
    assert_int_equal(l->spec->lease_transitions, 2);
    up_v1_lease_free(l);
    /* upstream's default: {} on spec makes an empty spec */
    up_v1_lease *e = up_v1_lease_new();
    assert_int_equal(up_v1_lease_set_defaults(e), 0);
    assert_non_null(e->spec);
    up_v1_lease_free(e);
}

/* The live documents make a model; --kinds names what must be there. */
static void test_openapi_live(void **state)
{
    fixture *f = *state;
    ckube_status *err = NULL;
    ckube_request rq = {.method = "GET", .path = "/openapi/v3/apis/apps/v1"};
    ckube_response resp = {0};
    must(ckube_client_do(f->c, &rq, &resp, &err), err, "openapi");
    json_t *doc = json_loadb(resp.body, resp.body_len, 0, NULL);
    ckube_response_free(&resp);
    assert_non_null(doc);
    char *gerr = NULL;
    gen_model *m = gen_model_new("apps", &gerr);
    assert_int_equal(gen_model_add_openapi(m, doc, "live", &gerr), 0);
    bool deployment = false;
    for (size_t i = 0; i < m->nkinds; i++) {
        if (strcmp(m->kinds[i].kind, "Deployment"))
            continue;
        deployment = true;
        assert_string_equal(m->kinds[i].plural, "deployments");
        assert_string_equal(m->kinds[i].group, "apps");
        assert_true(m->kinds[i].namespaced && m->kinds[i].status_subresource &&
                    m->kinds[i].scale_subresource);
        assert_string_equal(m->kinds[i].root->c_name, "apps_v1_deployment");
    }
    assert_true(deployment);
    gen_model_free(m);
    m = gen_model_new("apps", &gerr);
    assert_int_equal(gen_model_set_kinds(m, "Deployment,Bogus", &gerr), 0);
    assert_int_equal(gen_model_add_openapi(m, doc, "live", &gerr), 0);
    assert_int_equal(m->nkinds, 1); /* Deployment only */
    assert_int_equal(gen_model_check_kinds(m, &gerr), -1);
    assert_string_equal(gerr, "--kinds: no kind Bogus is served by the OpenAPI documents given");
    free(gerr);
    gen_model_free(m);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_namespaced_verbs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cluster_scoped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_undecodable_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_informer_and_lister, setup, teardown),
        cmocka_unit_test_setup_teardown(test_builtin_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_openapi_live, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_document, setup, teardown),
        cmocka_unit_test(test_typed_fake),
        cmocka_unit_test(test_shared_tree_readers),
    };
    return cmocka_run_group_tests(tests, ips_global_setup, ips_global_teardown);
}
