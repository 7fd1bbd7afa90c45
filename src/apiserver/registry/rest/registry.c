/* The registry of served resource types; see registry.h. */
#include "apiserver/registry/rest/registry.h"
#include "common/xalloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The types in a sorted array under a read-write lock: lookups (every
 * request) share it, changes (CRDs) are rare. */
struct registry {
    pthread_rwlock_t lock;
    resource_type **types;
    size_t ntypes, cap;
    unsigned long generation;
};

crd_serving *crd_serving_new(char *what)
{
    crd_serving *s = what ? xcalloc(1, sizeof *s) : NULL;
    if (!s) {
        free(what);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    atomic_init(&s->retired, 0);
    s->what = what;
    return s;
}

crd_serving *crd_serving_ref(crd_serving *s)
{
    if (s)
        atomic_fetch_add(&s->refs, 1);
    return s;
}

void crd_serving_unref(crd_serving *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    free(s->what);
    free(s);
}

resource_type *resource_type_ref(resource_type *t)
{
    if (t)
        atomic_fetch_add(&t->refs, 1);
    return t;
}

static void free_strv(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

void resource_type_unref(resource_type *t)
{
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
        return;
    free(t->group);
    free(t->version);
    free(t->resource);
    free(t->kind);
    free(t->list_kind);
    free(t->singular);
    free(t->api_version);
    free_strv(t->short_names);
    free_strv(t->categories);
    free(t->scale_spec_replicas_path);
    free(t->scale_status_replicas_path);
    free(t->scale_label_selector_path);
    json_decref(t->schema);
    for (size_t i = 0; i < t->ncolumns; i++) {
        free(t->columns[i].name);
        free(t->columns[i].type);
        free(t->columns[i].format);
        free(t->columns[i].description);
        free(t->columns[i].json_path);
    }
    free(t->columns);
    for (selectable_field *f = t->owned_selectable_fields; f && f->field; f++) {
        free((char *)f->field);
        free((char *)f->path);
    }
    free(t->owned_selectable_fields);
    free(t->crd_name);
    crd_serving_unref(t->serving);
    if (t->priv_free)
        t->priv_free(t->priv);
    free(t);
}

void resource_type_key_prefix(const resource_type *t, char *buf, size_t n)
{
    const char *g = t->storage_group ? t->storage_group : t->group;
    snprintf(buf, n, "/registry/%s/%s/", *g ? g : "core", t->resource);
}

static int cmp_types(const void *a, const void *b)
{
    const resource_type *x = *(resource_type *const *)a, *y = *(resource_type *const *)b;
    int c = strcmp(x->group, y->group);
    if (c)
        return c;
    c = strcmp(x->version, y->version);
    if (c)
        return c;
    return strcmp(x->resource, y->resource);
}

registry *registry_new(void)
{
    registry *r = xcalloc(1, sizeof *r);
    if (r)
        pthread_rwlock_init(&r->lock, NULL);
    return r;
}

void registry_free(registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->ntypes; i++)
        resource_type_unref(r->types[i]);
    free(r->types);
    pthread_rwlock_destroy(&r->lock);
    free(r);
}

resource_type *registry_lookup(registry *r, const char *group, const char *version,
                               const char *resource)
{
    resource_type *found = NULL;
    pthread_rwlock_rdlock(&r->lock);
    for (size_t i = 0; i < r->ntypes; i++) {
        resource_type *t = r->types[i];
        if (!strcmp(t->resource, resource) && !strcmp(t->group, group) &&
            !strcmp(t->version, version)) {
            found = resource_type_ref(t);
            break;
        }
    }
    pthread_rwlock_unlock(&r->lock);
    return found;
}

resource_type *registry_lookup_kind(registry *r, const char *group, const char *version,
                                    const char *kind)
{
    resource_type *found = NULL;
    pthread_rwlock_rdlock(&r->lock);
    for (size_t i = 0; i < r->ntypes; i++) {
        resource_type *t = r->types[i];
        if (!strcmp(t->kind, kind) && !strcmp(t->group, group) && !strcmp(t->version, version)) {
            found = resource_type_ref(t);
            break;
        }
    }
    pthread_rwlock_unlock(&r->lock);
    return found;
}

int registry_add(registry *r, resource_type *t)
{
    if (!t->api_version) {
        if (*t->group) {
            if (asprintf(&t->api_version, "%s/%s", t->group, t->version) < 0)
                return -1;
        } else {
            t->api_version = xstrdup(t->version);
        }
    }
    if (!t->list_kind && asprintf(&t->list_kind, "%sList", t->kind) < 0)
        return -1;
    pthread_rwlock_wrlock(&r->lock);
    for (size_t i = 0; i < r->ntypes; i++) {
        if (!cmp_types(&r->types[i], &t)) {
            pthread_rwlock_unlock(&r->lock);
            return -1;
        }
    }
    if (r->ntypes == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 32;
        resource_type **n = xrealloc(r->types, ncap * sizeof *n);
        r->types = n;
        r->cap = ncap;
    }
    r->types[r->ntypes++] = t;
    t->registry = r;
    qsort(r->types, r->ntypes, sizeof *r->types, cmp_types);
    r->generation++;
    pthread_rwlock_unlock(&r->lock);
    return 0;
}

void registry_remove(registry *r, const char *group, const char *version, const char *resource)
{
    resource_type *gone = NULL;
    pthread_rwlock_wrlock(&r->lock);
    for (size_t i = 0; i < r->ntypes; i++) {
        resource_type *t = r->types[i];
        if (!strcmp(t->resource, resource) && !strcmp(t->group, group) &&
            !strcmp(t->version, version)) {
            gone = t;
            memmove(&r->types[i], &r->types[i + 1], (r->ntypes - i - 1) * sizeof *r->types);
            r->ntypes--;
            r->generation++;
            break;
        }
    }
    pthread_rwlock_unlock(&r->lock);
    resource_type_unref(gone);
}

resource_type **registry_list(registry *r, size_t *n)
{
    pthread_rwlock_rdlock(&r->lock);
    resource_type **out = xcalloc(r->ntypes ? r->ntypes : 1, sizeof *out);
    *n = 0;
    if (out) {
        for (size_t i = 0; i < r->ntypes; i++)
            out[i] = resource_type_ref(r->types[i]);
        *n = r->ntypes;
    }
    pthread_rwlock_unlock(&r->lock);
    return out;
}

void registry_list_free(resource_type **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        resource_type_unref(list[i]);
    free(list);
}

unsigned long registry_generation(registry *r)
{
    pthread_rwlock_rdlock(&r->lock);
    unsigned long g = r->generation;
    pthread_rwlock_unlock(&r->lock);
    return g;
}
