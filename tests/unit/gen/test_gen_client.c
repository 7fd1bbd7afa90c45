/* test_gen_client.c - ckube-gen's typed clients (ckube/typed_client.h and
 * the generated PKG_VERSION_PLURAL_* wrappers) against a real API server
 * run in-process (util/inproc_server.h, so TSan runs this too): every verb
 * on a namespaced kind with status and scale subresources (kitchen's Sink)
 * and a cluster-scoped one (Pantry), the server's defaults seen through the
 * struct, watches, and the server's errors as its Status; an answer that
 * does not decode into the struct is a local error (code 0). */
#include "util/inproc_server.h"

#include "ckube/client.h"
#include "ckube/typed_client.h"
#include "ckube/yaml.h"
#include "kitchen.h"

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
        kitchen_v1_sink_list *l = NULL;
        int rc = kitchen_v1_sinks_list(f->c, "default", NULL, &l, &err);
        kitchen_v1_sink_list_free(l);
        kitchen_v1_pantry_list *p = NULL;
        int rc2 = rc ? -1 : kitchen_v1_pantries_list(f->c, NULL, &p, rc ? NULL : &err);
        kitchen_v1_pantry_list_free(p);
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
    kitchen_v1_sink_list *l = NULL;
    must(kitchen_v1_sinks_list(f->c, "default", NULL, &l, &err), err, "list");
    assert_int_equal(l->n_items, 2);
    assert_non_null(l->metadata.resource_version);
    assert_string_equal(kitchen_v1_sink_list_at(l, 0)->metadata.name, "a");
    assert_string_equal(kitchen_v1_sink_list_at(l, 1)->metadata.name, "b");
    kitchen_v1_sink_list_free(l);
    /* a page */
    ckube_list_opts lo = {.limit = 1};
    must(kitchen_v1_sinks_list(f->c, "default", &lo, &l, &err), err, "list page");
    assert_int_equal(l->n_items, 1);
    assert_non_null(l->metadata.continue_);
    kitchen_v1_sink_list_free(l);

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
    kitchen_v1_sink_list_free(l);
}

static void test_watch(void **state)
{
    fixture *f = *state;
    ckube_status *err = NULL;
    kitchen_v1_sink_list *l = NULL;
    must(kitchen_v1_sinks_list(f->c, "default", NULL, &l, &err), err, "list");
    ckube_list_opts lo = {.resource_version = l->metadata.resource_version,
                          .timeout_seconds = {true, 10}};
    ckube_watch *w = NULL;
    must(kitchen_v1_sinks_watch(f->c, "default", &lo, &w, &err), err, "watch");
    kitchen_v1_sink_list_free(l);
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
    kitchen_v1_pantry_list *l = NULL;
    must(kitchen_v1_pantries_list(f->c, NULL, &l, &err), err, "list");
    assert_int_equal(l->n_items, 1);
    kitchen_v1_pantry_list_free(l);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_namespaced_verbs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cluster_scoped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_undecodable_answer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, ips_global_setup, ips_global_teardown);
}
