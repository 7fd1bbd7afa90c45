/* CustomResourceDefinitions (apiextensions/crd.c): the served types a CRD
 * registers, the status computed when it is written, name conflicts,
 * retiring the types of a version that goes, the cleanup finalizer, and
 * validation.
 *
 * Each test runs an API server in-process (util/inproc_server.h) and
 * drives the CRD machinery directly through the server's own generic
 * store, registry and CRD state (srv->store, srv->registry, srv->crds):
 * writes go through store_write_start without the HTTP layer, and what
 * the machinery did is read from the registry and the cache. Validation is
 * checked both through the type's validate hook and as the 422 an HTTP
 * create gets. */
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

#include "apiserver/apiextensions/crd.h"
#include "ckube/json.h"
#include "ckube/status.h"
#include "util/inproc_server.h"

#define CRD_GROUP "apiextensions.k8s.io"
#define CRD_RESOURCE "customresourcedefinitions"
#define WAIT_MS 5000

/* ---- JSON ------------------------------------------------------------- */

/* JSON from printf-style text written with single quotes. */
static json_t *J(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *J(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t err;
    json_t *j = json_loads(s, 0, &err);
    if (!j)
        fail_msg("bad test JSON (%s): %s", err.text, s);
    free(s);
    return j;
}

#define SCHEMA "{'openAPIV3Schema':{'type':'object','x-kubernetes-preserve-unknown-fields':true}}"

/* A version of spec.versions with the permissive schema. */
#define VER(name, served, storage, extra)                                                          \
    "{'name':'" name "','served':" served ",'storage':" storage ",'schema':" SCHEMA extra "}"

/* A v1 CRD object. `names_extra` continues spec.names (",'singular':..."
 * or ""), `versions` is the JSON array of spec.versions. */
static json_t *crd_obj(const char *name, const char *group, const char *plural, const char *kind,
                       const char *scope, const char *names_extra, const char *versions)
{
    return J("{'apiVersion':'apiextensions.k8s.io/v1','kind':'CustomResourceDefinition',"
             "'metadata':{'name':'%s'},'spec':{'group':'%s','scope':'%s',"
             "'names':{'plural':'%s','kind':'%s'%s},'versions':%s}}",
             name, group, scope, plural, kind, names_extra, versions);
}

/* The condition of `type` in obj's status.conditions, or NULL. */
static json_t *condition(const json_t *obj, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(ckube_json_get_path(obj, "status.conditions"), i, c)
    {
        if (!strcmp(json_string_value(json_object_get(c, "type")) ?: "", type))
            return c;
    }
    return NULL;
}

static void assert_condition(const json_t *obj, const char *type, const char *status,
                             const char *reason, const char *message)
{
    json_t *c = condition(obj, type);
    if (!c)
        fail_msg("no %s condition", type);
    assert_string_equal(json_string_value(json_object_get(c, "status")), status);
    assert_string_equal(json_string_value(json_object_get(c, "reason")), reason);
    assert_string_equal(json_string_value(json_object_get(c, "message")), message);
    const char *ltt = json_string_value(json_object_get(c, "lastTransitionTime"));
    assert_non_null(ltt);
    assert_true(ckube_parse_rfc3339(ltt) > 0);
}

static bool has_string(const json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        if (json_string_value(v) && !strcmp(json_string_value(v), s))
            return true;
    }
    return false;
}

static void assert_strv(char **got, const char *const *want)
{
    size_t n = 0;
    for (; want[n]; n++) {
        assert_non_null(got);
        assert_non_null(got[n]);
        assert_string_equal(got[n], want[n]);
    }
    if (got)
        assert_null(got[n]);
}

/* ---- the server and direct writes -------------------------------------- */

static int setup(void **state)
{
    ips *p = calloc(1, sizeof *p);
    if (!p || ips_start(p, 0) != 0) {
        free(p);
        return -1;
    }
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    ips *p = *state;
    ips_stop(p);
    free(p);
    return 0;
}

typedef json_t *(*edit_fn)(const json_t *old, const void *arg);

/* One write through the generic store, waited for. */
typedef struct sync_write {
    store_write sw; /* first: the store's hooks get &w->sw */
    json_t *body;   /* what a create writes */
    edit_fn edit;   /* or: the new object from the current one */
    const void *edit_arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    store_result r;
} sync_write;

static json_t *sw_transform(store_write *sw, const json_t *old, ckube_status **st)
{
    (void)st;
    sync_write *w = (sync_write *)sw;
    return w->edit ? w->edit(old, w->edit_arg) : json_deep_copy(w->body);
}

/* On the storage thread (or the caller's, for a write ending at once). */
static void sw_done(store_write *sw, store_result *r)
{
    sync_write *w = (sync_write *)sw;
    pthread_mutex_lock(&w->mu);
    w->r = *r;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static const store_hooks sync_hooks = {.transform = sw_transform, .done = sw_done};

/* Writes through the server's store as an internal writer (no validation
 * hook: the REST layer's checks are not run) to GROUP/VERSION/RESOURCE.
 * Returns the result code (201/200, 0 on failure); the object written in
 * *out and the failure in *st when given (caller frees). */
static int store_sync(ips *p, const char *group, const char *version, const char *resource,
                      store_verb verb, const char *ns, const char *name, json_t *body, edit_fn edit,
                      const void *edit_arg, json_t **out, ckube_status **st)
{
    resource_type *t = registry_lookup(p->srv->registry, group, version, resource);
    if (!t)
        fail_msg("%s/%s %s is not served", group, version, resource);
    sync_write *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->sw = (store_write){.store = p->srv->store,
                          .type = t,
                          .verb = verb,
                          .hooks = &sync_hooks,
                          .ns = ns,
                          .name = name};
    w->body = body;
    w->edit = edit;
    w->edit_arg = edit_arg;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    store_write_start(&w->sw);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&w->mu);
    while (!w->done)
        if (pthread_cond_timedwait(&w->cv, &w->mu, &until) != 0 && !w->done) {
            pthread_mutex_unlock(&w->mu);
            fail_msg("%s %s: the store did not answer within %d ms", resource, name ? name : "",
                     WAIT_MS); /* (w is left to the store) */
        }
    pthread_mutex_unlock(&w->mu);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    int code = w->r.code;
    if (out)
        *out = w->r.obj;
    else
        json_decref(w->r.obj);
    if (st)
        *st = w->r.st;
    else
        ckube_status_free(w->r.st);
    free(w->r.value);
    free(w);
    resource_type_unref(t);
    return code;
}

/* Creates a v1 CRD (taking `obj`); returns the object written. */
static json_t *create_crd(ips *p, json_t *obj)
{
    json_t *out = NULL;
    ckube_status *st = NULL;
    int code = store_sync(p, CRD_GROUP, "v1", CRD_RESOURCE, STORE_CREATE, NULL, NULL, obj, NULL,
                          NULL, &out, &st);
    if (code != 201)
        fail_msg("creating CRD %s: %d %s", ckube_obj_name(obj), code,
                 st && st->message ? st->message : "");
    json_decref(obj);
    return out;
}

static int update_crd(ips *p, const char *name, edit_fn edit, const void *arg, json_t **out)
{
    return store_sync(p, CRD_GROUP, "v1", CRD_RESOURCE, STORE_UPDATE, NULL, name, NULL, edit, arg,
                      out, NULL);
}

static int delete_crd(ips *p, const char *name, json_t **out)
{
    return store_sync(p, CRD_GROUP, "v1", CRD_RESOURCE, STORE_DELETE, NULL, name, NULL, NULL, NULL,
                      out, NULL);
}

/* The object at a storage key, decoded from the cache, or NULL. */
static json_t *cached(ips *p, const char *key)
{
    cobj *o = cacher_get(p->srv->cache, key);
    if (!o)
        return NULL;
    json_t *j = cobj_decode(o);
    cobj_unref(o);
    return j;
}

static bool key_exists(ips *p, const char *key)
{
    cobj *o = cacher_get(p->srv->cache, key);
    cobj_unref(o);
    return o != NULL;
}

typedef struct key_wait {
    ips *p;
    const char *key;
} key_wait;

static bool key_gone(void *arg)
{
    key_wait *k = arg;
    return !key_exists(k->p, k->key);
}

static resource_type *lookup(ips *p, const char *group, const char *version, const char *resource)
{
    return registry_lookup(p->srv->registry, group, version, resource);
}

static bool served(ips *p, const char *group, const char *version, const char *resource)
{
    resource_type *t = lookup(p, group, version, resource);
    resource_type_unref(t);
    return t != NULL;
}

/* Types in the registry that CRD `name` registered. */
static size_t types_of_crd(ips *p, const char *name)
{
    size_t n, k = 0;
    resource_type **types = registry_list(p->srv->registry, &n);
    for (size_t i = 0; i < n; i++)
        k += types[i]->crd_name && !strcmp(types[i]->crd_name, name);
    registry_list_free(types, n);
    return k;
}

/* One version, v1, stored. */
#define ONLY_V1 "[" VER("v1", "true", "true", "") "]"

/* v1beta1 (status), v1 (stored; status and scale), v1alpha1 not served. */
#define WIDGETS_SCALE                                                                              \
    "'scale':{'specReplicasPath':'.spec.size','statusReplicasPath':'.status.size',"                \
    "'labelSelectorPath':'.status.selector'}"
#define WIDGETS_V1BETA1 VER("v1beta1", "true", "false", ",'subresources':{'status':{}}")
#define WIDGETS_V1 VER("v1", "true", "true", ",'subresources':{'status':{}," WIDGETS_SCALE "}")
#define WIDGETS_V1ALPHA1 VER("v1alpha1", "false", "false", "")
#define WIDGETS_VERSIONS "[" WIDGETS_V1BETA1 "," WIDGETS_V1 "," WIDGETS_V1ALPHA1 "]"

static json_t *widgets_crd(void)
{
    return crd_obj("widgets.example.com", "example.com", "widgets", "Widget", "Namespaced",
                   ",'singular':'widget','shortNames':['wd','wdg'],'categories':['all','example']",
                   WIDGETS_VERSIONS);
}

/* ---- registration --------------------------------------------------------- */

static void test_create_registers_served_versions(void **state)
{
    ips *p = *state;
    unsigned long gen0 = registry_generation(p->srv->registry);
    assert_false(served(p, "example.com", "v1", "widgets"));
    json_decref(create_crd(p, widgets_crd()));

    /* The cacher tells the CRD machinery of the change before the write
     * is acknowledged: the types are served when the create returns. */
    resource_type *v1 = lookup(p, "example.com", "v1", "widgets");
    resource_type *b1 = lookup(p, "example.com", "v1beta1", "widgets");
    assert_non_null(v1);
    assert_non_null(b1);
    assert_true(registry_generation(p->srv->registry) > gen0);
    /* served: false is not registered */
    assert_false(served(p, "example.com", "v1alpha1", "widgets"));

    assert_string_equal(v1->group, "example.com");
    assert_string_equal(v1->version, "v1");
    assert_string_equal(v1->resource, "widgets");
    assert_string_equal(v1->kind, "Widget");
    assert_string_equal(v1->list_kind, "WidgetList"); /* defaulted */
    assert_string_equal(v1->singular, "widget");
    assert_string_equal(v1->api_version, "example.com/v1");
    assert_true(v1->namespaced);
    assert_strv(v1->short_names, (const char *const[]){"wd", "wdg", NULL});
    assert_strv(v1->categories, (const char *const[]){"all", "example", NULL});
    assert_int_equal(v1->verbs, VERB_ALL);
    assert_true(v1->is_custom);
    assert_string_equal(v1->crd_name, "widgets.example.com");
    assert_true(v1->storage_version);
    assert_true(v1->status_subresource);
    assert_true(v1->scale_subresource);
    assert_string_equal(v1->scale_spec_replicas_path, ".spec.size");
    assert_string_equal(v1->scale_status_replicas_path, ".status.size");
    assert_string_equal(v1->scale_label_selector_path, ".status.selector");
    assert_non_null(v1->schema);
    assert_false(crd_type_retired(v1));

    /* Each version has its own subresources; both share names and scope. */
    assert_string_equal(b1->api_version, "example.com/v1beta1");
    assert_string_equal(b1->kind, "Widget");
    assert_true(b1->namespaced);
    assert_strv(b1->short_names, (const char *const[]){"wd", "wdg", NULL});
    assert_false(b1->storage_version);
    assert_true(b1->status_subresource);
    assert_false(b1->scale_subresource);
    assert_false(crd_type_retired(b1));

    resource_type *byk = registry_lookup_kind(p->srv->registry, "example.com", "v1", "Widget");
    assert_ptr_equal(byk, v1);
    resource_type_unref(byk);
    resource_type_unref(v1);
    resource_type_unref(b1);
    assert_int_equal(types_of_crd(p, "widgets.example.com"), 2);

    /* A cluster-scoped CRD without subresources; names defaulted from
     * the kind. */
    json_decref(create_crd(p, crd_obj("gizmos.example.com", "example.com", "gizmos", "Gizmo",
                                      "Cluster", "", ONLY_V1)));
    resource_type *g = lookup(p, "example.com", "v1", "gizmos");
    assert_non_null(g);
    assert_false(g->namespaced);
    assert_false(g->status_subresource);
    assert_false(g->scale_subresource);
    assert_string_equal(g->singular, "gizmo");
    assert_string_equal(g->list_kind, "GizmoList");
    assert_null(g->short_names);
    assert_null(g->categories);
    resource_type_unref(g);
    /* Nothing crossed over between the two CRDs. */
    assert_int_equal(types_of_crd(p, "widgets.example.com"), 2);
    assert_int_equal(types_of_crd(p, "gizmos.example.com"), 1);
}

static void test_create_computes_status(void **state)
{
    ips *p = *state;
    json_t *got = create_crd(p, widgets_crd());
    json_t *stored = cached(p, CRD_KEY_PREFIX "widgets.example.com");
    assert_non_null(stored);
    /* What the create answered is what is stored. */
    json_t *objs[] = {got, stored};
    for (size_t i = 0; i < 2; i++) {
        json_t *o = objs[i];
        assert_true(
            has_string(ckube_json_get_path(o, "metadata.finalizers"), CRD_CLEANUP_FINALIZER));
        json_t *want = J("{'plural':'widgets','singular':'widget','kind':'Widget',"
                         "'listKind':'WidgetList','shortNames':['wd','wdg'],"
                         "'categories':['all','example']}");
        assert_true(json_equal(ckube_json_get_path(o, "status.acceptedNames"), want));
        json_decref(want);
        assert_condition(o, "NamesAccepted", "True", "NoConflicts", "no conflicts found");
        assert_condition(o, "Established", "True", "InitialNamesAccepted",
                         "the initial names have been accepted");
        assert_null(condition(o, "Terminating"));
        json_t *sv = J("['v1']");
        assert_true(json_equal(ckube_json_get_path(o, "status.storedVersions"), sv));
        json_decref(sv);
        /* and the defaults went into the spec too */
        assert_string_equal(json_string_value(ckube_json_get_path(o, "spec.names.listKind")),
                            "WidgetList");
    }
    json_decref(got);
    json_decref(stored);
}

/* A CRD in the v1beta1 shape (top-level version, validation and
 * subresources) is stored as v1 and serves the same. */
static void test_v1beta1_body_is_stored_as_v1(void **state)
{
    ips *p = *state;
    json_t *obj =
        J("{'apiVersion':'apiextensions.k8s.io/v1beta1','kind':'CustomResourceDefinition',"
          "'metadata':{'name':'olds.example.com'},'spec':{'group':'example.com',"
          "'version':'v1','scope':'Namespaced','names':{'plural':'olds','kind':'Old'},"
          "'validation':%s,'subresources':{'status':{}}}}",
          SCHEMA);
    json_t *out = NULL;
    assert_int_equal(store_sync(p, CRD_GROUP, "v1beta1", CRD_RESOURCE, STORE_CREATE, NULL, NULL,
                                obj, NULL, NULL, &out, NULL),
                     201);
    json_decref(obj);
    json_decref(out);
    json_t *stored = cached(p, CRD_KEY_PREFIX "olds.example.com");
    assert_non_null(stored);
    assert_string_equal(ckube_obj_api_version(stored), "apiextensions.k8s.io/v1");
    json_t *spec = json_object_get(stored, "spec");
    assert_null(json_object_get(spec, "version"));
    assert_null(json_object_get(spec, "validation"));
    assert_null(json_object_get(spec, "subresources"));
    json_t *want = J("[{'name':'v1','served':true,'storage':true,'schema':%s,"
                     "'subresources':{'status':{}}}]",
                     SCHEMA);
    assert_true(json_equal(json_object_get(spec, "versions"), want));
    json_decref(want);
    json_decref(stored);
    resource_type *t = lookup(p, "example.com", "v1", "olds");
    assert_non_null(t);
    assert_true(t->status_subresource);
    assert_string_equal(t->singular, "old");
    resource_type_unref(t);
}

/* ---- names ---------------------------------------------------------------- */

static void assert_not_accepted(const json_t *o, const char *reason, const char *message)
{
    assert_condition(o, "NamesAccepted", "False", reason, message);
    assert_condition(o, "Established", "False", "NotAccepted", "not all names are accepted");
    json_t *empty = json_object();
    assert_true(json_equal(ckube_json_get_path(o, "status.acceptedNames"), empty));
    json_decref(empty);
}

static void test_name_conflicts(void **state)
{
    ips *p = *state;
    json_decref(create_crd(p, widgets_crd()));
    unsigned long gen = registry_generation(p->srv->registry);

    /* Another CRD of the group with the same plural. (Its name is not
     * plural.group: validation, which this internal write skips, would
     * refuse it, so only the name check is left to catch the clash.) */
    json_t *o =
        create_crd(p, crd_obj("widgets2.example.com", "example.com", "widgets", "OtherWidget",
                              "Namespaced", ",'singular':'otherwidget'", ONLY_V1));
    assert_not_accepted(o, "PluralConflict", "\"widgets\" is already in use");
    json_decref(o);
    /* Nothing of it is served and the first CRD's type stays. */
    assert_int_equal(types_of_crd(p, "widgets2.example.com"), 0);
    resource_type *t = lookup(p, "example.com", "v1", "widgets");
    assert_non_null(t);
    assert_string_equal(t->crd_name, "widgets.example.com");
    assert_string_equal(t->kind, "Widget");
    resource_type_unref(t);
    assert_int_equal(registry_generation(p->srv->registry), gen);

    /* The singular, then the kind, are checked the same way. */
    o = create_crd(p, crd_obj("gadgets.example.com", "example.com", "gadgets", "Gadget",
                              "Namespaced", ",'singular':'widget'", ONLY_V1));
    assert_not_accepted(o, "SingularConflict", "\"widget\" is already in use");
    json_decref(o);
    /* (a singular of its own: the default, the kind in lower case, would
     * clash first) */
    o = create_crd(p, crd_obj("things.example.com", "example.com", "things", "Widget", "Namespaced",
                              ",'singular':'thing'", ONLY_V1));
    assert_not_accepted(o, "KindConflict", "\"Widget\" is already in use");
    json_decref(o);
    assert_int_equal(types_of_crd(p, "gadgets.example.com"), 0);
    assert_int_equal(types_of_crd(p, "things.example.com"), 0);

    /* The same names in another group are no conflict. */
    o = create_crd(p, crd_obj("widgets.other.example.org", "other.example.org", "widgets", "Widget",
                              "Namespaced", ",'singular':'widget'", ONLY_V1));
    assert_condition(o, "NamesAccepted", "True", "NoConflicts", "no conflicts found");
    json_decref(o);
    assert_true(served(p, "other.example.org", "v1", "widgets"));

    /* A built-in type's plural clashes as well (this one passes
     * validation: the group has a dot and the name is plural.group). */
    o = create_crd(p, crd_obj("leases.coordination.k8s.io", "coordination.k8s.io", "leases",
                              "MyLease", "Namespaced", "", "[" VER("v9", "true", "true", "") "]"));
    assert_not_accepted(o, "PluralConflict", "\"leases\" is already in use");
    json_decref(o);
    assert_false(served(p, "coordination.k8s.io", "v9", "leases"));
    t = lookup(p, "coordination.k8s.io", "v1", "leases");
    assert_non_null(t);
    assert_false(t->is_custom);
    resource_type_unref(t);
}

/* ---- retiring types --------------------------------------------------------- */

/* Edits: the current CRD without spec.versions[name == arg]. */
static json_t *drop_version(const json_t *old, const void *arg)
{
    json_t *o = json_deep_copy(old);
    json_t *vs = ckube_json_get_path(o, "spec.versions");
    for (size_t i = 0; i < json_array_size(vs); i++) {
        const char *n = json_string_value(json_object_get(json_array_get(vs, i), "name"));
        if (n && !strcmp(n, arg)) {
            json_array_remove(vs, i);
            break;
        }
    }
    return o;
}

static json_t *add_label(const json_t *old, const void *arg)
{
    json_t *o = json_deep_copy(old);
    json_t *labels = ckube_json_object_ensure(ckube_json_object_ensure(o, "metadata"), "labels");
    json_object_set_new(labels, "touched", json_string(arg));
    return o;
}

static void test_dropping_a_version_retires_its_type(void **state)
{
    ips *p = *state;
    json_decref(create_crd(p, widgets_crd()));
    resource_type *old_v1 = lookup(p, "example.com", "v1", "widgets");
    resource_type *old_b1 = lookup(p, "example.com", "v1beta1", "widgets");
    assert_non_null(old_v1);
    assert_non_null(old_b1);
    unsigned long retired0 = crd_retired_generation(p->srv->crds);
    unsigned long gen0 = registry_generation(p->srv->registry);

    /* A change of metadata only: the types are rebuilt but keep serving
     * from the same spec, and nothing is retired. */
    assert_int_equal(update_crd(p, "widgets.example.com", add_label, "yes", NULL), 200);
    assert_int_equal(crd_retired_generation(p->srv->crds), retired0);
    assert_false(crd_type_retired(old_v1));
    assert_false(crd_type_retired(old_b1));
    assert_true(served(p, "example.com", "v1beta1", "widgets"));

    json_t *out = NULL;
    assert_int_equal(update_crd(p, "widgets.example.com", drop_version, "v1beta1", &out), 200);
    assert_int_equal(json_array_size(ckube_json_get_path(out, "spec.versions")), 2);
    json_decref(out);

    /* v1beta1 is gone and its type retired (watches on it end); the
     * generation moved once, after the registry changed. */
    assert_false(served(p, "example.com", "v1beta1", "widgets"));
    assert_true(crd_type_retired(old_b1));
    assert_int_equal(crd_retired_generation(p->srv->crds), retired0 + 1);
    assert_true(registry_generation(p->srv->registry) > gen0);
    /* The spec changed, so v1 serves from a new spec: its earlier type is
     * retired too (upstream rebuilds the CRD's storage), the new one not. */
    assert_true(crd_type_retired(old_v1));
    resource_type *v1 = lookup(p, "example.com", "v1", "widgets");
    assert_non_null(v1);
    assert_ptr_not_equal(v1, old_v1);
    assert_false(crd_type_retired(v1));
    assert_true(v1->storage_version);
    resource_type_unref(v1);
    assert_int_equal(types_of_crd(p, "widgets.example.com"), 1);
    resource_type_unref(old_v1);
    resource_type_unref(old_b1);

    /* So does dropping a version that is not the storage one from a
     * cluster-scoped CRD. */
    json_decref(create_crd(
        p, crd_obj("gizmos.example.com", "example.com", "gizmos", "Gizmo", "Cluster", "",
                   "[" VER("v1", "true", "true", "") "," VER("v2", "true", "false", "") "]")));
    resource_type *v2 = lookup(p, "example.com", "v2", "gizmos");
    assert_non_null(v2);
    unsigned long retired1 = crd_retired_generation(p->srv->crds);
    assert_int_equal(update_crd(p, "gizmos.example.com", drop_version, "v2", NULL), 200);
    assert_false(served(p, "example.com", "v2", "gizmos"));
    assert_true(served(p, "example.com", "v1", "gizmos"));
    assert_true(crd_type_retired(v2));
    assert_int_equal(crd_retired_generation(p->srv->crds), retired1 + 1);
    resource_type_unref(v2);
    /* The other CRD's type was not touched. */
    v1 = lookup(p, "example.com", "v1", "widgets");
    assert_false(crd_type_retired(v1));
    resource_type_unref(v1);
}

/* ---- deletion and the cleanup finalizer ---------------------------------- */

#define WIDGET_KEY(name) "/registry/example.com/widgets/default/" name

static void create_widget(ips *p, const char *name, const char *finalizers)
{
    json_t *obj = J("{'apiVersion':'example.com/v1','kind':'Widget','metadata':{'name':'%s',"
                    "'namespace':'default','finalizers':%s},'spec':{'size':1}}",
                    name, finalizers);
    ckube_status *st = NULL;
    int code = store_sync(p, "example.com", "v1", "widgets", STORE_CREATE, "default", NULL, obj,
                          NULL, NULL, NULL, &st);
    if (code != 201)
        fail_msg("creating widget %s: %d %s", name, code, st && st->message ? st->message : "");
    json_decref(obj);
}

static json_t *drop_finalizers(const json_t *old, const void *arg)
{
    (void)arg;
    json_t *o = json_deep_copy(old);
    json_object_del(json_object_get(o, "metadata"), "finalizers");
    return o;
}

typedef struct deleting {
    ips *p;
    const char *key;
} deleting;

/* The object at key is there with a deletionTimestamp. */
static bool is_deleting(void *arg)
{
    deleting *d = arg;
    json_t *o = cached(d->p, d->key);
    bool yes = o && ckube_json_get_path(o, "metadata.deletionTimestamp");
    json_decref(o);
    return yes;
}

static void test_delete_cleans_up_objects_then_the_crd(void **state)
{
    ips *p = *state;
    json_decref(create_crd(p, widgets_crd()));
    json_decref(create_crd(p, crd_obj("gadgets.example.com", "example.com", "gadgets", "Gadget",
                                      "Namespaced", "", ONLY_V1)));
    create_widget(p, "plain", "[]");
    create_widget(p, "plain2", "[]");
    create_widget(p, "held", "['example.com/hold']");
    json_t *gadget = J("{'apiVersion':'example.com/v1','kind':'Gadget','metadata':"
                       "{'name':'keep','namespace':'default'}}");
    assert_int_equal(store_sync(p, "example.com", "v1", "gadgets", STORE_CREATE, "default", NULL,
                                gadget, NULL, NULL, NULL, NULL),
                     201);
    json_decref(gadget);
    resource_type *old_v1 = lookup(p, "example.com", "v1", "widgets");
    assert_non_null(old_v1);
    unsigned long retired0 = crd_retired_generation(p->srv->crds);

    /* The delete only starts it: the CRD keeps its finalizer, gets a
     * deletionTimestamp and reports Terminating. */
    json_t *out = NULL;
    assert_int_equal(delete_crd(p, "widgets.example.com", &out), 200);
    assert_non_null(ckube_json_get_path(out, "metadata.deletionTimestamp"));
    assert_true(has_string(ckube_json_get_path(out, "metadata.finalizers"), CRD_CLEANUP_FINALIZER));
    assert_condition(out, "Terminating", "True", "InstanceDeletionInProgress",
                     "CustomResource deletion is in progress");
    assert_condition(out, "Established", "True", "InitialNamesAccepted",
                     "the initial names have been accepted");
    json_decref(out);

    /* Its objects are deleted: those without finalizers go... */
    key_wait kw = {p, WIDGET_KEY("plain")}, kw2 = {p, WIDGET_KEY("plain2")};
    assert_true(ips_wait(key_gone, &kw, WAIT_MS));
    assert_true(ips_wait(key_gone, &kw2, WAIT_MS));
    /* ...the one with a finalizer gets a deletionTimestamp and stays. */
    deleting d = {p, WIDGET_KEY("held")};
    assert_true(ips_wait(is_deleting, &d, WAIT_MS));
    ips_sleep_ms(200); /* and keeps the CRD with it */
    json_t *held = cached(p, WIDGET_KEY("held"));
    assert_non_null(held);
    json_t *fin = J("['example.com/hold']");
    assert_true(json_equal(ckube_json_get_path(held, "metadata.finalizers"), fin));
    json_decref(fin);
    json_decref(held);
    json_t *crd = cached(p, CRD_KEY_PREFIX "widgets.example.com");
    assert_non_null(crd);
    assert_non_null(ckube_json_get_path(crd, "metadata.deletionTimestamp"));
    json_decref(crd);

    /* Meanwhile the type is still served, without create; the start of a
     * deletion retires nothing (watches go on). */
    resource_type *t = lookup(p, "example.com", "v1", "widgets");
    assert_non_null(t);
    assert_int_equal(t->verbs, VERB_ALL & ~VERB_CREATE);
    assert_false(crd_type_retired(t));
    resource_type_unref(t);
    assert_false(crd_type_retired(old_v1));
    assert_int_equal(crd_retired_generation(p->srv->crds), retired0);
    /* HTTP refuses creates while it terminates. */
    http_resp *r = HPOST(p,
                         "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\","
                         "\"metadata\":{\"name\":\"late\"}}",
                         "/apis/example.com/v1/namespaces/default/widgets");
    assert_int_equal(r->code, 405);
    assert_non_null(strstr(r->body.p, "create not allowed while custom resource definition is "
                                      "terminating"));
    resp_free(r);

    /* The finalizer goes: the object is deleted, then the CRD is. */
    out = NULL;
    assert_int_equal(store_sync(p, "example.com", "v1", "widgets", STORE_UPDATE, "default", "held",
                                NULL, drop_finalizers, NULL, &out, NULL),
                     200);
    json_decref(out);
    key_wait kh = {p, WIDGET_KEY("held")}, kc = {p, CRD_KEY_PREFIX "widgets.example.com"};
    assert_true(ips_wait(key_gone, &kh, WAIT_MS));
    assert_true(ips_wait(key_gone, &kc, WAIT_MS));
    /* The cacher calls the CRD machinery about the DELETED event just
     * after readers see it: allow the registry a moment to follow (it
     * unregisters the types, then retires them). */
    int64_t until = ips_now_ms() + WAIT_MS;
    while ((served(p, "example.com", "v1", "widgets") ||
            served(p, "example.com", "v1beta1", "widgets") || !crd_type_retired(old_v1)) &&
           ips_now_ms() < until)
        ips_sleep_ms(5);
    assert_false(served(p, "example.com", "v1", "widgets"));
    assert_false(served(p, "example.com", "v1beta1", "widgets"));
    assert_int_equal(types_of_crd(p, "widgets.example.com"), 0);
    assert_true(crd_type_retired(old_v1));
    assert_true(crd_retired_generation(p->srv->crds) > retired0);
    resource_type_unref(old_v1);
    /* Other CRDs of the group and their objects are untouched. */
    assert_true(served(p, "example.com", "v1", "gadgets"));
    assert_true(key_exists(p, "/registry/example.com/gadgets/default/keep"));
}

static void test_delete_without_objects(void **state)
{
    ips *p = *state;
    json_decref(create_crd(p, crd_obj("gizmos.example.com", "example.com", "gizmos", "Gizmo",
                                      "Cluster", "", ONLY_V1)));
    resource_type *t = lookup(p, "example.com", "v1", "gizmos");
    assert_non_null(t);
    assert_int_equal(delete_crd(p, "gizmos.example.com", NULL), 200);
    key_wait kc = {p, CRD_KEY_PREFIX "gizmos.example.com"};
    assert_true(ips_wait(key_gone, &kc, WAIT_MS));
    /* (the types leave the registry, then are retired) */
    int64_t until = ips_now_ms() + WAIT_MS;
    while ((served(p, "example.com", "v1", "gizmos") || !crd_type_retired(t)) &&
           ips_now_ms() < until)
        ips_sleep_ms(5);
    assert_false(served(p, "example.com", "v1", "gizmos"));
    assert_true(crd_type_retired(t));
    resource_type_unref(t);
    /* A CRD of the same name can be made again at once. */
    json_decref(create_crd(p, crd_obj("gizmos.example.com", "example.com", "gizmos", "Gizmo",
                                      "Cluster", "", ONLY_V1)));
    t = lookup(p, "example.com", "v1", "gizmos");
    assert_non_null(t);
    assert_false(crd_type_retired(t));
    resource_type_unref(t);
}

/* A CRD whose names were never accepted because they are a built-in
 * type's has no objects of its own: deleting it must leave the built-in
 * objects stored under the same prefix alone (upstream's finalizer skips
 * instances of a CRD that overlaps a built-in resource or was never
 * established). */
static void test_delete_of_never_established_crd_keeps_builtin_objects(void **state)
{
    ips *p = *state;
    json_t *lease = J("{'apiVersion':'coordination.k8s.io/v1','kind':'Lease','metadata':"
                      "{'name':'l1','namespace':'default'},'spec':{'holderIdentity':'me'}}");
    assert_int_equal(store_sync(p, "coordination.k8s.io", "v1", "leases", STORE_CREATE, "default",
                                NULL, lease, NULL, NULL, NULL, NULL),
                     201);
    json_decref(lease);
    json_t *o =
        create_crd(p, crd_obj("leases.coordination.k8s.io", "coordination.k8s.io", "leases",
                              "MyLease", "Namespaced", "", "[" VER("v9", "true", "true", "") "]"));
    assert_not_accepted(o, "PluralConflict", "\"leases\" is already in use");
    json_decref(o);
    assert_int_equal(delete_crd(p, "leases.coordination.k8s.io", NULL), 200);
    key_wait kc = {p, CRD_KEY_PREFIX "leases.coordination.k8s.io"};
    assert_true(ips_wait(key_gone, &kc, WAIT_MS));
    /* the built-in type is still served... */
    assert_true(served(p, "coordination.k8s.io", "v1", "leases"));
    /* ...and its objects are still there. */
    assert_true(key_exists(p, "/registry/coordination.k8s.io/leases/default/l1"));
}

/* ---- validation ---------------------------------------------------------- */

/* The cause at `field`, or NULL. */
static const ckube_status_cause *cause_at(const ckube_status *st, const char *field)
{
    for (size_t i = 0; i < st->ncauses; i++)
        if (st->causes[i].field && !strcmp(st->causes[i].field, field))
            return &st->causes[i];
    return NULL;
}

static void assert_cause(const ckube_status *st, const char *field, const char *type,
                         const char *message)
{
    const ckube_status_cause *c = cause_at(st, field);
    if (!c) {
        for (size_t i = 0; i < st->ncauses; i++)
            print_message("cause: %s: %s\n", st->causes[i].field, st->causes[i].message);
        fail_msg("no cause at %s", field);
    }
    assert_string_equal(c->type, type);
    assert_string_equal(c->message, message);
}

/* Runs the CRD type's validate hook (`version`: v1 or v1beta1) on obj
 * (taken) against old (taken; may be NULL); returns the causes. */
static ckube_status *validate(ips *p, const char *version, json_t *obj, json_t *old)
{
    resource_type *t = lookup(p, CRD_GROUP, version, CRD_RESOURCE);
    assert_non_null(t);
    assert_non_null(t->validate);
    ckube_status *st =
        ckube_status_invalid_begin(CRD_GROUP, "CustomResourceDefinition", ckube_obj_name(obj));
    t->validate(t, obj, old, st);
    resource_type_unref(t);
    json_decref(obj);
    json_decref(old);
    return st;
}

#define BAD_PATTERN_VERSIONS                                                                       \
    "[{'name':'v1','served':true,'storage':true,'schema':{'openAPIV3Schema':{'type':'object',"     \
    "'properties':{'spec':{'type':'object','properties':{'a':{'type':'string',"                    \
    "'pattern':'(x'},'b':{'type':'string','pattern':'^[a-z]+$'}}}}}}}]"

static void test_validate_hook(void **state)
{
    ips *p = *state;
    /* A valid CRD has no causes. */
    ckube_status *st = validate(p, "v1", widgets_crd(), NULL);
    assert_int_equal(st->ncauses, 0);
    ckube_status_free(st);

    /* A group without a dot. */
    st = validate(
        p, "v1",
        crd_obj("widgets.example", "example", "widgets", "Widget", "Namespaced", "", ONLY_V1),
        NULL);
    assert_cause(st, "spec.group", CKUBE_CAUSE_FIELD_INVALID,
                 "Invalid value: \"example\": should be a domain with at least one dot");
    assert_int_equal(st->ncauses, 1);
    ckube_status_free(st);

    /* A pattern Go's regexp package refuses; a good one passes. */
    st = validate(p, "v1",
                  crd_obj("widgets.example.com", "example.com", "widgets", "Widget", "Namespaced",
                          "", BAD_PATTERN_VERSIONS),
                  NULL);
    assert_cause(st,
                 "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[a].pattern",
                 CKUBE_CAUSE_FIELD_INVALID,
                 "Invalid value: \"(x\": must be a valid regular expression, but isn't: error "
                 "parsing regexp: missing closing ): `(x`");
    assert_int_equal(st->ncauses, 1);
    ckube_status_free(st);

    /* The name, the scope, the storage version, the schema v1 requires. */
    st = validate(p, "v1",
                  crd_obj("wrong.example.com", "example.com", "widgets", "Widget", "Everywhere", "",
                          "[" VER("v1", "true", "true", "") ",{'name':'v2','served':true,"
                                                            "'storage':true}]"),
                  NULL);
    assert_cause(
        st, "metadata.name", CKUBE_CAUSE_FIELD_INVALID,
        "Invalid value: \"wrong.example.com\": must be spec.names.plural+\".\"+spec.group");
    assert_cause(st, "spec.scope", CKUBE_CAUSE_FIELD_NOT_SUPPORTED,
                 "Unsupported value: \"Everywhere\": supported values: \"Cluster\", "
                 "\"Namespaced\"");
    assert_cause(st, "spec.versions[1].schema.openAPIV3Schema", CKUBE_CAUSE_FIELD_REQUIRED,
                 "Required value: schemas are required");
    assert_cause(st, "spec.versions", CKUBE_CAUSE_FIELD_INVALID,
                 "Invalid value: 2: must have exactly one version marked as storage version");
    ckube_status_free(st);

    /* v1beta1 allowed a version without a schema. */
    st = validate(p, "v1beta1",
                  crd_obj("widgets.example.com", "example.com", "widgets", "Widget", "Namespaced",
                          "", "[{'name':'v1','served':true,'storage':true}]"),
                  NULL);
    assert_int_equal(st->ncauses, 0);
    ckube_status_free(st);

    /* On update the group and scope are immutable. */
    st = validate(
        p, "v1",
        crd_obj("widgets.example.com", "example.com", "widgets", "Widget", "Cluster", "", ONLY_V1),
        widgets_crd());
    assert_cause(st, "spec.scope", CKUBE_CAUSE_FIELD_INVALID,
                 "Invalid value: \"Cluster\": field is immutable");
    ckube_status_free(st);
}

static void test_http_create_invalid_is_422(void **state)
{
    ips *p = *state;
    struct {
        json_t *obj;
        const char *name, *field, *cause;
    } cases[] = {
        {crd_obj("widgets.example", "example", "widgets", "Widget", "Namespaced", "", ONLY_V1),
         "widgets.example", "spec.group",
         "Invalid value: \"example\": should be a domain with at least one dot"},
        {crd_obj("widgets.example.com", "example.com", "widgets", "Widget", "Namespaced", "",
                 BAD_PATTERN_VERSIONS),
         "widgets.example.com",
         "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[a].pattern",
         "Invalid value: \"(x\": must be a valid regular expression, but isn't: error parsing "
         "regexp: missing closing ): `(x`"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *body = json_dumps(cases[i].obj, JSON_COMPACT);
        json_decref(cases[i].obj);
        http_resp *r = HPOST(p, body, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
        long code = r->code;
        free(body);
        if (code != 422)
            fail_msg("case %zu: %ld %s", i, code, r->body.p);
        json_t *j = json_incref(r->json);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "kind")), "Status");
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "Invalid");
        assert_int_equal(json_integer_value(json_object_get(j, "code")), 422);
        char want[1024];
        snprintf(want, sizeof want,
                 "CustomResourceDefinition.apiextensions.k8s.io \"%s\" is invalid: %s: %s",
                 cases[i].name, cases[i].field, cases[i].cause);
        assert_string_equal(json_string_value(json_object_get(j, "message")), want);
        json_t *c0 = json_array_get(ckube_json_get_path(j, "details.causes"), 0);
        assert_string_equal(json_string_value(json_object_get(c0, "field")), cases[i].field);
        assert_string_equal(json_string_value(json_object_get(c0, "reason")),
                            CKUBE_CAUSE_FIELD_INVALID);
        assert_string_equal(json_string_value(ckube_json_get_path(j, "details.kind")),
                            "CustomResourceDefinition");
        json_decref(j);
        resp_free(r);
        char key[256];
        snprintf(key, sizeof key, CRD_KEY_PREFIX "%s", cases[i].name);
        assert_false(key_exists(p, key)); /* nothing stored, */
    }
    assert_false(served(p, "example", "v1", "widgets")); /* nothing served */
    assert_false(served(p, "example.com", "v1", "widgets"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_registers_served_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_computes_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v1beta1_body_is_stored_as_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_name_conflicts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dropping_a_version_retires_its_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_cleans_up_objects_then_the_crd, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_delete_without_objects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_of_never_established_crd_keeps_builtin_objects,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_validate_hook, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_create_invalid_is_422, setup, teardown),
    };
    return cmocka_run_group_tests(tests, ips_global_setup, ips_global_teardown);
}
