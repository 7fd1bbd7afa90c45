/* The schema engine (internal.h): validation of a value against its schema. */
#include "apiserver/apiextensions/schema/internal.h"
#include "ckube/validation.h"
#include "common/xalloc.h"

static double num_value(const json_t *v)
{
    return json_is_integer(v) ? (double)json_integer_value(v) : json_real_value(v);
}

static void validate_string(walk *w, const sch_kw *kw, const json_t *v)
{
    const char *str = json_string_value(v);
    size_t bytes = json_string_length(v);
    const json_t *maxl = kw->max_length;
    const json_t *minl = kw->min_length;
    /* Characters, as Go's utf8.RuneCountInString; counted only when a
     * length is checked (data values are kilobytes long). */
    size_t chars = 0;
    if (maxl || minl)
        for (size_t i = 0; i < bytes; i += sch_utf8_len(str + i, bytes - i))
            chars++;
    const json_t *pat = kw->pattern;
    /* kube-openapi's string validator stops at its first failure. */
    if (json_is_integer(maxl) && (json_int_t)chars > json_integer_value(maxl)) {
        json_int_t m = json_integer_value(maxl);
        sch_add_cause(w, CKUBE_CAUSE_FIELD_TOO_LONG, sch_cur_path(w),
                      "Too long: may not be more than %" JSON_INTEGER_FORMAT " %s", m,
                      m == 1 ? "byte" : "bytes");
    } else if (json_is_integer(minl) && (json_int_t)chars < json_integer_value(minl)) {
        sch_add_invalid(w, v, "%s in body should be at least %" JSON_INTEGER_FORMAT " chars long",
                        sch_cur_path(w), json_integer_value(minl));
    } else if (json_is_string(pat) && strlen(str) == bytes &&
               sch_pattern_match(json_string_value(pat), str) == 0) {
        sch_add_invalid(w, v, "%s in body should match '%s'", sch_cur_path(w),
                        json_string_value(pat));
    }
    const char *format = json_string_value(kw->format);
    if (format && !sch_string_format_ok(format, str)) {
        char *q = ckube_go_quote(str);
        if (!q) {
            w->oom = true;
            return;
        }
        char *detail = NULL;
        if (asprintf(&detail, "%s in body must be of type %s: %s", sch_cur_path(w), format, q) >=
            0) {
            sch_add_value_cause(w, CKUBE_CAUSE_FIELD_TYPE_INVALID, "Invalid value", v, detail);
            free(detail);
        } else {
            w->oom = true;
        }
        free(q);
    }
}

static void validate_number(walk *w, const sch_kw *kw, const json_t *v)
{
    bool is_int = json_is_integer(v);
    double d = num_value(v);
    char lim[64];
    const json_t *mult = kw->multiple_of;
    if (json_is_number(mult) && num_value(mult) > 0) {
        double f = num_value(mult);
        bool ok;
        if (is_int && json_is_integer(mult))
            ok = json_integer_value(v) % json_integer_value(mult) == 0;
        else {
            double q = d / f;
            ok = isfinite(q) && (q == floor(q) || fabs(q - nearbyint(q)) <= 1e-9 * fabs(q));
        }
        if (!ok) {
            sch_format_limit(lim, sizeof lim, f, is_int);
            sch_add_invalid(w, v, "%s in body should be a multiple of %s", sch_cur_path(w), lim);
        }
    }
    const json_t *min = kw->minimum;
    if (json_is_number(min)) {
        bool excl = json_is_true(kw->exclusive_minimum);
        bool bad;
        if (is_int && json_is_integer(min))
            bad = excl ? json_integer_value(v) <= json_integer_value(min)
                       : json_integer_value(v) < json_integer_value(min);
        else
            bad = excl ? d <= num_value(min) : d < num_value(min);
        if (bad) {
            sch_format_limit(lim, sizeof lim, num_value(min), is_int);
            sch_add_invalid(w, v, "%s in body should be greater than %s%s", sch_cur_path(w),
                            excl ? "" : "or equal to ", lim);
        }
    }
    const json_t *max = kw->maximum;
    if (json_is_number(max)) {
        bool excl = json_is_true(kw->exclusive_maximum);
        bool bad;
        if (is_int && json_is_integer(max))
            bad = excl ? json_integer_value(v) >= json_integer_value(max)
                       : json_integer_value(v) > json_integer_value(max);
        else
            bad = excl ? d >= num_value(max) : d > num_value(max);
        if (bad) {
            sch_format_limit(lim, sizeof lim, num_value(max), is_int);
            sch_add_invalid(w, v, "%s in body should be less than %s%s", sch_cur_path(w),
                            excl ? "" : "or equal to ", lim);
        }
    }
    /* int32 fields of built-in types: Go would fail to decode these. */
    const char *format = json_string_value(kw->format);
    if (format && !strcmp(format, "int32") && sch_is_integral(v) &&
        (d < INT32_MIN || d > INT32_MAX)) {
        sch_add_invalid(w, v, "%s in body should be %s", sch_cur_path(w),
                        d < 0 ? "greater than or equal to -2147483648"
                              : "less than or equal to 2147483647");
    }
}

/* Entry of a list being checked for duplicates. */
typedef struct dup_entry {
    char *key;
    size_t idx;
} dup_entry;

static int dup_cmp(const void *a, const void *b)
{
    const dup_entry *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int size_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Finds, for each value that occurs more than once, the index of its
 * second occurrence (upstream reports that one). `keys[i]` are canonical
 * encodings. Fills out[] (sorted) and returns its length, or -1 on OOM. */
static long find_duplicates(char **keys, size_t n, size_t *out)
{
    dup_entry *e = xmalloc(n * sizeof *e);
    for (size_t i = 0; i < n; i++)
        e[i] = (dup_entry){keys[i], i};
    qsort(e, n, sizeof *e, dup_cmp);
    size_t nout = 0;
    for (size_t i = 1; i < n; i++)
        if (!strcmp(e[i].key, e[i - 1].key) && (i < 2 || strcmp(e[i - 1].key, e[i - 2].key)))
            out[nout++] = e[i].idx;
    free(e);
    qsort(out, nout, sizeof *out, size_cmp);
    return (long)nout;
}

static void free_keys(char **keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

/* x-kubernetes-list-type: set and map uniqueness. */
static void validate_list_type(walk *w, const sch_kw *kw, const json_t *v)
{
    const char *lt = json_string_value(kw->list_type);
    if (!lt || (strcmp(lt, "set") && strcmp(lt, "map")))
        return;
    bool is_map = !strcmp(lt, "map");
    size_t n = json_array_size(v);
    if (is_map) {
        for (size_t i = 0; i < n; i++) {
            const json_t *e = json_array_get(v, i);
            if (!json_is_null(e) && !json_is_object(e)) {
                size_t old = sch_path_push_index(w, i);
                sch_add_invalid(w, e, "must be an object for an array of list-type map");
                sch_path_pop(w, old);
                return;
            }
        }
    }
    if (n <= 1)
        return;
    const json_t *mkeys = kw->list_map_keys;
    char **keys = xcalloc(n, sizeof *keys);
    json_t **shown = xcalloc(n, sizeof *shown);
    size_t *dups = xmalloc(n * sizeof *dups);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (!is_map) {
            keys[i] = sch_dump_canonical(e);
            shown[i] = json_incref((json_t *)e);
        } else {
            json_t *k = json_object();
            if (!k) {
                w->oom = true;
                goto out;
            }
            size_t j;
            const json_t *mk;
            json_array_foreach(mkeys, j, mk)
            {
                const json_t *kv = json_is_string(mk) && json_is_object(e)
                                       ? json_object_get(e, json_string_value(mk))
                                       : NULL;
                if (kv)
                    json_object_set(k, json_string_value(mk), (json_t *)kv);
            }
            keys[i] = sch_dump_canonical(k);
            shown[i] = k;
        }
        if (!keys[i]) {
            w->oom = true;
            goto out;
        }
    }
    long nd = find_duplicates(keys, n, dups);
    if (nd < 0) {
        w->oom = true;
        goto out;
    }
    for (long i = 0; i < nd; i++) {
        size_t old = sch_path_push_index(w, dups[i]);
        sch_add_value_cause(w, CKUBE_CAUSE_FIELD_DUPLICATE, "Duplicate value", shown[dups[i]],
                            NULL);
        sch_path_pop(w, old);
    }
out:
    if (shown)
        for (size_t i = 0; i < n; i++)
            json_decref(shown[i]);
    free(shown);
    if (keys)
        free_keys(keys, n);
    free(dups);
}

static void validate_array(walk *w, const sch_kw *kw, const json_t *v)
{
    size_t n = json_array_size(v);
    const json_t *mini = kw->min_items;
    const json_t *maxi = kw->max_items;
    if (json_is_integer(mini) && (json_int_t)n < json_integer_value(mini)) {
        json_t *cnt = json_integer((json_int_t)n);
        sch_add_invalid(w, cnt, "%s in body should have at least %" JSON_INTEGER_FORMAT " items",
                        sch_cur_path(w), json_integer_value(mini));
        json_decref(cnt);
    }
    if (json_is_integer(maxi) && (json_int_t)n > json_integer_value(maxi)) {
        json_int_t m = json_integer_value(maxi);
        sch_add_cause(w, "FieldValueTooMany", sch_cur_path(w),
                      "Too many: %zu: must have at most %" JSON_INTEGER_FORMAT " %s", n, m,
                      m == 1 ? "item" : "items");
    }
    if (json_is_true(kw->unique_items) && n > 1) {
        char **keys = xcalloc(n, sizeof *keys);
        size_t *dups = xmalloc(n * sizeof *dups);
        bool ok = keys && dups;
        for (size_t i = 0; ok && i < n; i++)
            ok = (keys[i] = sch_dump_canonical(json_array_get(v, i))) != NULL;
        long nd = ok ? find_duplicates(keys, n, dups) : -1;
        if (nd < 0)
            w->oom = true;
        else if (nd > 0)
            sch_add_invalid(w, NULL, "%s in body shouldn't contain duplicates", sch_cur_path(w));
        if (keys)
            free_keys(keys, n);
        free(dups);
    }
    const json_t *items = sch_kw_obj(kw->items);
    if (items) {
        for (size_t i = 0; i < n && !w->oom; i++) {
            size_t old = sch_path_push_index(w, i);
            sch_validate_node(w, items, json_array_get(v, i), CTX_NORMAL);
            sch_path_pop(w, old);
        }
    }
    validate_list_type(w, kw, v);
}

/* apiVersion/kind/metadata of a resource root or an embedded resource.
 * The root's apiVersion and kind are checked by the request handler. */
static void validate_resource_keys(walk *w, const json_t *v, bool embedded)
{
    static const char *const keys[] = {"apiVersion", "kind"};
    for (size_t i = 0; embedded && i < 2; i++) {
        const json_t *f = json_object_get(v, keys[i]);
        size_t old = sch_path_push_key(w, keys[i]);
        if (!f) {
            sch_add_cause(w, CKUBE_CAUSE_FIELD_REQUIRED, sch_cur_path(w), "Required value");
        } else if (!json_is_string(f)) {
            sch_add_invalid(w, f, "must be a string");
        } else if (json_string_length(f) == 0) {
            sch_add_invalid(w, f, "must not be empty");
        }
        sch_path_pop(w, old);
    }
    const json_t *md = json_object_get(v, "metadata");
    if (md && !json_is_object(md) && !json_is_null(md)) {
        size_t old = sch_path_push_key(w, "metadata");
        sch_add_type_invalid(w, "object", sch_json_type_name(md));
        sch_path_pop(w, old);
    }
}

static void validate_object(walk *w, const sch_kw *kw, const json_t *v, int ctx)
{
    size_t nkeys = json_object_size(v);
    const json_t *minp = kw->min_properties;
    const json_t *maxp = kw->max_properties;
    if (json_is_integer(minp) && (json_int_t)nkeys < json_integer_value(minp)) {
        json_t *cnt = json_integer((json_int_t)nkeys);
        sch_add_invalid(w, cnt,
                        "%s in body should have at least %" JSON_INTEGER_FORMAT " properties",
                        sch_cur_path(w), json_integer_value(minp));
        json_decref(cnt);
        return;
    }
    if (json_is_integer(maxp) && (json_int_t)nkeys > json_integer_value(maxp)) {
        json_int_t m = json_integer_value(maxp);
        sch_add_cause(w, "FieldValueTooMany", sch_cur_path(w),
                      "Too many: %zu: must have at most %" JSON_INTEGER_FORMAT " %s", nkeys, m,
                      m == 1 ? "item" : "items");
        return;
    }
    const json_t *props = sch_kw_obj(kw->properties);
    const json_t *addl = kw->additional_properties;
    bool embedded = ctx != CTX_NORMAL || json_is_true(kw->embedded_resource);
    const char *key;
    const json_t *child;
    json_object_foreach((json_t *)v, key, child)
    {
        if (ctx == CTX_ROOT && !strcmp(key, "metadata"))
            continue;
        const json_t *cs = props ? json_object_get(props, key) : NULL;
        if (!json_is_object(cs))
            cs = NULL;
        if (embedded && !cs && (sch_is_resource_key(key) || !strcmp(key, "metadata")))
            continue;
        if (cs) {
            size_t old = sch_path_push_key(w, key);
            sch_validate_node(w, cs, child, CTX_NORMAL);
            sch_path_pop(w, old);
        } else if (json_is_object(addl)) {
            size_t old = sch_path_push_key(w, key);
            sch_validate_node(w, addl, child, CTX_NORMAL);
            sch_path_pop(w, old);
        } else if (json_is_false(addl)) {
            json_t *k = json_string(key);
            char *p = w->path.len ? xstrdup(sch_cur_path(w)) : xstrdup("");
            if (!k || !p)
                w->oom = true;
            else
                sch_add_invalid(w, k, "%s.%s in body is a forbidden property", p, key);
            free(p);
            json_decref(k);
        }
        if (w->oom)
            return;
    }
    const json_t *req = kw->required;
    size_t i;
    const json_t *r;
    json_array_foreach(req, i, r)
    {
        if (!json_is_string(r) || json_object_get(v, json_string_value(r)))
            continue;
        size_t old = sch_path_push_key(w, json_string_value(r));
        sch_add_cause(w, CKUBE_CAUSE_FIELD_REQUIRED, sch_cur_path(w), "Required value");
        sch_path_pop(w, old);
    }
    if (embedded)
        validate_resource_keys(w, v, ctx != CTX_ROOT);
}

/* Validates v against sub-schema `s` into a scratch status; returns the
 * number of causes. The caller may keep the scratch causes. */
static int validate_scratch(walk *w, const json_t *s, const json_t *v, ckube_status **out)
{
    ckube_status *scratch = ckube_status_new(422, CKUBE_REASON_INVALID, NULL);
    if (!scratch) {
        w->oom = true;
        return 0;
    }
    ckube_status *saved_st = w->st;
    int saved_n = w->ncauses;
    w->st = scratch;
    w->ncauses = 0;
    sch_validate_node(w, s, v, CTX_NORMAL);
    int n = w->ncauses;
    w->st = saved_st;
    w->ncauses = saved_n;
    if (out)
        *out = scratch;
    else
        ckube_status_free(scratch);
    return n;
}

static void merge_causes(walk *w, const ckube_status *from)
{
    if (!from)
        return;
    for (size_t i = 0; i < from->ncauses; i++) {
        w->ncauses++;
        if (w->st)
            ckube_status_add_cause(w->st, from->causes[i].type, from->causes[i].field, "%s",
                                   from->causes[i].message ? from->causes[i].message : "");
    }
}

/* A composite failure (anyOf & co.): upstream reports it without a field. */
static void add_composite(walk *w, const char *fmt, const char *extra)
{
    char *q = ckube_go_quote(sch_cur_path(w));
    if (!q) {
        w->oom = true;
        return;
    }
    char *detail = NULL;
    if (asprintf(&detail, fmt, q, extra) < 0) {
        w->oom = true;
    } else {
        sch_add_cause(w, CKUBE_CAUSE_FIELD_INVALID, "", "Invalid value: \"\": %s", detail);
        free(detail);
    }
    free(q);
}

static void validate_combinators(walk *w, const sch_kw *kw, const json_t *v)
{
    const json_t *anyof = kw->any_of;
    if (json_is_array(anyof) && json_array_size(anyof)) {
        ckube_status *best = NULL;
        int best_n = INT_MAX;
        bool ok = false;
        size_t i;
        const json_t *sub;
        json_array_foreach(anyof, i, sub)
        {
            ckube_status *res = NULL;
            int n = validate_scratch(w, sub, v, &res);
            if (n == 0) {
                ok = true;
                ckube_status_free(res);
                break;
            }
            if (n < best_n) {
                ckube_status_free(best);
                best = res;
                best_n = n;
            } else {
                ckube_status_free(res);
            }
        }
        if (!ok) {
            add_composite(w, "%s must validate at least one schema (anyOf)%s", "");
            merge_causes(w, best);
        }
        ckube_status_free(best);
    }
    const json_t *oneof = kw->one_of;
    if (json_is_array(oneof) && json_array_size(oneof)) {
        ckube_status *best = NULL;
        int best_n = INT_MAX, valid = 0;
        size_t i;
        const json_t *sub;
        json_array_foreach(oneof, i, sub)
        {
            ckube_status *res = NULL;
            int n = validate_scratch(w, sub, v, &res);
            if (n == 0) {
                valid++;
                ckube_status_free(res);
            } else if (valid == 0 && n < best_n) {
                ckube_status_free(best);
                best = res;
                best_n = n;
            } else {
                ckube_status_free(res);
            }
        }
        if (valid != 1) {
            char extra[64];
            if (valid == 0)
                snprintf(extra, sizeof extra, "Found none valid");
            else
                snprintf(extra, sizeof extra, "Found %d valid alternatives", valid);
            add_composite(w, "%s must validate one and only one schema (oneOf). %s", extra);
            if (valid == 0)
                merge_causes(w, best);
        }
        ckube_status_free(best);
    }
    const json_t *allof = kw->all_of;
    if (json_is_array(allof) && json_array_size(allof)) {
        size_t valid = 0, i;
        const json_t *sub;
        json_array_foreach(allof, i, sub)
        {
            ckube_status *res = NULL;
            int n = validate_scratch(w, sub, v, &res);
            if (n == 0)
                valid++;
            merge_causes(w, res);
            ckube_status_free(res);
        }
        if (valid != json_array_size(allof))
            add_composite(w, "%s must validate all the schemas (allOf)%s",
                          valid == 0 ? ". None validated" : "");
    }
    const json_t *notv = sch_kw_obj(kw->not_);
    if (notv && validate_scratch(w, notv, v, NULL) == 0)
        add_composite(w, "%s must not validate the schema (not)%s", "");
}

static bool enum_contains(const json_t *en, const json_t *v)
{
    size_t i;
    const json_t *e;
    json_array_foreach(en, i, e)
    {
        if (json_is_number(e) && json_is_number(v)) {
            if (num_value(e) == num_value(v))
                return true;
        } else if (json_equal((json_t *)e, (json_t *)v)) {
            return true;
        }
    }
    return false;
}

static void validate_enum(walk *w, const json_t *en, const json_t *v)
{
    ckube__strbuf b = {0};
    ckube__sb_add(&b, "supported values: ");
    size_t i;
    const json_t *e;
    json_array_foreach(en, i, e)
    {
        char *text = json_is_string(e) ? xstrdup(json_string_value(e)) : sch_dump_canonical(e);
        char *q = text ? ckube_go_quote(text) : NULL;
        if (!q)
            b.oom = true;
        else {
            if (i)
                ckube__sb_add(&b, ", ");
            ckube__sb_add(&b, q);
        }
        free(q);
        free(text);
    }
    char *detail = ckube__sb_take(&b);
    if (!detail) {
        w->oom = true;
        return;
    }
    sch_add_value_cause(w, CKUBE_CAUSE_FIELD_NOT_SUPPORTED, "Unsupported value", v,
                        json_array_size(en) ? detail : NULL);
    free(detail);
}

void sch_validate_node(walk *w, const json_t *s, const json_t *v, int ctx)
{
    if (!json_is_object(s) || !v || w->oom)
        return;
    if (++w->depth > MAX_DEPTH) {
        w->depth--;
        return;
    }
    sch_kw k;
    sch_keywords(s, &k);
    const json_t *type = k.type;
    bool ios = json_is_true(k.int_or_string);
    bool typed = ios || sch_has_type(type);
    const json_t *en = k.enum_;
    bool has_enum = json_is_array(en) && json_array_size(en) > 0;

    if (json_is_null(v)) {
        bool contains_null = false;
        if (type)
            sch_type_matches(type, v, &contains_null);
        if (typed && !contains_null && !json_is_true(k.nullable)) {
            char *label = sch_type_label(type, ios);
            if (!label)
                w->oom = true;
            else
                sch_add_type_invalid(w, label, "null");
            free(label);
        } else if (has_enum && !enum_contains(en, v))
            validate_enum(w, en, v);
        goto out;
    }
    if (typed) {
        bool contains_null;
        bool ok = ios ? (json_is_string(v) || sch_is_integral(v))
                      : sch_type_matches(type, v, &contains_null);
        if (!ok) {
            char *label = sch_type_label(type, ios);
            if (!label)
                w->oom = true;
            else
                sch_add_type_invalid(w, label, sch_json_type_name(v));
            free(label);
            goto out;
        }
    }
    validate_combinators(w, &k, v);
    if (json_is_string(v))
        validate_string(w, &k, v);
    else if (json_is_number(v))
        validate_number(w, &k, v);
    else if (json_is_array(v))
        validate_array(w, &k, v);
    if (has_enum && !enum_contains(en, v))
        validate_enum(w, en, v);
    if (json_is_object(v))
        validate_object(w, &k, v, ctx);
out:
    w->depth--;
}
