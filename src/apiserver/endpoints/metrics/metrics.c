/* metrics.c - the server's Prometheus metrics at /metrics, under
 * kube-apiserver's names so existing dashboards and alerts read them:
 *
 *   apiserver_request_total{verb,dry_run,group,version,resource,
 *       subresource,scope,component,code}            counter
 *   apiserver_request_duration_seconds{verb,dry_run,group,version,
 *       resource,subresource,scope,component}        histogram (not WATCH)
 *   apiserver_longrunning_requests{verb,group,version,resource,
 *       subresource,scope,component}                 gauge (watches open)
 *   apiserver_storage_objects{resource}              gauge ("configmaps",
 *                                                    "deployments.apps")
 *   process_cpu_seconds_total, process_resident_memory_bytes,
 *   process_virtual_memory_bytes, process_open_fds, process_start_time_seconds
 *   ckube_storage_{commits,failed_commits,writes,commit_seconds,checkpoints}_total,
 *   ckube_storage_largest_commit_writes, ckube_storage_revision,
 *   ckube_storage_compacted_revision     the group committer's own
 *   apiserver_admission_{webhook,step,controller}_*  admission's own (registered in
 *                                        this registry by
 *                                        admission_set_metrics)
 *
 * Verbs as upstream reports them: GET, LIST, WATCH, POST, PUT, PATCH,
 * APPLY (a server-side apply), DELETE, DELETECOLLECTION; scope is
 * "resource" (one named object), "namespace" or "cluster" (collections),
 * "" for non-resource paths.
 *
 * Cost on the request path: the children (time series) are looked up in a
 * small per-loop cache keyed by the label values, so a request takes no
 * lock; the counter and histogram updates are relaxed atomics. A request
 * is counted when its context is freed, which for every kind of answer
 * (buffered, streamed list, watch) is after its last byte was queued. */
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apiserver/endpoints/metrics/metrics.h"
#include "ckube/metrics.h"
#include "common/text.h"
#include "common/xalloc.h"

struct apimetrics {
    ckube_metrics_registry *reg;
    ckube_metric_family *requests, *durations, *longrunning, *objects;
    ckube_metric_family *cpu, *rss, *vsize, *fds, *start_time;
    ckube_metric_family *commits, *failed_commits, *writes, *commit_seconds, *checkpoints,
        *wal_pages, *largest, *rev, *compacted;
    ckube_metrics_collector *collector;
    apiserver *srv;
    double started; /* wall clock, seconds */
};

/* ---- a per-loop cache of children ------------------------------------ */

#define MCACHE_SLOTS 128
#define MCACHE_KEY 256

typedef struct mcache_entry {
    uint64_t hash;
    size_t len;
    char key[MCACHE_KEY];
    ckube_metric *count, *duration;
} mcache_entry;

struct apimetrics_cache {
    mcache_entry slot[MCACHE_SLOTS];
};

/* ---- labels -------------------------------------------------------- */

typedef struct req_labels {
    const char *verb, *dry_run, *group, *version, *resource, *subresource, *scope;
    char code[8];
} req_labels;

static const char *reported_verb(const req_ctx *rc)
{
    const char *v = rc->ri.verb;
    if (!rc->ri.is_resource || !*v) /* discovery, /version, /openapi, /metrics */
        return rc->method ? rc->method : "GET";
    if (!strcmp(v, "get"))
        return "GET";
    if (!strcmp(v, "list"))
        return "LIST";
    if (!strcmp(v, "watch"))
        return "WATCH";
    if (!strcmp(v, "create"))
        return "POST";
    if (!strcmp(v, "update"))
        return "PUT";
    if (!strcmp(v, "patch"))
        return rc->is_apply ? "APPLY" : "PATCH";
    if (!strcmp(v, "delete"))
        return "DELETE";
    if (!strcmp(v, "deletecollection"))
        return "DELETECOLLECTION";
    return "GET";
}

/* (rc's query is still there: req_ctx_free counts before it clears it) */
static void labels_of(req_ctx *rc, req_labels *l)
{
    const request_info *ri = &rc->ri;
    const char *dry = rc->method && strcmp(rc->method, "GET") ? req_query(rc, "dryRun") : NULL;
    l->verb = reported_verb(rc);
    l->dry_run = dry && !strcmp(dry, "All") ? "All" : "";
    bool res = ri->is_resource;
    l->group = res ? ri->group : "";
    l->version = res ? ri->version : "";
    l->resource = res ? ri->resource : "";
    l->subresource = res ? ri->subresource : "";
    l->scope = !res ? "" : *ri->name ? "resource" : *ri->ns ? "namespace" : "cluster";
    /* an HTTP status by hand: snprintf's format parsing showed in a
     * create's profile */
    if (rc->code >= 100 && rc->code <= 999) {
        l->code[0] = (char)('0' + rc->code / 100);
        l->code[1] = (char)('0' + rc->code / 10 % 10);
        l->code[2] = (char)('0' + rc->code % 10);
        l->code[3] = '\0';
    } else {
        snprintf(l->code, sizeof l->code, "%d", rc->code);
    }
}

/* The cache key: every label value, NUL-separated. 0 when it does not
 * fit (then the registry is asked directly). */
static size_t key_of(const req_labels *l, char *buf)
{
    const char *parts[] = {l->verb,     l->dry_run,     l->group, l->version,
                           l->resource, l->subresource, l->scope, l->code};
    size_t n = 0;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        size_t len = strlen(parts[i]);
        if (n + len + 1 > MCACHE_KEY)
            return 0;
        memcpy(buf + n, parts[i], len + 1);
        n += len + 1;
    }
    return n;
}

/* The counter and histogram children of a request's labels. */
static void children(apimetrics *m, apimetrics_cache *cache, const req_labels *l,
                     ckube_metric **count, ckube_metric **duration)
{
    char key[MCACHE_KEY];
    size_t len = key_of(l, key);
    mcache_entry *e = NULL;
    uint64_t h = 0;
    if (len && cache) {
        h = ckube__fnv1a(CKUBE__FNV1A_INIT, key, len);
        e = &cache->slot[h % MCACHE_SLOTS];
        if (e->hash == h && e->len == len && !memcmp(e->key, key, len)) {
            *count = e->count;
            *duration = e->duration;
            return;
        }
    }
    const char *cv[] = {l->verb,        l->dry_run, l->group,    l->version, l->resource,
                        l->subresource, l->scope,   "apiserver", l->code};
    *count = ckube_metric_with(m->requests, cv);
    const char *dv[] = {l->verb,     l->dry_run,     l->group, l->version,
                        l->resource, l->subresource, l->scope, "apiserver"};
    *duration = ckube_metric_with(m->durations, dv);
    if (e && *count && *duration) {
        e->hash = h;
        e->len = len;
        memcpy(e->key, key, len);
        e->count = *count;
        e->duration = *duration;
    }
}

void apimetrics_request_done(req_ctx *rc)
{
    apimetrics *m = rc->srv ? rc->srv->metrics : NULL;
    if (!m || !rc->code)
        return;
    req_labels l;
    labels_of(rc, &l);
    ckube_metric *count, *duration;
    children(m, rc->lp ? rc->lp->mcache : NULL, &l, &count, &duration);
    ckube_counter_inc(count);
    if (rc->longrunning_gauge) {
        ckube_gauge_dec(rc->longrunning_gauge);
        return; /* upstream's latency histogram leaves watches out */
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    ckube_histogram_observe(duration, (double)(now - rc->start_ns) / 1e9);
}

void apimetrics_watch_started(req_ctx *rc)
{
    apimetrics *m = rc->srv ? rc->srv->metrics : NULL;
    if (!m || rc->longrunning_gauge)
        return;
    req_labels l;
    labels_of(rc, &l);
    const char *v[] = {"WATCH",       l.group, l.version,  l.resource,
                       l.subresource, l.scope, "apiserver"};
    rc->longrunning_gauge = ckube_metric_with(m->longrunning, v);
    ckube_gauge_inc(rc->longrunning_gauge);
}

/* ---- collected at render time ------------------------------------------ */

/* Brings a counter child up to a total kept elsewhere (collectors run one
 * at a time, so the difference is ours to add). */
static void counter_to(ckube_metric *c, double total)
{
    double d = total - ckube_metric_value(c);
    if (d > 0)
        ckube_counter_add(c, d);
}

/* apiserver_storage_objects: one series per resource (versions share a
 * bucket); a resource whose CRD went keeps its last series at 0. */
static void collect_objects(apimetrics *m)
{
    size_t n;
    resource_type **types = registry_list(m->srv->registry, &n);
    for (size_t i = 0; i < n; i++) {
        const resource_type *t = types[i];
        if (t->review)
            continue; /* never stored */
        char name[300], prefix[300];
        snprintf(name, sizeof name, "%s%s%s", t->resource, *t->group ? "." : "", t->group);
        resource_type_key_prefix(t, prefix, sizeof prefix);
        const char *v[] = {name};
        ckube_gauge_set(ckube_metric_with(m->objects, v),
                        (double)cacher_count(m->srv->cache, prefix));
    }
    registry_list_free(types, n);
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

/* process_*: from /proc/self/stat (fields 14-15 CPU ticks, 23 vsize, 24
 * RSS pages), as the Prometheus Go client reads them. */
static void collect_process(apimetrics *m)
{
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        char buf[1024];
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        buf[len] = '\0';
        fclose(f);
        /* fields after the command, which ends at the last ')' */
        char *p = strrchr(buf, ')');
        unsigned long long utime = 0, stime = 0, vsize = 0, rss = 0;
        if (p && sscanf(p + 2,
                        "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d "
                        "%*d %*d %*d %*u %llu %llu",
                        &utime, &stime, &vsize, &rss) == 4) {
            double tick = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
            counter_to(ckube_metric_with(m->cpu, NULL), (double)(utime + stime) / tick);
            ckube_gauge_set(ckube_metric_with(m->vsize, NULL), (double)vsize);
            ckube_gauge_set(ckube_metric_with(m->rss, NULL), (double)rss * page);
        }
    }
    int fds = open_fds();
    if (fds >= 0)
        ckube_gauge_set(ckube_metric_with(m->fds, NULL), fds);
    ckube_gauge_set(ckube_metric_with(m->start_time, NULL), m->started);
}

/* ckube_storage_*: the group committer's counters (commits / writes is
 * the mean group size; commit seconds include the fsync). */
static void collect_storage(apimetrics *m)
{
    storage_stats st;
    storage_get_stats(m->srv->st, &st);
    counter_to(ckube_metric_with(m->commits, NULL), (double)st.commits);
    counter_to(ckube_metric_with(m->failed_commits, NULL), (double)st.failed_commits);
    counter_to(ckube_metric_with(m->writes, NULL), (double)st.ops);
    counter_to(ckube_metric_with(m->commit_seconds, NULL), (double)st.commit_ns / 1e9);
    counter_to(ckube_metric_with(m->checkpoints, (const char *[]){"checkpointer"}),
               (double)st.checkpoints);
    counter_to(ckube_metric_with(m->checkpoints, (const char *[]){"writer"}),
               (double)st.inline_checkpoints);
    ckube_gauge_set(ckube_metric_with(m->wal_pages, NULL), (double)st.wal_pages);
    ckube_gauge_set(ckube_metric_with(m->largest, NULL), (double)st.max_batch);
    ckube_gauge_set(ckube_metric_with(m->rev, NULL), (double)storage_current_rev(m->srv->st));
    ckube_gauge_set(ckube_metric_with(m->compacted, NULL),
                    (double)storage_compacted_rev(m->srv->st));
}

static void collect(void *ctx)
{
    collect_objects(ctx);
    collect_storage(ctx);
    collect_process(ctx);
}

/* ---- life cycle and the endpoint --------------------------------------- */

ckube_metrics_registry *apimetrics_registry(apimetrics *m)
{
    return m->reg;
}

apimetrics *apimetrics_new(apiserver *srv)
{
    apimetrics *m = xcalloc(1, sizeof *m);
    if (!(m->reg = ckube_metrics_registry_new())) {
        free(m);
        return NULL;
    }
    m->srv = srv;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    m->started = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    static const char *const req[] = {"verb",        "dry_run", "group",     "version", "resource",
                                      "subresource", "scope",   "component", "code",    NULL};
    static const char *const dur[] = {"verb",        "dry_run", "group",     "version", "resource",
                                      "subresource", "scope",   "component", NULL};
    static const char *const lr[] = {"verb",        "group", "version",   "resource",
                                     "subresource", "scope", "component", NULL};
    static const char *const obj[] = {"resource", NULL};
    /* kube-apiserver's buckets for request latency */
    static const double buckets[] = {0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2,
                                     3,     4,     5,    6,   8,   10,  15,  20,  30,  45,   60};
    m->requests = ckube_metrics_counter(
        m->reg, "apiserver_request_total",
        "Counter of apiserver requests broken out for each verb, dry run value, group, version, "
        "resource, scope, component, and HTTP response code.",
        req);
    m->durations = ckube_metrics_histogram(
        m->reg, "apiserver_request_duration_seconds",
        "Response latency distribution in seconds for each verb, dry run value, group, version, "
        "resource, subresource, scope and component.",
        dur, buckets, sizeof buckets / sizeof *buckets);
    m->longrunning = ckube_metrics_gauge(
        m->reg, "apiserver_longrunning_requests",
        "Gauge of all active long-running apiserver requests broken out by verb, group, version, "
        "resource, scope and component.",
        lr);
    m->objects = ckube_metrics_gauge(m->reg, "apiserver_storage_objects",
                                     "Number of stored objects at the time of last check split "
                                     "by kind.",
                                     obj);
    m->cpu = ckube_metrics_counter(m->reg, "process_cpu_seconds_total",
                                   "Total user and system CPU time spent in seconds.", NULL);
    m->rss = ckube_metrics_gauge(m->reg, "process_resident_memory_bytes",
                                 "Resident memory size in bytes.", NULL);
    m->vsize = ckube_metrics_gauge(m->reg, "process_virtual_memory_bytes",
                                   "Virtual memory size in bytes.", NULL);
    m->fds =
        ckube_metrics_gauge(m->reg, "process_open_fds", "Number of open file descriptors.", NULL);
    m->start_time =
        ckube_metrics_gauge(m->reg, "process_start_time_seconds",
                            "Start time of the process since unix epoch in seconds.", NULL);
    m->commits =
        ckube_metrics_counter(m->reg, "ckube_storage_commits_total",
                              "Write groups committed (one transaction and fsync each).", NULL);
    m->failed_commits = ckube_metrics_counter(m->reg, "ckube_storage_failed_commits_total",
                                              "Write groups whose transaction failed.", NULL);
    m->writes = ckube_metrics_counter(m->reg, "ckube_storage_writes_total",
                                      "Writes completed by the storage, in any result.", NULL);
    m->commit_seconds =
        ckube_metrics_counter(m->reg, "ckube_storage_commit_seconds_total",
                              "Time spent committing write groups, fsync included.", NULL);
    m->checkpoints = ckube_metrics_counter(
        m->reg, "ckube_storage_checkpoints_total",
        "SQLite WAL checkpoints that copied pages back into the database file, by the "
        "checkpointer thread or by the writer once the WAL reached its bound.",
        (const char *[]){"by", NULL});
    m->wal_pages = ckube_metrics_gauge(
        m->reg, "ckube_storage_wal_pages",
        "Pages in SQLite's write-ahead log after the last commit (what a crash recovery "
        "would read; 0 on other backends).",
        NULL);
    m->largest = ckube_metrics_gauge(m->reg, "ckube_storage_largest_commit_writes",
                                     "The most writes one group commit has carried.", NULL);
    m->rev = ckube_metrics_gauge(m->reg, "ckube_storage_revision",
                                 "The newest revision (resourceVersion) stored.", NULL);
    m->compacted = ckube_metrics_gauge(m->reg, "ckube_storage_compacted_revision",
                                       "Revisions up to this one are compacted away.", NULL);
    m->collector = ckube_metrics_add_collector(m->reg, collect, m);
    if (!m->requests || !m->durations || !m->longrunning || !m->objects || !m->cpu || !m->rss ||
        !m->vsize || !m->fds || !m->start_time || !m->commits || !m->failed_commits || !m->writes ||
        !m->commit_seconds || !m->checkpoints || !m->wal_pages || !m->largest || !m->rev ||
        !m->compacted || !m->collector) {
        apimetrics_free(m);
        return NULL;
    }
    return m;
}

void apimetrics_free(apimetrics *m)
{
    if (!m)
        return;
    ckube_metrics_registry_free(m->reg);
    free(m);
}

apimetrics_cache *apimetrics_cache_new(void)
{
    return xcalloc(1, sizeof(apimetrics_cache));
}

void apimetrics_cache_free(apimetrics_cache *c)
{
    free(c);
}

void handle_metrics(req_ctx *rc)
{
    apimetrics *m = rc->srv->metrics;
    size_t len = 0;
    char *text = m ? ckube_metrics_render(m->reg, &len) : NULL;
    if (!text) {
        reply_status(rc, ckube_status_new(500, CKUBE_REASON_INTERNAL, "metrics unavailable"));
        return;
    }
    reply_raw(rc, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}
