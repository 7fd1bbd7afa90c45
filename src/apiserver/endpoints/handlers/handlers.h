/* handlers.h - the REST verbs on resources: get, list, create, update,
 * patch, delete, deletecollection (handlers.c), watch (watch.c), and large
 * lists streamed in pieces (list_stream.c). */
#ifndef CKUBE_APISERVER_ENDPOINTS_HANDLERS_HANDLERS_H
#define CKUBE_APISERVER_ENDPOINTS_HANDLERS_HANDLERS_H

#include "apiserver/endpoints/request/context.h"

/* Serves a request for a resource (rc->type is set by the caller's
 * request info); replies and frees rc. */
void handle_resource(req_ctx *rc);

/* Watches (watch.c): handle_watch starts one; watch_loop_flush delivers
 * new events to the loop's watchers; watch_loop_close_all ends them at
 * shutdown. */
void handle_watch(req_ctx *rc);
void watch_loop_flush(loop *lp);
void watch_loop_close_all(loop *lp);

/* Large lists (list_stream.c). list_stream_wanted: whether a list of these
 * objects (borrowed) is big enough to stream. list_stream_start replies
 * with the list, streamed: head is the JSON up to and including
 * "\"items\":[" (or a Table's "\"rows\":[" when rc->want_table: then
 * each object is rendered as a row as the stream reaches it) (owned,
 * freed), objs and its references are taken; rc is freed when the stream
 * ends. list_stream_close_all drops the loop's streams at shutdown. */
bool list_stream_wanted(req_ctx *rc, cobj *const *objs, size_t n);
void list_stream_start(req_ctx *rc, char *head, size_t head_len, cobj **objs, size_t n);
void list_stream_close_all(loop *lp);

/* TokenRequest (tokenrequest.c): POST
 * /api/v1/namespaces/NS/serviceaccounts/NAME/token. */
void handle_token_request(req_ctx *rc);

/* Reads of a type that converts through a webhook (resource_type.convert;
 * convert.c): the objects (taken) in the request's version, as cobjs
 * serving the converted bytes, handed to cb (which takes them, and the
 * array) once, later, on rc's loop; or NULL, 0 and a Status (taken). One
 * review for all of them; `list` words errors as for a list. */
typedef void (*read_convert_cb)(req_ctx *rc, cobj **objs, size_t n, ckube_status *st, void *arg);
typedef struct read_conv read_conv;
read_conv *read_convert(req_ctx *rc, cobj **objs, size_t n, bool list, read_convert_cb cb,
                        void *arg);
/* Stops a read_convert whose cb has not run (it will not); the objects
 * are released. */
void read_convert_cancel(read_conv *c);

/* The core/v1 object `resource` ns/name as the watch cache has it,
 * decoded (a new reference), or NULL. (tokenrequest.c; the server's
 * ServiceAccount token checks read it too.) */
json_t *handlers_cached_core(apiserver *s, const char *resource, const char *ns, const char *name);

/* For this room's files: the request body decoded as a create's is (per
 * Content-Type, fieldValidation honoured for duplicate keys), which must
 * be a JSON object. NULL with *st set (the caller answers it), or NULL
 * with *st NULL when it was answered already (a bad fieldValidation: rc
 * is freed). */
json_t *handlers_read_object(req_ctx *rc, const char *kind, ckube_status **st);

/* Parses labelSelector and fieldSelector, checking field selector keys
 * against the type's selectable fields. On error returns a 400 Status. */
ckube_status *request_selectors(req_ctx *rc, ckube_selector **ls, ckube_selector **fs);

#endif
