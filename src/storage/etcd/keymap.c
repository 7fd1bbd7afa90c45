/* keymap.c - ckube's internal storage keys to kube-apiserver's etcd
 * layout and back (keymap.h).
 *
 * How kube-apiserver (1.31) names a key in etcd:
 *
 * - The etcd3 store puts every key under path.Join("/", --etcd-prefix)
 *   plus "/" (staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go,
 *   New: pathPrefix), hence etcd_keymap_new's normalisation.
 * - The generic registry's keys are RESOURCE_PREFIX/NAMESPACE/NAME or
 *   RESOURCE_PREFIX/NAME (staging/.../registry/generic/registry/store.go,
 *   CompleteWithOptions: NamespaceKeyFunc, NoNamespaceKeyFunc), names
 *   being path segments (no '/', no '%', not "." or "..").
 * - kube-apiserver's own types get RESOURCE_PREFIX from
 *   DefaultStorageFactory.ResourcePrefix (staging/.../server/storage/
 *   storage_factory.go): the lowercased resource name, without the group,
 *   unless pkg/kubeapiserver/default_storage_factory_builder.go's
 *   SpecialDefaultResourcePrefixes says otherwise:
 *       core/replicationcontrollers          controllers
 *       core/endpoints                       services/endpoints
 *       core/nodes                           minions
 *       core/services                        services/specs
 *       extensions/ingresses                 ingress
 *       networking.k8s.io/ingresses          ingress
 *   Resources of two groups that AddCohabitatingResources ties together
 *   share the first's prefix: core/events and events.k8s.io/events are
 *   both "events" (apps and extensions deployments, daemonsets,
 *   replicasets; networking and extensions networkpolicies and
 *   ingresses; core and extensions replicationcontrollers).
 * - apiextensions-apiserver and kube-aggregator apply their etcd options
 *   with EtcdOptions.ApplyTo, whose SimpleStorageFactory.ResourcePrefix is
 *   GROUP/RESOURCE (staging/.../server/options/etcd.go): CRDs live under
 *   "apiextensions.k8s.io/customresourcedefinitions", APIServices under
 *   "apiregistration.k8s.io/apiservices". Custom resources use
 *   CRDRESTOptionsGetter (apiextensions-apiserver/pkg/apiserver/
 *   customresource_handler.go), also GROUP/RESOURCE: "example.com/widgets".
 *
 * Two rules keep the mapping a bijection. A built-in type's etcd prefix
 * never holds a dot in its first segment (resource names have none) and a
 * custom resource's always does (a CRD's group must contain one: upstream
 * validation, and crd.c's); so an etcd key whose first segment has a dot
 * is a GROUP/RESOURCE key, mapped as it is, and any other is looked up in
 * the table by its etcd prefix. And no row's etcd prefix is another's, or
 * a segment-wise prefix of another's (as "services" would be of
 * "services/specs"), so that lookup finds one row at most. test_keymap
 * checks both over the table. A CRD's group cannot be "core", "apps" or
 * any built-in group without a dot; one in a dotted built-in group with a
 * built-in plural (rbac.authorization.k8s.io/roles) would have the same
 * internal key as the built-in type already, so it maps as the built-in
 * does; with another plural it is GROUP/RESOURCE, as upstream stores it.
 *
 * events.k8s.io/v1 Events are core Events in ckube's storage too
 * (registry/events/events.c: their internal keys are core's), so they
 * need no row of their own. */
#include "storage/etcd/keymap.h"

#include <string.h>

#include "common/xalloc.h"

#define ROOT ETCD_KEYMAP_INTERNAL_ROOT
#define ROOT_LEN (sizeof ROOT - 1)

/* The most segments any key has after its root: GROUP/RESOURCE/NS/NAME
 * inside, services/specs/NS/NAME in etcd. */
#define MAX_SEGS 4

/* Every built-in type ckube serves and stores (the review types of
 * registry/authorization are never stored), and nothing else: an etcd key
 * of a type ckube does not serve is not ours. A type added to a registry
 * install table needs its row here (test_keymap fails until it has one),
 * with upstream's prefix from the list above: a plain resource name
 * unless SpecialDefaultResourcePrefixes names it. */
static const etcd_keymap_resource RESOURCES[] = {
    {"core", "namespaces", "namespaces", false},
    {"core", "configmaps", "configmaps", true},
    {"core", "secrets", "secrets", true},
    {"core", "serviceaccounts", "serviceaccounts", true},
    {"core", "services", "services/specs", true},
    {"core", "endpoints", "services/endpoints", true},
    {"core", "pods", "pods", true},
    {"core", "nodes", "minions", false},
    {"core", "events", "events", true},
    {"apps", "deployments", "deployments", true},
    {"apps", "replicasets", "replicasets", true},
    {"coordination.k8s.io", "leases", "leases", true},
    {"rbac.authorization.k8s.io", "roles", "roles", true},
    {"rbac.authorization.k8s.io", "rolebindings", "rolebindings", true},
    {"rbac.authorization.k8s.io", "clusterroles", "clusterroles", false},
    {"rbac.authorization.k8s.io", "clusterrolebindings", "clusterrolebindings", false},
    {"admissionregistration.k8s.io", "mutatingwebhookconfigurations",
     "mutatingwebhookconfigurations", false},
    {"admissionregistration.k8s.io", "validatingwebhookconfigurations",
     "validatingwebhookconfigurations", false},
    {"apiextensions.k8s.io", "customresourcedefinitions",
     "apiextensions.k8s.io/customresourcedefinitions", false},
    {"apiregistration.k8s.io", "apiservices", "apiregistration.k8s.io/apiservices", false},
};
#define NRESOURCES (sizeof RESOURCES / sizeof *RESOURCES)

const etcd_keymap_resource *etcd_keymap_resources(size_t *n)
{
    *n = NRESOURCES;
    return RESOURCES;
}

/* ---- the prefix ----------------------------------------------------------- */

etcd_keymap *etcd_keymap_new(const char *etcd_prefix)
{
    const char *p = etcd_prefix ? etcd_prefix : "";
    size_t n = strlen(p);
    /* Go's path.Clean of "/" + p, then a trailing '/': out[0..w) is
     * always "/" or "/seg/.../seg/". At most 1 + n + 1 bytes. */
    char *out = xmalloc(n + 3);
    size_t w = 0;
    out[w++] = '/';
    for (size_t i = 0; i < n;) {
        if (p[i] == '/') {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && p[j] != '/')
            j++;
        size_t len = j - i;
        if (len == 1 && p[i] == '.') {
            /* "." names the directory itself */
        } else if (len == 2 && p[i] == '.' && p[i + 1] == '.') {
            if (w > 1) { /* drop the last segment; ".." of "/" is "/" */
                w--;
                while (out[w - 1] != '/')
                    w--;
            }
        } else {
            memcpy(out + w, p + i, len);
            w += len;
            out[w++] = '/';
        }
        i = j;
    }
    out[w] = 0;
    etcd_keymap *m = xmalloc(sizeof *m);
    m->prefix = out;
    m->prefix_len = w;
    return m;
}

void etcd_keymap_free(etcd_keymap *m)
{
    if (!m)
        return;
    free(m->prefix);
    free(m);
}

/* ---- segments ------------------------------------------------------------- */

typedef struct seg {
    const char *p;
    size_t n;
} seg;

/* A segment any Kubernetes name, namespace, group or resource could be:
 * upstream's IsValidPathSegmentName (which its key functions enforce on
 * names), and not empty. '/' never gets here; callers refuse NUL. */
static bool seg_ok(seg s)
{
    if (s.n == 0 || (s.n == 1 && s.p[0] == '.') || (s.n == 2 && s.p[0] == '.' && s.p[1] == '.'))
        return false;
    return !memchr(s.p, '%', s.n);
}

static bool seg_is(seg s, const char *str, size_t n)
{
    return s.n == n && memcmp(s.p, str, n) == 0;
}

static bool seg_eq(seg s, const char *str)
{
    return seg_is(s, str, strlen(str));
}

static bool seg_dotted(seg s)
{
    return memchr(s.p, '.', s.n) != NULL;
}

/* Splits p[0..n) at each '/' into out (at most MAX_SEGS); *dir tells
 * whether it ends in '/' (a prefix, not a key). The count, or -1 when a
 * segment is not seg_ok (so "a//b" and "/a" fail) or there are too many. */
static int split(const char *p, size_t n, seg *out, bool *dir)
{
    int k = 0;
    *dir = false;
    for (size_t i = 0; i < n;) {
        const char *slash = memchr(p + i, '/', n - i);
        size_t end = slash ? (size_t)(slash - p) : n;
        if (k == MAX_SEGS)
            return -1;
        out[k] = (seg){p + i, end - i};
        if (!seg_ok(out[k++]))
            return -1;
        if (!slash)
            break;
        i = end + 1;
        if (i == n)
            *dir = true;
    }
    return k;
}

/* ---- the table -------------------------------------------------------------- */

static const etcd_keymap_resource *by_type(seg group, seg resource)
{
    for (size_t i = 0; i < NRESOURCES; i++)
        if (seg_eq(group, RESOURCES[i].group) && seg_eq(resource, RESOURCES[i].resource))
            return &RESOURCES[i];
    return NULL;
}

/* The row whose etcd prefix (one or two segments) starts s[0..k), and in
 * *used how many segments it took. */
static const etcd_keymap_resource *by_etcd(const seg *s, int k, int *used)
{
    for (size_t i = 0; i < NRESOURCES; i++) {
        const char *e = RESOURCES[i].etcd, *slash = strchr(e, '/');
        if (!slash && seg_eq(s[0], e)) {
            *used = 1;
            return &RESOURCES[i];
        }
        if (slash && k >= 2 && seg_is(s[0], e, (size_t)(slash - e)) && seg_eq(s[1], slash + 1)) {
            *used = 2;
            return &RESOURCES[i];
        }
    }
    return NULL;
}

/* Whether the row's etcd prefix is its own GROUP/RESOURCE (so its etcd
 * keys are found by the dotted-group rule, not by by_etcd). */
static bool row_is_group_resource(const etcd_keymap_resource *r)
{
    size_t g = strlen(r->group);
    return !strncmp(r->etcd, r->group, g) && r->etcd[g] == '/' &&
           !strcmp(r->etcd + g + 1, r->resource);
}

/* Whether GROUP/RESOURCE, in no row, is a custom resource's: every
 * dotted GROUP/RESOURCE upstream writes that is not a custom resource's
 * (CRDs, APIServices) is a row. */
static bool custom(seg group)
{
    return seg_dotted(group);
}

enum { CLUSTER = 1, NAMESPACED = 2, EITHER = 3 };

static int scope_of(const etcd_keymap_resource *r)
{
    return r->namespaced ? NAMESPACED : CLUSTER;
}

/* Whether ntail segments after a type's fit its scope: an object is NAME
 * (cluster) or NS/NAME (namespaced); a prefix (dir) is the type's own or,
 * namespaced, a namespace's. A custom resource's key does not say its
 * scope: EITHER. */
static bool tail_fits(int scope, int ntail, bool dir)
{
    if (dir)
        return ntail == 0 || (ntail == 1 && (scope & NAMESPACED));
    return (ntail == 1 && (scope & CLUSTER)) || (ntail == 2 && (scope & NAMESPACED));
}

#define SEG(str) ((seg){(str), strlen(str)})

/* The parts one after the other, then "/" + each of tail, then "/" if
 * dir: malloc'd and NUL-terminated. */
static char *build(const seg *parts, int nparts, const seg *tail, int ntail, bool dir)
{
    size_t len = dir ? 1 : 0;
    for (int i = 0; i < nparts; i++)
        len += parts[i].n;
    for (int i = 0; i < ntail; i++)
        len += 1 + tail[i].n;
    char *out = xmalloc(len + 1), *w = out;
    for (int i = 0; i < nparts; i++) {
        memcpy(w, parts[i].p, parts[i].n);
        w += parts[i].n;
    }
    for (int i = 0; i < ntail; i++) {
        *w++ = '/';
        memcpy(w, tail[i].p, tail[i].n);
        w += tail[i].n;
    }
    if (dir)
        *w++ = '/';
    *w = 0;
    return out;
}

/* ---- the two directions --------------------------------------------------- */

char *etcd_key_to_etcd(const etcd_keymap *m, const char *internal_key)
{
    if (!m || !internal_key || strncmp(internal_key, ROOT, ROOT_LEN) != 0)
        return NULL;
    seg prefix = {m->prefix, m->prefix_len}, rest = SEG(internal_key + ROOT_LEN);
    if (rest.n == 0) /* the whole store */
        return build(&prefix, 1, NULL, 0, false);
    seg s[MAX_SEGS];
    bool dir;
    int k = split(rest.p, rest.n, s, &dir);
    if (k < 2) /* malformed, or a group alone */
        return NULL;
    const etcd_keymap_resource *r = by_type(s[0], s[1]);
    if (r) {
        if (!tail_fits(scope_of(r), k - 2, dir))
            return NULL;
        seg parts[] = {prefix, SEG(r->etcd)};
        return build(parts, 2, s + 2, k - 2, dir);
    }
    if (!custom(s[0]) || !tail_fits(EITHER, k - 2, dir))
        return NULL;
    seg parts[] = {prefix, rest}; /* GROUP/RESOURCE/... as it is */
    return build(parts, 2, NULL, 0, false);
}

char *etcd_key_from_etcd(const etcd_keymap *m, const char *etcd_key, size_t len)
{
    if (!m || !etcd_key || len <= m->prefix_len ||
        memcmp(etcd_key, m->prefix, m->prefix_len) != 0 || memchr(etcd_key, 0, len))
        return NULL;
    seg rest = {etcd_key + m->prefix_len, len - m->prefix_len};
    seg s[MAX_SEGS];
    bool dir;
    int k = split(rest.p, rest.n, s, &dir);
    if (k < 2 || dir) /* an object's key has a type and a name */
        return NULL;
    if (seg_dotted(s[0])) {
        /* GROUP/RESOURCE: a row stored so, or a custom resource; a row
         * stored elsewhere never is (coordination.k8s.io/leases is not
         * upstream's key for a Lease, nor ours). */
        const etcd_keymap_resource *r = by_type(s[0], s[1]);
        bool ok = r ? row_is_group_resource(r) && tail_fits(scope_of(r), k - 2, false)
                    : custom(s[0]) && tail_fits(EITHER, k - 2, false);
        seg parts[] = {SEG(ROOT), rest};
        return ok ? build(parts, 2, NULL, 0, false) : NULL;
    }
    int used = 0;
    const etcd_keymap_resource *r = by_etcd(s, k, &used);
    if (!r || !tail_fits(scope_of(r), k - used, false))
        return NULL;
    seg parts[] = {SEG(ROOT), SEG(r->group), SEG("/"), SEG(r->resource)};
    return build(parts, 4, s + used, k - used, false);
}
