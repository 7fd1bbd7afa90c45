/* metrics.c - a small Prometheus registry (see ckube/metrics.h).
 *
 * Locking: the registry's `mu` guards its sorted family array; each
 * family's `mu` guards its children hash table; `collect_mu` serialises
 * collector runs and guards the collector list. Values are atomics,
 * updated with relaxed ordering (metrics need no ordering with other
 * memory). Lock order: collect_mu, then mu, then a family's mu; collectors
 * run with only collect_mu held, so they may register families and look
 * up children.
 */
#include <ckube/log.h>
#include <ckube/metrics.h>

#include "common/text.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- atomic doubles, stored as their bit patterns ---- */

static uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static double bitsd(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

static void atomic_add_double(_Atomic uint64_t *p, double v)
{
    uint64_t old = atomic_load_explicit(p, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(p, &old, dbits(bitsd(old) + v),
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

static double atomic_load_double(const _Atomic uint64_t *p)
{
    return bitsd(atomic_load_explicit((_Atomic uint64_t *)p, memory_order_relaxed));
}

/* ---- data ---- */

struct ckube_metric {
    ckube_metric_family *fam;
    struct ckube_metric *hnext; /* family hash chain */
    uint64_t hash;
    char **values; /* fam->n_labels strings, one allocation with the pointers */
    /* Counter: whole-number increments go to ival (one fetch_add), other
     * amounts to fbits; the value is their sum. Gauge: fbits only.
     * Histogram: fbits is the sum, counts[] the per-bucket (non-
     * cumulative) counts, the last one for +Inf. */
    _Atomic uint64_t ival;
    _Atomic uint64_t fbits;
    _Atomic uint64_t counts[];
};

struct ckube_metric_family {
    char *name;
    char *help;
    ckube_metric_type type;
    size_t n_labels;
    char **labels;
    size_t n_buckets; /* finite bounds; histograms have n_buckets+1 counts */
    double *buckets;
    pthread_mutex_t mu;
    ckube_metric **table; /* chained hash of children */
    size_t table_cap;
    size_t n_children;
};

struct ckube_metrics_collector {
    ckube_metrics_collect_fn fn;
    void *ctx;
    struct ckube_metrics_collector *next;
};

struct ckube_metrics_registry {
    pthread_mutex_t mu;
    ckube_metric_family **fams; /* sorted by name */
    size_t n_fams, cap_fams;
    pthread_mutex_t collect_mu;
    ckube_metrics_collector *collectors; /* in insertion order */
};

static const double default_buckets[] = {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10};

/* ---- errors ---- */

/* ---- registries ---- */

ckube_metrics_registry *ckube_metrics_registry_new(void)
{
    ckube_metrics_registry *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->collect_mu, NULL);
    return r;
}

static ckube_metrics_registry *default_registry;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void)
{
    default_registry = ckube_metrics_registry_new();
}

ckube_metrics_registry *ckube_metrics_default(void)
{
    pthread_once(&default_once, default_init);
    return default_registry;
}

static void family_free(ckube_metric_family *f)
{
    for (size_t i = 0; i < f->table_cap; i++) {
        ckube_metric *m = f->table[i];
        while (m) {
            ckube_metric *next = m->hnext;
            free(m->values);
            free(m);
            m = next;
        }
    }
    free(f->table);
    for (size_t i = 0; i < f->n_labels; i++)
        free(f->labels[i]);
    free(f->labels);
    free(f->buckets);
    free(f->name);
    free(f->help);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

void ckube_metrics_registry_free(ckube_metrics_registry *reg)
{
    if (!reg || reg == default_registry)
        return;
    for (size_t i = 0; i < reg->n_fams; i++)
        family_free(reg->fams[i]);
    free(reg->fams);
    ckube_metrics_collector *c = reg->collectors;
    while (c) {
        ckube_metrics_collector *next = c->next;
        free(c);
        c = next;
    }
    pthread_mutex_destroy(&reg->mu);
    pthread_mutex_destroy(&reg->collect_mu);
    free(reg);
}

/* ---- validation ---- */

static bool valid_name(const char *s, bool colon_ok)
{
    if (!s || !*s)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (colon_ok && c == ':') || (p != s && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static size_t count_labels(const char *const *labels)
{
    size_t n = 0;
    while (labels && labels[n])
        n++;
    return n;
}

static int validate_labels(const ckube_metric_opts *o, size_t n, char **err)
{
    for (size_t i = 0; i < n; i++) {
        const char *l = o->label_names[i];
        if (!valid_name(l, false) || strncmp(l, "__", 2) == 0) {
            ckube__set_err(err, "metric %s: invalid label name \"%s\"", o->name, l);
            return -1;
        }
        if (o->type == CKUBE_METRIC_HISTOGRAM && strcmp(l, "le") == 0) {
            ckube__set_err(err, "metric %s: label name \"le\" is reserved for histogram buckets",
                           o->name);
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(l, o->label_names[j]) == 0) {
                ckube__set_err(err, "metric %s: duplicate label name \"%s\"", o->name, l);
                return -1;
            }
        }
    }
    return 0;
}

/* The finite bucket bounds a histogram will use (a trailing +Inf is
 * dropped); -1 with *err when they are not strictly increasing. */
static int resolve_buckets(const ckube_metric_opts *o, const double **b, size_t *n, char **err)
{
    *b = o->buckets;
    *n = o->n_buckets;
    if (*n == 0 || !*b) {
        *b = default_buckets;
        *n = sizeof(default_buckets) / sizeof(default_buckets[0]);
        return 0;
    }
    if (isinf((*b)[*n - 1]) && (*b)[*n - 1] > 0)
        (*n)--;
    for (size_t i = 0; i < *n; i++) {
        if (isnan((*b)[i]) || (i > 0 && !((*b)[i] > (*b)[i - 1]))) {
            ckube__set_err(err, "metric %s: histogram buckets must be strictly increasing numbers",
                           o->name);
            return -1;
        }
    }
    return 0;
}

static const char *type_name(ckube_metric_type t)
{
    switch (t) {
    case CKUBE_METRIC_COUNTER:
        return "counter";
    case CKUBE_METRIC_GAUGE:
        return "gauge";
    case CKUBE_METRIC_HISTOGRAM:
        return "histogram";
    }
    return "untyped";
}

/* ---- families ---- */

/* Index of `name` in the sorted array, or where it would go (*found
 * false). Caller holds reg->mu. */
static size_t find_family(ckube_metrics_registry *reg, const char *name, bool *found)
{
    size_t lo = 0, hi = reg->n_fams;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(reg->fams[mid]->name, name);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

/* Whether an existing family matches the requested shape exactly. */
static bool same_shape(const ckube_metric_family *f, const ckube_metric_opts *o, size_t n_labels,
                       const double *b, size_t nb)
{
    if (f->type != o->type || f->n_labels != n_labels)
        return false;
    for (size_t i = 0; i < n_labels; i++)
        if (strcmp(f->labels[i], o->label_names[i]) != 0)
            return false;
    if (o->type != CKUBE_METRIC_HISTOGRAM)
        return true;
    if (f->n_buckets != nb)
        return false;
    return nb == 0 || memcmp(f->buckets, b, nb * sizeof(*b)) == 0;
}

static ckube_metric *child_new(ckube_metric_family *f, const char *const *values, uint64_t h);
static uint64_t hash_values(size_t n, const char *const *values);

static ckube_metric_family *family_new(const ckube_metric_opts *o, size_t n_labels, const double *b,
                                       size_t nb)
{
    ckube_metric_family *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    f->type = o->type;
    f->name = strdup(o->name);
    f->help = strdup(o->help ? o->help : "");
    f->n_labels = n_labels;
    f->labels = calloc(n_labels ? n_labels : 1, sizeof(char *));
    f->table_cap = 16;
    f->table = calloc(f->table_cap, sizeof(*f->table));
    bool ok = f->name && f->help && f->labels && f->table;
    for (size_t i = 0; ok && i < n_labels; i++)
        ok = (f->labels[i] = strdup(o->label_names[i])) != NULL;
    if (ok && o->type == CKUBE_METRIC_HISTOGRAM) {
        f->n_buckets = nb;
        f->buckets = malloc((nb ? nb : 1) * sizeof(double));
        ok = f->buckets != NULL;
        if (ok && nb)
            memcpy(f->buckets, b, nb * sizeof(double));
    }
    /* A family without labels has exactly one child: create it now so it
     * renders (as 0) before its first update, as Go exporters do. */
    if (ok && n_labels == 0)
        ok = child_new(f, NULL, hash_values(0, NULL)) != NULL;
    if (!ok) {
        family_free(f);
        return NULL;
    }
    return f;
}

ckube_metric_family *ckube_metrics_register(ckube_metrics_registry *reg, const ckube_metric_opts *o,
                                            char **err)
{
    if (err)
        *err = NULL;
    if (!reg || !o) {
        ckube__set_err(err, "metrics: NULL registry or options");
        return NULL;
    }
    if (!valid_name(o->name, true)) {
        ckube__set_err(err, "invalid metric name \"%s\"", o->name ? o->name : "(null)");
        return NULL;
    }
    if (o->type != CKUBE_METRIC_COUNTER && o->type != CKUBE_METRIC_GAUGE &&
        o->type != CKUBE_METRIC_HISTOGRAM) {
        ckube__set_err(err, "metric %s: unknown type %d", o->name, (int)o->type);
        return NULL;
    }
    size_t n_labels = count_labels(o->label_names);
    if (validate_labels(o, n_labels, err) != 0)
        return NULL;
    const double *b = NULL;
    size_t nb = 0;
    if (o->type == CKUBE_METRIC_HISTOGRAM && resolve_buckets(o, &b, &nb, err) != 0)
        return NULL;

    pthread_mutex_lock(&reg->mu);
    bool found;
    size_t at = find_family(reg, o->name, &found);
    ckube_metric_family *f = NULL;
    if (found) {
        f = reg->fams[at];
        if (!same_shape(f, o, n_labels, b, nb)) {
            ckube__set_err(err, "metric %s is already registered as a %s with different %s",
                           o->name, type_name(f->type),
                           f->type == o->type ? "labels or buckets" : "type");
            f = NULL;
        }
        pthread_mutex_unlock(&reg->mu);
        return f;
    }
    if (reg->n_fams == reg->cap_fams) {
        size_t cap = reg->cap_fams ? reg->cap_fams * 2 : 16;
        ckube_metric_family **fams = realloc(reg->fams, cap * sizeof(*fams));
        if (!fams)
            goto oom;
        reg->fams = fams;
        reg->cap_fams = cap;
    }
    f = family_new(o, n_labels, b, nb);
    if (!f)
        goto oom;
    memmove(reg->fams + at + 1, reg->fams + at, (reg->n_fams - at) * sizeof(*reg->fams));
    reg->fams[at] = f;
    reg->n_fams++;
    pthread_mutex_unlock(&reg->mu);
    return f;
oom:
    pthread_mutex_unlock(&reg->mu);
    ckube__set_err(err, "metric %s: out of memory", o->name);
    return NULL;
}

static ckube_metric_family *register_or_log(ckube_metrics_registry *reg, const ckube_metric_opts *o)
{
    char *err = NULL;
    ckube_metric_family *f = ckube_metrics_register(reg, o, &err);
    if (!f)
        CKUBE_ERROR("%s", err ? err : "metrics: registration failed");
    free(err);
    return f;
}

ckube_metric_family *ckube_metrics_counter(ckube_metrics_registry *reg, const char *name,
                                           const char *help, const char *const *label_names)
{
    ckube_metric_opts o = {
        .name = name, .help = help, .type = CKUBE_METRIC_COUNTER, .label_names = label_names};
    return register_or_log(reg, &o);
}

ckube_metric_family *ckube_metrics_gauge(ckube_metrics_registry *reg, const char *name,
                                         const char *help, const char *const *label_names)
{
    ckube_metric_opts o = {
        .name = name, .help = help, .type = CKUBE_METRIC_GAUGE, .label_names = label_names};
    return register_or_log(reg, &o);
}

ckube_metric_family *ckube_metrics_histogram(ckube_metrics_registry *reg, const char *name,
                                             const char *help, const char *const *label_names,
                                             const double *buckets, size_t n_buckets)
{
    ckube_metric_opts o = {.name = name,
                           .help = help,
                           .type = CKUBE_METRIC_HISTOGRAM,
                           .label_names = label_names,
                           .buckets = buckets,
                           .n_buckets = n_buckets};
    return register_or_log(reg, &o);
}

ckube_metric_type ckube_metric_family_type(const ckube_metric_family *fam)
{
    return fam ? fam->type : CKUBE_METRIC_GAUGE;
}

/* ---- children ---- */

static uint64_t hash_values(size_t n, const char *const *values)
{
    static const unsigned char sep = 0xff; /* one after each value */
    uint64_t h = CKUBE__FNV1A_INIT;
    for (size_t i = 0; i < n; i++)
        h = ckube__fnv1a(ckube__fnv1a(h, values[i], strlen(values[i])), &sep, 1);
    return h;
}

static bool values_equal(const ckube_metric *m, size_t n, const char *const *values)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(m->values[i], values[i]) != 0)
            return false;
    return true;
}

/* Doubles the children table. Caller holds f->mu. Failure is harmless
 * (chains just get longer). */
static void grow_children(ckube_metric_family *f)
{
    size_t cap = f->table_cap * 2;
    ckube_metric **t = calloc(cap, sizeof(*t));
    if (!t)
        return;
    for (size_t i = 0; i < f->table_cap; i++) {
        ckube_metric *m = f->table[i];
        while (m) {
            ckube_metric *next = m->hnext;
            size_t b = m->hash & (cap - 1);
            m->hnext = t[b];
            t[b] = m;
            m = next;
        }
    }
    free(f->table);
    f->table = t;
    f->table_cap = cap;
}

/* Creates and links a child. Caller holds f->mu (or owns f alone). */
static ckube_metric *child_new(ckube_metric_family *f, const char *const *values, uint64_t h)
{
    size_t n_counts = f->type == CKUBE_METRIC_HISTOGRAM ? f->n_buckets + 1 : 0;
    ckube_metric *m = calloc(1, sizeof(*m) + n_counts * sizeof(m->counts[0]));
    if (!m)
        return NULL;
    size_t bytes = (f->n_labels ? f->n_labels : 1) * sizeof(char *);
    for (size_t i = 0; i < f->n_labels; i++)
        bytes += strlen(values[i]) + 1;
    m->values = malloc(bytes);
    if (!m->values) {
        free(m);
        return NULL;
    }
    char *p = (char *)(m->values + (f->n_labels ? f->n_labels : 1));
    for (size_t i = 0; i < f->n_labels; i++) {
        size_t len = strlen(values[i]) + 1;
        memcpy(p, values[i], len);
        m->values[i] = p;
        p += len;
    }
    m->fam = f;
    m->hash = h;
    if (f->n_children * 2 >= f->table_cap)
        grow_children(f);
    size_t b = h & (f->table_cap - 1);
    m->hnext = f->table[b];
    f->table[b] = m;
    f->n_children++;
    return m;
}

ckube_metric *ckube_metric_with(ckube_metric_family *f, const char *const *values)
{
    if (!f)
        return NULL;
    if (f->n_labels && !values)
        return NULL;
    for (size_t i = 0; i < f->n_labels; i++)
        if (!values[i])
            return NULL;
    uint64_t h = hash_values(f->n_labels, values);
    pthread_mutex_lock(&f->mu);
    ckube_metric *m = f->table[h & (f->table_cap - 1)];
    while (m && !(m->hash == h && values_equal(m, f->n_labels, values)))
        m = m->hnext;
    if (!m)
        m = child_new(f, values, h);
    pthread_mutex_unlock(&f->mu);
    return m;
}

/* ---- updates ---- */

void ckube_counter_inc(ckube_metric *m)
{
    if (!m)
        return;
    if (m->fam->type == CKUBE_METRIC_COUNTER)
        atomic_fetch_add_explicit(&m->ival, 1, memory_order_relaxed);
    else if (m->fam->type == CKUBE_METRIC_GAUGE)
        atomic_add_double(&m->fbits, 1);
}

void ckube_counter_add(ckube_metric *m, double v)
{
    if (!m)
        return;
    if (m->fam->type == CKUBE_METRIC_GAUGE) {
        atomic_add_double(&m->fbits, v);
        return;
    }
    if (m->fam->type != CKUBE_METRIC_COUNTER || !(v >= 0))
        return;
    /* Whole amounts below 2^53 are exact as integers: one fetch_add. */
    if (v < 9007199254740992.0 && v == (double)(uint64_t)v)
        atomic_fetch_add_explicit(&m->ival, (uint64_t)v, memory_order_relaxed);
    else
        atomic_add_double(&m->fbits, v);
}

void ckube_gauge_set(ckube_metric *m, double v)
{
    if (m && m->fam->type == CKUBE_METRIC_GAUGE)
        atomic_store_explicit(&m->fbits, dbits(v), memory_order_relaxed);
}

void ckube_gauge_add(ckube_metric *m, double v)
{
    if (m && m->fam->type == CKUBE_METRIC_GAUGE)
        atomic_add_double(&m->fbits, v);
}

void ckube_gauge_inc(ckube_metric *m)
{
    ckube_gauge_add(m, 1);
}

void ckube_gauge_dec(ckube_metric *m)
{
    ckube_gauge_add(m, -1);
}

void ckube_histogram_observe(ckube_metric *m, double v)
{
    if (!m || m->fam->type != CKUBE_METRIC_HISTOGRAM)
        return;
    const ckube_metric_family *f = m->fam;
    size_t i = 0;
    while (i < f->n_buckets && !(v <= f->buckets[i]))
        i++;
    atomic_fetch_add_explicit(&m->counts[i], 1, memory_order_relaxed);
    atomic_add_double(&m->fbits, v);
}

double ckube_metric_value(const ckube_metric *m)
{
    if (!m)
        return 0;
    double v = atomic_load_double(&m->fbits);
    if (m->fam->type == CKUBE_METRIC_COUNTER)
        v += (double)atomic_load_explicit((_Atomic uint64_t *)&m->ival, memory_order_relaxed);
    return v;
}

uint64_t ckube_histogram_count(const ckube_metric *m)
{
    if (!m || m->fam->type != CKUBE_METRIC_HISTOGRAM)
        return 0;
    uint64_t n = 0;
    for (size_t i = 0; i <= m->fam->n_buckets; i++)
        n += atomic_load_explicit((_Atomic uint64_t *)&m->counts[i], memory_order_relaxed);
    return n;
}

/* ---- collectors ---- */

ckube_metrics_collector *ckube_metrics_add_collector(ckube_metrics_registry *reg,
                                                     ckube_metrics_collect_fn fn, void *ctx)
{
    if (!reg || !fn)
        return NULL;
    ckube_metrics_collector *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->fn = fn;
    c->ctx = ctx;
    pthread_mutex_lock(&reg->collect_mu);
    ckube_metrics_collector **pp = &reg->collectors;
    while (*pp)
        pp = &(*pp)->next;
    *pp = c;
    pthread_mutex_unlock(&reg->collect_mu);
    return c;
}

void ckube_metrics_remove_collector(ckube_metrics_registry *reg, ckube_metrics_collector *c)
{
    if (!reg || !c)
        return;
    pthread_mutex_lock(&reg->collect_mu);
    for (ckube_metrics_collector **pp = &reg->collectors; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            free(c);
            break;
        }
    }
    pthread_mutex_unlock(&reg->collect_mu);
}

/* ---- rendering ---- */

/* Rendering writes into the library's growable string (common/text.h). */
typedef ckube__strbuf sbuf;

static void sb_puts(sbuf *b, const char *s)
{
    ckube__sb_add(b, s);
}

static void sb_putc(sbuf *b, char c)
{
    ckube__sb_addc(b, c);
}

/* Label values escape \ " and newline; help text escapes \ and newline. */
static void sb_escaped(sbuf *b, const char *s, bool quotes)
{
    for (const char *p = s; *p; p++) {
        if (*p == '\\')
            sb_puts(b, "\\\\");
        else if (*p == '\n')
            sb_puts(b, "\\n");
        else if (quotes && *p == '"')
            sb_puts(b, "\\\"");
        else
            sb_putc(b, *p);
    }
}

char *ckube_metrics_format_float(double v, char *buf, size_t n)
{
    if (isnan(v)) {
        snprintf(buf, n, "NaN");
        return buf;
    }
    if (isinf(v)) {
        snprintf(buf, n, v > 0 ? "+Inf" : "-Inf");
        return buf;
    }
    /* Shortest digit string that reads back as v, like Go's
     * strconv.FormatFloat(v, 'g', -1, 64). */
    char e[40];
    int prec = 0;
    for (; prec < 17; prec++) {
        snprintf(e, sizeof(e), "%.*e", prec, v);
        if (strtod(e, NULL) == v)
            break;
    }
    int exp = atoi(strchr(e, 'e') + 1);
    int digits = prec + 1;
    /* Go's 'g' with shortest precision picks exponent form when the
     * decimal exponent is < -4 or >= 6 (so 1234567 is "1.234567e+06"). */
    int eprec = 6;
    if (exp < -4 || exp >= eprec) {
        snprintf(buf, n, "%s", e);
        return buf;
    }
    int decimals = digits - (exp + 1);
    snprintf(buf, n, "%.*f", decimals > 0 ? decimals : 0, v);
    return buf;
}

static void sb_float(sbuf *b, double v)
{
    char buf[48];
    sb_puts(b, ckube_metrics_format_float(v, buf, sizeof(buf)));
}

static void sb_u64(sbuf *b, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    sb_puts(b, buf);
}

/* name{l1="v1",...,extra="x"} — braces only when there is a label. */
static void sb_series(sbuf *b, const ckube_metric *m, const char *suffix, const char *extra_name,
                      const char *extra_value)
{
    const ckube_metric_family *f = m->fam;
    sb_puts(b, f->name);
    sb_puts(b, suffix);
    if (f->n_labels == 0 && !extra_name) {
        sb_putc(b, ' ');
        return;
    }
    sb_putc(b, '{');
    for (size_t i = 0; i < f->n_labels; i++) {
        if (i)
            sb_putc(b, ',');
        sb_puts(b, f->labels[i]);
        sb_puts(b, "=\"");
        sb_escaped(b, m->values[i], true);
        sb_putc(b, '"');
    }
    if (extra_name) {
        if (f->n_labels)
            sb_putc(b, ',');
        sb_puts(b, extra_name);
        sb_puts(b, "=\"");
        sb_puts(b, extra_value);
        sb_putc(b, '"');
    }
    sb_puts(b, "} ");
}

static void render_child(sbuf *b, const ckube_metric *m)
{
    const ckube_metric_family *f = m->fam;
    if (f->type != CKUBE_METRIC_HISTOGRAM) {
        sb_series(b, m, "", NULL, NULL);
        sb_float(b, ckube_metric_value(m));
        sb_putc(b, '\n');
        return;
    }
    /* Buckets are cumulative. _count is the +Inf bucket, so the two always
     * agree even when observations race with the scrape. */
    uint64_t cum = 0;
    char le[48];
    for (size_t i = 0; i <= f->n_buckets; i++) {
        cum += atomic_load_explicit((_Atomic uint64_t *)&m->counts[i], memory_order_relaxed);
        if (i < f->n_buckets)
            ckube_metrics_format_float(f->buckets[i], le, sizeof(le));
        else
            snprintf(le, sizeof(le), "+Inf");
        sb_series(b, m, "_bucket", "le", le);
        sb_u64(b, cum);
        sb_putc(b, '\n');
    }
    sb_series(b, m, "_sum", NULL, NULL);
    sb_float(b, atomic_load_double(&m->fbits));
    sb_putc(b, '\n');
    sb_series(b, m, "_count", NULL, NULL);
    sb_u64(b, cum);
    sb_putc(b, '\n');
}

static int child_cmp(const void *a, const void *b)
{
    const ckube_metric *x = *(const ckube_metric *const *)a;
    const ckube_metric *y = *(const ckube_metric *const *)b;
    for (size_t i = 0; i < x->fam->n_labels; i++) {
        int c = strcmp(x->values[i], y->values[i]);
        if (c)
            return c;
    }
    return 0;
}

/* Renders one family. Children are snapshotted under the family lock and
 * rendered after it is released (they are never freed before the
 * registry). */
static void render_family(sbuf *b, ckube_metric_family *f)
{
    pthread_mutex_lock(&f->mu);
    size_t n = f->n_children;
    ckube_metric **kids = n ? malloc(n * sizeof(*kids)) : NULL;
    if (n && !kids) {
        pthread_mutex_unlock(&f->mu);
        b->oom = true;
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < f->table_cap; i++)
        for (ckube_metric *m = f->table[i]; m; m = m->hnext)
            kids[k++] = m;
    pthread_mutex_unlock(&f->mu);
    if (n == 0)
        return;
    qsort(kids, n, sizeof(*kids), child_cmp);
    sb_puts(b, "# HELP ");
    sb_puts(b, f->name);
    sb_putc(b, ' ');
    sb_escaped(b, f->help, false);
    sb_puts(b, "\n# TYPE ");
    sb_puts(b, f->name);
    sb_putc(b, ' ');
    sb_puts(b, type_name(f->type));
    sb_putc(b, '\n');
    for (size_t i = 0; i < n; i++)
        render_child(b, kids[i]);
    free(kids);
}

static void run_collectors(ckube_metrics_registry *reg)
{
    pthread_mutex_lock(&reg->collect_mu);
    for (ckube_metrics_collector *c = reg->collectors; c; c = c->next)
        c->fn(c->ctx);
    pthread_mutex_unlock(&reg->collect_mu);
}

char *ckube_metrics_render(ckube_metrics_registry *reg, size_t *len)
{
    if (len)
        *len = 0;
    if (!reg)
        return NULL;
    run_collectors(reg);
    sbuf b = {0};
    pthread_mutex_lock(&reg->mu);
    for (size_t i = 0; i < reg->n_fams && !b.oom; i++)
        render_family(&b, reg->fams[i]);
    pthread_mutex_unlock(&reg->mu);
    size_t n = b.len;
    char *text = ckube__sb_take(&b); /* "" for an empty registry; NULL on OOM */
    if (text && len)
        *len = n;
    return text;
}

/* ---- buckets ---- */

int ckube_metrics_exponential_buckets(double start, double factor, size_t count, double *out)
{
    if (!(start > 0) || !(factor > 1) || count == 0 || !out)
        return -1;
    /* Repeated multiplication (not pow) so bounds are bit-identical to Go
     * exporters' (e.g. 9.999999999999999e-06 in the workqueue buckets). */
    for (size_t i = 0; i < count; i++) {
        out[i] = start;
        start *= factor;
    }
    return 0;
}

int ckube_metrics_linear_buckets(double start, double width, size_t count, double *out)
{
    if (!(width > 0) || count == 0 || !out)
        return -1;
    for (size_t i = 0; i < count; i++) {
        out[i] = start;
        start += width;
    }
    return 0;
}
