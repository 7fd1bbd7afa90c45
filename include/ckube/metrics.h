/* ckube/metrics.h - a small Prometheus metrics registry.
 *
 * A registry holds metric families (counters, gauges, histograms), each
 * with a fixed list of label names. A family's children are its time
 * series, one per combination of label values:
 *
 *   ckube_metric_family *f = ckube_metrics_counter(reg, "jobs_total",
 *       "Jobs run.", (const char *[]){"queue", NULL});
 *   ckube_metric *m = ckube_metric_with(f, (const char *[]){"fast"});
 *   ckube_counter_inc(m);          // lock-free
 *   char *text = ckube_metrics_render(reg, &len);   // exposition 0.0.4
 *
 * Thread-safety: every function here may be called from any thread.
 * Updating a child (inc/add/set/observe) is a few relaxed atomic
 * operations, never a lock; registering a family and looking up a child
 * take short mutexes, so hot paths should look a child up once and keep
 * the pointer. Families and children live as long as their registry.
 *
 * Every update function accepts a NULL child and then does nothing, so
 * optional instrumentation needs no branches at the call site.
 */
#ifndef CKUBE_METRICS_H
#define CKUBE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckube_metrics_registry ckube_metrics_registry;
typedef struct ckube_metric_family ckube_metric_family;
/* One time series (a family's child for one set of label values). */
typedef struct ckube_metric ckube_metric;
typedef struct ckube_metrics_collector ckube_metrics_collector;

typedef enum ckube_metric_type {
    CKUBE_METRIC_COUNTER = 0,
    CKUBE_METRIC_GAUGE = 1,
    CKUBE_METRIC_HISTOGRAM = 2,
} ckube_metric_type;

/* ---- registries ---- */

/* A new, empty registry. Free with ckube_metrics_registry_free once no
 * other thread uses it or any family/child pointer obtained from it.
 * Returns NULL only when out of memory. */
ckube_metrics_registry *ckube_metrics_registry_new(void);
/* Frees the registry, its families, children and collector handles.
 * Freeing the default registry (or NULL) is a no-op. */
void ckube_metrics_registry_free(ckube_metrics_registry *reg);
/* The process-wide registry that libckube's components (e.g. named
 * workqueues) use by default, and that a manager serves at /metrics.
 * Created on first use, never freed. */
ckube_metrics_registry *ckube_metrics_default(void);

/* ---- families ---- */

typedef struct ckube_metric_opts {
    /* [a-zA-Z_:][a-zA-Z0-9_:]* ; copied. */
    const char *name;
    /* Free text (escaped when rendered); copied. NULL = "". */
    const char *help;
    ckube_metric_type type;
    /* NULL-terminated array of label names ([a-zA-Z_][a-zA-Z0-9_]*, not
     * starting with "__", and not "le" for histograms), or NULL for a
     * family without labels. Copied. */
    const char *const *label_names;
    /* Histograms only: strictly increasing upper bounds; a trailing +Inf
     * may be given or not (the +Inf bucket is always there). n_buckets 0
     * picks Prometheus' defaults (.005 .01 .025 .05 .1 .25 .5 1 2.5 5 10).
     * Copied. */
    const double *buckets;
    size_t n_buckets;
} ckube_metric_opts;

/* Registers a family, or returns the existing one when a family with the
 * same name, type, label names (and buckets, for histograms) already
 * exists. Returns NULL on invalid options or a conflicting existing
 * family, with *err (malloc'd, caller frees; err may be NULL) saying why.
 * The family is owned by the registry. */
ckube_metric_family *ckube_metrics_register(ckube_metrics_registry *reg,
                                            const ckube_metric_opts *opts, char **err);

/* Shorthands for ckube_metrics_register; on failure they log the reason
 * with CKUBE_ERROR and return NULL. */
ckube_metric_family *ckube_metrics_counter(ckube_metrics_registry *reg, const char *name,
                                           const char *help, const char *const *label_names);
ckube_metric_family *ckube_metrics_gauge(ckube_metrics_registry *reg, const char *name,
                                         const char *help, const char *const *label_names);
ckube_metric_family *ckube_metrics_histogram(ckube_metrics_registry *reg, const char *name,
                                             const char *help, const char *const *label_names,
                                             const double *buckets, size_t n_buckets);

ckube_metric_type ckube_metric_family_type(const ckube_metric_family *fam);

/* The child for `label_values` (an array with exactly as many strings as
 * the family has label names, in the same order; NULL for a family
 * without labels), created on first use with value 0. Values are copied
 * and may hold any bytes but NUL. The pointer stays valid for the
 * registry's lifetime. Returns NULL when fam is NULL or out of memory. */
ckube_metric *ckube_metric_with(ckube_metric_family *fam, const char *const *label_values);

/* ---- updates (lock-free; NULL m = no-op) ---- */

/* Counters only go up: negative or NaN amounts are ignored. On a gauge
 * child these behave like ckube_gauge_add. */
void ckube_counter_inc(ckube_metric *m);
void ckube_counter_add(ckube_metric *m, double v);

/* Gauges (on counter or histogram children these do nothing). */
void ckube_gauge_set(ckube_metric *m, double v);
void ckube_gauge_add(ckube_metric *m, double v);
void ckube_gauge_inc(ckube_metric *m);
void ckube_gauge_dec(ckube_metric *m);

/* Histograms: counts v in the first bucket whose bound is >= v (NaN goes
 * to +Inf only) and adds v to the sum. No-op on other types. */
void ckube_histogram_observe(ckube_metric *m, double v);

/* ---- reads (for tests and collectors) ---- */

/* A counter's or gauge's current value; a histogram's sum. 0 for NULL. */
double ckube_metric_value(const ckube_metric *m);
/* A histogram's observation count (0 for other types or NULL). */
uint64_t ckube_histogram_count(const ckube_metric *m);

/* ---- collectors ---- */

/* Called by ckube_metrics_render before it reads any value, so values
 * that are cheap to compute on demand but costly to track (e.g. how long
 * in-flight work has been running) are set just in time. The callback
 * typically calls ckube_metric_with / ckube_gauge_set. It may register
 * families, but must not render, nor add or remove collectors. */
typedef void (*ckube_metrics_collect_fn)(void *ctx);

/* Adds a collector; returns a handle for removal (owned by the registry),
 * or NULL when out of memory. Collectors run in the order they were
 * added, one render at a time. */
ckube_metrics_collector *ckube_metrics_add_collector(ckube_metrics_registry *reg,
                                                     ckube_metrics_collect_fn fn, void *ctx);
/* Removes (and frees) a collector. When this returns, the callback is not
 * running and will not run again, so ctx may be freed. Must not be called
 * from inside a collector. NULL c is a no-op. */
void ckube_metrics_remove_collector(ckube_metrics_registry *reg, ckube_metrics_collector *c);

/* ---- exposition ---- */

/* Runs the collectors, then renders every family in the Prometheus text
 * exposition format 0.0.4: families sorted by name, each with # HELP and
 * # TYPE lines, children sorted by their label values; label values and
 * help text escaped; floats in Go's shortest 'g' form ("1e-08", "0.25",
 * "+Inf") so output matches Go exporters. Families with labels but no
 * children are omitted. Returns a malloc'd NUL-terminated string (caller
 * frees) and its length in *len (len may be NULL), or NULL when out of
 * memory. Content-Type to serve it with: CKUBE_METRICS_CONTENT_TYPE. */
char *ckube_metrics_render(ckube_metrics_registry *reg, size_t *len);

#define CKUBE_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Formats v the way Prometheus' Go exporters do (shortest round-trip,
 * Go 'g' layout, "+Inf", "-Inf", "NaN") into buf (>= 32 bytes). Returns
 * buf. */
char *ckube_metrics_format_float(double v, char *buf, size_t n);

/* ---- bucket helpers ---- */

/* Fills out[0..count) with start, start*factor, start*factor^2, ...
 * Returns 0, or -1 when start <= 0, factor <= 1 or count == 0. */
int ckube_metrics_exponential_buckets(double start, double factor, size_t count, double *out);
/* Fills out[0..count) with start, start+width, ... Returns 0, or -1 when
 * width <= 0 or count == 0. */
int ckube_metrics_linear_buckets(double start, double width, size_t count, double *out);

#ifdef __cplusplus
}
#endif
#endif
