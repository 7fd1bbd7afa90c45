/* bench_rbac - the RBAC authorizer's cost per request (not a test).
 *
 * Built by CMake as build/bench_rbac (use a Release build without
 * sanitizers for meaningful figures); bench/run.py runs it.
 * Run: ./bench_rbac [--json] [bindings, default 1000]
 *
 * The index holds what a busy cluster has: N RoleBindings spread over
 * N/10 namespaces, each naming two users, a group and a ServiceAccount,
 * to one of ten Roles per namespace, plus 50 ClusterRoleBindings of
 * system groups and users (the bootstrap policy's shape). The asker is a
 * ServiceAccount in three groups, as a controller's requests are:
 *  - allow: a list allowed by the RoleBinding of its namespace;
 *  - deny: a verb nothing grants (every binding of the user and groups
 *    visited, the worst case);
 *  - chain: authz_allowed (what the request path calls), same as allow.
 * Each is the median of 5 runs of 1 s of one thread.
 *
 * --json prints one line:
 *   {"rbac_allow_ns": N, "rbac_deny_ns": N, "rbac_chain_ns": N, "rbac_bindings": N}
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apiserver/authentication/user.h"
#include "apiserver/authorization/authorizer.h"
#include "apiserver/authorization/rbac/authorizer.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void add(rbac_index *ix, rbac_kind kind, json_t *obj)
{
    rbac_index_apply(ix, kind, obj, false);
    json_decref(obj);
}

static void populate(rbac_index *ix, int nbindings)
{
    int nns = nbindings / 10 > 0 ? nbindings / 10 : 1;
    char ns[32], name[64], u1[64], u2[64], g[64], sa[64];
    for (int n = 0; n < nns; n++) {
        snprintf(ns, sizeof ns, "ns-%d", n);
        for (int r = 0; r < 10; r++) {
            snprintf(name, sizeof name, "role-%d", r);
            add(ix, RBAC_ROLE,
                json_pack("{s:{s:s,s:s},s:[{s:[s,s,s],s:[s],s:[s,s]}]}", "metadata", "name", name,
                          "namespace", ns, "rules", "verbs", "get", "list", "watch", "apiGroups",
                          "", "resources", "configmaps", "pods"));
        }
    }
    for (int b = 0; b < nbindings; b++) {
        snprintf(ns, sizeof ns, "ns-%d", b % nns);
        snprintf(name, sizeof name, "rb-%d", b);
        snprintf(u1, sizeof u1, "user-%d", b);
        snprintf(u2, sizeof u2, "user-%d", b + 1);
        snprintf(g, sizeof g, "team-%d", b % 37);
        snprintf(sa, sizeof sa, "sa-%d", b);
        char role[32];
        snprintf(role, sizeof role, "role-%d", b % 10);
        add(ix, RBAC_ROLE_BINDING,
            json_pack("{s:{s:s,s:s},s:{s:s,s:s},s:[{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s}]}",
                      "metadata", "name", name, "namespace", ns, "roleRef", "kind", "Role", "name",
                      role, "subjects", "kind", "User", "name", u1, "kind", "User", "name", u2,
                      "kind", "Group", "name", g, "kind", "ServiceAccount", "name", sa));
    }
    for (int c = 0; c < 50; c++) {
        snprintf(name, sizeof name, "system:crb-%d", c);
        snprintf(g, sizeof g, c % 2 ? "system:authenticated" : "system:serviceaccounts");
        snprintf(u1, sizeof u1, "system:user-%d", c);
        add(ix, RBAC_CLUSTER_ROLE,
            json_pack("{s:{s:s},s:[{s:[s],s:[s]}]}", "metadata", "name", name, "rules", "verbs",
                      "get", "nonResourceURLs", name));
        add(ix, RBAC_CLUSTER_ROLE_BINDING,
            json_pack("{s:{s:s},s:{s:s,s:s},s:[{s:s,s:s},{s:s,s:s}]}", "metadata", "name", name,
                      "roleRef", "kind", "ClusterRole", "name", name, "subjects", "kind", "Group",
                      "name", g, "kind", "User", "name", u1));
    }
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef bool (*decide_fn)(void *arg);

/* ns per call, median of 5 runs of about 1 s each. */
static double measure(decide_fn fn, void *arg, bool want)
{
    double runs[5];
    for (int r = 0; r < 5; r++) {
        long n = 0;
        double t0 = now_s(), t;
        do {
            for (int i = 0; i < 1000; i++)
                if (fn(arg) != want) {
                    fprintf(stderr, "bench_rbac: wrong decision\n");
                    exit(1);
                }
            n += 1000;
        } while ((t = now_s()) - t0 < 1.0);
        runs[r] = (t - t0) * 1e9 / (double)n;
    }
    qsort(runs, 5, sizeof *runs, cmp_d);
    return runs[2];
}

typedef struct ctx {
    rbac_index *ix;
    rbac_user user;
    rbac_request req;
    authz_attributes at;
} ctx;

static bool decide_rbac(void *arg)
{
    ctx *c = arg;
    return rbac_authorize(c->ix, &c->user, &c->req, NULL, NULL);
}

static bool decide_chain(void *arg)
{
    ctx *c = arg;
    return authz_allowed(c->ix, &c->at, NULL, NULL);
}

int main(int argc, char **argv)
{
    bool json = false;
    int nbindings = 1000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else
            nbindings = atoi(argv[i]);
    }
    rbac_index *ix = rbac_index_new();
    populate(ix, nbindings);
    /* sa-42 is bound in ns-42 % nns */
    int nns = nbindings / 10 > 0 ? nbindings / 10 : 1;
    char ns[32];
    snprintf(ns, sizeof ns, "ns-%d", 42 % nns);
    const char *groups[] = {"system:serviceaccounts", "system:serviceaccounts:x",
                            "system:authenticated"};
    /* the ServiceAccount subject is of the binding's namespace */
    char uname[96];
    snprintf(uname, sizeof uname, "system:serviceaccount:%s:sa-42", ns);
    auth_user *u = auth_user_new(uname, "", groups, 3, NULL);
    ctx c = {.ix = ix,
             .user = {u->name, (const char *const *)u->groups, u->ngroups},
             .req = {.verb = "list",
                     .resource_request = true,
                     .api_group = "",
                     .resource = "configmaps",
                     .subresource = "",
                     .name = "",
                     .namespace_ = ns}};
    c.at = (authz_attributes){.user = u,
                              .verb = "list",
                              .resource_request = true,
                              .api_group = "",
                              .resource = "configmaps",
                              .subresource = "",
                              .name = "",
                              .namespace_ = ns};
    double allow = measure(decide_rbac, &c, true);
    double chain = measure(decide_chain, &c, true);
    c.req.verb = "delete";
    double deny = measure(decide_rbac, &c, false);
    if (json)
        printf("{\"rbac_allow_ns\": %.1f, \"rbac_deny_ns\": %.1f, \"rbac_chain_ns\": %.1f, "
               "\"rbac_bindings\": %d}\n",
               allow, deny, chain, nbindings + 50);
    else
        printf("%d bindings: allow %.1f ns, deny %.1f ns, authz_allowed %.1f ns\n", nbindings + 50,
               allow, deny, chain);
    auth_user_unref(u);
    rbac_index_free(ix);
    return 0;
}
