/* The RBAC bootstrap policy and its reconciliation
 * (registry/rbac/bootstrap.h): the embedded data parses, every object is
 * one the RBAC types accept (metadata and the type's validation, as a
 * create request is checked), the roles and bindings users rely on are
 * there as kubernetes v1.31 has them, and the reconcile functions do what
 * upstream's reconciliation does in union mode: create what is missing,
 * leave autoupdate=false alone, add missing rules (broken down) but not
 * covered ones, keep what users added, merge labels and annotations,
 * union aggregation selectors, add subjects, recreate a binding whose
 * roleRef changed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "apiserver/registry/rbac/bootstrap.h"
#include "apiserver/registry/rbac/rbac.h"
#include "apiserver/registry/rest/registry.h"
#include "ckube/json.h"
#include "ckube/status.h"
#include "ckube/validation.h"

#define GROUP "rbac.authorization.k8s.io"

/* ---- helpers ------------------------------------------------------------- */

/* JSON written with ' for " (a new reference). */
static json_t *J(const char *text)
{
    char *s = strdup(text);
    assert_non_null(s);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t err;
    json_t *v = json_loads(s, 0, &err);
    if (!v)
        fail_msg("bad test JSON (%s): %s", err.text, s);
    free(s);
    return v;
}

static void assert_json_at(const json_t *got, const char *want_text, const char *file, int line)
{
    json_t *want = J(want_text);
    if (!json_equal(got, want)) {
        char *g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : strdup("(null)");
        char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
        print_message("%s:%d:\ngot:  %s\nwant: %s\n", file, line, g, w);
        free(g);
        free(w);
        json_decref(want);
        fail_msg("JSON differs");
    }
    json_decref(want);
}
#define assert_json(got, want) assert_json_at((got), (want), __FILE__, __LINE__)

/* The policy object of `kind` named `name` (in `ns`, or cluster-wide when
 * NULL), borrowed from `policy`; fails the test when absent. */
static const json_t *find_at(const json_t *policy, const char *kind, const char *ns,
                             const char *name, const char *file, int line)
{
    size_t i;
    json_t *o;
    json_array_foreach(policy, i, o)
    {
        const char *ons = ckube_obj_namespace(o);
        if (!strcmp(ckube_obj_kind(o), kind) && !strcmp(ckube_obj_name(o), name) &&
            (ns ? ons && !strcmp(ons, ns) : !ons))
            return o;
    }
    fail_msg("%s:%d: no %s %s%s%s in the policy", file, line, kind, ns ? ns : "", ns ? "/" : "",
             name);
    return NULL;
}
#define find(policy, kind, ns, name) find_at((policy), (kind), (ns), (name), __FILE__, __LINE__)

static size_t count_kind(const json_t *policy, const char *kind)
{
    size_t i, n = 0;
    json_t *o;
    json_array_foreach(policy, i, o) n += !strcmp(ckube_obj_kind(o), kind);
    return n;
}

static const char *meta_str(const json_t *o, const char *map, const char *key)
{
    const char *s = json_string_value(
        json_object_get(json_object_get(json_object_get(o, "metadata"), map), key));
    return s ? s : "";
}

/* ---- the policy ------------------------------------------------------------ */

static void test_policy_parses(void **state)
{
    (void)state;
    json_t *policy = rbac_bootstrap_policy();
    assert_true(json_is_array(policy));
    /* v1.31 with its default feature gates: policy.go's 31 ClusterRoles
     * and 12 ClusterRoleBindings, controller_policy.go's 33 of each,
     * namespace_policy.go's 7 Roles and 7 RoleBindings; then ckube's own
     * (ckube_policy.yaml): the pod counter's ClusterRole and binding. */
    assert_int_equal(json_array_size(policy), 123 + 2);
    assert_int_equal(count_kind(policy, "ClusterRole"), 64 + 1);
    assert_int_equal(count_kind(policy, "ClusterRoleBinding"), 45 + 1);
    assert_int_equal(count_kind(policy, "Role"), 7);
    assert_int_equal(count_kind(policy, "RoleBinding"), 7);
    /* Upstream's come first, in their file's order; ckube's last. */
    assert_string_equal(ckube_obj_name(json_array_get(policy, 0)), "cluster-admin");
    assert_string_equal(ckube_obj_name(json_array_get(policy, 123)),
                        "system:controller:pod-counter");
    size_t i, j;
    json_t *o, *p;
    json_array_foreach(policy, i, o)
    {
        const char *kind = ckube_obj_kind(o);
        assert_string_equal(ckube_obj_api_version(o), GROUP "/v1");
        assert_string_equal(meta_str(o, "labels", RBAC_BOOTSTRAPPING_LABEL), "rbac-defaults");
        assert_string_equal(meta_str(o, "annotations", RBAC_AUTOUPDATE_ANNOTATION), "true");
        bool namespaced = !strcmp(kind, "Role") || !strcmp(kind, "RoleBinding");
        const char *ns = ckube_obj_namespace(o);
        if (namespaced)
            assert_true(ns && (!strcmp(ns, "kube-system") || !strcmp(ns, "kube-public")));
        else
            assert_null(ns);
        /* No two objects are one. */
        json_array_foreach(policy, j, p)
        {
            if (j <= i)
                continue;
            const char *pns = ckube_obj_namespace(p);
            if (!strcmp(kind, ckube_obj_kind(p)) && !strcmp(ckube_obj_name(o), ckube_obj_name(p)))
                assert_false(!ns == !pns && (!ns || !strcmp(ns, pns)));
        }
    }
    /* Every call parses anew: the caller owns what it gets. */
    json_t *again = rbac_bootstrap_policy();
    assert_true(json_equal(policy, again));
    assert_ptr_not_equal(policy, again);
    json_decref(again);
    json_decref(policy);
}

/* What a create request checks after decoding (the handlers'
 * validate_object without the schema): the type's defaults, the object
 * metadata, the type's own validation. And no field outside the kinds'
 * own. */
static void test_policy_validates(void **state)
{
    (void)state;
    registry *reg = registry_new();
    assert_non_null(reg);
    assert_int_equal(rbac_install(reg), 0);
    json_t *policy = rbac_bootstrap_policy();
    size_t i;
    json_t *o;
    json_array_foreach(policy, i, o)
    {
        resource_type *t = registry_lookup_kind(reg, GROUP, "v1", ckube_obj_kind(o));
        assert_non_null(t);
        json_t *obj = json_deep_copy(o);
        if (t->prepare_create)
            t->prepare_create(t, obj);
        /* Defaulting finds nothing to fill in: the data says it all. */
        assert_true(json_equal(obj, o));
        ckube_status *st = ckube_status_invalid_begin(t->group, t->kind, ckube_obj_name(obj));
        ckube_validate_object_meta(obj, t->namespaced, t->name_kind, st);
        if (t->validate)
            t->validate(t, obj, NULL, st);
        for (size_t c = 0; c < st->ncauses; c++)
            print_message("%s %s: %s: %s\n", t->kind, ckube_obj_name(obj), st->causes[c].field,
                          st->causes[c].message);
        assert_int_equal(st->ncauses, 0);
        ckube_status_free(st);
        const char *k;
        json_t *v;
        json_object_foreach(obj, k, v)
        {
            static const char *const role_fields[] = {
                "apiVersion", "kind", "metadata", "rules", "aggregationRule", NULL};
            static const char *const binding_fields[] = {"apiVersion", "kind",     "metadata",
                                                         "roleRef",    "subjects", NULL};
            const char *const *allowed = strstr(t->kind, "Binding") ? binding_fields : role_fields;
            bool ok = false;
            for (size_t a = 0; allowed[a]; a++)
                ok = ok || !strcmp(allowed[a], k);
            if (!ok)
                fail_msg("%s %s: unexpected field %s", t->kind, ckube_obj_name(obj), k);
        }
        json_decref(obj);
        resource_type_unref(t);
    }
    json_decref(policy);
    registry_free(reg);
}

static void test_well_known_roles(void **state)
{
    (void)state;
    json_t *policy = rbac_bootstrap_policy();
    /* cluster-admin can do anything. */
    assert_json(json_object_get(find(policy, "ClusterRole", NULL, "cluster-admin"), "rules"),
                "[{'apiGroups':['*'],'resources':['*'],'verbs':['*']},"
                "{'nonResourceURLs':['*'],'verbs':['*']}]");
    /* admin, edit and view are aggregated; the system:aggregate-to-*
     * roles feed them, and edit and view feed the roles above them. */
    static const char *const agg[][2] = {{"admin", "admin"}, {"edit", "edit"}, {"view", "view"}};
    for (size_t i = 0; i < 3; i++) {
        const json_t *r = find(policy, "ClusterRole", NULL, agg[i][0]);
        char want[256];
        snprintf(want, sizeof want,
                 "{'clusterRoleSelectors':[{'matchLabels':"
                 "{'rbac.authorization.k8s.io/aggregate-to-%s':'true'}}]}",
                 agg[i][1]);
        assert_json(json_object_get(r, "aggregationRule"), want);
        assert_json(json_object_get(r, "rules"), "[]");
        char feeder[64], label[96];
        snprintf(feeder, sizeof feeder, "system:aggregate-to-%s", agg[i][1]);
        snprintf(label, sizeof label, "rbac.authorization.k8s.io/aggregate-to-%s", agg[i][1]);
        const json_t *f = find(policy, "ClusterRole", NULL, feeder);
        assert_string_equal(meta_str(f, "labels", label), "true");
        assert_true(json_array_size(json_object_get(f, "rules")) > 0);
    }
    assert_string_equal(meta_str(find(policy, "ClusterRole", NULL, "edit"), "labels",
                                 "rbac.authorization.k8s.io/aggregate-to-admin"),
                        "true");
    assert_string_equal(meta_str(find(policy, "ClusterRole", NULL, "view"), "labels",
                                 "rbac.authorization.k8s.io/aggregate-to-edit"),
                        "true");
    assert_json(
        json_object_get(find(policy, "ClusterRole", NULL, "system:public-info-viewer"), "rules"),
        "[{'nonResourceURLs':['/healthz','/livez','/readyz','/version','/version/'],"
        "'verbs':['get']}]");
    assert_json(json_object_get(find(policy, "ClusterRole", NULL, "system:basic-user"), "rules"),
                "[{'apiGroups':['authorization.k8s.io'],"
                "'resources':['selfsubjectaccessreviews','selfsubjectrulesreviews'],"
                "'verbs':['create']},"
                "{'apiGroups':['authentication.k8s.io'],'resources':['selfsubjectreviews'],"
                "'verbs':['create']}]");
    /* Roles the control plane's components and controllers run with. */
    static const char *const names[] = {"system:discovery",
                                        "system:monitoring",
                                        "system:service-account-issuer-discovery",
                                        "system:auth-delegator",
                                        "system:heapster",
                                        "system:node",
                                        "system:node-proxier",
                                        "system:node-bootstrapper",
                                        "system:node-problem-detector",
                                        "system:kubelet-api-admin",
                                        "system:kube-controller-manager",
                                        "system:kube-scheduler",
                                        "system:kube-dns",
                                        "system:kube-aggregator",
                                        "system:persistent-volume-provisioner",
                                        "system:volume-scheduler",
                                        ("system:certificates.k8s.io:certificatesigningrequests:"
                                         "nodeclient"),
                                        "system:certificates.k8s.io:kube-apiserver-client-approver",
                                        "system:controller:clusterrole-aggregation-controller",
                                        "system:controller:namespace-controller",
                                        "system:controller:generic-garbage-collector",
                                        "system:controller:root-ca-cert-publisher",
                                        "system:controller:legacy-service-account-token-cleaner"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        find(policy, "ClusterRole", NULL, names[i]);
    /* Feature-gated (off by default in v1.31): not there. */
    size_t i;
    json_t *o;
    json_array_foreach(policy, i, o)
    {
        const char *n = ckube_obj_name(o);
        assert_string_not_equal(n, "system:controller:resource-claim-controller");
        assert_string_not_equal(n, "system:controller:service-cidrs-controller");
        assert_string_not_equal(n, "system:cluster-trust-bundle-discovery");
        assert_string_not_equal(n, "system:controller:storage-version-garbage-collector");
        assert_string_not_equal(n, "system:controller:storage-version-migrator-controller");
    }
    json_decref(policy);
}

/* ckube's own controllers: a role of least privilege each, bound to the
 * ServiceAccount the controller-manager makes for it. */
static void test_ckube_policy(void **state)
{
    (void)state;
    json_t *policy = rbac_bootstrap_policy();
    assert_json(json_object_get(find(policy, "ClusterRole", NULL, "system:controller:pod-counter"),
                                "rules"),
                "[{'apiGroups':[''],'resources':['nodes'],'verbs':['patch']}]");
    const json_t *b = find(policy, "ClusterRoleBinding", NULL, "system:controller:pod-counter");
    assert_json(json_object_get(b, "subjects"),
                "[{'kind':'ServiceAccount','name':'pod-counter','namespace':'kube-system'}]");
    assert_json(json_object_get(b, "roleRef"),
                "{'apiGroup':'" GROUP
                "','kind':'ClusterRole','name':'system:controller:pod-counter'}");
    json_decref(policy);
}

static void test_bindings(void **state)
{
    (void)state;
    json_t *policy = rbac_bootstrap_policy();
#define G(n) "{'apiGroup':'" GROUP "','kind':'Group','name':'" n "'}"
#define U(n) "{'apiGroup':'" GROUP "','kind':'User','name':'" n "'}"
    static const char *const want[][2] = {
        {"cluster-admin", "[" G("system:masters") "]"},
        {"system:basic-user", "[" G("system:authenticated") "]"},
        {"system:discovery", "[" G("system:authenticated") "]"},
        {"system:public-info-viewer",
         "[" G("system:authenticated") "," G("system:unauthenticated") "]"},
        {"system:service-account-issuer-discovery", "[" G("system:serviceaccounts") "]"},
        {"system:monitoring", "[" G("system:monitoring") "]"},
        {"system:kube-controller-manager", "[" U("system:kube-controller-manager") "]"},
        {"system:kube-scheduler", "[" U("system:kube-scheduler") "]"},
        {"system:volume-scheduler", "[" U("system:kube-scheduler") "]"},
        {"system:node-proxier", "[" U("system:kube-proxy") "]"},
        {"system:kube-dns", "[{'kind':'ServiceAccount','name':'kube-dns',"
                            "'namespace':'kube-system'}]"},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const json_t *b = find(policy, "ClusterRoleBinding", NULL, want[i][0]);
        assert_json(json_object_get(b, "subjects"), want[i][1]);
        char ref[256];
        snprintf(ref, sizeof ref, "{'apiGroup':'%s','kind':'ClusterRole','name':'%s'}", GROUP,
                 want[i][0]);
        assert_json(json_object_get(b, "roleRef"), ref);
    }
    /* system:node's binding is kept without subjects (the Node authorizer
     * replaced it), as upstream keeps it. */
    assert_null(
        json_object_get(find(policy, "ClusterRoleBinding", NULL, "system:node"), "subjects"));
    /* Every binding names a role of the policy; a controller's binds its
     * ServiceAccount in kube-system. */
    size_t i;
    json_t *o;
    json_array_foreach(policy, i, o)
    {
        const char *kind = ckube_obj_kind(o);
        if (!strstr(kind, "Binding"))
            continue;
        const json_t *ref = json_object_get(o, "roleRef");
        const char *rkind = json_string_value(json_object_get(ref, "kind"));
        const char *rname = json_string_value(json_object_get(ref, "name"));
        find(policy, rkind, !strcmp(rkind, "Role") ? ckube_obj_namespace(o) : NULL, rname);
        const char *name = ckube_obj_name(o);
        if (!strncmp(name, "system:controller:", 18) && !strcmp(kind, "ClusterRoleBinding")) {
            char sa[256];
            snprintf(sa, sizeof sa,
                     "[{'kind':'ServiceAccount','name':'%s','namespace':'kube-system'}]",
                     name + 18);
            assert_json(json_object_get(o, "subjects"), sa);
        }
    }
    const json_t *rb = find(policy, "RoleBinding", "kube-system",
                            "system::leader-locking-kube-controller-manager");
    assert_json(json_object_get(rb, "subjects"),
                "[" U("system:kube-controller-manager") ","
                                                        "{'kind':'ServiceAccount','name':'kube-"
                                                        "controller-manager',"
                                                        "'namespace':'kube-system'},"
                                                        "{'kind':'ServiceAccount','name':'leader-"
                                                        "election-controller',"
                                                        "'namespace':'kube-system'}]");
    find(policy, "RoleBinding", "kube-public", "system:controller:bootstrap-signer");
#undef G
#undef U
    json_decref(policy);
}

/* ---- validation.Covers ------------------------------------------------------ */

static bool covers(const char *owner, const char *servant)
{
    json_t *o = J(owner), *s = J(servant);
    bool c = rbac_rules_cover(o, s, NULL);
    json_decref(o);
    json_decref(s);
    return c;
}

static void test_covers(void **state)
{
    (void)state;
    /* Stars, and one rule's parts from several owner rules. */
    assert_true(covers("[{'apiGroups':['*'],'resources':['*'],'verbs':['*']}]",
                       "[{'apiGroups':['apps',''],'resources':['pods','x/y'],"
                       "'verbs':['get','delete']}]"));
    assert_true(covers("[{'apiGroups':[''],'resources':['pods'],'verbs':['get']},"
                       "{'apiGroups':[''],'resources':['pods'],'verbs':['list']}]",
                       "[{'apiGroups':[''],'resources':['pods'],'verbs':['get','list']}]"));
    assert_false(covers("[{'apiGroups':[''],'resources':['pods'],'verbs':['get']}]",
                        "[{'apiGroups':[''],'resources':['pods'],'verbs':['get','list']}]"));
    assert_false(covers("[{'apiGroups':['apps'],'resources':['pods'],'verbs':['get']}]",
                        "[{'apiGroups':[''],'resources':['pods'],'verbs':['get']}]"));
    /* A subresource of any resource: a star before its slash. */
    assert_true(covers("[{'apiGroups':['*'],'resources':['*/scale'],'verbs':['get']}]",
                       "[{'apiGroups':['apps'],'resources':['deployments/scale'],"
                       "'verbs':['get']}]"));
    assert_false(covers("[{'apiGroups':['*'],'resources':['*/scale'],'verbs':['get']}]",
                        "[{'apiGroups':['apps'],'resources':['deployments'],'verbs':['get']}]"));
    /* Resource names: none in the owner allows all; names in the owner
     * do not cover a rule without them. */
    assert_true(covers("[{'apiGroups':[''],'resources':['configmaps'],'verbs':['get']}]",
                       "[{'apiGroups':[''],'resources':['configmaps'],'resourceNames':['a'],"
                       "'verbs':['get']}]"));
    assert_false(covers("[{'apiGroups':[''],'resources':['configmaps'],'resourceNames':['a'],"
                        "'verbs':['get']}]",
                        "[{'apiGroups':[''],'resources':['configmaps'],'verbs':['get']}]"));
    assert_false(covers("[{'apiGroups':[''],'resources':['configmaps'],'resourceNames':['a'],"
                        "'verbs':['get']}]",
                        "[{'apiGroups':[''],'resources':['configmaps'],'resourceNames':['b'],"
                        "'verbs':['get']}]"));
    /* Non-resource URLs: a trailing star is a prefix; resource rules
     * allow none. */
    assert_true(covers("[{'nonResourceURLs':['/apis/*'],'verbs':['get']}]",
                       "[{'nonResourceURLs':['/apis/apps','/apis/'],'verbs':['get']}]"));
    assert_false(covers("[{'nonResourceURLs':['/apis/*'],'verbs':['get']}]",
                        "[{'nonResourceURLs':['/apis'],'verbs':['get']}]"));
    assert_false(covers("[{'apiGroups':['*'],'resources':['*'],'verbs':['*']}]",
                        "[{'nonResourceURLs':['/healthz'],'verbs':['get']}]"));
    assert_true(covers("[{'nonResourceURLs':['*'],'verbs':['*']}]",
                       "[{'nonResourceURLs':['/healthz'],'verbs':['get']}]"));
    /* What is not covered comes back broken down, in upstream's order
     * (group, resource, verb, name; then URLs). */
    json_t *left = NULL;
    json_t *o = J("[{'apiGroups':[''],'resources':['pods'],'verbs':['get']}]");
    json_t *s = J("[{'apiGroups':['','apps'],'resources':['pods'],'verbs':['get','list'],"
                  "'resourceNames':['x']},{'nonResourceURLs':['/a'],'verbs':['get']}]");
    assert_false(rbac_rules_cover(o, s, &left));
    assert_json(left, "[{'verbs':['list'],'apiGroups':[''],'resources':['pods'],"
                      "'resourceNames':['x']},"
                      "{'verbs':['get'],'apiGroups':['apps'],'resources':['pods'],"
                      "'resourceNames':['x']},"
                      "{'verbs':['list'],'apiGroups':['apps'],'resources':['pods'],"
                      "'resourceNames':['x']},"
                      "{'verbs':['get'],'nonResourceURLs':['/a']}]");
    json_decref(left);
    json_decref(o);
    json_decref(s);
}

/* ---- reconciling roles -------------------------------------------------------- */

#define ROLE_META                                                                                  \
    "'metadata':{'name':'r','labels':{'kubernetes.io/bootstrapping':'rbac-defaults'},"             \
    "'annotations':{'rbac.authorization.kubernetes.io/autoupdate':'true'}}"

static const char *const WANTED_ROLE =
    "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'ClusterRole'," ROLE_META ","
    "'rules':[{'apiGroups':[''],'resources':['pods','services'],'verbs':['get','list']},"
    "{'nonResourceURLs':['/version'],'verbs':['get']}]}";

/* A stored object: `meta` (the metadata members after name, without the
 * braces) and `rest` (members after metadata), with the fields a server
 * sets. */
static json_t *stored(const char *kind, const char *meta, const char *rest)
{
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'%s',"
             "'metadata':{'name':'r','uid':'u-1','resourceVersion':'42',"
             "'creationTimestamp':'2024-01-01T00:00:00Z'%s%s}%s%s}",
             kind, *meta ? "," : "", meta, *rest ? "," : "", rest);
    return J(buf);
}

static void test_reconcile_role_create(void **state)
{
    (void)state;
    json_t *wanted = J(WANTED_ROLE);
    rbac_reconcile r;
    rbac_reconcile_role(NULL, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_CREATE);
    assert_false(r.protected_);
    assert_false(r.binding);
    assert_true(json_equal(r.object, wanted));
    assert_ptr_not_equal(r.object, wanted);
    assert_true(json_equal(r.missing, json_object_get(wanted, "rules")));
    rbac_reconcile_release(&r);
    json_decref(wanted);
}

static void test_reconcile_role_unchanged(void **state)
{
    (void)state;
    json_t *wanted = J(WANTED_ROLE);
    /* As stored after its create: nothing to do. Rules split otherwise
     * but allowing the same are as good. */
    json_t *have = stored("ClusterRole",
                          "'labels':{'kubernetes.io/bootstrapping':'rbac-defaults'},"
                          "'annotations':{'rbac.authorization.kubernetes.io/autoupdate':'true'}",
                          "'rules':[{'apiGroups':[''],'resources':['services'],'verbs':['*']},"
                          "{'apiGroups':[''],'resources':['pods'],'verbs':['get','list']},"
                          "{'nonResourceURLs':['/v*'],'verbs':['get']}]");
    rbac_reconcile r;
    rbac_reconcile_role(have, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_NONE);
    assert_null(r.object);
    assert_int_equal(json_array_size(r.missing), 0);
    rbac_reconcile_release(&r);
    json_decref(have);
    json_decref(wanted);
}

static void test_reconcile_role_adds_missing_rules(void **state)
{
    (void)state;
    json_t *wanted = J(WANTED_ROLE);
    /* A user removed "list" and the URL rule, and added a rule of their
     * own: theirs stays, the missing parts come back broken down, after
     * the stored rules; the resourceVersion is the stored one. */
    json_t *have = stored("ClusterRole",
                          "'labels':{'kubernetes.io/bootstrapping':'rbac-defaults'},"
                          "'annotations':{'rbac.authorization.kubernetes.io/autoupdate':'true'}",
                          "'rules':[{'apiGroups':[''],'resources':['pods','services'],"
                          "'verbs':['get']},"
                          "{'apiGroups':['apps'],'resources':['deployments'],'verbs':['get']}]");
    rbac_reconcile r;
    rbac_reconcile_role(have, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_UPDATE);
    assert_false(r.protected_);
    assert_json(r.missing, "[{'verbs':['list'],'apiGroups':[''],'resources':['pods']},"
                           "{'verbs':['list'],'apiGroups':[''],'resources':['services']},"
                           "{'verbs':['get'],'nonResourceURLs':['/version']}]");
    assert_json(json_object_get(r.object, "rules"),
                "[{'apiGroups':[''],'resources':['pods','services'],'verbs':['get']},"
                "{'apiGroups':['apps'],'resources':['deployments'],'verbs':['get']},"
                "{'verbs':['list'],'apiGroups':[''],'resources':['pods']},"
                "{'verbs':['list'],'apiGroups':[''],'resources':['services']},"
                "{'verbs':['get'],'nonResourceURLs':['/version']}]");
    assert_string_equal(ckube_obj_resource_version(r.object), "42");
    assert_string_equal(ckube_obj_uid(r.object), "u-1");
    char *d = rbac_reconcile_describe(&r);
    assert_string_equal(d, "[{[list] [] [pods] [] []} {[list] [] [services] [] []} "
                           "{[get] [] [] [] [/version]}]");
    free(d);
    rbac_reconcile_release(&r);
    /* The input is left as it was. */
    assert_int_equal(json_array_size(json_object_get(have, "rules")), 2);
    json_decref(have);
    json_decref(wanted);
}

static void test_reconcile_role_protected(void **state)
{
    (void)state;
    json_t *wanted = J(WANTED_ROLE);
    json_t *have = stored("ClusterRole",
                          "'annotations':{'rbac.authorization.kubernetes.io/autoupdate':'false'}",
                          "'rules':[]");
    rbac_reconcile r;
    rbac_reconcile_role(have, wanted, &r);
    assert_true(r.protected_);
    assert_int_equal(r.op, RBAC_RECONCILE_UPDATE); /* what it would do */
    assert_null(r.object);                         /* and will not */
    assert_int_equal(json_array_size(r.missing), 5);
    rbac_reconcile_release(&r);
    /* Any other value is not "false". */
    json_decref(have);
    have = stored("ClusterRole",
                  "'annotations':{'rbac.authorization.kubernetes.io/autoupdate':'False'}",
                  "'rules':[]");
    rbac_reconcile_role(have, wanted, &r);
    assert_false(r.protected_);
    assert_non_null(r.object);
    rbac_reconcile_release(&r);
    json_decref(have);
    json_decref(wanted);
}

static void test_reconcile_role_metadata(void **state)
{
    (void)state;
    json_t *wanted = J(WANTED_ROLE);
    /* Labels and annotations the stored role lacks are added; its own,
     * and its own values for the policy's keys, stay. */
    json_t *have =
        stored("ClusterRole",
               "'labels':{'kubernetes.io/bootstrapping':'mine','team':'a'},'annotations':{'x':'y'}",
               "'rules':[{'apiGroups':[''],'resources':['pods','services'],'verbs':['get','list']},"
               "{'nonResourceURLs':['/version'],'verbs':['get']}]");
    rbac_reconcile r;
    rbac_reconcile_role(have, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_UPDATE);
    assert_int_equal(json_array_size(r.missing), 0);
    assert_json(json_object_get(r.object, "metadata"),
                "{'name':'r','uid':'u-1','resourceVersion':'42',"
                "'creationTimestamp':'2024-01-01T00:00:00Z',"
                "'labels':{'kubernetes.io/bootstrapping':'mine','team':'a'},"
                "'annotations':{'x':'y','rbac.authorization.kubernetes.io/autoupdate':'true'}}");
    assert_true(json_equal(json_object_get(r.object, "rules"), json_object_get(have, "rules")));
    rbac_reconcile_release(&r);
    json_decref(have);
    /* None at all: both maps are made. */
    have = stored("ClusterRole", "",
                  "'rules':[{'apiGroups':['*'],'resources':['*'],'verbs':['*']},"
                  "{'nonResourceURLs':['*'],'verbs':['*']}]");
    rbac_reconcile_role(have, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_UPDATE);
    assert_string_equal(meta_str(r.object, "labels", RBAC_BOOTSTRAPPING_LABEL), "rbac-defaults");
    assert_string_equal(meta_str(r.object, "annotations", RBAC_AUTOUPDATE_ANNOTATION), "true");
    rbac_reconcile_release(&r);
    json_decref(have);
    json_decref(wanted);
}

static void test_reconcile_role_aggregation(void **state)
{
    (void)state;
    json_t *wanted =
        J("{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'ClusterRole'," ROLE_META
          ",'aggregationRule':{'clusterRoleSelectors':["
          "{'matchLabels':{'a':'true'}},{'matchLabels':{'b':'true'}}]},"
          "'rules':[]}");
    /* The aggregation controller filled the rules: they stay. A selector
     * a user added stays; the policy's missing one is added; an equal
     * one written otherwise (empty matchExpressions) counts as there. */
    json_t *have = stored("ClusterRole",
                          "'labels':{'kubernetes.io/bootstrapping':'rbac-defaults'},"
                          "'annotations':{'rbac.authorization.kubernetes.io/autoupdate':'true'}",
                          "'aggregationRule':{'clusterRoleSelectors':["
                          "{'matchLabels':{'mine':'true'}},"
                          "{'matchLabels':{'a':'true'},'matchExpressions':[]}]},"
                          "'rules':[{'apiGroups':[''],'resources':['pods'],'verbs':['get']}]");
    rbac_reconcile r;
    rbac_reconcile_role(have, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_UPDATE);
    assert_json(json_object_get(r.object, "aggregationRule"),
                "{'clusterRoleSelectors':[{'matchLabels':{'mine':'true'}},"
                "{'matchLabels':{'a':'true'},'matchExpressions':[]},"
                "{'matchLabels':{'b':'true'}}]}");
    assert_json(json_object_get(r.object, "rules"),
                "[{'apiGroups':[''],'resources':['pods'],'verbs':['get']}]");
    rbac_reconcile_release(&r);
    /* Once there, nothing more. */
    json_t *again = json_deep_copy(have);
    json_array_append_new(
        json_object_get(json_object_get(again, "aggregationRule"), "clusterRoleSelectors"),
        J("{'matchLabels':{'b':'true'}}"));
    rbac_reconcile_role(again, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_NONE);
    rbac_reconcile_release(&r);
    json_decref(again);
    json_decref(have);
    /* An aggregation rule the policy does not have goes, as upstream. */
    json_t *plain = J(WANTED_ROLE);
    have = stored("ClusterRole",
                  "'labels':{'kubernetes.io/bootstrapping':'rbac-defaults'},"
                  "'annotations':{'rbac.authorization.kubernetes.io/autoupdate':'true'}",
                  "'aggregationRule':{'clusterRoleSelectors':[{'matchLabels':{'a':'true'}}]},"
                  "'rules':[{'apiGroups':[''],'resources':['pods','services'],"
                  "'verbs':['get','list']},{'nonResourceURLs':['/version'],'verbs':['get']}]");
    rbac_reconcile_role(have, plain, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_UPDATE);
    assert_null(json_object_get(r.object, "aggregationRule"));
    rbac_reconcile_release(&r);
    json_decref(have);
    json_decref(plain);
    json_decref(wanted);
}

/* ---- reconciling bindings ------------------------------------------------------ */

static const char *const WANTED_BINDING =
    "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'ClusterRoleBinding'," ROLE_META ","
    "'roleRef':{'apiGroup':'rbac.authorization.k8s.io','kind':'ClusterRole','name':'r'},"
    "'subjects':[{'apiGroup':'rbac.authorization.k8s.io','kind':'Group','name':'g1'},"
    "{'kind':'ServiceAccount','name':'sa','namespace':'kube-system'}]}";

#define BINDING_META                                                                               \
    "'labels':{'kubernetes.io/bootstrapping':'rbac-defaults'},"                                    \
    "'annotations':{'rbac.authorization.kubernetes.io/autoupdate':'true'}"
#define REF_R "'roleRef':{'apiGroup':'rbac.authorization.k8s.io','kind':'ClusterRole','name':'r'}"

static void test_reconcile_binding(void **state)
{
    (void)state;
    json_t *wanted = J(WANTED_BINDING);
    rbac_reconcile r;
    /* Create. */
    rbac_reconcile_binding(NULL, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_CREATE);
    assert_true(r.binding);
    assert_true(json_equal(r.object, wanted));
    rbac_reconcile_release(&r);
    /* As created: nothing. */
    json_t *have = stored("ClusterRoleBinding", BINDING_META,
                          REF_R ",'subjects':[{'kind':'ServiceAccount','name':'sa',"
                                "'namespace':'kube-system'},"
                                "{'apiGroup':'rbac.authorization.k8s.io','kind':'Group',"
                                "'name':'g1'}]");
    rbac_reconcile_binding(have, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_NONE);
    assert_null(r.object);
    rbac_reconcile_release(&r);
    json_decref(have);
    /* A subject removed and one of the user's added: the missing one comes
     * back after theirs. A subject differing only in its namespace or
     * group is another subject. */
    have = stored("ClusterRoleBinding", BINDING_META,
                  REF_R ",'subjects':[{'apiGroup':'rbac.authorization.k8s.io','kind':'User',"
                        "'name':'bob'},"
                        "{'kind':'ServiceAccount','name':'sa','namespace':'default'},"
                        "{'kind':'Group','name':'g1'}]");
    rbac_reconcile_binding(have, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_UPDATE);
    assert_json(r.missing, "[{'apiGroup':'rbac.authorization.k8s.io','kind':'Group','name':'g1'},"
                           "{'kind':'ServiceAccount','name':'sa','namespace':'kube-system'}]");
    assert_json(json_object_get(r.object, "subjects"),
                "[{'apiGroup':'rbac.authorization.k8s.io','kind':'User','name':'bob'},"
                "{'kind':'ServiceAccount','name':'sa','namespace':'default'},"
                "{'kind':'Group','name':'g1'},"
                "{'apiGroup':'rbac.authorization.k8s.io','kind':'Group','name':'g1'},"
                "{'kind':'ServiceAccount','name':'sa','namespace':'kube-system'}]");
    assert_string_equal(ckube_obj_resource_version(r.object), "42");
    char *d = rbac_reconcile_describe(&r);
    assert_string_equal(d,
                        "[{Group rbac.authorization.k8s.io g1 } {ServiceAccount  sa kube-system}]");
    free(d);
    rbac_reconcile_release(&r);
    json_decref(have);
    /* No subjects at all, and no labels: all added. */
    have = stored("ClusterRoleBinding", "", REF_R);
    rbac_reconcile_binding(have, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_UPDATE);
    assert_true(
        json_equal(json_object_get(r.object, "subjects"), json_object_get(wanted, "subjects")));
    assert_string_equal(meta_str(r.object, "labels", RBAC_BOOTSTRAPPING_LABEL), "rbac-defaults");
    rbac_reconcile_release(&r);
    json_decref(have);
    json_decref(wanted);
}

static void test_reconcile_binding_roleref(void **state)
{
    (void)state;
    json_t *wanted = J(WANTED_BINDING);
    rbac_reconcile r;
    /* A roleRef cannot change: the binding is made again, as the policy
     * has it (the user's subjects go with the old binding). */
    json_t *have = stored("ClusterRoleBinding", BINDING_META,
                          "'roleRef':{'apiGroup':'rbac.authorization.k8s.io','kind':'ClusterRole',"
                          "'name':'other'},"
                          "'subjects':[{'apiGroup':'rbac.authorization.k8s.io','kind':'User',"
                          "'name':'bob'}]");
    rbac_reconcile_binding(have, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_RECREATE);
    assert_false(r.protected_);
    assert_true(json_equal(r.object, wanted));
    assert_int_equal(json_array_size(r.missing), 0);
    rbac_reconcile_release(&r);
    json_decref(have);
    /* Not when protected. */
    have = stored("ClusterRoleBinding",
                  "'annotations':{'rbac.authorization.kubernetes.io/autoupdate':'false'}",
                  "'roleRef':{'apiGroup':'rbac.authorization.k8s.io','kind':'Role',"
                  "'name':'r'}");
    rbac_reconcile_binding(have, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_RECREATE);
    assert_true(r.protected_);
    assert_null(r.object);
    rbac_reconcile_release(&r);
    json_decref(have);
    /* Protected, with subjects missing: left alone too. */
    have = stored("ClusterRoleBinding",
                  "'annotations':{'rbac.authorization.kubernetes.io/autoupdate':'false'}", REF_R);
    rbac_reconcile_binding(have, wanted, &r);
    assert_int_equal(r.op, RBAC_RECONCILE_UPDATE);
    assert_true(r.protected_);
    assert_null(r.object);
    assert_int_equal(json_array_size(r.missing), 2);
    rbac_reconcile_release(&r);
    json_decref(have);
    json_decref(wanted);
}

/* Reconciling the policy with itself as stored changes nothing, and
 * every object's create is the object itself. */
static void test_reconcile_policy_fixpoint(void **state)
{
    (void)state;
    json_t *policy = rbac_bootstrap_policy();
    size_t i;
    json_t *o;
    json_array_foreach(policy, i, o)
    {
        bool binding = strstr(ckube_obj_kind(o), "Binding") != NULL;
        rbac_reconcile r;
        if (binding)
            rbac_reconcile_binding(o, o, &r);
        else
            rbac_reconcile_role(o, o, &r);
        if (r.op != RBAC_RECONCILE_NONE)
            fail_msg("%s %s reconciles with itself to op %d", ckube_obj_kind(o), ckube_obj_name(o),
                     (int)r.op);
        rbac_reconcile_release(&r);
    }
    json_decref(policy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_parses),
        cmocka_unit_test(test_policy_validates),
        cmocka_unit_test(test_well_known_roles),
        cmocka_unit_test(test_bindings),
        cmocka_unit_test(test_ckube_policy),
        cmocka_unit_test(test_covers),
        cmocka_unit_test(test_reconcile_role_create),
        cmocka_unit_test(test_reconcile_role_unchanged),
        cmocka_unit_test(test_reconcile_role_adds_missing_rules),
        cmocka_unit_test(test_reconcile_role_protected),
        cmocka_unit_test(test_reconcile_role_metadata),
        cmocka_unit_test(test_reconcile_role_aggregation),
        cmocka_unit_test(test_reconcile_binding),
        cmocka_unit_test(test_reconcile_binding_roleref),
        cmocka_unit_test(test_reconcile_policy_fixpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
