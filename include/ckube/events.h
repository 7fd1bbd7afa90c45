/* ckube/events.h - the event recorder: core/v1 Events about objects, with
 * client-go's correlation (dedup, aggregation, spam filter).
 *
 * The C counterpart of client-go's tools/record (EventBroadcaster +
 * EventRecorder + StartRecordingToSink + StartLogging):
 *
 *   ckube_event_recorder *rec = ckube_event_recorder_new(client,
 *       &(ckube_event_recorder_opts){.component = "pod-counter"}, &err);
 *   ckube_event_recordf(rec, pod, CKUBE_EVENT_NORMAL, "Counted", "pod count is %d", n);
 *   ...
 *   ckube_event_recorder_free(rec);   // flushes (bounded), joins
 *
 * Recording never blocks the caller: the event is formatted and put on a
 * bounded queue (1000 by default); when the queue is full it is dropped
 * with an error log line ("too many queued events"). One sender thread
 * per recorder takes events off the queue, logs each one in klog format
 *
 *   Event(v1.ObjectReference{Kind:"Pod", Namespace:"default", Name:"p", UID:"...",
 *   APIVersion:"v1", ResourceVersion:"42", FieldPath:""}): type: 'Normal'
 *   reason: 'Counted' pod count is 3
 *
 * runs it through the correlator and writes it to the API server:
 *
 * - Aggregation: events that differ only in their message (same source,
 *   object, type and reason) are "similar". Once 10 distinct messages were
 *   seen within 10 minutes (measured on the recorder's clock, the window
 *   restarting whenever 10 minutes pass without one), each further similar
 *   event is replaced by one combined Event whose message is
 *   "(combined from similar events): " + the latest message; the combined
 *   Event is then counted like any other (dedup below).
 * - Dedup: an event identical to one already written (same source, object,
 *   type, reason, message) PATCHes the existing Event (strategic merge
 *   patch of count, lastTimestamp and message) instead of creating one;
 *   when that patch answers 404 (the Event was deleted or expired), the
 *   Event is created again under the same name.
 * - Spam filter: a token bucket per source + object (burst 25, refilled
 *   1 token per 5 minutes, on the recorder's clock); an event arriving
 *   with the bucket empty is dropped (it still counts for dedup, so the
 *   next written count jumps as upstream's does).
 * - Each of the three caches is an LRU of 4096 entries.
 * - Writes that fail without an answer from the server (connection
 *   refused, timeouts) are retried up to 12 tries in all, 10 s apart (the
 *   first wait randomized in [0, 10 s) so many clients do not retry in
 *   step); answers that reject the event (4xx/5xx) are not retried, as
 *   upstream.
 *
 * Events written are core/v1 Events named "<involvedName>.<hex>" (the hex
 * of the wall-clock time in nanoseconds, made strictly increasing per
 * recorder so names never collide) in the involved object's namespace, or
 * "default" for a cluster-scoped object, with involvedObject {kind,
 * namespace, name, uid, apiVersion, resourceVersion, fieldPath}, reason,
 * message, type, source {component, host}, count, firstTimestamp,
 * lastTimestamp (RFC 3339, wall clock), reportingComponent,
 * reportingInstance, and eventTime null (the legacy recorder's shape).
 *
 * Thread-safety: every function may be called from any thread, except
 * that ckube_event_recorder_free must not race with other calls on the
 * same recorder.
 */
#ifndef CKUBE_EVENTS_H
#define CKUBE_EVENTS_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/status.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CKUBE_EVENT_NORMAL "Normal"
#define CKUBE_EVENT_WARNING "Warning"

struct ckube_metrics_registry;
typedef struct ckube_event_recorder ckube_event_recorder;

/* Options. Zero means the default everywhere; strings are copied. */
typedef struct ckube_event_recorder_opts {
    const char *component; /* source.component, reportingComponent: required */
    const char *host;      /* source.host, reportingInstance; NULL = "" */
    ckube_clock *clock;    /* aggregation window, spam bucket, retry waits;
                              NULL = real; borrowed, must outlive the recorder */
    /* When set, the recorder counts every event's fate in
     * ckube_event_recorder_events_total{component, result} with result
     * queued | dropped | invalid | filtered | aggregated | created |
     * patched | rejected | abandoned, and failed write attempts in
     * ckube_event_recorder_write_errors_total{component}. Borrowed. */
    struct ckube_metrics_registry *metrics;
    size_t queue_size;          /* 0 = 1000 */
    int max_tries;              /* tries per write; 0 = 12 */
    uint64_t retry_interval_ns; /* 0 = 10 s */
    uint64_t flush_timeout_ns;  /* how long free() keeps writing what is
                                   queued, in real time; 0 = 10 s */
    /* Events are logged with CKUBE_V(log_verbosity); 0 = always (as
     * upstream's StartLogging(klog.Infof)); negative = never. */
    int log_verbosity;
} ckube_event_recorder_opts;

/* Creates a recorder writing through `c` (borrowed: must outlive the
 * recorder) and starts its sender thread. Returns NULL with *err (caller
 * frees; err may be NULL) when the component is missing or a resource
 * (memory, thread) is unavailable. Free with ckube_event_recorder_free. */
ckube_event_recorder *ckube_event_recorder_new(ckube_client *c,
                                               const ckube_event_recorder_opts *opts,
                                               ckube_status **err);

/* Stops accepting events, writes what is still queued (each event tried
 * once more, no retry waits) for at most opts.flush_timeout_ns of real
 * time, abandons the rest with a log line, joins the sender thread and
 * frees everything. An in-flight request is bounded by the client's own
 * timeout. NULL-safe. */
void ckube_event_recorder_free(ckube_event_recorder *r);

/* Records an event about `involved_object` (borrowed, read only; may be a
 * cache object): either a full object (apiVersion, kind,
 * metadata.{name, namespace, uid, resourceVersion}) or an ObjectReference
 * ({kind, namespace, name, uid, apiVersion, resourceVersion, fieldPath}).
 * `type` is CKUBE_EVENT_NORMAL or CKUBE_EVENT_WARNING; `reason` is a short
 * CamelCase machine-readable word; the message is printf-formatted.
 * Never blocks (beyond a short mutex). Returns 0 when queued, -1 when
 * dropped: invalid arguments (unsupported type, no reason, an object
 * without a name; logged as errors like upstream's "Unsupported event
 * type"), the queue full, or the recorder shutting down. */
int ckube_event_recordf(ckube_event_recorder *r, const json_t *involved_object, const char *type,
                        const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int ckube_event_vrecordf(ckube_event_recorder *r, const json_t *involved_object, const char *type,
                         const char *reason, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));
/* The same with a literal message (no formatting). */
int ckube_event_record(ckube_event_recorder *r, const json_t *involved_object, const char *type,
                       const char *reason, const char *message);

/* Waits (real time, at most timeout_ns; 0 = no limit) until every event
 * queued before the call has been handled (written, filtered, rejected or
 * given up). Retry waits run on the recorder's clock, so with a fake clock
 * an event that is being retried holds this until the clock is advanced.
 * Returns 0, or -1 on timeout. */
int ckube_event_recorder_flush(ckube_event_recorder *r, uint64_t timeout_ns);

/* What happened to the events recorded so far (each event lands in
 * exactly one of the outcome counters once handled). */
typedef struct ckube_event_recorder_stats {
    uint64_t queued;       /* accepted by record */
    uint64_t dropped;      /* queue full (or shutting down) */
    uint64_t invalid;      /* rejected by record: bad arguments */
    uint64_t filtered;     /* outcome: dropped by the spam filter */
    uint64_t created;      /* outcome: written with POST */
    uint64_t patched;      /* outcome: written with PATCH (dedup) */
    uint64_t rejected;     /* outcome: the server refused it (not retried) */
    uint64_t abandoned;    /* outcome: gave up (tries exhausted, shutdown) */
    uint64_t aggregated;   /* of the written/filtered: replaced by a combined event */
    uint64_t write_errors; /* failed write attempts (each try) */
    size_t pending;        /* queued and not yet handled */
} ckube_event_recorder_stats;
void ckube_event_recorder_stats_get(ckube_event_recorder *r, ckube_event_recorder_stats *out);

#ifdef __cplusplus
}
#endif
#endif
