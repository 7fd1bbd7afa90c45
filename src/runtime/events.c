/* events.c - the event recorder (see ckube/events.h for the contract).
 *
 * Data path:
 *
 *   record (any thread) --> ring queue (mu) --> sender thread:
 *       log line --> correlate (aggregate, observe, spam filter) --> write
 *
 * The three correlation caches (aggregation records, observations, spam
 * buckets) are touched only by the sender thread, so they need no lock;
 * `mu` guards the queue, the counters and the shutdown state.
 */
#include <ckube/events.h>
#include <ckube/json.h>
#include <ckube/log.h>
#include <ckube/metrics.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/tree.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_QUEUE 1000
#define DEFAULT_TRIES 12
#define DEFAULT_RETRY_NS CKUBE_SEC(10)
#define DEFAULT_FLUSH_NS CKUBE_SEC(10)
#define LRU_ENTRIES 4096
#define AGG_MAX_EVENTS 10
#define AGG_INTERVAL_NS CKUBE_SEC(600)
#define SPAM_BURST 25
#define SPAM_REFILL_NS CKUBE_SEC(300) /* one token per 5 minutes (qps 1/300) */
#define AGG_PREFIX "(combined from similar events): "
/* Separates the fields of a cache key (upstream joins with "", which can
 * make two different events collide; a control character cannot). */
#define KEY_SEP "\x1f"

static const ckube_gvr EVENTS = {"", "v1", "events"};

/* ================================================================ LRU */

/* A string-keyed LRU cache: an RB tree for lookup, a tail queue for
 * recency (most recent first). Values are owned and freed with free_val. */
struct lru_entry {
    RB_ENTRY(lru_entry) link;
    TAILQ_ENTRY(lru_entry) order;
    char *key;
    void *val;
};
RB_HEAD(lru_tree, lru_entry);
TAILQ_HEAD(lru_list, lru_entry);

struct lru {
    struct lru_tree tree;
    struct lru_list list;
    size_t n, cap;
    void (*free_val)(void *);
};

static int lru_cmp(const struct lru_entry *a, const struct lru_entry *b)
{
    return strcmp(a->key, b->key);
}
/* libbsd's RB_GENERATE_STATIC marks the functions __unused, a name the
 * glibc headers leave undefined. */
#ifndef __unused
#define __unused __attribute__((__unused__))
#endif
RB_GENERATE_STATIC(lru_tree, lru_entry, link, lru_cmp)
#undef __unused

static void lru_init(struct lru *l, size_t cap, void (*free_val)(void *))
{
    RB_INIT(&l->tree);
    TAILQ_INIT(&l->list);
    l->n = 0;
    l->cap = cap;
    l->free_val = free_val;
}

static void lru_entry_free(struct lru *l, struct lru_entry *e)
{
    RB_REMOVE(lru_tree, &l->tree, e);
    TAILQ_REMOVE(&l->list, e, order);
    l->n--;
    l->free_val(e->val);
    free(e->key);
    free(e);
}

/* The value under key (borrowed; marked most recently used) or NULL. */
static void *lru_get(struct lru *l, const char *key)
{
    struct lru_entry probe = {.key = (char *)key};
    struct lru_entry *e = RB_FIND(lru_tree, &l->tree, &probe);
    if (!e)
        return NULL;
    TAILQ_REMOVE(&l->list, e, order);
    TAILQ_INSERT_HEAD(&l->list, e, order);
    return e->val;
}

/* Stores val (owned from now on, freed on failure too) under key,
 * replacing any previous value, and evicts the least recently used entry
 * beyond capacity. Returns 0 or -1 when out of memory. */
static int lru_put(struct lru *l, const char *key, void *val)
{
    struct lru_entry probe = {.key = (char *)key};
    struct lru_entry *e = RB_FIND(lru_tree, &l->tree, &probe);
    if (e) {
        if (e->val != val)
            l->free_val(e->val);
        e->val = val;
        TAILQ_REMOVE(&l->list, e, order);
        TAILQ_INSERT_HEAD(&l->list, e, order);
        return 0;
    }
    e = calloc(1, sizeof(*e));
    if (!e || !(e->key = strdup(key))) {
        free(e);
        l->free_val(val);
        return -1;
    }
    e->val = val;
    RB_INSERT(lru_tree, &l->tree, e);
    TAILQ_INSERT_HEAD(&l->list, e, order);
    l->n++;
    if (l->n > l->cap)
        lru_entry_free(l, TAILQ_LAST(&l->list, lru_list));
    return 0;
}

static void lru_clear(struct lru *l)
{
    struct lru_entry *e;
    while ((e = TAILQ_FIRST(&l->list)))
        lru_entry_free(l, e);
}

/* ================================================== correlation records */

/* Distinct messages seen for one aggregation key, and when last. */
struct agg_record {
    char *msgs[AGG_MAX_EVENTS];
    size_t n;
    uint64_t last_ns; /* recorder clock */
};

static void agg_record_free(void *p)
{
    struct agg_record *a = p;
    for (size_t i = 0; i < a->n; i++)
        free(a->msgs[i]);
    free(a);
}

/* The last write of one event (what the next duplicate patches). */
struct observation {
    int64_t count;
    char *first_ts;
    char *name;
    char *rv;
};

static void observation_free(void *p)
{
    struct observation *o = p;
    free(o->first_ts);
    free(o->name);
    free(o->rv);
    free(o);
}

/* The spam token bucket of one source + object. Tokens are kept in
 * nanoseconds of refill time (one token = SPAM_REFILL_NS), so the
 * arithmetic is exact: waiting exactly 300 s yields exactly one token. */
struct bucket {
    uint64_t tokens_ns;
    uint64_t last_ns; /* recorder clock */
};

/* ================================================================ queue */

/* One recorded event as the caller described it. Every string is
 * non-NULL ("" when absent) and points into the same allocation. */
struct ev {
    const char *kind, *ns, *name, *uid, *api_version, *rv, *field_path;
    const char *type, *reason, *message;
    int64_t wall_ns; /* when recorded (wall clock) */
};

enum { EV_NFIELDS = 10 };

enum outcome {
    OUT_FILTERED,
    OUT_CREATED,
    OUT_PATCHED,
    OUT_REJECTED,
    OUT_ABANDONED,
};

struct ckube_event_recorder {
    ckube_client *client; /* borrowed */
    ckube_clock *clock;   /* borrowed */
    char *component, *host;
    size_t cap;
    int max_tries;
    uint64_t retry_ns, flush_ns;
    int log_v;

    pthread_mutex_t mu;
    pthread_cond_t cv;      /* sender: new event, closing */
    pthread_cond_t done_cv; /* flushers: an event was handled */
    struct ev **ring;
    size_t head, len;
    uint64_t seq_in, seq_done; /* events queued / handled, ever */
    bool closing;
    uint64_t close_deadline; /* real monotonic ns */
    ckube_event_recorder_stats st;
    pthread_t thread;

    /* sender thread only */
    struct lru agg, obs, spam;
    int64_t last_name_ns;
    unsigned int seed;

    struct {
        ckube_metric *queued, *dropped, *invalid, *filtered, *aggregated, *created, *patched,
            *rejected, *abandoned, *write_errors;
    } m;
};

static int64_t wall_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* RFC 3339 with seconds, as metav1.Time serializes. buf >= 21 bytes. */
static void format_ts(int64_t wall_ns, char *buf, size_t n)
{
    time_t t = (time_t)(wall_ns / 1000000000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *str_or_empty(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* Builds the queued form of an event in one allocation (free with
 * free()). Returns NULL when the object has no name or out of memory. */
static struct ev *ev_new(const json_t *obj, const char *type, const char *reason,
                         const char *message)
{
    const char *f[EV_NFIELDS];
    const json_t *md = json_object_get(obj, "metadata");
    if (json_is_object(md)) {
        f[0] = str_or_empty(obj, "kind");
        f[1] = str_or_empty(md, "namespace");
        f[2] = str_or_empty(md, "name");
        f[3] = str_or_empty(md, "uid");
        f[4] = str_or_empty(obj, "apiVersion");
        f[5] = str_or_empty(md, "resourceVersion");
        f[6] = "";
    } else {
        f[0] = str_or_empty(obj, "kind");
        f[1] = str_or_empty(obj, "namespace");
        f[2] = str_or_empty(obj, "name");
        f[3] = str_or_empty(obj, "uid");
        f[4] = str_or_empty(obj, "apiVersion");
        f[5] = str_or_empty(obj, "resourceVersion");
        f[6] = str_or_empty(obj, "fieldPath");
    }
    if (!*f[2])
        return NULL;
    f[7] = type;
    f[8] = reason;
    f[9] = message;
    size_t len[EV_NFIELDS], total = sizeof(struct ev);
    for (int i = 0; i < EV_NFIELDS; i++) {
        len[i] = strlen(f[i]) + 1;
        total += len[i];
    }
    struct ev *e = malloc(total);
    if (!e)
        return NULL;
    char *p = (char *)(e + 1);
    const char **dst[EV_NFIELDS] = {&e->kind, &e->ns,         &e->name, &e->uid,    &e->api_version,
                                    &e->rv,   &e->field_path, &e->type, &e->reason, &e->message};
    for (int i = 0; i < EV_NFIELDS; i++) {
        memcpy(p, f[i], len[i]);
        *dst[i] = p;
        p += len[i];
    }
    e->wall_ns = wall_now_ns();
    return e;
}

/* ============================================================ counters */

static void count_outcome(ckube_event_recorder *r, enum outcome o, bool aggregated)
{
    pthread_mutex_lock(&r->mu);
    switch (o) {
    case OUT_FILTERED:
        r->st.filtered++;
        break;
    case OUT_CREATED:
        r->st.created++;
        break;
    case OUT_PATCHED:
        r->st.patched++;
        break;
    case OUT_REJECTED:
        r->st.rejected++;
        break;
    case OUT_ABANDONED:
        r->st.abandoned++;
        break;
    }
    if (aggregated)
        r->st.aggregated++;
    pthread_mutex_unlock(&r->mu);
    ckube_metric *ms[] = {r->m.filtered, r->m.created, r->m.patched, r->m.rejected, r->m.abandoned};
    ckube_counter_inc(ms[o]);
    if (aggregated)
        ckube_counter_inc(r->m.aggregated);
}

static void metrics_init(ckube_event_recorder *r, ckube_metrics_registry *reg)
{
    if (!reg)
        return;
    ckube_metric_family *f = ckube_metrics_counter(
        reg, "ckube_event_recorder_events_total",
        "Events recorded, by what became of them (queued, dropped, invalid, filtered, "
        "aggregated, created, patched, rejected, abandoned).",
        (const char *[]){"component", "result", NULL});
    ckube_metric_family *w =
        ckube_metrics_counter(reg, "ckube_event_recorder_write_errors_total",
                              "Failed attempts to write an event to the API server.",
                              (const char *[]){"component", NULL});
    const char *c = r->component;
#define CHILD(field, name) r->m.field = ckube_metric_with(f, (const char *[]){c, name})
    CHILD(queued, "queued");
    CHILD(dropped, "dropped");
    CHILD(invalid, "invalid");
    CHILD(filtered, "filtered");
    CHILD(aggregated, "aggregated");
    CHILD(created, "created");
    CHILD(patched, "patched");
    CHILD(rejected, "rejected");
    CHILD(abandoned, "abandoned");
#undef CHILD
    r->m.write_errors = ckube_metric_with(w, (const char *[]){c});
}

/* ============================================================== logging */

/* Appends s quoted as Go's %q would for printable text (escapes quotes,
 * backslashes and control characters). */
static void go_quote(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* "v1.ObjectReference{Kind:"Pod", ...}" as Go's %#v prints it. malloc'd. */
static char *ref_string(const struct ev *e)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    const char *names[] = {"Kind",       "Namespace",       "Name",     "UID",
                           "APIVersion", "ResourceVersion", "FieldPath"};
    const char *vals[] = {e->kind, e->ns, e->name, e->uid, e->api_version, e->rv, e->field_path};
    fputs("v1.ObjectReference{", f);
    for (int i = 0; i < 7; i++) {
        fprintf(f, "%s%s:", i ? ", " : "", names[i]);
        go_quote(f, vals[i]);
    }
    fputc('}', f);
    fclose(f);
    return buf;
}

static void log_event(ckube_event_recorder *r, const struct ev *e)
{
    if (r->log_v < 0 || ckube_log_verbosity() < r->log_v)
        return;
    char *ref = ref_string(e);
    CKUBE_INFO("Event(%s): type: '%s' reason: '%s' %s", ref ? ref : "?", e->type, e->reason,
               e->message);
    free(ref);
}

/* ========================================================= correlation */

static char *join_key(const char *const *parts, size_t n)
{
    size_t total = 1;
    for (size_t i = 0; i < n; i++)
        total += strlen(parts[i]) + 1;
    char *k = malloc(total), *p = k;
    if (!k)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(parts[i]);
        memcpy(p, parts[i], l);
        p += l;
        *p++ = KEY_SEP[0];
    }
    *p = '\0';
    return k;
}

/* Identity of one exact event: source, object, type, reason, message. */
static char *event_key(const char *component, const char *host, const char *kind, const char *ns,
                       const char *name, const char *field_path, const char *uid,
                       const char *api_version, const char *type, const char *reason,
                       const char *message)
{
    const char *p[] = {component, host,        kind, ns,     name,   field_path,
                       uid,       api_version, type, reason, message};
    return join_key(p, sizeof(p) / sizeof(p[0]));
}

/* What the sender writes for one event after correlation. */
struct outgoing {
    json_t *event;   /* the full Event (create body) */
    char *patch;     /* dedup: the strategic merge patch; NULL = create */
    bool aggregated; /* the event was replaced by a combined one */
};

static void set_nonempty(json_t *o, const char *key, const char *v)
{
    if (v && *v)
        json_object_set_new(o, key, json_string(v));
}

static json_t *build_event(ckube_event_recorder *r, const struct ev *e, const char *name,
                           const char *message, const char *first_ts, const char *last_ts,
                           int64_t count, const char *rv)
{
    json_t *ev = json_object(), *md = json_object(), *io = json_object(), *src = json_object();
    if (!ev || !md || !io || !src) {
        json_decref(ev);
        json_decref(md);
        json_decref(io);
        json_decref(src);
        return NULL;
    }
    json_object_set_new(ev, "apiVersion", json_string("v1"));
    json_object_set_new(ev, "kind", json_string("Event"));
    json_object_set_new(md, "name", json_string(name));
    json_object_set_new(md, "namespace", json_string(*e->ns ? e->ns : "default"));
    set_nonempty(md, "resourceVersion", rv);
    json_object_set_new(ev, "metadata", md);
    set_nonempty(io, "kind", e->kind);
    set_nonempty(io, "namespace", e->ns);
    set_nonempty(io, "name", e->name);
    set_nonempty(io, "uid", e->uid);
    set_nonempty(io, "apiVersion", e->api_version);
    set_nonempty(io, "resourceVersion", e->rv);
    set_nonempty(io, "fieldPath", e->field_path);
    json_object_set_new(ev, "involvedObject", io);
    json_object_set_new(ev, "reason", json_string(e->reason));
    json_object_set_new(ev, "message", json_string(message));
    json_object_set_new(ev, "type", json_string(e->type));
    set_nonempty(src, "component", r->component);
    set_nonempty(src, "host", r->host);
    json_object_set_new(ev, "source", src);
    json_object_set_new(ev, "count", json_integer(count));
    json_object_set_new(ev, "firstTimestamp", json_string(first_ts));
    json_object_set_new(ev, "lastTimestamp", json_string(last_ts));
    json_object_set_new(ev, "eventTime", json_null());
    json_object_set_new(ev, "reportingComponent", json_string(r->component));
    json_object_set_new(ev, "reportingInstance", json_string(r->host));
    return ev;
}

/* A name "<involvedName>.<hex ns>" unique within this recorder. */
static void unique_name(ckube_event_recorder *r, const char *obj, int64_t wall_ns, char *buf,
                        size_t n)
{
    if (wall_ns <= r->last_name_ns)
        wall_ns = r->last_name_ns + 1;
    r->last_name_ns = wall_ns;
    snprintf(buf, n, "%s.%" PRIx64, obj, (uint64_t)wall_ns);
}

/* Aggregation: notes e's message under its aggregation key. Returns true
 * when 10 distinct messages have now been seen within the window, i.e. e
 * must be replaced by the combined event. *agg_key receives the key
 * (malloc'd) in every case. */
static bool aggregate(ckube_event_recorder *r, const struct ev *e, char **agg_key)
{
    const char *p[] = {r->component,   r->host, e->kind,   e->ns,        e->name, e->uid,
                       e->api_version, e->type, e->reason, r->component, r->host};
    *agg_key = join_key(p, sizeof(p) / sizeof(p[0]));
    if (!*agg_key)
        return false;
    uint64_t now = ckube_clock_now(r->clock);
    struct agg_record *a = lru_get(&r->agg, *agg_key);
    if (a && now - a->last_ns > AGG_INTERVAL_NS) {
        for (size_t i = 0; i < a->n; i++)
            free(a->msgs[i]);
        a->n = 0;
    }
    if (!a) {
        a = calloc(1, sizeof(*a));
        if (!a || lru_put(&r->agg, *agg_key, a) != 0)
            return false;
    }
    a->last_ns = now;
    bool seen = false;
    for (size_t i = 0; i < a->n && !seen; i++)
        seen = strcmp(a->msgs[i], e->message) == 0;
    if (!seen && a->n < AGG_MAX_EVENTS) {
        char *m = strdup(e->message);
        if (m)
            a->msgs[a->n++] = m;
    }
    if (a->n < AGG_MAX_EVENTS)
        return false;
    /* Keep the set below the threshold: drop one (any) message, so the
     * next distinct message aggregates again. */
    free(a->msgs[--a->n]);
    return true;
}

/* Dedup: looks up the last write under `key`; when there was one, turns
 * out->event into its next occurrence (same name and first timestamp,
 * count + 1) with a patch. Records the new observation either way. */
static int observe(ckube_event_recorder *r, const char *key, struct outgoing *out)
{
    json_t *ev = out->event, *md = json_object_get(ev, "metadata");
    struct observation *last = lru_get(&r->obs, key);
    if (last && last->count > 0) {
        json_object_set_new(md, "name", json_string(last->name));
        if (*last->rv)
            json_object_set_new(md, "resourceVersion", json_string(last->rv));
        json_object_set_new(ev, "firstTimestamp", json_string(last->first_ts));
        json_object_set_new(ev, "count", json_integer(last->count + 1));
        json_t *patch = json_pack("{s:I,s:O,s:O}", "count", (json_int_t)(last->count + 1),
                                  "lastTimestamp", json_object_get(ev, "lastTimestamp"), "message",
                                  json_object_get(ev, "message"));
        out->patch = patch ? ckube_json_dumps(patch, NULL) : NULL;
        json_decref(patch);
        if (!out->patch)
            return -1;
    }
    struct observation *o = calloc(1, sizeof(*o));
    if (!o)
        return -1;
    o->count = json_integer_value(json_object_get(ev, "count"));
    o->first_ts = strdup(str_or_empty(ev, "firstTimestamp"));
    o->name = strdup(str_or_empty(md, "name"));
    o->rv = strdup(str_or_empty(md, "resourceVersion"));
    if (!o->first_ts || !o->name || !o->rv) {
        observation_free(o);
        return -1;
    }
    return lru_put(&r->obs, key, o);
}

/* Spam filter: true when the source + object has no token left. */
static bool spam_filtered(ckube_event_recorder *r, const struct ev *e)
{
    const char *p[] = {r->component, r->host, e->kind, e->ns, e->name, e->uid, e->api_version};
    char *key = join_key(p, sizeof(p) / sizeof(p[0]));
    if (!key)
        return false;
    uint64_t now = ckube_clock_now(r->clock);
    struct bucket *b = lru_get(&r->spam, key);
    if (!b) {
        b = calloc(1, sizeof(*b));
        if (!b || lru_put(&r->spam, key, b) != 0) {
            free(key);
            return false;
        }
        b->tokens_ns = SPAM_BURST * SPAM_REFILL_NS;
        b->last_ns = now;
    }
    free(key);
    if (now > b->last_ns) {
        uint64_t full = SPAM_BURST * SPAM_REFILL_NS, gained = now - b->last_ns;
        b->tokens_ns = gained >= full - b->tokens_ns ? full : b->tokens_ns + gained;
        b->last_ns = now;
    }
    if (b->tokens_ns < SPAM_REFILL_NS)
        return true;
    b->tokens_ns -= SPAM_REFILL_NS;
    return false;
}

/* Runs e through the correlator. Returns 1 to write *out, 0 when the
 * spam filter drops it, -1 when out of memory. */
static int correlate(ckube_event_recorder *r, const struct ev *e, struct outgoing *out)
{
    memset(out, 0, sizeof(*out));
    char name[320], ts[32];
    char *agg_key = NULL, *key = NULL, *combined = NULL;
    const char *message = e->message;
    int64_t wall = e->wall_ns;
    out->aggregated = aggregate(r, e, &agg_key);
    if (out->aggregated) {
        /* The combined event is a new occurrence, stamped now. */
        wall = wall_now_ns();
        if (asprintf(&combined, "%s%s", AGG_PREFIX, e->message) < 0)
            combined = NULL;
        message = combined;
        key = agg_key;
        agg_key = NULL;
    } else {
        key = event_key(r->component, r->host, e->kind, e->ns, e->name, e->field_path, e->uid,
                        e->api_version, e->type, e->reason, e->message);
    }
    int rc = -1;
    if (!key || !message)
        goto out;
    unique_name(r, e->name, wall, name, sizeof(name));
    format_ts(wall, ts, sizeof(ts));
    out->event = build_event(r, e, name, message, ts, ts, 1, NULL);
    if (!out->event || observe(r, key, out) != 0)
        goto out;
    rc = spam_filtered(r, e) ? 0 : 1;
out:
    free(agg_key);
    free(key);
    free(combined);
    if (rc != 1) {
        json_decref(out->event);
        free(out->patch);
        out->event = NULL;
        out->patch = NULL;
    }
    return rc;
}

/* After a successful write: remember what the server stored, under the
 * stored event's own key (name and resourceVersion for the next patch). */
static void update_state(ckube_event_recorder *r, const json_t *stored)
{
    const json_t *md = json_object_get(stored, "metadata");
    const json_t *io = json_object_get(stored, "involvedObject");
    const json_t *src = json_object_get(stored, "source");
    char *key = event_key(
        str_or_empty(src, "component"), str_or_empty(src, "host"), str_or_empty(io, "kind"),
        str_or_empty(io, "namespace"), str_or_empty(io, "name"), str_or_empty(io, "fieldPath"),
        str_or_empty(io, "uid"), str_or_empty(io, "apiVersion"), str_or_empty(stored, "type"),
        str_or_empty(stored, "reason"), str_or_empty(stored, "message"));
    struct observation *o = calloc(1, sizeof(*o));
    if (!key || !o) {
        free(key);
        free(o);
        return;
    }
    o->count = json_integer_value(json_object_get(stored, "count"));
    o->first_ts = strdup(str_or_empty(stored, "firstTimestamp"));
    o->name = strdup(str_or_empty(md, "name"));
    o->rv = strdup(str_or_empty(md, "resourceVersion"));
    if (o->first_ts && o->name && o->rv)
        lru_put(&r->obs, key, o);
    else
        observation_free(o);
    free(key);
}

/* ================================================================ write */

static bool namespace_terminating(const ckube_status *st)
{
    for (size_t i = 0; st && i < st->ncauses; i++)
        if (st->causes[i].type && strcmp(st->causes[i].type, "NamespaceTerminating") == 0)
            return true;
    return false;
}

/* One attempt. Returns 0 written (outcome in *o), 1 to retry, -1 rejected. */
static int write_once(ckube_event_recorder *r, struct outgoing *out, enum outcome *o)
{
    json_t *md = json_object_get(out->event, "metadata");
    const char *ns = str_or_empty(md, "namespace");
    const char *name = str_or_empty(md, "name");
    json_t *stored = NULL;
    ckube_status *err = NULL;
    int rc = -1;
    bool create = !out->patch;
    if (out->patch) {
        rc = ckube_patch(r->client, &EVENTS, ns, name, CKUBE_PATCH_STRATEGIC, out->patch,
                         strlen(out->patch), NULL, &stored, &err);
        *o = OUT_PATCHED;
        if (rc != 0 && ckube_is_not_found(err)) {
            /* The event is gone (deleted, expired): create it again. */
            ckube_status_free(err);
            err = NULL;
            create = true;
        }
    }
    if (create) {
        json_object_del(md, "resourceVersion");
        rc = ckube_create(r->client, &EVENTS, ns, out->event, NULL, &stored, &err);
        *o = OUT_CREATED;
    }
    if (rc == 0) {
        update_state(r, stored);
        json_decref(stored);
        return 0;
    }
    json_decref(stored);
    int ret = -1;
    const char *msg = err && err->message ? err->message : "unknown error";
    if (!err || err->code == 0) {
        CKUBE_ERROR("Unable to write event %s/%s: '%s' (may retry after sleeping)", ns, name, msg);
        ret = 1;
    } else if (ckube_status_is(err, 409) || namespace_terminating(err)) {
        CKUBE_V(5, "Server rejected event %s/%s: '%s' (will not retry!)", ns, name, msg);
    } else {
        CKUBE_ERROR("Server rejected event %s/%s: '%s' (will not retry!)", ns, name, msg);
    }
    ckube_status_free(err);
    return ret;
}

/* Waits ns on the recorder's clock; returns false when the recorder
 * started closing meanwhile (retries then stop). */
static bool retry_wait(ckube_event_recorder *r, uint64_t ns)
{
    uint64_t deadline = ckube_clock_now(r->clock) + ns;
    pthread_mutex_lock(&r->mu);
    while (!r->closing && ckube_clock_cond_wait(r->clock, &r->cv, &r->mu, deadline) != ETIMEDOUT)
        ;
    bool go_on = !r->closing;
    pthread_mutex_unlock(&r->mu);
    return go_on;
}

static bool is_closing(ckube_event_recorder *r)
{
    pthread_mutex_lock(&r->mu);
    bool c = r->closing;
    pthread_mutex_unlock(&r->mu);
    return c;
}

static enum outcome write_with_retries(ckube_event_recorder *r, struct outgoing *out)
{
    enum outcome o = OUT_CREATED;
    for (int tries = 1;; tries++) {
        int rc = write_once(r, out, &o);
        if (rc == 0)
            return o;
        if (rc < 0)
            return OUT_REJECTED;
        pthread_mutex_lock(&r->mu);
        r->st.write_errors++;
        pthread_mutex_unlock(&r->mu);
        ckube_counter_inc(r->m.write_errors);
        if (tries >= r->max_tries) {
            CKUBE_ERROR("Unable to write event %s (retry limit exceeded!)",
                        str_or_empty(json_object_get(out->event, "metadata"), "name"));
            return OUT_ABANDONED;
        }
        if (is_closing(r))
            return OUT_ABANDONED;
        /* Randomize the first wait so clients do not retry in step after
         * an API server outage. */
        uint64_t wait = r->retry_ns;
        if (tries == 1)
            wait = (uint64_t)((double)r->retry_ns * ((double)rand_r(&r->seed) / (RAND_MAX + 1.0)));
        if (!retry_wait(r, wait)) {
            CKUBE_WARN("Dropping event %s: recorder shutting down",
                       str_or_empty(json_object_get(out->event, "metadata"), "name"));
            return OUT_ABANDONED;
        }
    }
}

static void handle(ckube_event_recorder *r, const struct ev *e)
{
    log_event(r, e);
    struct outgoing out;
    int rc = correlate(r, e, &out);
    if (rc < 0) {
        CKUBE_ERROR("Unable to record event about %s/%s: out of memory", e->ns, e->name);
        count_outcome(r, OUT_ABANDONED, false);
        return;
    }
    if (rc == 0) {
        CKUBE_V(4, "Event about %s %s/%s filtered (too many events about the object)", e->kind,
                e->ns, e->name);
        count_outcome(r, OUT_FILTERED, out.aggregated);
        return;
    }
    enum outcome o = write_with_retries(r, &out);
    count_outcome(r, o, out.aggregated);
    json_decref(out.event);
    free(out.patch);
}

/* ================================================================ sender */

static void *sender_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-events"); /* top -H, perf, gdb */
    ckube_event_recorder *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (r->len == 0 && !r->closing)
            ckube_clock_cond_wait(ckube_clock_real(), &r->cv, &r->mu, 0);
        if (r->len == 0)
            break; /* closing and drained */
        if (r->closing && ckube_monotonic_ns() >= r->close_deadline) {
            CKUBE_WARN("Event recorder %s shutting down: dropping %zu queued events", r->component,
                       r->len);
            while (r->len) {
                free(r->ring[r->head]);
                r->head = (r->head + 1) % r->cap;
                r->len--;
                r->st.abandoned++;
                r->seq_done++;
                ckube_counter_inc(r->m.abandoned);
            }
            break;
        }
        struct ev *e = r->ring[r->head];
        r->head = (r->head + 1) % r->cap;
        r->len--;
        pthread_mutex_unlock(&r->mu);
        handle(r, e);
        free(e);
        pthread_mutex_lock(&r->mu);
        r->seq_done++;
        pthread_cond_broadcast(&r->done_cv);
    }
    pthread_cond_broadcast(&r->done_cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ================================================================ public */

ckube_event_recorder *
ckube_event_recorder_new(ckube_client *c, const ckube_event_recorder_opts *opts, ckube_status **err)
{
    if (!c || !opts || !opts->component || !*opts->component) {
        if (err)
            *err = ckube_status_new(0, NULL, "event recorder: %s",
                                    !c ? "no client" : "options must name a component");
        return NULL;
    }
    ckube_event_recorder *r = calloc(1, sizeof(*r));
    if (!r)
        goto oom;
    r->client = c;
    r->clock = ckube_clock_or_real(opts->clock);
    r->component = strdup(opts->component);
    r->host = strdup(opts->host ? opts->host : "");
    r->cap = opts->queue_size ? opts->queue_size : DEFAULT_QUEUE;
    r->ring = calloc(r->cap, sizeof(*r->ring));
    if (!r->component || !r->host || !r->ring)
        goto oom;
    r->max_tries = opts->max_tries > 0 ? opts->max_tries : DEFAULT_TRIES;
    r->retry_ns = opts->retry_interval_ns ? opts->retry_interval_ns : DEFAULT_RETRY_NS;
    r->flush_ns = opts->flush_timeout_ns ? opts->flush_timeout_ns : DEFAULT_FLUSH_NS;
    r->log_v = opts->log_verbosity;
    r->seed = (unsigned int)(ckube_monotonic_ns() ^ ((uint64_t)getpid() << 16) ^ (uintptr_t)r);
    lru_init(&r->agg, LRU_ENTRIES, agg_record_free);
    lru_init(&r->obs, LRU_ENTRIES, observation_free);
    lru_init(&r->spam, LRU_ENTRIES, free);
    pthread_mutex_init(&r->mu, NULL);
    ckube_cond_init(&r->cv);
    ckube_cond_init(&r->done_cv);
    metrics_init(r, opts->metrics);
    int rc = pthread_create(&r->thread, NULL, sender_main, r);
    if (rc != 0) {
        if (err)
            *err = ckube_status_new(0, NULL, "event recorder: starting the sender thread: %s",
                                    strerror(rc));
        pthread_cond_destroy(&r->cv);
        pthread_cond_destroy(&r->done_cv);
        pthread_mutex_destroy(&r->mu);
        free(r->ring);
        free(r->component);
        free(r->host);
        free(r);
        return NULL;
    }
    return r;
oom:
    if (r) {
        free(r->ring);
        free(r->component);
        free(r->host);
        free(r);
    }
    if (err)
        *err = ckube_status_new(0, NULL, "event recorder: out of memory");
    return NULL;
}

void ckube_event_recorder_free(ckube_event_recorder *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->closing = true;
    r->close_deadline = ckube_monotonic_ns() + r->flush_ns;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    lru_clear(&r->agg);
    lru_clear(&r->obs);
    lru_clear(&r->spam);
    pthread_cond_destroy(&r->cv);
    pthread_cond_destroy(&r->done_cv);
    pthread_mutex_destroy(&r->mu);
    free(r->ring);
    free(r->component);
    free(r->host);
    free(r);
}

static bool valid_type(const char *t)
{
    return t && (strcmp(t, CKUBE_EVENT_NORMAL) == 0 || strcmp(t, CKUBE_EVENT_WARNING) == 0);
}

static int count_invalid(ckube_event_recorder *r)
{
    pthread_mutex_lock(&r->mu);
    r->st.invalid++;
    pthread_mutex_unlock(&r->mu);
    ckube_counter_inc(r->m.invalid);
    return -1;
}

int ckube_event_record(ckube_event_recorder *r, const json_t *involved_object, const char *type,
                       const char *reason, const char *message)
{
    if (!r)
        return -1;
    if (!valid_type(type)) {
        CKUBE_ERROR("Unsupported event type: '%s'", type ? type : "(null)");
        return count_invalid(r);
    }
    if (!reason || !*reason || !message || !json_is_object(involved_object)) {
        CKUBE_ERROR("Could not record event: %s",
                    !json_is_object(involved_object) ? "no involved object" : "no reason");
        return count_invalid(r);
    }
    struct ev *e = ev_new(involved_object, type, reason, message);
    if (!e) {
        CKUBE_ERROR("Could not construct reference to the object of event '%s' '%s': %s", reason,
                    message, ckube_obj_name(involved_object) ? "out of memory" : "no name");
        return count_invalid(r);
    }
    pthread_mutex_lock(&r->mu);
    bool full = r->closing || r->len == r->cap;
    if (!full) {
        r->ring[(r->head + r->len) % r->cap] = e;
        r->len++;
        r->seq_in++;
        r->st.queued++;
        pthread_cond_signal(&r->cv);
    } else {
        r->st.dropped++;
    }
    bool closing = r->closing;
    pthread_mutex_unlock(&r->mu);
    if (full) {
        CKUBE_ERROR("Unable to record event: %s, dropped event about %s %s/%s: type: '%s' "
                    "reason: '%s' %s",
                    closing ? "recorder shutting down" : "too many queued events", e->kind, e->ns,
                    e->name, e->type, e->reason, e->message);
        free(e);
        ckube_counter_inc(r->m.dropped);
        return -1;
    }
    ckube_counter_inc(r->m.queued);
    return 0;
}

int ckube_event_vrecordf(ckube_event_recorder *r, const json_t *involved_object, const char *type,
                         const char *reason, const char *fmt, va_list ap)
{
    char *msg = NULL;
    if (!fmt || vasprintf(&msg, fmt, ap) < 0) {
        if (r)
            count_invalid(r);
        return -1;
    }
    int rc = ckube_event_record(r, involved_object, type, reason, msg);
    free(msg);
    return rc;
}

int ckube_event_recordf(ckube_event_recorder *r, const json_t *involved_object, const char *type,
                        const char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = ckube_event_vrecordf(r, involved_object, type, reason, fmt, ap);
    va_end(ap);
    return rc;
}

int ckube_event_recorder_flush(ckube_event_recorder *r, uint64_t timeout_ns)
{
    if (!r)
        return 0;
    uint64_t deadline = timeout_ns ? ckube_monotonic_ns() + timeout_ns : 0;
    pthread_mutex_lock(&r->mu);
    uint64_t target = r->seq_in;
    int rc = 0;
    while (r->seq_done < target) {
        if (ckube_clock_cond_wait(ckube_clock_real(), &r->done_cv, &r->mu, deadline) == ETIMEDOUT) {
            rc = r->seq_done < target ? -1 : 0;
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

void ckube_event_recorder_stats_get(ckube_event_recorder *r, ckube_event_recorder_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    out->pending = (size_t)(r->seq_in - r->seq_done);
    pthread_mutex_unlock(&r->mu);
}
