/* backend_bridge.c - the linux-bridge backend: a Network is a Linux bridge
 * carrying gateway/prefix-length, in a network namespace of the
 * controller's own (default "ckube-networks", so the host's interfaces
 * are never touched).
 *
 * Everything goes over rtnetlink (libmnl) on one NETLINK_ROUTE socket
 * opened inside the namespace: a netlink socket belongs to the namespace
 * it was created in, so the rest of the process (and its other threads)
 * stays in its own namespace. Actual state is always read back from the
 * kernel: a bridge deleted or re-addressed by hand is seen as such on the
 * next observe.
 *
 * Each bridge is named "ckn-<hash>" (see netctl_device_name) and carries
 * the key in its alias, "ckube-network:<namespace>/<name>", which is how
 * list() finds bridges whose Network is gone.
 */
#include "backend.h"

#include <ckube/log.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NETNS_DIR "/run/netns"
#define ALIAS_PREFIX "ckube-network:"

typedef struct bridge_backend {
    netctl_backend base;
    pthread_mutex_t mu; /* one request/answer exchange at a time */
    struct mnl_socket *nl;
    unsigned portid;
    unsigned seq;
    char *netns;
} bridge_backend;

/* ---- the network namespace ---- */

struct ns_job {
    const char *path;      /* /run/netns/NAME */
    bool create;           /* unshare a new namespace and bind it to path */
    int ns_fd;             /* enter this one (when !create) */
    struct mnl_socket *nl; /* out: a NETLINK_ROUTE socket in the namespace */
    int err_no;
    const char *what;
};

/* Runs on a thread of its own, because setns/unshare change the calling
 * thread's namespace and that thread then ends. */
static void *ns_thread(void *arg)
{
    struct ns_job *j = arg;
    if (j->create) {
        if (unshare(CLONE_NEWNET) != 0) {
            j->err_no = errno, j->what = "unshare(CLONE_NEWNET)";
            return NULL;
        }
        if (mount("/proc/thread-self/ns/net", j->path, "none", MS_BIND, NULL) != 0) {
            j->err_no = errno, j->what = "bind-mounting the namespace";
            return NULL;
        }
    } else if (setns(j->ns_fd, CLONE_NEWNET) != 0) {
        j->err_no = errno, j->what = "setns";
        return NULL;
    }
    j->nl = mnl_socket_open(NETLINK_ROUTE);
    if (!j->nl) {
        j->err_no = errno, j->what = "opening a netlink socket";
        return NULL;
    }
    if (mnl_socket_bind(j->nl, 0, MNL_SOCKET_AUTOPID) != 0) {
        j->err_no = errno, j->what = "binding the netlink socket";
        mnl_socket_close(j->nl);
        j->nl = NULL;
    }
    return NULL;
}

static int run_ns_job(struct ns_job *j, char **err)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, ns_thread, j);
    if (rc != 0)
        return netctl_set_err(err, "cannot start a thread: %s", strerror(rc));
    pthread_join(t, NULL);
    if (j->err_no)
        return netctl_set_err(err, "network namespace %s: %s failed: %s", j->path, j->what,
                              strerror(j->err_no));
    return 0;
}

/* Opens a netlink socket inside namespace `name`, creating the namespace
 * the way `ip netns add` does when it does not exist. */
static struct mnl_socket *open_in_netns(const char *name, char **err)
{
    if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        netctl_set_err(err, "invalid network namespace name \"%s\"", name);
        return NULL;
    }
    char path[256];
    snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
    struct ns_job j = {.path = path};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        j.ns_fd = fd;
        int rc = run_ns_job(&j, err);
        close(fd);
        return rc == 0 ? j.nl : NULL;
    }
    if (errno != ENOENT) {
        netctl_set_err(err, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    if (mkdir(NETNS_DIR, 0755) != 0 && errno != EEXIST) {
        netctl_set_err(err, "cannot create " NETNS_DIR ": %s", strerror(errno));
        return NULL;
    }
    fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
    if (fd < 0) {
        netctl_set_err(err, "cannot create %s: %s", path, strerror(errno));
        return NULL;
    }
    close(fd);
    j.create = true;
    if (run_ns_job(&j, err) != 0) {
        umount2(path, MNT_DETACH);
        unlink(path);
        return NULL;
    }
    CKUBE_INFO("created network namespace %s", name);
    return j.nl;
}

/* ---- one netlink exchange ---- */

/* Sends `nlh` and runs `cb` over every answer until the kernel's ACK (or
 * the end of a dump). Called with mu held. Returns 0 or -errno. */
static int exchange(bridge_backend *b, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
    nlh->nlmsg_seq = ++b->seq;
    nlh->nlmsg_flags |= NLM_F_ACK;
    if (mnl_socket_sendto(b->nl, nlh, nlh->nlmsg_len) < 0)
        return -errno;
    char buf[MNL_SOCKET_BUFFER_SIZE];
    for (;;) {
        ssize_t n = mnl_socket_recvfrom(b->nl, buf, sizeof(buf));
        if (n < 0)
            return -errno;
        int rc = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, b->portid, cb, data);
        if (rc == MNL_CB_ERROR)
            return -errno;
        if (rc == MNL_CB_STOP)
            return 0;
    }
}

/* ---- reading links and addresses ---- */

typedef struct link_info {
    int index;
    char name[IFNAMSIZ];
    char alias[256];
    char kind[32];
    bool up;
} link_info;

typedef struct link_list {
    link_info *v;
    size_t n, cap;
} link_list;

static int link_attr_cb(const struct nlattr *a, void *data)
{
    const struct nlattr **tb = data;
    int type = mnl_attr_get_type(a);
    if (mnl_attr_type_valid(a, IFLA_MAX) >= 0)
        tb[type] = a;
    return MNL_CB_OK;
}

static int linkinfo_attr_cb(const struct nlattr *a, void *data)
{
    const struct nlattr **tb = data;
    if (mnl_attr_type_valid(a, IFLA_INFO_MAX) >= 0)
        tb[mnl_attr_get_type(a)] = a;
    return MNL_CB_OK;
}

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
    link_list *l = data;
    const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
    const struct nlattr *tb[IFLA_MAX + 1] = {0};
    mnl_attr_parse(nlh, sizeof(*ifm), link_attr_cb, tb);
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        link_info *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return MNL_CB_ERROR;
        l->v = v, l->cap = cap;
    }
    link_info *li = &l->v[l->n++];
    memset(li, 0, sizeof(*li));
    li->index = ifm->ifi_index;
    li->up = (ifm->ifi_flags & IFF_UP) != 0;
    if (tb[IFLA_IFNAME])
        snprintf(li->name, sizeof(li->name), "%s", mnl_attr_get_str(tb[IFLA_IFNAME]));
    if (tb[IFLA_IFALIAS])
        snprintf(li->alias, sizeof(li->alias), "%.*s",
                 (int)mnl_attr_get_payload_len(tb[IFLA_IFALIAS]),
                 (const char *)mnl_attr_get_payload(tb[IFLA_IFALIAS]));
    if (tb[IFLA_LINKINFO]) {
        const struct nlattr *info[IFLA_INFO_MAX + 1] = {0};
        mnl_attr_parse_nested(tb[IFLA_LINKINFO], linkinfo_attr_cb, info);
        if (info[IFLA_INFO_KIND])
            snprintf(li->kind, sizeof(li->kind), "%s", mnl_attr_get_str(info[IFLA_INFO_KIND]));
    }
    return MNL_CB_OK;
}

static int dump_links(bridge_backend *b, link_list *out)
{
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_GETLINK;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    memset(out, 0, sizeof(*out));
    return exchange(b, nlh, link_cb, out);
}

/* The bridge of `key`: by alias first, then by its expected name (an
 * alias cleared by hand must not make us create a second bridge). */
static const link_info *find_link(const link_list *l, const char *key)
{
    char dev[16];
    netctl_device_name(key, dev);
    const link_info *by_name = NULL;
    for (size_t i = 0; i < l->n; i++) {
        const link_info *li = &l->v[i];
        if (strncmp(li->alias, ALIAS_PREFIX, strlen(ALIAS_PREFIX)) == 0 &&
            strcmp(li->alias + strlen(ALIAS_PREFIX), key) == 0)
            return li;
        if (strcmp(li->name, dev) == 0)
            by_name = li;
    }
    return by_name;
}

struct addr_dump {
    int index;
    netctl_actual *out;
};

static int addr_attr_cb(const struct nlattr *a, void *data)
{
    const struct nlattr **tb = data;
    if (mnl_attr_type_valid(a, IFA_MAX) >= 0)
        tb[mnl_attr_get_type(a)] = a;
    return MNL_CB_OK;
}

static int addr_cb(const struct nlmsghdr *nlh, void *data)
{
    struct addr_dump *d = data;
    const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
    if ((int)ifa->ifa_index != d->index || ifa->ifa_scope == RT_SCOPE_LINK ||
        d->out->naddrs == NETCTL_MAX_ADDRS)
        return MNL_CB_OK;
    const struct nlattr *tb[IFA_MAX + 1] = {0};
    mnl_attr_parse(nlh, sizeof(*ifa), addr_attr_cb, tb);
    /* IFA_LOCAL is the interface's own address on IPv4 (IFA_ADDRESS is
     * the peer on point-to-point links); IPv6 has only IFA_ADDRESS. */
    const struct nlattr *a = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
    size_t alen = ifa->ifa_family == AF_INET ? 4 : 16;
    if (!a || mnl_attr_get_payload_len(a) != alen)
        return MNL_CB_OK;
    netaddr *na = &d->out->addrs[d->out->naddrs].addr;
    memset(na, 0, sizeof(*na));
    na->family = ifa->ifa_family;
    memcpy(na->addr, mnl_attr_get_payload(a), alen);
    d->out->addrs[d->out->naddrs].len = ifa->ifa_prefixlen;
    d->out->naddrs++;
    return MNL_CB_OK;
}

static int dump_addrs(bridge_backend *b, int index, netctl_actual *out)
{
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_GETADDR;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
    ifa->ifa_family = AF_UNSPEC;
    struct addr_dump d = {.index = index, .out = out};
    return exchange(b, nlh, addr_cb, &d);
}

/* observe() with mu held; *index receives the link's ifindex (0 = none)
 * and *is_bridge (may be NULL) whether it is a bridge at all: a link of
 * another kind under our name is reported down and without addresses, so
 * it never matches, and apply() replaces it. */
static int observe_locked(bridge_backend *b, const char *key, netctl_actual *out, int *index,
                          bool *is_bridge, char **err)
{
    memset(out, 0, sizeof(*out));
    *index = 0;
    if (is_bridge)
        *is_bridge = false;
    link_list l;
    int rc = dump_links(b, &l);
    if (rc < 0) {
        free(l.v);
        return netctl_set_err(err, "listing links in %s: %s", b->netns, strerror(-rc));
    }
    const link_info *li = find_link(&l, key);
    if (li) {
        out->exists = true;
        snprintf(out->device, sizeof(out->device), "%s", li->name);
        out->up = li->up;
        *index = li->index;
        if (is_bridge)
            *is_bridge = strcmp(li->kind, "bridge") == 0;
        rc = dump_addrs(b, li->index, out);
        if (rc < 0)
            netctl_set_err(err, "listing addresses of %s: %s", li->name, strerror(-rc));
    }
    bool not_bridge = li && strcmp(li->kind, "bridge") != 0;
    free(l.v);
    if (rc < 0)
        return -1;
    if (not_bridge) {
        out->up = false;
        out->naddrs = 0;
    }
    return 0;
}

static int br_observe(netctl_backend *base, const char *key, netctl_actual *out, char **err)
{
    bridge_backend *b = (bridge_backend *)base;
    int index;
    pthread_mutex_lock(&b->mu);
    int rc = observe_locked(b, key, out, &index, NULL, err);
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* ---- changing links and addresses ---- */

static int del_link(bridge_backend *b, int index)
{
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_DELLINK;
    nlh->nlmsg_flags = NLM_F_REQUEST;
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    ifm->ifi_index = index;
    int rc = exchange(b, nlh, NULL, NULL);
    return rc == -ENODEV ? 0 : rc;
}

static int new_bridge(bridge_backend *b, const char *dev)
{
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWLINK;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL;
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, dev);
    struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "bridge");
    mnl_attr_nest_end(nlh, info);
    return exchange(b, nlh, NULL, NULL);
}

/* Sets the alias and brings the link up (one RTM_NEWLINK on the index). */
static int set_link(bridge_backend *b, int index, const char *key)
{
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWLINK;
    nlh->nlmsg_flags = NLM_F_REQUEST;
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    ifm->ifi_index = index;
    ifm->ifi_flags = IFF_UP;
    ifm->ifi_change = IFF_UP;
    char alias[256];
    snprintf(alias, sizeof(alias), ALIAS_PREFIX "%s", key);
    mnl_attr_put_str(nlh, IFLA_IFALIAS, alias);
    return exchange(b, nlh, NULL, NULL);
}

static int change_addr(bridge_backend *b, int type, int index, const netaddr *a, int len)
{
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = (uint16_t)type;
    nlh->nlmsg_flags = NLM_F_REQUEST | (type == RTM_NEWADDR ? NLM_F_CREATE | NLM_F_REPLACE : 0);
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
    ifa->ifa_family = (uint8_t)a->family;
    ifa->ifa_prefixlen = (uint8_t)len;
    ifa->ifa_scope = RT_SCOPE_UNIVERSE;
    ifa->ifa_index = (uint32_t)index;
    size_t alen = a->family == AF_INET ? 4 : 16;
    mnl_attr_put(nlh, IFA_LOCAL, alen, a->addr);
    mnl_attr_put(nlh, IFA_ADDRESS, alen, a->addr);
    return exchange(b, nlh, NULL, NULL);
}

static int apply_locked(bridge_backend *b, const char *key, const netctl_want *want, char **err)
{
    netctl_actual cur;
    int index = 0, rc;
    bool is_bridge = false;
    if (observe_locked(b, key, &cur, &index, &is_bridge, err) != 0)
        return -1;
    char dev[16];
    netctl_device_name(key, dev);
    if (cur.exists && !is_bridge) {
        /* Something else (a dummy, a veth...) took our name: replace it. */
        CKUBE_WARN("%s in %s is a %s, not a bridge; replacing it", cur.device, b->netns,
                   "link of another kind");
        if ((rc = del_link(b, index)) < 0)
            return netctl_set_err(err, "deleting %s: %s", cur.device, strerror(-rc));
        cur.exists = false;
    }
    if (cur.exists && strcmp(cur.device, dev) != 0) {
        /* Found by alias under another name (renamed by hand): keep
         * using it; the alias is what identifies it. */
        snprintf(dev, sizeof(dev), "%.15s", cur.device);
    }
    if (!cur.exists) {
        if ((rc = new_bridge(b, dev)) < 0)
            return netctl_set_err(err, "creating bridge %s: %s", dev, strerror(-rc));
        if ((rc = observe_locked(b, key, &cur, &index, &is_bridge, err)) != 0)
            return -1;
        if (!cur.exists)
            return netctl_set_err(err, "bridge %s vanished right after it was created", dev);
    }
    if ((rc = set_link(b, index, key)) < 0)
        return netctl_set_err(err, "setting up bridge %s: %s", dev, strerror(-rc));
    /* Remove every global address but the wanted one, then add it. */
    bool have = false;
    for (size_t i = 0; i < cur.naddrs; i++) {
        if (cur.addrs[i].len == want->cidr.len &&
            netaddr_equal(&cur.addrs[i].addr, &want->gateway)) {
            have = true;
            continue;
        }
        rc = change_addr(b, RTM_DELADDR, index, &cur.addrs[i].addr, cur.addrs[i].len);
        if (rc < 0 && rc != -EADDRNOTAVAIL) {
            char a[NETADDR_STRLEN];
            return netctl_set_err(
                err, "removing %s from %s: %s",
                netaddr_format_prefix(&cur.addrs[i].addr, cur.addrs[i].len, a, sizeof(a)), dev,
                strerror(-rc));
        }
    }
    if (!have && (rc = change_addr(b, RTM_NEWADDR, index, &want->gateway, want->cidr.len)) < 0) {
        char a[NETADDR_STRLEN];
        return netctl_set_err(err, "adding %s to %s: %s",
                              netaddr_format_prefix(&want->gateway, want->cidr.len, a, sizeof(a)),
                              dev, strerror(-rc));
    }
    return 0;
}

static int br_apply(netctl_backend *base, const char *key, const netctl_want *want, char **err)
{
    bridge_backend *b = (bridge_backend *)base;
    pthread_mutex_lock(&b->mu);
    int rc = apply_locked(b, key, want, err);
    pthread_mutex_unlock(&b->mu);
    return rc;
}

static int br_remove(netctl_backend *base, const char *key, char **err)
{
    bridge_backend *b = (bridge_backend *)base;
    netctl_actual cur;
    int index = 0, rc = 0;
    pthread_mutex_lock(&b->mu);
    if (observe_locked(b, key, &cur, &index, NULL, err) != 0) {
        rc = -1;
    } else if (cur.exists) {
        int e = del_link(b, index);
        if (e < 0)
            rc = netctl_set_err(err, "deleting bridge %s: %s", cur.device, strerror(-e));
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

static int br_list(netctl_backend *base, char ***keys, size_t *n, char **err)
{
    bridge_backend *b = (bridge_backend *)base;
    link_list l;
    pthread_mutex_lock(&b->mu);
    int rc = dump_links(b, &l);
    pthread_mutex_unlock(&b->mu);
    if (rc < 0) {
        free(l.v);
        return netctl_set_err(err, "listing links in %s: %s", b->netns, strerror(-rc));
    }
    char **out = calloc(l.n ? l.n : 1, sizeof(*out));
    size_t cnt = 0;
    for (size_t i = 0; out && i < l.n; i++)
        if (strncmp(l.v[i].alias, ALIAS_PREFIX, strlen(ALIAS_PREFIX)) == 0)
            out[cnt++] = strdup(l.v[i].alias + strlen(ALIAS_PREFIX));
    free(l.v);
    if (!out)
        return netctl_set_err(err, "out of memory");
    *keys = out;
    *n = cnt;
    return 0;
}

static void br_free(netctl_backend *base)
{
    bridge_backend *b = (bridge_backend *)base;
    mnl_socket_close(b->nl);
    pthread_mutex_destroy(&b->mu);
    free(b->netns);
    free(b);
}

static const netctl_backend_ops bridge_ops = {
    .name = "linux-bridge",
    .observe = br_observe,
    .apply = br_apply,
    .remove = br_remove,
    .list = br_list,
    .free = br_free,
};

netctl_backend *netctl_backend_bridge_new(const char *netns, char **err)
{
    struct mnl_socket *nl = open_in_netns(netns, err);
    if (!nl)
        return NULL;
    bridge_backend *b = calloc(1, sizeof(*b));
    if (!b) {
        mnl_socket_close(nl);
        netctl_set_err(err, "out of memory");
        return NULL;
    }
    b->base.ops = &bridge_ops;
    b->nl = nl;
    b->portid = mnl_socket_get_portid(nl);
    b->seq = (unsigned)time(NULL);
    b->netns = strdup(netns);
    pthread_mutex_init(&b->mu, NULL);
    return &b->base;
}
