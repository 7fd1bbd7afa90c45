/* backend_memory.c - the memory backend: networks as entries of a table.
 *
 * For tests and for users without CAP_NET_ADMIN. With a state file the
 * table is read from the file before every operation and written back (to
 * a temporary file, fsync'd and renamed over the old one) after every
 * change, so it behaves like an external system that outlives the
 * controller and that several replicas (or a user) share: a Network deleted while
 * the controller was down still has its entry removed by the finalizer
 * when the controller comes back. The file is JSON:
 *
 *   {"networks": {"default/example-network":
 *       {"device": "ckn-0f1e2d3c", "up": true, "addresses": ["192.168.0.1/16"]}}}
 */
#include "backend.h"

#include <ckube/log.h>

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct memory_backend {
    netctl_backend base;
    pthread_mutex_t mu;
    json_t *nets; /* key -> {"device", "up", "addresses"}; guarded by mu */
    char *state_file;
} memory_backend;

/* Writes the table to the state file. Called with mu held. */
static int save(memory_backend *m, char **err)
{
    if (!m->state_file)
        return 0;
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp", m->state_file) < 0)
        return netctl_set_err(err, "out of memory");
    json_t *doc = json_pack("{s:O}", "networks", m->nets);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = -1;
    if (fd < 0) {
        netctl_set_err(err, "cannot write %s: %s", tmp, strerror(errno));
    } else if (json_dumpfd(doc, fd, JSON_INDENT(2) | JSON_SORT_KEYS) != 0 || fsync(fd) != 0) {
        netctl_set_err(err, "cannot write %s: %s", tmp, strerror(errno));
        close(fd);
    } else if (close(fd) != 0 || rename(tmp, m->state_file) != 0) {
        netctl_set_err(err, "cannot replace %s: %s", m->state_file, strerror(errno));
    } else {
        rc = 0;
    }
    json_decref(doc);
    free(tmp);
    return rc;
}

/* With a state file, the file is the truth: it is read again before every
 * operation (it is small), so a second replica that takes over, or a
 * user editing the file by hand, is seen. Called with mu held; on a read
 * error the table in memory is kept. */
static void reload(memory_backend *m)
{
    if (!m->state_file)
        return;
    json_t *doc = json_load_file(m->state_file, 0, NULL);
    json_t *n = json_object_get(doc, "networks");
    if (json_is_object(n)) {
        json_decref(m->nets);
        m->nets = json_incref(n);
    } else if (!doc && access(m->state_file, F_OK) != 0) {
        json_object_clear(m->nets); /* the file was removed: nothing exists */
    }
    json_decref(doc);
}

static int mem_observe(netctl_backend *b, const char *key, netctl_actual *out, char **err)
{
    memory_backend *m = (memory_backend *)b;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&m->mu);
    reload(m);
    json_t *n = json_object_get(m->nets, key);
    int rc = 0;
    if (n) {
        out->exists = true;
        snprintf(out->device, sizeof(out->device), "%s",
                 json_is_string(json_object_get(n, "device"))
                     ? json_string_value(json_object_get(n, "device"))
                     : "");
        out->up = json_is_true(json_object_get(n, "up"));
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(n, "addresses"), i, a)
        {
            netaddr_prefix p;
            /* Stored as gateway/len: parse the address and the length
             * apart (a host address has host bits set by design). */
            const char *s = json_string_value(a);
            const char *slash = s ? strchr(s, '/') : NULL;
            if (!slash || out->naddrs == NETCTL_MAX_ADDRS)
                continue;
            char ip[NETADDR_STRLEN];
            snprintf(ip, sizeof(ip), "%.*s", (int)(slash - s), s);
            if (netaddr_parse_ip(ip, &p.net, NULL) != 0)
                continue;
            out->addrs[out->naddrs].addr = p.net;
            out->addrs[out->naddrs].len = atoi(slash + 1);
            out->naddrs++;
        }
    }
    pthread_mutex_unlock(&m->mu);
    (void)err;
    return rc;
}

static int mem_apply(netctl_backend *b, const char *key, const netctl_want *want, char **err)
{
    memory_backend *m = (memory_backend *)b;
    char dev[16], addr[NETADDR_STRLEN];
    netctl_device_name(key, dev);
    netaddr_format_prefix(&want->gateway, want->cidr.len, addr, sizeof(addr));
    pthread_mutex_lock(&m->mu);
    reload(m);
    json_t *old = json_deep_copy(json_object_get(m->nets, key));
    json_object_set_new(m->nets, key,
                        json_pack("{s:s, s:b, s:[s]}", "device", dev, "up", 1, "addresses", addr));
    int rc = save(m, err);
    if (rc != 0) { /* keep memory and file in step: undo */
        if (old)
            json_object_set(m->nets, key, old);
        else
            json_object_del(m->nets, key);
    }
    pthread_mutex_unlock(&m->mu);
    json_decref(old);
    return rc;
}

static int mem_remove(netctl_backend *b, const char *key, char **err)
{
    memory_backend *m = (memory_backend *)b;
    pthread_mutex_lock(&m->mu);
    reload(m);
    int rc = 0;
    json_t *old = json_incref(json_object_get(m->nets, key));
    if (old && json_object_del(m->nets, key) == 0 && (rc = save(m, err)) != 0)
        json_object_set(m->nets, key, old);
    pthread_mutex_unlock(&m->mu);
    json_decref(old);
    return rc;
}

static int mem_list(netctl_backend *b, char ***keys, size_t *n, char **err)
{
    memory_backend *m = (memory_backend *)b;
    pthread_mutex_lock(&m->mu);
    reload(m);
    size_t cnt = json_object_size(m->nets);
    char **out = calloc(cnt ? cnt : 1, sizeof(*out));
    const char *k;
    json_t *v;
    size_t i = 0;
    json_object_foreach(m->nets, k, v)
    {
        (void)v;
        out[i++] = strdup(k);
    }
    pthread_mutex_unlock(&m->mu);
    *keys = out;
    *n = i;
    (void)err;
    return 0;
}

static void mem_free(netctl_backend *b)
{
    memory_backend *m = (memory_backend *)b;
    json_decref(m->nets);
    pthread_mutex_destroy(&m->mu);
    free(m->state_file);
    free(m);
}

static const netctl_backend_ops memory_ops = {
    .name = "memory",
    .observe = mem_observe,
    .apply = mem_apply,
    .remove = mem_remove,
    .list = mem_list,
    .free = mem_free,
};

netctl_backend *netctl_backend_memory_new(const char *state_file, char **err)
{
    json_t *nets = NULL;
    if (state_file) {
        json_error_t je;
        json_t *doc = json_load_file(state_file, 0, &je);
        if (!doc && access(state_file, F_OK) == 0) {
            netctl_set_err(err, "cannot load memory backend state %s: %s (line %d)", state_file,
                           je.text, je.line);
            return NULL;
        }
        json_t *n = json_object_get(doc, "networks");
        if (doc && !json_is_object(n)) {
            json_decref(doc);
            netctl_set_err(err, "memory backend state %s has no \"networks\" object", state_file);
            return NULL;
        }
        nets = json_incref(n);
        json_decref(doc);
    }
    memory_backend *m = calloc(1, sizeof(*m));
    if (!m) {
        json_decref(nets);
        netctl_set_err(err, "out of memory");
        return NULL;
    }
    m->base.ops = &memory_ops;
    m->nets = nets ? nets : json_object();
    m->state_file = state_file ? strdup(state_file) : NULL;
    pthread_mutex_init(&m->mu, NULL);
    CKUBE_V(1, "memory backend: %zu networks%s%s", json_object_size(m->nets),
            state_file ? " from " : "", state_file ? state_file : "");
    return &m->base;
}
