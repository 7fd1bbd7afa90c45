/* test_events.c - the event recorder against a real `ckube server` (event
 * fields, dedup by PATCH, aggregation, spam filter, free flushing) and
 * against a port nothing listens on (retries, queue full, bounded free),
 * with a fake clock driving every time window. */
#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/config.h>
#include <ckube/events.h>
#include <ckube/json.h>
#include <ckube/metrics.h>

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/server_util.h"

static const ckube_gvr EVENTS = {"", "v1", "events"};

static struct test_server srv;
static ckube_client *client;

static int group_setup(void **state)
{
    (void)state;
    if (tsu_start(&srv, "memory") != 0)
        return -1;
    client = tsu_client(&srv);
    return client ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    ckube_client_free(client);
    return tsu_stop(&srv, SIGTERM) == 0 ? 0 : -1;
}

/* A client for a loopback port nothing listens on: every write fails
 * without an answer (the case the recorder retries). https://, as the
 * server's own URL is: the connect is refused before any TLS. */
static ckube_client *dead_client(void)
{
    ckube_config *cfg = calloc(1, sizeof(*cfg));
    assert_non_null(cfg);
    int port = tsu_free_port();
    assert_true(port > 0);
    assert_true(asprintf(&cfg->host, "https://127.0.0.1:%d", port) > 0);
    cfg->qps = -1;
    cfg->max_retries = -1;
    ckube_status *err = NULL;
    ckube_client *c = ckube_client_new(cfg, &err);
    ckube_status_free(err);
    ckube_config_free(cfg);
    assert_non_null(c);
    return c;
}

static json_t *pod(const char *ns, const char *name, const char *uid)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s}}", "apiVersion", "v1", "kind", "Pod", "metadata",
                     "name", name, "namespace", ns, "uid", uid, "resourceVersion", "42");
}

/* The Events in `ns` about the object named `name`, sorted by name
 * (a new array; caller decrefs). */
static json_t *events_about(const char *ns, const char *name)
{
    json_t *list = NULL;
    ckube_status *err = NULL;
    assert_int_equal(ckube_list(client, &EVENTS, ns, NULL, &list, &err), 0);
    json_t *out = json_array();
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(list, "items"), i, it)
    {
        const char *n = json_string_value(ckube_json_get_path(it, "involvedObject.name"));
        if (n && strcmp(n, name) == 0)
            json_array_append(out, it);
    }
    json_decref(list);
    return out;
}

static const char *jstr(const json_t *o, const char *path)
{
    return json_string_value(ckube_json_get_path(o, path));
}

static json_int_t jint(const json_t *o, const char *path)
{
    return json_integer_value(ckube_json_get_path(o, path));
}

/* The one event in `evs` whose message is `msg`, or NULL. */
static json_t *with_message(json_t *evs, const char *msg)
{
    size_t i;
    json_t *it;
    json_array_foreach(evs, i, it)
    {
        if (strcmp(jstr(it, "message"), msg) == 0)
            return it;
    }
    return NULL;
}

static void flush(ckube_event_recorder *r)
{
    assert_int_equal(ckube_event_recorder_flush(r, CKUBE_SEC(30)), 0);
}

/* ------------------------------------------------------------ fields */

/* Runs fn with stderr redirected to a file; returns what was logged. */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/stderr-capture.log", srv.dir);
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    off_t len = lseek(fd, 0, SEEK_END);
    char *buf = calloc(1, (size_t)len + 1);
    assert_int_equal(pread(fd, buf, (size_t)len, 0), len);
    close(fd);
    return buf;
}

static void record_fields_events(void *arg)
{
    ckube_event_recorder *r = arg;
    json_t *p = pod("default", "fields-pod", "uid-fields");
    assert_int_equal(
        ckube_event_recordf(r, p, CKUBE_EVENT_NORMAL, "Scheduled", "assigned %s to %s", "p", "n1"),
        0);
    json_decref(p);
    /* A cluster-scoped object, as an ObjectReference with a fieldPath. */
    json_t *node = json_pack("{s:s,s:s,s:s,s:s,s:s}", "kind", "Node", "apiVersion", "v1", "name",
                             "fields-node", "uid", "uid-node", "fieldPath", "spec.taints");
    assert_int_equal(ckube_event_record(r, node, CKUBE_EVENT_WARNING, "NodeNotReady", "not ready"),
                     0);
    json_decref(node);
    flush(r);
}

static void test_event_fields(void **state)
{
    (void)state;
    ckube_event_recorder_opts o = {.component = "test-controller", .host = "host-1"};
    ckube_event_recorder *r = ckube_event_recorder_new(client, &o, NULL);
    assert_non_null(r);
    char *log = capture_stderr(record_fields_events, r);
    assert_non_null(strstr(log, "Event(v1.ObjectReference{Kind:\"Pod\", Namespace:\"default\", "
                                "Name:\"fields-pod\", UID:\"uid-fields\", APIVersion:\"v1\", "
                                "ResourceVersion:\"42\", FieldPath:\"\"}): type: 'Normal' "
                                "reason: 'Scheduled' assigned p to n1"));
    assert_non_null(strstr(log, "Name:\"fields-node\", UID:\"uid-node\", APIVersion:\"v1\", "
                                "ResourceVersion:\"\", FieldPath:\"spec.taints\"}): type: "
                                "'Warning' reason: 'NodeNotReady' not ready"));
    free(log);

    json_t *evs = events_about("default", "fields-pod");
    assert_int_equal(json_array_size(evs), 1);
    json_t *e = json_array_get(evs, 0);
    const char *name = jstr(e, "metadata.name");
    assert_true(strncmp(name, "fields-pod.", 11) == 0);
    assert_true(strlen(name) > 11 && strspn(name + 11, "0123456789abcdef") == strlen(name + 11));
    assert_string_equal(jstr(e, "metadata.namespace"), "default");
    assert_string_equal(jstr(e, "involvedObject.kind"), "Pod");
    assert_string_equal(jstr(e, "involvedObject.namespace"), "default");
    assert_string_equal(jstr(e, "involvedObject.name"), "fields-pod");
    assert_string_equal(jstr(e, "involvedObject.uid"), "uid-fields");
    assert_string_equal(jstr(e, "involvedObject.apiVersion"), "v1");
    assert_string_equal(jstr(e, "involvedObject.resourceVersion"), "42");
    assert_null(ckube_json_get_path(e, "involvedObject.fieldPath"));
    assert_string_equal(jstr(e, "reason"), "Scheduled");
    assert_string_equal(jstr(e, "message"), "assigned p to n1");
    assert_string_equal(jstr(e, "type"), "Normal");
    assert_string_equal(jstr(e, "source.component"), "test-controller");
    assert_string_equal(jstr(e, "source.host"), "host-1");
    assert_string_equal(jstr(e, "reportingComponent"), "test-controller");
    assert_string_equal(jstr(e, "reportingInstance"), "host-1");
    assert_int_equal(jint(e, "count"), 1);
    const char *first = jstr(e, "firstTimestamp"), *last = jstr(e, "lastTimestamp");
    assert_non_null(first);
    assert_string_equal(first, last);
    int64_t t = ckube_parse_rfc3339(first);
    assert_true(t > 0 && llabs((long long)(t - (int64_t)time(NULL))) < 60);
    json_t *et = json_object_get(e, "eventTime");
    assert_true(et == NULL || json_is_null(et));
    json_decref(evs);

    /* Cluster-scoped object: the event lands in "default", the reference
     * has no namespace. */
    evs = events_about("default", "fields-node");
    assert_int_equal(json_array_size(evs), 1);
    e = json_array_get(evs, 0);
    assert_string_equal(jstr(e, "type"), "Warning");
    assert_string_equal(jstr(e, "reason"), "NodeNotReady");
    assert_string_equal(jstr(e, "involvedObject.kind"), "Node");
    assert_null(ckube_json_get_path(e, "involvedObject.namespace"));
    assert_string_equal(jstr(e, "involvedObject.fieldPath"), "spec.taints");
    json_decref(evs);

    ckube_event_recorder_stats st;
    ckube_event_recorder_stats_get(r, &st);
    assert_int_equal(st.queued, 2);
    assert_int_equal(st.created, 2);
    assert_int_equal(st.pending, 0);
    ckube_event_recorder_free(r);
}

static void test_invalid_arguments(void **state)
{
    (void)state;
    ckube_status *err = NULL;
    assert_null(ckube_event_recorder_new(client, &(ckube_event_recorder_opts){0}, &err));
    assert_non_null(err);
    assert_non_null(strstr(err->message, "component"));
    ckube_status_free(err);
    err = NULL;
    assert_null(
        ckube_event_recorder_new(NULL, &(ckube_event_recorder_opts){.component = "x"}, &err));
    ckube_status_free(err);

    ckube_event_recorder *r =
        ckube_event_recorder_new(client, &(ckube_event_recorder_opts){.component = "inv"}, NULL);
    assert_non_null(r);
    json_t *p = pod("default", "inv-pod", "uid-inv");
    json_t *noname = json_pack("{s:s,s:{s:s}}", "kind", "Pod", "metadata", "namespace", "default");
    assert_int_equal(ckube_event_record(r, p, "Bogus", "R", "m"), -1);
    assert_int_equal(ckube_event_record(r, p, NULL, "R", "m"), -1);
    assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_NORMAL, "", "m"), -1);
    assert_int_equal(ckube_event_record(r, NULL, CKUBE_EVENT_NORMAL, "R", "m"), -1);
    assert_int_equal(ckube_event_record(r, noname, CKUBE_EVENT_NORMAL, "R", "m"), -1);
    assert_int_equal(ckube_event_record(NULL, p, CKUBE_EVENT_NORMAL, "R", "m"), -1);
    ckube_event_recorder_stats st;
    ckube_event_recorder_stats_get(r, &st);
    assert_int_equal(st.invalid, 5);
    assert_int_equal(st.queued, 0);
    json_decref(p);
    json_decref(noname);
    ckube_event_recorder_free(r);
    json_t *evs = events_about("default", "inv-pod");
    assert_int_equal(json_array_size(evs), 0);
    json_decref(evs);
}

/* ------------------------------------------------------------- dedup */

static double metric(ckube_metrics_registry *reg, const char *component, const char *result)
{
    ckube_metric_family *f = ckube_metrics_counter(reg, "ckube_event_recorder_events_total", NULL,
                                                   (const char *[]){"component", "result", NULL});
    return ckube_metric_value(ckube_metric_with(f, (const char *[]){component, result}));
}

static void test_dedup_patches_count(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_event_recorder *r = ckube_event_recorder_new(
        client, &(ckube_event_recorder_opts){.component = "dedup", .metrics = reg}, NULL);
    assert_non_null(r);
    json_t *p = pod("default", "dedup-pod", "uid-dedup");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_NORMAL, "Pulled", "image pulled"), 0);
        flush(r);
    }
    json_t *evs = events_about("default", "dedup-pod");
    assert_int_equal(json_array_size(evs), 1);
    json_t *e = json_array_get(evs, 0);
    assert_int_equal(jint(e, "count"), 3);
    char *name = strdup(jstr(e, "metadata.name"));
    char *first = strdup(jstr(e, "firstTimestamp"));
    json_decref(evs);

    ckube_event_recorder_stats st;
    ckube_event_recorder_stats_get(r, &st);
    assert_int_equal(st.created, 1);
    assert_int_equal(st.patched, 2);
    assert_true(metric(reg, "dedup", "created") == 1.0);
    assert_true(metric(reg, "dedup", "patched") == 2.0);
    assert_true(metric(reg, "dedup", "queued") == 3.0);

    /* A different message is a different event. */
    assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_NORMAL, "Pulled", "other"), 0);
    flush(r);
    evs = events_about("default", "dedup-pod");
    assert_int_equal(json_array_size(evs), 2);
    assert_int_equal(jint(with_message(evs, "other"), "count"), 1);
    json_decref(evs);

    /* The Event deleted on the server: the patch 404s, the recorder
     * creates it again under the same name with the next count. */
    ckube_status *err = NULL;
    assert_int_equal(ckube_delete(client, &EVENTS, "default", name, NULL, NULL, &err), 0);
    assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_NORMAL, "Pulled", "image pulled"), 0);
    flush(r);
    evs = events_about("default", "dedup-pod");
    assert_int_equal(json_array_size(evs), 2);
    e = with_message(evs, "image pulled");
    assert_non_null(e);
    assert_string_equal(jstr(e, "metadata.name"), name);
    assert_int_equal(jint(e, "count"), 4);
    assert_string_equal(jstr(e, "firstTimestamp"), first);
    json_decref(evs);
    ckube_event_recorder_stats_get(r, &st);
    assert_int_equal(st.created, 3);
    assert_int_equal(st.patched, 2);

    free(name);
    free(first);
    json_decref(p);
    ckube_event_recorder_free(r);
    ckube_metrics_registry_free(reg);
}

/* ------------------------------------------------------- aggregation */

static void test_aggregation(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(CKUBE_SEC(1000));
    ckube_event_recorder *r = ckube_event_recorder_new(
        client, &(ckube_event_recorder_opts){.component = "agg", .clock = clk}, NULL);
    assert_non_null(r);
    json_t *p = pod("default", "agg-pod", "uid-agg");
    char msg[32];
    for (int i = 0; i < 9; i++) {
        snprintf(msg, sizeof(msg), "attempt %d failed", i);
        assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_WARNING, "BackOff", msg), 0);
        ckube_fake_clock_advance(clk, CKUBE_SEC(30));
    }
    flush(r);
    json_t *evs = events_about("default", "agg-pod");
    assert_int_equal(json_array_size(evs), 9);
    json_decref(evs);

    /* The 10th distinct message in the window: a combined event. */
    assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_WARNING, "BackOff", "attempt 9 failed"),
                     0);
    flush(r);
    evs = events_about("default", "agg-pod");
    assert_int_equal(json_array_size(evs), 10);
    json_t *c = with_message(evs, "(combined from similar events): attempt 9 failed");
    assert_non_null(c);
    assert_int_equal(jint(c, "count"), 1);
    assert_string_equal(jstr(c, "reason"), "BackOff");
    assert_string_equal(jstr(c, "type"), "Warning");
    char *cname = strdup(jstr(c, "metadata.name"));
    assert_null(with_message(evs, "attempt 9 failed"));
    json_decref(evs);

    /* The next one updates the combined event. */
    assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_WARNING, "BackOff", "attempt 10 failed"),
                     0);
    flush(r);
    evs = events_about("default", "agg-pod");
    assert_int_equal(json_array_size(evs), 10);
    c = with_message(evs, "(combined from similar events): attempt 10 failed");
    assert_non_null(c);
    assert_string_equal(jstr(c, "metadata.name"), cname);
    assert_int_equal(jint(c, "count"), 2);
    json_decref(evs);

    /* A different reason is not similar. */
    assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_WARNING, "Failed", "attempt 11 failed"),
                     0);
    /* After 10 quiet minutes the window restarts: plain events again. */
    ckube_fake_clock_advance(clk, CKUBE_SEC(601));
    assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_WARNING, "BackOff", "attempt 12 failed"),
                     0);
    flush(r);
    evs = events_about("default", "agg-pod");
    assert_int_equal(json_array_size(evs), 12);
    assert_non_null(with_message(evs, "attempt 11 failed"));
    assert_non_null(with_message(evs, "attempt 12 failed"));
    json_decref(evs);

    ckube_event_recorder_stats st;
    ckube_event_recorder_stats_get(r, &st);
    assert_int_equal(st.aggregated, 2);
    assert_int_equal(st.created, 12);
    assert_int_equal(st.patched, 1);
    free(cname);
    json_decref(p);
    ckube_event_recorder_free(r);
    ckube_fake_clock_free(clk);
}

/* ------------------------------------------------------- spam filter */

static void test_spam_filter(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(CKUBE_SEC(1000));
    ckube_event_recorder *r = ckube_event_recorder_new(
        client,
        &(ckube_event_recorder_opts){.component = "spam", .clock = clk, .log_verbosity = -1}, NULL);
    assert_non_null(r);
    json_t *p = pod("default", "spam-pod", "uid-spam");
    json_t *other = pod("default", "spam-other", "uid-spam-other");
    for (int i = 0; i < 30; i++)
        assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_NORMAL, "Sync", "synced"), 0);
    /* The bucket is per object: another object is not limited. */
    assert_int_equal(ckube_event_record(r, other, CKUBE_EVENT_NORMAL, "Sync", "synced"), 0);
    flush(r);
    ckube_event_recorder_stats st;
    ckube_event_recorder_stats_get(r, &st);
    assert_int_equal(st.created, 2);
    assert_int_equal(st.patched, 24);
    assert_int_equal(st.filtered, 5);
    json_t *evs = events_about("default", "spam-pod");
    assert_int_equal(json_array_size(evs), 1);
    assert_int_equal(jint(json_array_get(evs, 0), "count"), 25);
    json_decref(evs);
    evs = events_about("default", "spam-other");
    assert_int_equal(json_array_size(evs), 1);
    json_decref(evs);

    /* 299 s later still no token; at 300 s one (and only one). */
    ckube_fake_clock_advance(clk, CKUBE_SEC(299));
    assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_NORMAL, "Sync", "synced"), 0);
    flush(r);
    ckube_event_recorder_stats_get(r, &st);
    assert_int_equal(st.filtered, 6);
    ckube_fake_clock_advance(clk, CKUBE_SEC(1));
    assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_NORMAL, "Sync", "synced"), 0);
    assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_NORMAL, "Sync", "synced"), 0);
    flush(r);
    ckube_event_recorder_stats_get(r, &st);
    assert_int_equal(st.patched, 25);
    assert_int_equal(st.filtered, 7);
    /* Filtered occurrences still count (as upstream): 25 written, 6
     * filtered, then the 32nd occurrence written. */
    evs = events_about("default", "spam-pod");
    assert_int_equal(jint(json_array_get(evs, 0), "count"), 32);
    json_decref(evs);

    json_decref(p);
    json_decref(other);
    ckube_event_recorder_free(r);
    ckube_fake_clock_free(clk);
}

/* ---------------------------------------------- free flushes and joins */

static void test_free_flushes(void **state)
{
    (void)state;
    ckube_event_recorder *r = ckube_event_recorder_new(
        client, &(ckube_event_recorder_opts){.component = "flush", .log_verbosity = -1}, NULL);
    assert_non_null(r);
    char name[32];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "flush-%02d", i);
        json_t *ref = json_pack("{s:s,s:s,s:s,s:s}", "kind", "ConfigMap", "apiVersion", "v1",
                                "namespace", "default", "name", name);
        assert_int_equal(ckube_event_recordf(r, ref, CKUBE_EVENT_NORMAL, "Made", "made %d", i), 0);
        json_decref(ref);
    }
    ckube_event_recorder_free(r); /* no flush before: free must write them */
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "flush-%02d", i);
        json_t *evs = events_about("default", name);
        assert_int_equal(json_array_size(evs), 1);
        json_decref(evs);
    }
}

/* ------------------------------------------- failures: retries, queue */

static void test_retries_then_gives_up(void **state)
{
    (void)state;
    ckube_client *dead = dead_client();
    ckube_clock *clk = ckube_fake_clock_new(CKUBE_SEC(1000));
    ckube_event_recorder *r = ckube_event_recorder_new(
        dead, &(ckube_event_recorder_opts){.component = "retry", .clock = clk}, NULL);
    assert_non_null(r);
    json_t *p = pod("default", "retry-pod", "uid-retry");
    assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_NORMAL, "R", "m"), 0);
    ckube_event_recorder_stats st;
    uint64_t deadline = ckube_monotonic_ns() + CKUBE_SEC(60);
    uint64_t advanced = 0, errors_at_advance = 0;
    for (;;) {
        ckube_event_recorder_stats_get(r, &st);
        if (st.abandoned || ckube_monotonic_ns() > deadline)
            break;
        /* Advance once per failed try, once the sender waits again. */
        if (st.write_errors > errors_at_advance && ckube_fake_clock_waiters(clk) > 0) {
            errors_at_advance = st.write_errors;
            /* Between tries the recorder waits on its clock: no try
             * happens until the clock moves. */
            uint64_t before = st.write_errors;
            usleep(5000);
            ckube_event_recorder_stats_get(r, &st);
            assert_int_equal(st.write_errors, before);
            ckube_fake_clock_advance(clk, CKUBE_SEC(10));
            advanced += 10;
        }
        usleep(1000);
    }
    assert_int_equal(st.abandoned, 1);
    assert_int_equal(st.write_errors, 12);
    /* 11 waits of at most 10 s each (the first one random). */
    assert_true(advanced >= 100 && advanced <= 110);
    assert_int_equal(st.created + st.patched + st.rejected, 0);
    json_decref(p);
    ckube_event_recorder_free(r);
    ckube_fake_clock_free(clk);
    ckube_client_free(dead);
}

static void test_queue_full_drops_without_blocking(void **state)
{
    (void)state;
    ckube_client *dead = dead_client();
    ckube_clock *clk = ckube_fake_clock_new(CKUBE_SEC(1000));
    ckube_event_recorder *r =
        ckube_event_recorder_new(dead,
                                 &(ckube_event_recorder_opts){.component = "full",
                                                              .clock = clk,
                                                              .log_verbosity = -1,
                                                              .flush_timeout_ns = CKUBE_MS(300)},
                                 NULL);
    assert_non_null(r);
    json_t *p = pod("default", "full-pod", "uid-full");
    assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_NORMAL, "R", "first"), 0);
    /* The sender is stuck retrying the first event (the fake clock never
     * moves), so the queue can only fill. */
    uint64_t deadline = ckube_monotonic_ns() + CKUBE_SEC(30);
    ckube_event_recorder_stats st;
    for (;;) {
        ckube_event_recorder_stats_get(r, &st);
        if ((st.write_errors >= 2 || ckube_fake_clock_waiters(clk) > 0) && st.pending == 1)
            break;
        assert_true(ckube_monotonic_ns() < deadline);
        usleep(1000);
    }
    uint64_t t0 = ckube_monotonic_ns();
    for (int i = 0; i < 1000; i++)
        assert_int_equal(ckube_event_recordf(r, p, CKUBE_EVENT_NORMAL, "R", "queued %d", i), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(ckube_event_record(r, p, CKUBE_EVENT_NORMAL, "R", "one too many"), -1);
    uint64_t took = ckube_monotonic_ns() - t0;
    assert_true(took < CKUBE_SEC(5)); /* never blocked on the stuck sender */
    ckube_event_recorder_stats_get(r, &st);
    assert_int_equal(st.queued, 1001);
    assert_int_equal(st.dropped, 5);
    assert_int_equal(st.pending, 1001);

    /* free: the stuck retry ends at once, the queue is tried for at most
     * the flush timeout, the rest abandoned; the thread is joined. */
    t0 = ckube_monotonic_ns();
    ckube_event_recorder_free(r);
    took = ckube_monotonic_ns() - t0;
    assert_true(took < CKUBE_SEC(10));
    json_decref(p);
    ckube_fake_clock_free(clk);
    ckube_client_free(dead);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_fields),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_dedup_patches_count),
        cmocka_unit_test(test_aggregation),
        cmocka_unit_test(test_spam_filter),
        cmocka_unit_test(test_free_flushes),
        cmocka_unit_test(test_retries_then_gives_up),
        cmocka_unit_test(test_queue_full_drops_without_blocking),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
