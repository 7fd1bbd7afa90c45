/* table.h - server-side printing: meta.k8s.io/v1 Table answers for
 * kubectl's human output. */
#ifndef CKUBE_APISERVER_ENDPOINTS_REQUEST_TABLE_H
#define CKUBE_APISERVER_ENDPOINTS_REQUEST_TABLE_H

#include "apiserver/endpoints/request/context.h"

/* table_for_objects: a Table of the objects (borrowed), built whole (new
 * reference). table_row: one object's row (new reference). table_head: a
 * Table list's JSON up to and including "\"rows\":[" (malloc'd, *len
 * set; NULL when out of memory), with its resourceVersion, and
 * continue/remainingItemCount when `cont` is not NULL. table_row_append:
 * an object's row, encoded, appended to out. */
json_t *table_for_objects(req_ctx *rc, cobj **objs, size_t n);
json_t *table_row(req_ctx *rc, const json_t *obj);
char *table_head(req_ctx *rc, int64_t rev, const char *cont, size_t more, size_t *len);
void table_row_append(struct evbuffer *out, req_ctx *rc, const cobj *o);
json_t *table_column_definitions(const resource_type *t);

#endif
