/* The managedFields list (internal.h, section 4): decode, encode, cap. */
#include "apiserver/fieldmanager/internal.h"

fm_managed *fm_managed_new(void)
{
    return xcalloc(1, sizeof(fm_managed));
}

static void entry_free(fm_entry *e)
{
    free(e->manager);
    free(e->api_version);
    free(e->subresource);
    free(e->time);
    fm_set_free(e->set);
}

void fm_managed_free(fm_managed *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        entry_free(&m->e[i]);
    free(m->e);
    free(m);
}

fm_managed *fm_managed_copy(const fm_managed *m)
{
    fm_managed *c = fm_managed_new();
    c->cap = c->n = m->n;
    c->e = xcalloc(m->n, sizeof *c->e);
    for (size_t i = 0; i < m->n; i++) {
        const fm_entry *s = &m->e[i];
        c->e[i] = (fm_entry){xstrdup(s->manager),
                             s->apply,
                             xstrdup(s->api_version),
                             xstrdup(s->subresource),
                             s->time ? xstrdup(s->time) : NULL,
                             fm_set_copy(s->set)};
    }
    return c;
}

long fm_managed_find(const fm_managed *m, const char *manager, bool apply, const char *api_version,
                     const char *subresource)
{
    for (size_t i = 0; i < m->n; i++) {
        const fm_entry *e = &m->e[i];
        if (e->apply == apply && !strcmp(e->manager, manager) &&
            !strcmp(e->subresource, subresource) && (apply || !strcmp(e->api_version, api_version)))
            return (long)i;
    }
    return -1;
}

size_t fm_managed_put(fm_managed *m, const char *manager, bool apply, const char *api_version,
                      const char *subresource, fm_set *set)
{
    long i = fm_managed_find(m, manager, apply, api_version, subresource);
    if (i >= 0) {
        fm_set_free(m->e[i].set);
        m->e[i].set = set;
        free(m->e[i].api_version);
        m->e[i].api_version = xstrdup(api_version);
        return (size_t)i;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 4;
        m->e = xrealloc(m->e, m->cap * sizeof *m->e);
    }
    m->e[m->n] =
        (fm_entry){xstrdup(manager), apply, xstrdup(api_version), xstrdup(subresource), NULL, set};
    return m->n++;
}

static void managed_remove(fm_managed *m, size_t i)
{
    entry_free(&m->e[i]);
    memmove(m->e + i, m->e + i + 1, (m->n - i - 1) * sizeof *m->e);
    m->n--;
}

void fm_managed_drop_empty(fm_managed *m)
{
    for (size_t i = 0; i < m->n;) {
        fm_set_compact(m->e[i].set);
        if (fm_set_empty(m->e[i].set))
            managed_remove(m, i);
        else
            i++;
    }
}

void fm_set_time(fm_entry *e, const char *now)
{
    free(e->time);
    e->time = xstrdup(now);
}

fm_managed *fm_managed_decode(const json_t *list, char **err)
{
    *err = NULL;
    fm_managed *m = fm_managed_new();
    if (!list || json_is_null(list))
        return m;
    if (!json_is_array(list)) {
        *err = xstrdup("managedFields must be a list");
        fm_managed_free(m);
        return NULL;
    }
    size_t i;
    json_t *it;
    json_array_foreach(list, i, it)
    {
        const char *op = json_string_value(json_object_get(it, "operation"));
        const char *av = json_string_value(json_object_get(it, "apiVersion"));
        const char *ft = json_string_value(json_object_get(it, "fieldsType"));
        json_t *mgr = json_object_get(it, "manager"), *sub = json_object_get(it, "subresource");
        json_t *tm = json_object_get(it, "time");
        if (!json_is_object(it))
            *err = xasprintf("managed fields entry %zu is not an object", i);
        else if (!op || (strcmp(op, "Apply") && strcmp(op, "Update")))
            *err = xstrdup("operation must be `Apply` or `Update`");
        else if (!av || !*av)
            *err = xstrdup("apiVersion must not be empty");
        else if (!ft || !*ft)
            *err = xasprintf("missing fieldsType in managed fields entry %zu", i);
        else if (strcmp(ft, "FieldsV1"))
            *err = xasprintf("invalid fieldsType \"%s\" in managed fields entry %zu", ft, i);
        else if ((mgr && !json_is_string(mgr) && !json_is_null(mgr)) ||
                 (sub && !json_is_string(sub) && !json_is_null(sub)) ||
                 (tm && !json_is_string(tm) && !json_is_null(tm)))
            *err = xasprintf("managed fields entry %zu has a field of the wrong type", i);
        if (*err) {
            fm_managed_free(m);
            return NULL;
        }
        char *ferr = NULL;
        fm_set *set = fm_set_from_fields(json_object_get(it, "fieldsV1"), &ferr);
        if (!set) {
            *err = xasprintf("error decoding versioned set from entry %zu: %s", i, ferr);
            free(ferr);
            fm_managed_free(m);
            return NULL;
        }
        size_t k = fm_managed_put(m, str_or(json_string_value(mgr), ""), !strcmp(op, "Apply"), av,
                                  str_or(json_string_value(sub), ""), set);
        free(m->e[k].time);
        m->e[k].time = json_string_value(tm) ? xstrdup(json_string_value(tm)) : NULL;
    }
    return m;
}

static int64_t entry_seconds(const fm_entry *e)
{
    int64_t s = e->time ? ckube_parse_rfc3339(e->time) : 0;
    return s < 0 ? 0 : s;
}

/* Upstream's order: Apply before Update, then by time, manager,
 * apiVersion, subresource. */
static int entry_cmp(const void *pa, const void *pb)
{
    const fm_entry *a = *(const fm_entry *const *)pa, *b = *(const fm_entry *const *)pb;
    if (a->apply != b->apply)
        return a->apply ? -1 : 1;
    int64_t x = entry_seconds(a), y = entry_seconds(b);
    if (x != y)
        return x < y ? -1 : 1;
    int c = strcmp(a->manager, b->manager);
    if (!c)
        c = strcmp(a->api_version, b->api_version);
    if (!c)
        c = strcmp(a->subresource, b->subresource);
    return c;
}

static json_t *managed_encode(const fm_managed *m)
{
    const fm_entry **order = xcalloc(m->n, sizeof *order);
    for (size_t i = 0; i < m->n; i++)
        order[i] = &m->e[i];
    qsort(order, m->n, sizeof *order, entry_cmp);
    json_t *list = json_array();
    for (size_t i = 0; i < m->n; i++) {
        const fm_entry *e = order[i];
        json_t *o = json_object();
        /* Literal keys and server-made values need no UTF-8 check; the
         * manager's name comes from the client and keeps it. */
        json_object_set_new_nocheck(o, "manager", json_string(e->manager));
        json_object_set_new_nocheck(o, "operation",
                                    json_string_nocheck(e->apply ? "Apply" : "Update"));
        json_object_set_new_nocheck(o, "apiVersion", json_string(e->api_version));
        if (e->time)
            json_object_set_new_nocheck(o, "time", json_string(e->time));
        json_object_set_new_nocheck(o, "fieldsType", json_string_nocheck("FieldsV1"));
        json_object_set_new_nocheck(o, "fieldsV1", fm_fields_of(e->set));
        if (*e->subresource)
            json_object_set_new_nocheck(o, "subresource", json_string(e->subresource));
        json_array_append_new(list, o);
    }
    free(order);
    return list;
}

void fm_managed_store(const fm_managed *m, json_t *obj)
{
    json_t *meta = ckube_json_object_ensure(obj, "metadata");
    if (!m || !m->n) {
        json_object_del(meta, "managedFields");
        return;
    }
    json_object_set_new(meta, "managedFields", managed_encode(m));
}

void fm_managed_cap(fm_managed *m)
{
    size_t nupd = 0;
    for (size_t i = 0; i < m->n; i++)
        nupd += !m->e[i].apply;
    if (nupd <= MAX_UPDATE_MANAGERS)
        return;
    fm_entry **upd = xcalloc(nupd, sizeof *upd);
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++)
        if (!m->e[i].apply)
            upd[k++] = &m->e[i];
    qsort(upd, nupd, sizeof *upd, entry_cmp);
    /* Work on identities: entries move in m->e as others are removed. */
    typedef struct ident {
        char *manager, *api_version, *subresource;
    } ident;
    ident *ids = xcalloc(nupd, sizeof *ids);
    for (size_t i = 0; i < nupd; i++)
        ids[i] = (ident){xstrdup(upd[i]->manager), xstrdup(upd[i]->api_version),
                         xstrdup(upd[i]->subresource)};
    free(upd);
    size_t length = nupd;
    for (size_t i = 0; i < nupd && length > MAX_UPDATE_MANAGERS; i++) {
        const char *version = ids[i].api_version;
        long first = -1;
        for (size_t j = 0; j < i && first < 0; j++)
            if (!strcmp(ids[j].api_version, version))
                first = (long)j;
        if (first < 0)
            continue; /* the first of its version stays until a second comes */
        long bucket = fm_managed_find(m, "ancient-changes", false, version, "");
        if (bucket < 0) {
            long f = fm_managed_find(m, ids[first].manager, false, version, ids[first].subresource);
            if (f < 0)
                continue;
            free(m->e[f].manager);
            m->e[f].manager = xstrdup("ancient-changes");
            free(m->e[f].subresource);
            m->e[f].subresource = xstrdup("");
            bucket = f;
        }
        long cur = fm_managed_find(m, ids[i].manager, false, version, ids[i].subresource);
        if (cur < 0 || cur == bucket)
            continue;
        fm_set_union_into(m->e[bucket].set, m->e[cur].set);
        free(m->e[bucket].time);
        m->e[bucket].time = m->e[cur].time ? xstrdup(m->e[cur].time) : NULL;
        managed_remove(m, (size_t)cur);
        length--;
    }
    for (size_t i = 0; i < nupd; i++) {
        free(ids[i].manager);
        free(ids[i].api_version);
        free(ids[i].subresource);
    }
    free(ids);
}
