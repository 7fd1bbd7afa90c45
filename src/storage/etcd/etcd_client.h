/* etcd_client.h - a client of etcd's v3 API over gRPC's C core (Debian's
 * libgrpc), for the etcd storage backend (issue #23): unary calls of the
 * KV and Maintenance services, and Watch streams. Messages are
 * protobuf-c's, from proto/etcd_rpc.proto.
 *
 * One gRPC channel per client multiplexes every call over HTTP/2 (one
 * connection per etcd member in use, never one per request); with
 * several endpoints gRPC's round_robin policy spreads calls and skips a
 * member that is down. Thread-safe: any thread may make calls at once.
 * Asynchronous calls complete on the client's one driver thread, so that
 * many in flight cost no thread each.
 *
 * The etcd storage backend (etcd.c, next) keeps keys as upstream's
 * apiserver lays them out; this layer knows nothing of keys or JSON. */
#ifndef CKUBE_STORAGE_ETCD_CLIENT_H
#define CKUBE_STORAGE_ETCD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "proto/etcd_rpc.pb-c.h"
#include "storage/etcd/etcd.h"

/* gRPC status codes the backend tells apart (grpc/status.h's values). */
#define ETCD_GRPC_OK 0
#define ETCD_GRPC_CANCELLED 1
#define ETCD_GRPC_DEADLINE_EXCEEDED 4
#define ETCD_GRPC_OUT_OF_RANGE 11 /* etcd: a compacted revision */
#define ETCD_GRPC_UNAVAILABLE 14
#define ETCD_GRPC_INVALID_ARGUMENT 3
#define ETCD_GRPC_RESOURCE_EXHAUSTED 8

/* A failed call: gRPC's status code and etcd's message ("etcdserver:
 * mvcc: required revision has been compacted", "failed to connect to all
 * addresses", ...). */
typedef struct etcd_error {
    int code;
    char message[256];
} etcd_error;

/* etcd_tls: see etcd.h. */

typedef struct etcd_client etcd_client;

/* A client of the members in `endpoints` ("http://127.0.0.1:2379" or
 * several, comma-separated, as --etcd-servers; all http or all https).
 * No connection is made here: the first call connects. NULL with *err
 * (malloc'd) on a malformed list or an unreadable TLS file. */
etcd_client *etcd_client_new(const char *endpoints, const etcd_tls *tls, char **err);
/* Cancels nothing: every call and watch must be over. NULL-safe. */
void etcd_client_free(etcd_client *c);

/* One unary call: `method` is the gRPC path ("/etcdserverpb.KV/Range"),
 * `req` the request (borrowed), `resp_desc` the answer's type. Waits up
 * to timeout_ms (0: 30 s), connecting first if need be (a member that is
 * down is waited for until the deadline, as etcd's clients do; a Range
 * that meets a member dying under it, UNAVAILABLE, is tried again within
 * the deadline, as clientv3 retries its repeatable requests). Returns
 * 0 with *resp (free with protobuf_c_message_free_unpacked), or -1 with
 * *err. */
int etcd_call(etcd_client *c, const char *method, const ProtobufCMessage *req,
              const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp, int timeout_ms,
              etcd_error *err);

/* etcd_call without waiting for a connection: with none ready it fails
 * at once (UNAVAILABLE), its message gRPC's account of the last attempt
 * ("failed to connect to all addresses; last error: ... Ssl handshake
 * failed ..."), which etcd_call's deadline hides. */
int etcd_call_now(etcd_client *c, const char *method, const ProtobufCMessage *req,
                  const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                  int timeout_ms, etcd_error *err);

/* Called once per asynchronous call, on the client's driver thread: the
 * answer (the callee owns it: protobuf_c_message_free_unpacked) and a
 * NULL err, or NULL and why the call failed. It must not block for long:
 * every other asynchronous answer waits for it. */
typedef void (*etcd_call_fn)(void *arg, ProtobufCMessage *resp, const etcd_error *err);

/* The call etcd_call makes, without waiting: `req` is serialized before
 * this returns (borrowed only for the call); fn(arg, ...) runs later,
 * exactly once, on the driver thread, at the latest at the deadline
 * (timeout_ms; 0: 30 s). Any thread. Returns 0, or -1 with *err when the
 * call could not start (fn will not run). */
int etcd_call_async(etcd_client *c, const char *method, const ProtobufCMessage *req,
                    const ProtobufCMessageDescriptor *resp_desc, int timeout_ms, etcd_call_fn fn,
                    void *arg, etcd_error *err);

/* ---- watches ----------------------------------------------------------- */

typedef struct etcd_watch etcd_watch;

/* Called on the client's driver thread for each WatchResponse (borrowed for
 * the call): events, progress notifications (no events, a header
 * revision), the creation and cancellation answers. When the stream
 * ends (an error, etcd gone, etcd_watch_stop) it is called once more
 * with resp NULL and *err saying why (code CANCELLED after a stop). */
typedef void (*etcd_watch_fn)(void *arg, const Ckube__Etcd__WatchResponse *resp,
                              const etcd_error *err);

/* Opens a Watch stream and asks for one watch: the keys from `key` to
 * `range_end` (both `len` bytes; range_end NULL: the key alone) from
 * `start_rev` (0: from now), with progress notifications and each
 * event's previous key-value (prev_kv: a delete's create revision) as
 * asked.
 * Waits until the request is sent (not for etcd's answer, which comes to
 * fn). Not from the driver thread (a callback). Returns the watch, or
 * NULL with *err (fn is then never called). */
etcd_watch *etcd_watch_start(etcd_client *c, const void *key, size_t key_len, const void *range_end,
                             size_t range_end_len, int64_t start_rev, bool progress_notify,
                             bool prev_kv, etcd_watch_fn fn, void *arg, etcd_error *err);
/* Asks etcd for a progress notification on the stream (a WatchResponse
 * with the current revision and no events, once every watch on it is
 * caught up). 0, or -1 when the stream is over. Any thread but the
 * driver: it waits until the request is sent. */
int etcd_watch_request_progress(etcd_watch *w);
/* Ends the stream (the callback gets its last call), waits for that call
 * and frees the watch. Not from the callback. NULL-safe. */
void etcd_watch_stop(etcd_watch *w);

#endif
