/* Server-side printing: meta.k8s.io/v1 Table responses for kubectl. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "apiserver/endpoints/request/table.h"
#include "common/text.h"
#include "ckube/json.h"
#include "common/xalloc.h"

static json_t *age_cell(const json_t *ts)
{
    int64_t t = ckube_parse_rfc3339(json_string_value(ts));
    if (t < 0)
        return json_string("<unknown>");
    char buf[32];
    ckube__human_duration((int64_t)time(NULL) - t, buf, sizeof buf);
    return json_string(buf);
}

static const printer_column default_columns[] = {
    {"Name", "string", "name", "Name must be unique within a namespace.", 0, ".metadata.name",
     NULL},
    {"Created At", "date", "", "The time the object was created.", 0, ".metadata.creationTimestamp",
     NULL},
};

static const printer_column *columns_of(const resource_type *t, size_t *n)
{
    if (t->ncolumns) {
        *n = t->ncolumns;
        return t->columns;
    }
    *n = 2;
    return default_columns;
}

json_t *table_column_definitions(const resource_type *t)
{
    size_t n;
    const printer_column *cols = columns_of(t, &n);
    json_t *defs = json_array();
    for (size_t i = 0; i < n; i++) {
        /* Date columns keep their declared type; their cells are ages. */
        json_array_append_new(defs, json_pack("{s:s,s:s,s:s,s:s,s:i}", "name", cols[i].name, "type",
                                              cols[i].type, "format",
                                              cols[i].format ? cols[i].format : "", "description",
                                              cols[i].description ? cols[i].description : "",
                                              "priority", cols[i].priority));
    }
    return defs;
}

static json_t *cell(const resource_type *t, const printer_column *c, const json_t *obj)
{
    if (c->fn)
        return c->fn(obj);
    json_t *v = c->json_path ? ckube_json_get_path(obj, c->json_path) : NULL;
    bool date = !strcmp(c->type, "date") ||
                (c->json_path && !strcmp(c->json_path, ".metadata.creationTimestamp"));
    if (date)
        return v ? age_cell(v) : json_string("<unknown>");
    if (!v || json_is_null(v)) {
        /* Built-in printers show <none>; CRD columns leave the cell empty. */
        return t->is_custom ? json_null() : json_string("<none>");
    }
    if (json_is_object(v) || json_is_array(v)) {
        char *s = ckube_json_dumps(v, NULL);
        json_t *r = json_string(s ? s : "");
        free(s);
        return r;
    }
    if (!strcmp(c->type, "integer") && json_is_integer(v))
        return json_incref(v);
    if (!strcmp(c->type, "number") && json_is_number(v))
        return json_incref(v);
    if (!strcmp(c->type, "boolean") && json_is_boolean(v))
        return json_incref(v);
    if (json_is_string(v))
        return json_incref(v);
    char *s = ckube_json_dumps(v, NULL);
    json_t *r = json_string(s ? s : "");
    free(s);
    return r;
}

static json_t *partial_metadata(const json_t *obj)
{
    json_t *meta = json_deep_copy(json_object_get(obj, "metadata"));
    json_object_del(meta, "managedFields");
    return json_pack("{s:s,s:s,s:o}", "kind", "PartialObjectMetadata", "apiVersion",
                     "meta.k8s.io/v1", "metadata", meta ? meta : json_object());
}

json_t *table_row(req_ctx *rc, const json_t *obj)
{
    size_t n;
    const printer_column *cols = columns_of(rc->type, &n);
    json_t *cells = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(cells, cell(rc->type, &cols[i], obj));
    json_t *row = json_pack("{s:o}", "cells", cells);
    if (rc->include_object == 2)
        json_object_set_new(row, "object", json_deep_copy(obj));
    else if (rc->include_object == 1)
        json_object_set_new(row, "object", partial_metadata(obj));
    return row;
}

json_t *table_for_objects(req_ctx *rc, cobj **objs, size_t n)
{
    json_t *rows = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *obj = cobj_decode(objs[i]);
        if (!obj)
            continue;
        if (rc->type->present)
            rc->type->present(rc->type, obj);
        json_array_append_new(rows, table_row(rc, obj));
        json_decref(obj);
    }
    const char *rv = "";
    char buf[32];
    if (n == 1) {
        snprintf(buf, sizeof buf, "%" PRId64, objs[0]->rev);
        rv = buf;
    }
    return json_pack("{s:s,s:s,s:{s:s},s:o,s:o}", "kind", "Table", "apiVersion", "meta.k8s.io/v1",
                     "metadata", "resourceVersion", rv, "columnDefinitions",
                     table_column_definitions(rc->type), "rows", rows);
}

char *table_head(req_ctx *rc, int64_t rev, const char *cont, size_t more, size_t *len)
{
    char rv[32];
    snprintf(rv, sizeof rv, "%" PRId64, rev);
    json_t *t = json_pack("{s:s,s:s,s:{s:s},s:o}", "kind", "Table", "apiVersion", "meta.k8s.io/v1",
                          "metadata", "resourceVersion", rv, "columnDefinitions",
                          table_column_definitions(rc->type));
    if (t && cont) {
        json_t *meta = json_object_get(t, "metadata");
        json_object_set_new(meta, "continue", json_string(cont));
        json_object_set_new(meta, "remainingItemCount", json_integer((json_int_t)more));
    }
    size_t n = 0;
    char *s = t ? ckube_json_dumps(t, &n) : NULL;
    json_decref(t);
    /* "{...}" becomes "{...,\"rows\":[". */
    char *head = s ? xrealloc(s, n + 9) : NULL; /* n - 1 + 9 bytes and a NUL */
    if (!head) {
        free(s);
        return NULL;
    }
    memcpy(head + n - 1, ",\"rows\":[", 9);
    *len = n - 1 + 9;
    head[*len] = '\0';
    return head;
}

void table_row_append(struct evbuffer *out, req_ctx *rc, const cobj *o)
{
    json_t *obj = cobj_decode(o);
    if (!obj)
        return;
    if (rc->type->present)
        rc->type->present(rc->type, obj);
    json_t *row = table_row(rc, obj);
    json_decref(obj);
    size_t n;
    char *s = row ? ckube_json_dumps(row, &n) : NULL;
    json_decref(row);
    if (s)
        evbuffer_add(out, s, n);
    free(s);
}
