/* test_keymap.c - ckube's internal storage keys to kube-apiserver's etcd
 * layout and back (storage/etcd/keymap.h), with no etcd: every built-in
 * type both ways against a table of upstream's layout (and against the
 * types the server's install functions really register, so a new type
 * without a keymap row fails here), custom resources and CRDs, scopes,
 * the prefixes ranges and watches use, --etcd-prefix values and their
 * normalisation, round trips, injectivity, and the keys that must not
 * map: foreign ones (kube-apiserver's own, types ckube does not serve)
 * and malformed ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "apiserver/apiextensions/crd.h"
#include "apiserver/registry/admissionregistration/admissionregistration.h"
#include "apiserver/registry/apiregistration/apiregistration.h"
#include "apiserver/registry/apps/apps.h"
#include "apiserver/registry/authorization/reviews.h"
#include "apiserver/registry/coordination/coordination.h"
#include "apiserver/registry/core/core.h"
#include "apiserver/registry/events/events.h"
#include "apiserver/registry/generic/store.h"
#include "apiserver/registry/rbac/rbac.h"
#include "apiserver/registry/rest/registry.h"
#include "storage/etcd/keymap.h"

/* What kube-apiserver 1.31 calls each type ckube stores, under
 * --etcd-prefix (see keymap.c for the sources): the spec the keymap is
 * held to, written out independently of its table. `group` is the API
 * group ("" for core). */
static const struct want {
    const char *group, *resource;
    bool namespaced;
    const char *etcd;
} WANT[] = {
    {"", "namespaces", false, "namespaces"},
    {"", "configmaps", true, "configmaps"},
    {"", "secrets", true, "secrets"},
    {"", "serviceaccounts", true, "serviceaccounts"},
    {"", "services", true, "services/specs"},
    {"", "endpoints", true, "services/endpoints"},
    {"", "pods", true, "pods"},
    {"", "nodes", false, "minions"},
    {"", "events", true, "events"},
    {"apps", "deployments", true, "deployments"},
    {"apps", "replicasets", true, "replicasets"},
    {"coordination.k8s.io", "leases", true, "leases"},
    {"rbac.authorization.k8s.io", "roles", true, "roles"},
    {"rbac.authorization.k8s.io", "rolebindings", true, "rolebindings"},
    {"rbac.authorization.k8s.io", "clusterroles", false, "clusterroles"},
    {"rbac.authorization.k8s.io", "clusterrolebindings", false, "clusterrolebindings"},
    {"admissionregistration.k8s.io", "mutatingwebhookconfigurations", false,
     "mutatingwebhookconfigurations"},
    {"admissionregistration.k8s.io", "validatingwebhookconfigurations", false,
     "validatingwebhookconfigurations"},
    {"apiextensions.k8s.io", "customresourcedefinitions", false,
     "apiextensions.k8s.io/customresourcedefinitions"},
    {"apiregistration.k8s.io", "apiservices", false, "apiregistration.k8s.io/apiservices"},
};
#define NWANT (sizeof WANT / sizeof *WANT)

static const char *internal_group(const char *group)
{
    return *group ? group : "core";
}

/* ---- helpers ------------------------------------------------------------------ */

static void expect_to(const etcd_keymap *m, const char *in, const char *want)
{
    char *got = etcd_key_to_etcd(m, in);
    if (!want && got)
        fail_msg("to_etcd(%s, %s): want NULL, got %s", m->prefix, in ? in : "(null)", got);
    if (want && (!got || strcmp(got, want) != 0))
        fail_msg("to_etcd(%s, %s): want %s, got %s", m->prefix, in, want, got ? got : "NULL");
    free(got);
}

static void expect_from_n(const etcd_keymap *m, const char *in, size_t len, const char *want)
{
    char *got = etcd_key_from_etcd(m, in, len);
    if (!want && got)
        fail_msg("from_etcd(%s, %.*s): want NULL, got %s", m->prefix, (int)len, in, got);
    if (want && (!got || strcmp(got, want) != 0))
        fail_msg("from_etcd(%s, %.*s): want %s, got %s", m->prefix, (int)len, in, want,
                 got ? got : "NULL");
    free(got);
}

static void expect_from(const etcd_keymap *m, const char *in, const char *want)
{
    expect_from_n(m, in, strlen(in), want);
}

/* An object key both ways. */
static void both(const etcd_keymap *m, const char *internal, const char *etcd)
{
    expect_to(m, internal, etcd);
    expect_from(m, etcd, internal);
}

static char *cat(const char *a, const char *b)
{
    char *s = malloc(strlen(a) + strlen(b) + 1);
    assert_non_null(s);
    strcpy(s, a);
    strcat(s, b);
    return s;
}

/* ---- the built-in types ------------------------------------------------------ */

/* Every row: objects, the type's prefix, a namespace's prefix, and the
 * wrong scope's shapes refused both ways. */
static void check_builtins(const char *prefix_arg, const char *prefix)
{
    etcd_keymap *m = etcd_keymap_new(prefix_arg);
    assert_string_equal(m->prefix, prefix);
    char in[512], out[512];
    for (size_t i = 0; i < NWANT; i++) {
        const struct want *w = &WANT[i];
        const char *g = internal_group(w->group);
        snprintf(in, sizeof in, "/registry/%s/%s/", g, w->resource);
        snprintf(out, sizeof out, "%s%s/", prefix, w->etcd);
        expect_to(m, in, out);
        expect_from(m, out, NULL); /* a prefix is never a stored key */
        if (w->namespaced) {
            snprintf(in, sizeof in, "/registry/%s/%s/kube-system/", g, w->resource);
            snprintf(out, sizeof out, "%s%s/kube-system/", prefix, w->etcd);
            expect_to(m, in, out);
            snprintf(in, sizeof in, "/registry/%s/%s/kube-system/obj-1", g, w->resource);
            snprintf(out, sizeof out, "%s%s/kube-system/obj-1", prefix, w->etcd);
            both(m, in, out);
            /* a name alone is not a namespaced key */
            snprintf(in, sizeof in, "/registry/%s/%s/obj-1", g, w->resource);
            snprintf(out, sizeof out, "%s%s/obj-1", prefix, w->etcd);
            expect_to(m, in, NULL);
            expect_from(m, out, NULL);
        } else {
            snprintf(in, sizeof in, "/registry/%s/%s/obj-1", g, w->resource);
            snprintf(out, sizeof out, "%s%s/obj-1", prefix, w->etcd);
            both(m, in, out);
            /* nor a namespace a cluster-scoped one */
            snprintf(in, sizeof in, "/registry/%s/%s/kube-system/obj-1", g, w->resource);
            snprintf(out, sizeof out, "%s%s/kube-system/obj-1", prefix, w->etcd);
            expect_to(m, in, NULL);
            expect_from(m, out, NULL);
            snprintf(in, sizeof in, "/registry/%s/%s/kube-system/", g, w->resource);
            expect_to(m, in, NULL);
        }
        /* an object key with a trailing '/' is neither */
        snprintf(in, sizeof in, "/registry/%s/%s/%sobj-1/", g, w->resource,
                 w->namespaced ? "ns/" : "");
        expect_to(m, in, NULL);
    }
    etcd_keymap_free(m);
}

static void test_builtins(void **state)
{
    (void)state;
    check_builtins("/registry", "/registry/");
    check_builtins("/registry/", "/registry/");
    check_builtins("/ckube", "/ckube/");
    check_builtins("/a/b", "/a/b/");
    check_builtins("", "/");
}

/* A few by hand, as etcdctl shows them. */
static void test_examples(void **state)
{
    (void)state;
    etcd_keymap *m = etcd_keymap_new("/registry");
    both(m, "/registry/core/configmaps/default/kube-root-ca.crt",
         "/registry/configmaps/default/kube-root-ca.crt");
    both(m, "/registry/apps/deployments/default/web", "/registry/deployments/default/web");
    both(m, "/registry/core/namespaces/kube-system", "/registry/namespaces/kube-system");
    both(m, "/registry/rbac.authorization.k8s.io/clusterroles/system:controller:job-controller",
         "/registry/clusterroles/system:controller:job-controller");
    both(m, "/registry/coordination.k8s.io/leases/kube-system/kube-controller-manager",
         "/registry/leases/kube-system/kube-controller-manager");
    both(m, "/registry/core/nodes/node-1", "/registry/minions/node-1");
    both(m, "/registry/core/services/default/kubernetes",
         "/registry/services/specs/default/kubernetes");
    both(m, "/registry/core/endpoints/default/kubernetes",
         "/registry/services/endpoints/default/kubernetes");
    both(m, "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com",
         "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com");
    etcd_keymap_free(m);
}

/* The keymap's own table is the spec's, row for row. */
static void test_table_matches_spec(void **state)
{
    (void)state;
    size_t n;
    const etcd_keymap_resource *r = etcd_keymap_resources(&n);
    assert_int_equal(n, NWANT);
    for (size_t i = 0; i < NWANT; i++) {
        size_t j = 0;
        while (j < n && !(strcmp(r[j].group, internal_group(WANT[i].group)) == 0 &&
                          strcmp(r[j].resource, WANT[i].resource) == 0))
            j++;
        if (j == n)
            fail_msg("no keymap row for %s/%s", WANT[i].group, WANT[i].resource);
        assert_string_equal(r[j].etcd, WANT[i].etcd);
        assert_int_equal(r[j].namespaced, WANT[i].namespaced);
    }
}

/* What keymap.c's bijection rests on, checked over its table: types are
 * unique; etcd prefixes are unique and none is a segment-wise prefix of
 * another; a dotted first etcd segment only where the prefix is the
 * row's own GROUP/RESOURCE (the reverse map tells the two kinds apart by
 * that dot); built-in groups without a dot are never custom groups. */
static void test_table_invariants(void **state)
{
    (void)state;
    size_t n;
    const etcd_keymap_resource *r = etcd_keymap_resources(&n);
    for (size_t i = 0; i < n; i++) {
        const char *e = r[i].etcd;
        assert_true(*e && e[0] != '/' && e[strlen(e) - 1] != '/');
        assert_null(strstr(e, "//"));
        assert_null(strchr(e, '%'));
        const char *slash = strchr(e, '/');
        size_t first = slash ? (size_t)(slash - e) : strlen(e);
        char gr[256];
        snprintf(gr, sizeof gr, "%s/%s", r[i].group, r[i].resource);
        if (memchr(e, '.', first))
            assert_string_equal(e, gr);
        else
            assert_true(slash == NULL || strchr(slash + 1, '/') == NULL); /* 1 or 2 segments */
        for (size_t j = 0; j < n; j++) {
            if (i == j)
                continue;
            assert_false(!strcmp(r[i].group, r[j].group) && !strcmp(r[i].resource, r[j].resource));
            size_t li = strlen(e);
            if (!strncmp(r[j].etcd, e, li) && (r[j].etcd[li] == 0 || r[j].etcd[li] == '/'))
                fail_msg("etcd prefix %s is a prefix of %s", e, r[j].etcd);
        }
    }
}

/* Every stored type the server registers (its install functions, as
 * apiserver_new calls them) has a row, maps as the spec says from the
 * keys store_object_key and resource_type_key_prefix really build, and
 * every row is a type the server registers. */
static void test_registered_types(void **state)
{
    (void)state;
    registry *reg = registry_new();
    assert_non_null(reg);
    assert_int_equal(core_install(reg), 0);
    assert_int_equal(apps_install(reg), 0);
    assert_int_equal(coordination_install(reg), 0);
    assert_int_equal(events_install(reg), 0);
    assert_int_equal(authorization_install(reg), 0);
    assert_int_equal(rbac_install(reg), 0);
    assert_int_equal(admissionregistration_install(reg), 0);
    assert_int_equal(apiregistration_install(reg), 0);
    assert_int_equal(apiextensions_install(reg), 0);
    etcd_keymap *m = etcd_keymap_new("/registry");
    size_t n;
    resource_type **types = registry_list(reg, &n);
    bool seen[NWANT] = {false};
    size_t stored = 0;
    for (size_t i = 0; i < n; i++) {
        const resource_type *t = types[i];
        if (t->review)
            continue; /* answered, never stored */
        if (t->storage_group)
            continue; /* kept as another's (test_events_shared) */
        stored++;
        size_t w = 0;
        while (w < NWANT && !(strcmp(WANT[w].group, t->group) == 0 &&
                              strcmp(WANT[w].resource, t->resource) == 0))
            w++;
        if (w == NWANT)
            fail_msg("%s/%s is registered and stored but has no etcd layout "
                     "(a row in keymap.c's RESOURCES and in this test's WANT)",
                     t->group, t->resource);
        seen[w] = true;
        assert_int_equal(t->namespaced, WANT[w].namespaced);
        char key[1024], want[1024];
        resource_type_key_prefix(t, key, sizeof key);
        snprintf(want, sizeof want, "/registry/%s/", WANT[w].etcd);
        expect_to(m, key, want);
        store_object_key(t, "ns-1", "obj.1", key, sizeof key);
        snprintf(want, sizeof want, "/registry/%s/%sobj.1", WANT[w].etcd,
                 t->namespaced ? "ns-1/" : "");
        both(m, key, want);
    }
    assert_true(stored >= NWANT);
    for (size_t w = 0; w < NWANT; w++)
        if (!seen[w])
            fail_msg("%s/%s has a row but the server does not register it", WANT[w].group,
                     WANT[w].resource);
    registry_list_free(types, n);
    registry_free(reg);
    etcd_keymap_free(m);
}

/* ---- custom resources --------------------------------------------------------- */

static void test_custom_resources(void **state)
{
    (void)state;
    etcd_keymap *m = etcd_keymap_new("/registry");
    /* GROUP/PLURAL, either scope (the key does not say which) */
    both(m, "/registry/example.com/widgets/default/w-1",
         "/registry/example.com/widgets/default/w-1");
    both(m, "/registry/example.com/clusterwidgets/cw-1",
         "/registry/example.com/clusterwidgets/cw-1");
    both(m, "/registry/stable.example.com/crontabs/default/my-new-cron-object",
         "/registry/stable.example.com/crontabs/default/my-new-cron-object");
    expect_to(m, "/registry/example.com/widgets/", "/registry/example.com/widgets/");
    expect_to(m, "/registry/example.com/widgets/default/",
              "/registry/example.com/widgets/default/");
    expect_from(m, "/registry/example.com/widgets/", NULL);
    expect_from(m, "/registry/example.com/widgets/default/", NULL);
    /* a group named after a built-in one, plural after a built-in type:
     * still the CRD's own GROUP/PLURAL */
    both(m, "/registry/apps.example.com/deployments/ns/d",
         "/registry/apps.example.com/deployments/ns/d");
    both(m, "/registry/configmaps.example.com/configmaps/c",
         "/registry/configmaps.example.com/configmaps/c");
    /* a CRD in a dotted built-in group with another plural: upstream
     * stores it as GROUP/PLURAL too */
    both(m, "/registry/rbac.authorization.k8s.io/widgets/ns/w",
         "/registry/rbac.authorization.k8s.io/widgets/ns/w");
    both(m, "/registry/events.k8s.io/widgets/w", "/registry/events.k8s.io/widgets/w");
    /* a group without a dot is no CRD's: built-in or nothing */
    expect_to(m, "/registry/example/widgets/ns/w", NULL);
    expect_from(m, "/registry/example/widgets/ns/w", NULL);
    expect_to(m, "/registry/core/widgets/ns/w", NULL);
    expect_to(m, "/registry/apps/widgets/ns/w", NULL);
    /* too few or too many segments */
    expect_to(m, "/registry/example.com/widgets", NULL);
    expect_from(m, "/registry/example.com/widgets", NULL);
    expect_to(m, "/registry/example.com/widgets/a/b/c", NULL);
    expect_from(m, "/registry/example.com/widgets/a/b/c", NULL);
    expect_to(m, "/registry/example.com/widgets/a/b/", NULL);
    /* a group alone is not a range ckube makes */
    expect_to(m, "/registry/example.com/", NULL);
    expect_to(m, "/registry/apps/", NULL);
    expect_to(m, "/registry/core/", NULL);
    etcd_keymap_free(m);

    m = etcd_keymap_new("/a/b");
    both(m, "/registry/example.com/widgets/default/w-1", "/a/b/example.com/widgets/default/w-1");
    expect_to(m, "/registry/example.com/widgets/", "/a/b/example.com/widgets/");
    expect_from(m, "/registry/example.com/widgets/default/w-1", NULL); /* not under /a/b/ */
    etcd_keymap_free(m);
}

/* events.k8s.io/v1 Events are core Events in storage: the same internal
 * keys, upstream's etcd keys; "events.k8s.io/events" is no table row (a
 * key there would be a custom resource's). */
static void test_events_shared(void **state)
{
    (void)state;
    registry *reg = registry_new();
    assert_int_equal(core_install(reg), 0);
    assert_int_equal(events_install(reg), 0);
    resource_type *core = registry_lookup(reg, "", "v1", "events");
    resource_type *ev = registry_lookup(reg, "events.k8s.io", "v1", "events");
    assert_non_null(core);
    assert_non_null(ev);
    char a[256], b[256];
    resource_type_key_prefix(core, a, sizeof a);
    resource_type_key_prefix(ev, b, sizeof b);
    assert_string_equal(a, "/registry/core/events/");
    assert_string_equal(b, a);
    store_object_key(core, "default", "pod-1.17a", a, sizeof a);
    store_object_key(ev, "default", "pod-1.17a", b, sizeof b);
    assert_string_equal(b, a);
    etcd_keymap *m = etcd_keymap_new("/registry");
    both(m, a, "/registry/events/default/pod-1.17a");
    both(m, "/registry/events.k8s.io/events/default/pod-1.17a",
         "/registry/events.k8s.io/events/default/pod-1.17a");
    etcd_keymap_free(m);
    resource_type_unref(core);
    resource_type_unref(ev);
    registry_free(reg);
}

/* ---- prefixes ------------------------------------------------------------------ */

static void test_prefix_normalised(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"/registry", "/registry/"},
        {"/registry/", "/registry/"},
        {"registry", "/registry/"},
        {"//registry//", "/registry/"},
        {"/ckube", "/ckube/"},
        {"/a/b", "/a/b/"},
        {"/a/b/", "/a/b/"},
        {"a//b", "/a/b/"},
        {"/a/./b/../c", "/a/c/"},
        {"/a/b/..", "/a/"},
        {"/..", "/"},
        {"../x", "/x/"},
        {"", "/"},
        {"/", "/"},
        {".", "/"},
        {"/a.b/c..d/.e", "/a.b/c..d/.e/"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        etcd_keymap *m = etcd_keymap_new(cases[i][0]);
        if (strcmp(m->prefix, cases[i][1]) != 0)
            fail_msg("prefix %s: want %s, got %s", cases[i][0], cases[i][1], m->prefix);
        assert_int_equal(m->prefix_len, strlen(cases[i][1]));
        /* the whole store ("/registry/") is the prefix itself */
        expect_to(m, "/registry/", cases[i][1]);
        etcd_keymap_free(m);
    }
    etcd_keymap_free(NULL);
}

/* The same keys under each --etcd-prefix: PREFIX + the relative key. */
static void test_custom_prefixes(void **state)
{
    (void)state;
    static const char *const prefixes[][2] = {
        {"/registry", "/registry/"},
        {"/registry/", "/registry/"},
        {"/ckube", "/ckube/"},
        {"/a/b", "/a/b/"},
        {"/", "/"},
    };
    static const char *const keys[][2] = {
        {"/registry/core/configmaps/ns/c", "configmaps/ns/c"},
        {"/registry/core/nodes/n", "minions/n"},
        {"/registry/core/services/ns/s", "services/specs/ns/s"},
        {"/registry/apps/deployments/ns/d", "deployments/ns/d"},
        {"/registry/example.com/widgets/ns/w", "example.com/widgets/ns/w"},
        {"/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com",
         "apiextensions.k8s.io/customresourcedefinitions/widgets.example.com"},
    };
    for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
        etcd_keymap *m = etcd_keymap_new(prefixes[p][0]);
        expect_to(m, "/registry/", prefixes[p][1]);
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
            char *e = cat(prefixes[p][1], keys[k][1]);
            both(m, keys[k][0], e);
            free(e);
        }
        etcd_keymap_free(m);
    }
    /* a key under another prefix is not ours */
    etcd_keymap *m = etcd_keymap_new("/ckube");
    expect_from(m, "/registry/configmaps/ns/c", NULL);
    expect_from(m, "/ckubex/configmaps/ns/c", NULL);
    expect_from(m, "/ckube", NULL);
    expect_from(m, "/ckube/", NULL);
    etcd_keymap_free(m);
    m = etcd_keymap_new("/a/b");
    expect_from(m, "/a/configmaps/ns/c", NULL);
    expect_from(m, "/a/b/c/configmaps/ns/c", NULL);
    etcd_keymap_free(m);
}

/* ---- round trips and injectivity ---------------------------------------------- */

/* Names as bytes: anything a path-segment name may hold (RBAC names have
 * colons, some names dots and non-ASCII). */
static const char *const NAMES[] = {
    "a",
    "obj-1",
    "a.b.c",
    "..a",
    "a..",
    ".a",
    "system:controller:job-controller",
    "with space",
    "caf\xc3\xa9",
    "\x01\x7f\xff",
    "-",
    "x@y",
    "UPPER",
    "a\\b",
};
#define NNAMES (sizeof NAMES / sizeof *NAMES)

static void test_round_trip(void **state)
{
    (void)state;
    static const char *const prefixes[] = {"/registry", "/ckube/", "/a/b", "/"};
    static const char *const customs[][3] = {
        {"example.com", "widgets", "ns"},
        {"example.com", "clusterwidgets", NULL},
        {"a.b.c.d", "things", "x"},
    };
    for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
        etcd_keymap *m = etcd_keymap_new(prefixes[p]);
        char in[512];
        for (size_t i = 0; i < NWANT + sizeof customs / sizeof *customs; i++) {
            const char *g, *r, *ns;
            if (i < NWANT) {
                g = internal_group(WANT[i].group);
                r = WANT[i].resource;
                ns = WANT[i].namespaced ? "kube-system" : NULL;
            } else {
                g = customs[i - NWANT][0];
                r = customs[i - NWANT][1];
                ns = customs[i - NWANT][2];
            }
            for (size_t j = 0; j < NNAMES; j++) {
                if (ns)
                    snprintf(in, sizeof in, "/registry/%s/%s/%s/%s", g, r, ns, NAMES[j]);
                else
                    snprintf(in, sizeof in, "/registry/%s/%s/%s", g, r, NAMES[j]);
                char *e = etcd_key_to_etcd(m, in);
                if (!e)
                    fail_msg("to_etcd(%s, %s) refused", m->prefix, in);
                assert_memory_equal(e, m->prefix, m->prefix_len);
                char *back = etcd_key_from_etcd(m, e, strlen(e));
                if (!back || strcmp(back, in) != 0)
                    fail_msg("round trip of %s: %s then %s", in, e, back ? back : "NULL");
                free(back);
                free(e);
            }
        }
        etcd_keymap_free(m);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* No two internal keys share an etcd key: every row and a few custom
 * types, namespaced and not, over a few namespaces and names. */
static void test_injective(void **state)
{
    (void)state;
    static const char *const extra[][2] = {
        {"example.com", "widgets"},        {"events.k8s.io", "widgets"},
        {"example.com", "events"},         {"apps.example.com", "deployments"},
        {"services.example.com", "specs"},
    };
    static const char *const nss[] = {"default", "specs", "endpoints", "events"};
    etcd_keymap *m = etcd_keymap_new("/registry");
    size_t cap = (NWANT + 5) * 8 * NNAMES, n = 0;
    char **keys = calloc(cap, sizeof *keys);
    assert_non_null(keys);
    char in[512];
    for (size_t i = 0; i < NWANT + 5; i++) {
        const char *g = i < NWANT ? internal_group(WANT[i].group) : extra[i - NWANT][0];
        const char *r = i < NWANT ? WANT[i].resource : extra[i - NWANT][1];
        for (size_t j = 0; j < NNAMES; j++) {
            for (size_t s = 0; s < 5; s++) {
                if (s < 4)
                    snprintf(in, sizeof in, "/registry/%s/%s/%s/%s", g, r, nss[s], NAMES[j]);
                else
                    snprintf(in, sizeof in, "/registry/%s/%s/%s", g, r, NAMES[j]);
                char *e = etcd_key_to_etcd(m, in);
                if (!e)
                    continue; /* the wrong scope for a built-in type */
                char *back = etcd_key_from_etcd(m, e, strlen(e));
                assert_non_null(back);
                assert_string_equal(back, in);
                free(back);
                assert_true(n < cap);
                keys[n++] = e;
            }
        }
    }
    assert_true(n > NNAMES * NWANT);
    qsort(keys, n, sizeof *keys, cmp_str);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(keys[i - 1], keys[i]))
            fail_msg("two internal keys map to %s", keys[i]);
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
    etcd_keymap_free(m);
}

/* ---- keys that do not map ------------------------------------------------------ */

/* What kube-apiserver (and kube-aggregator) keep in etcd that is not an
 * object ckube serves, and layouts upstream never writes. */
static void test_foreign_keys(void **state)
{
    (void)state;
    static const char *const foreign[] = {
        "/registry/ranges/serviceips",
        "/registry/ranges/servicenodeports",
        "/registry/masterleases/10.0.0.1",
        "/registry/statefulsets/default/web",
        "/registry/daemonsets/kube-system/kube-proxy",
        "/registry/jobs/default/pi",
        "/registry/controllers/default/rc-1",
        "/registry/ingress/default/ing-1",
        "/registry/ingressclasses/nginx",
        "/registry/persistentvolumes/pv-1",
        "/registry/priorityclasses/system-node-critical",
        "/registry/flowschemas/exempt",
        /* an APIService has no namespace */
        "/registry/apiregistration.k8s.io/apiservices/default/v1.apps",
        /* built-in types under their group: not upstream's keys */
        "/registry/coordination.k8s.io/leases/kube-system/l",
        "/registry/rbac.authorization.k8s.io/roles/default/r",
        "/registry/rbac.authorization.k8s.io/clusterroles/admin",
        /* ckube's internal layout is not an etcd one */
        "/registry/core/configmaps/default/c",
        "/registry/apps/deployments/default/d",
        "/registry/core/namespaces/default",
        /* services and endpoints only under services/ */
        "/registry/services/default/kubernetes",
        "/registry/endpoints/default/kubernetes",
        "/registry/nodes/node-1",
        "/registry/services/other/default/s",
    };
    etcd_keymap *m = etcd_keymap_new("/registry");
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++)
        expect_from(m, foreign[i], NULL);
    expect_from(m, "compact_rev_key", NULL); /* upstream's, beside the prefix */

    /* types ckube does not serve, as internal keys */
    static const char *const unserved[] = {
        "/registry/core/replicationcontrollers/default/rc-1",
        "/registry/core/persistentvolumes/pv-1",
        "/registry/batch/jobs/default/pi",
        "/registry/apps/statefulsets/default/web",
        "/registry/extensions/ingresses/default/i",
    };
    for (size_t i = 0; i < sizeof unserved / sizeof *unserved; i++)
        expect_to(m, unserved[i], NULL);
    /* a dotted group ckube does not serve a type of looks like a custom
     * resource's, and is one if a CRD says so: it maps as GROUP/PLURAL */
    both(m, "/registry/authorization.k8s.io/subjectaccessreviews/x",
         "/registry/authorization.k8s.io/subjectaccessreviews/x");
    etcd_keymap_free(m);
}

static void test_malformed(void **state)
{
    (void)state;
    etcd_keymap *m = etcd_keymap_new("/registry");
    static const char *const bad_internal[] = {
        "",
        "/",
        "/registry",
        "registry/core/configmaps/ns/c",
        "/registryx/core/configmaps/ns/c",
        "/other/core/configmaps/ns/c",
        "/registry//core/configmaps/ns/c",
        "/registry/core//configmaps/ns/c",
        "/registry/core/configmaps//c",
        "/registry/core/configmaps/ns//c",
        "/registry/core/configmaps/ns/c/",
        "/registry/core/configmaps/ns/c/extra",
        "/registry/core/configmaps/ns",
        "/registry/core/configmaps",
        "/registry/core",
        "/registry/core/",
        "/registry/core/configmaps/./c",
        "/registry/core/configmaps/../c",
        "/registry/core/configmaps/ns/.",
        "/registry/core/configmaps/ns/..",
        "/registry/core/configmaps/ns/a%2fb",
        "/registry/core/namespaces/%",
        "/registry/core/namespaces//",
        "/registry/example.com/widgets//w",
        "/registry/example.com/wid%gets/w",
        "/registry/./widgets/w",
        "/registry/../widgets/w",
    };
    for (size_t i = 0; i < sizeof bad_internal / sizeof *bad_internal; i++)
        expect_to(m, bad_internal[i], NULL);
    /* "..." is neither "." nor "..", and has a dot: odd, but a group */
    both(m, "/registry/.../widgets/w", "/registry/.../widgets/w");
    expect_to(m, NULL, NULL);
    expect_to(NULL, "/registry/core/configmaps/ns/c", NULL);

    static const char *const bad_etcd[] = {
        "",
        "/",
        "/registry",
        "/registry/",
        "/registry//configmaps/ns/c",
        "/registry/configmaps//c",
        "/registry/configmaps/ns//c",
        "/registry/configmaps/ns/c/",
        "/registry/configmaps/ns/",
        "/registry/configmaps/",
        "/registry/configmaps",
        "/registry/configmaps/ns/c/extra",
        "/registry/configmaps/ns/.",
        "/registry/configmaps/ns/..",
        "/registry/configmaps/./c",
        "/registry/configmaps/ns/a%b",
        "/registry/minions/",
        "/registry/services/specs/",
        "/registry/services/specs",
        "/registry/services",
        "/registry/example.com/widgets/w/",
        "/registry/example.com/",
        "/registry/example.com",
    };
    for (size_t i = 0; i < sizeof bad_etcd / sizeof *bad_etcd; i++)
        expect_from(m, bad_etcd[i], NULL);
    /* bytes, not strings: a NUL inside, and a length that cuts the key */
    static const char nul[] = "/registry/configmaps/ns/c\0x";
    expect_from_n(m, nul, sizeof nul - 1, NULL);
    expect_from_n(m, nul, strlen(nul), "/registry/core/configmaps/ns/c");
    expect_from_n(m, "/registry/configmaps/ns/cXYZ", strlen("/registry/configmaps/ns/c"),
                  "/registry/core/configmaps/ns/c");
    expect_from_n(m, "/registry/minions/n", 5, NULL);
    expect_from_n(m, "/registry/minions/n", 0, NULL);
    expect_from_n(m, NULL, 0, NULL);
    assert_null(etcd_key_from_etcd(NULL, "/registry/configmaps/ns/c", 25));
    etcd_keymap_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins),           cmocka_unit_test(test_examples),
        cmocka_unit_test(test_table_matches_spec), cmocka_unit_test(test_table_invariants),
        cmocka_unit_test(test_registered_types),   cmocka_unit_test(test_custom_resources),
        cmocka_unit_test(test_events_shared),       cmocka_unit_test(test_prefix_normalised),
        cmocka_unit_test(test_custom_prefixes),    cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_injective),          cmocka_unit_test(test_foreign_keys),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
