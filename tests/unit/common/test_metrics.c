/* The Prometheus registry: registration rules, values, byte-exact text
 * exposition, escaping, float formatting, collectors, and a concurrency
 * smoke test (also run under ThreadSanitizer). */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ckube/metrics.h"

static const char *const no_labels[] = {NULL};

/* Renders reg and compares with `want` byte for byte. */
static void assert_render(ckube_metrics_registry *reg, const char *want)
{
    size_t len = 99;
    char *got = ckube_metrics_render(reg, &len);
    assert_non_null(got);
    assert_int_equal(len, strlen(got));
    if (strcmp(got, want) != 0)
        fail_msg("render mismatch\n--- got ---\n%s--- want ---\n%s", got, want);
    free(got);
}

static void test_counter_without_labels(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_metric_family *f = ckube_metrics_counter(reg, "jobs_total", "Jobs run.", NULL);
    assert_non_null(f);
    assert_int_equal(ckube_metric_family_type(f), CKUBE_METRIC_COUNTER);
    /* A family without labels renders its single child before any use. */
    assert_render(reg, "# HELP jobs_total Jobs run.\n"
                       "# TYPE jobs_total counter\n"
                       "jobs_total 0\n");
    ckube_metric *m = ckube_metric_with(f, NULL);
    assert_ptr_equal(m, ckube_metric_with(f, no_labels));
    ckube_counter_inc(m);
    ckube_counter_add(m, 2);
    ckube_counter_add(m, 0.5);
    ckube_counter_add(m, -10); /* ignored: counters only go up */
    ckube_counter_add(m, NAN); /* ignored */
    ckube_gauge_set(m, 100);   /* wrong type: ignored */
    ckube_histogram_observe(m, 1);
    assert_true(ckube_metric_value(m) == 3.5);
    assert_render(reg, "# HELP jobs_total Jobs run.\n"
                       "# TYPE jobs_total counter\n"
                       "jobs_total 3.5\n");
    ckube_metrics_registry_free(reg);
}

static void test_gauge_labels_sorted_and_escaped(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_metric_family *f = ckube_metrics_gauge(reg, "temp", "Line one\nback\\slash \"q\"",
                                                 (const char *[]){"room", "unit", NULL});
    assert_non_null(f);
    /* Created out of order; rendered sorted by label values. */
    ckube_metric *z = ckube_metric_with(f, (const char *[]){"z", "c"});
    ckube_metric *a2 = ckube_metric_with(f, (const char *[]){"a", "f"});
    ckube_metric *a1 = ckube_metric_with(f, (const char *[]){"a", "c"});
    ckube_metric *esc = ckube_metric_with(f, (const char *[]){"q\"\\\n", ""});
    assert_ptr_equal(z, ckube_metric_with(f, (const char *[]){"z", "c"}));
    assert_ptr_not_equal(a1, a2);
    ckube_gauge_set(z, -2.5);
    ckube_gauge_inc(a2);
    ckube_gauge_inc(a2);
    ckube_gauge_dec(a2);
    ckube_gauge_add(a1, 1e-5);
    ckube_gauge_set(esc, 1234567);
    ckube_counter_inc(a1); /* on a gauge: adds 1 */
    assert_render(reg, "# HELP temp Line one\\nback\\\\slash \"q\"\n"
                       "# TYPE temp gauge\n"
                       "temp{room=\"a\",unit=\"c\"} 1.00001\n"
                       "temp{room=\"a\",unit=\"f\"} 1\n"
                       "temp{room=\"q\\\"\\\\\\n\",unit=\"\"} 1.234567e+06\n"
                       "temp{room=\"z\",unit=\"c\"} -2.5\n");
    /* A NULL label value is refused. */
    assert_null(ckube_metric_with(f, (const char *[]){"a", NULL}));
    assert_null(ckube_metric_with(f, NULL));
    ckube_metrics_registry_free(reg);
}

static void test_histogram_render(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    const double b[] = {0.1, 1, INFINITY}; /* trailing +Inf is accepted and implied */
    ckube_metric_family *f =
        ckube_metrics_histogram(reg, "lat_seconds", "Latency.", (const char *[]){"op", NULL}, b, 3);
    assert_non_null(f);
    ckube_metric *get = ckube_metric_with(f, (const char *[]){"get"});
    ckube_histogram_observe(get, 0.1); /* bounds are inclusive */
    ckube_histogram_observe(get, 0.5);
    ckube_histogram_observe(get, 4);
    ckube_histogram_observe(get, 0.15);
    ckube_gauge_set(get, 7); /* wrong type: ignored */
    assert_int_equal(ckube_histogram_count(get), 4);
    assert_true(ckube_metric_value(get) == 4.75);
    ckube_metric *put = ckube_metric_with(f, (const char *[]){"put"});
    (void)put;
    /* A family without labels: no braces on _sum/_count. */
    ckube_metric_family *g = ckube_metrics_histogram(reg, "a_seconds", "", NULL, b, 2);
    ckube_histogram_observe(ckube_metric_with(g, NULL), 2);
    assert_render(reg, "# HELP a_seconds \n"
                       "# TYPE a_seconds histogram\n"
                       "a_seconds_bucket{le=\"0.1\"} 0\n"
                       "a_seconds_bucket{le=\"1\"} 0\n"
                       "a_seconds_bucket{le=\"+Inf\"} 1\n"
                       "a_seconds_sum 2\n"
                       "a_seconds_count 1\n"
                       "# HELP lat_seconds Latency.\n"
                       "# TYPE lat_seconds histogram\n"
                       "lat_seconds_bucket{op=\"get\",le=\"0.1\"} 1\n"
                       "lat_seconds_bucket{op=\"get\",le=\"1\"} 3\n"
                       "lat_seconds_bucket{op=\"get\",le=\"+Inf\"} 4\n"
                       "lat_seconds_sum{op=\"get\"} 4.75\n"
                       "lat_seconds_count{op=\"get\"} 4\n"
                       "lat_seconds_bucket{op=\"put\",le=\"0.1\"} 0\n"
                       "lat_seconds_bucket{op=\"put\",le=\"1\"} 0\n"
                       "lat_seconds_bucket{op=\"put\",le=\"+Inf\"} 0\n"
                       "lat_seconds_sum{op=\"put\"} 0\n"
                       "lat_seconds_count{op=\"put\"} 0\n");
    ckube_metrics_registry_free(reg);
}

static void test_default_buckets_and_nan(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_metric_family *f = ckube_metrics_histogram(reg, "d", "h", NULL, NULL, 0);
    ckube_metric *m = ckube_metric_with(f, NULL);
    ckube_histogram_observe(m, NAN); /* NaN lands in +Inf only */
    char *text = ckube_metrics_render(reg, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "d_bucket{le=\"0.005\"} 0\nd_bucket{le=\"0.01\"} 0\n"
                                 "d_bucket{le=\"0.025\"} 0\n"));
    assert_non_null(strstr(text, "d_bucket{le=\"10\"} 0\nd_bucket{le=\"+Inf\"} 1\n"
                                 "d_sum NaN\nd_count 1\n"));
    free(text);
    ckube_metrics_registry_free(reg);
}

static void test_families_sorted_empty_vec_omitted(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    assert_render(reg, ""); /* empty registry */
    ckube_metrics_gauge(reg, "zeta", "z", NULL);
    ckube_metrics_counter(reg, "alpha_total", "a", NULL);
    ckube_metrics_gauge(reg, "mid", "m", (const char *[]){"x", NULL}); /* no children yet */
    ckube_metrics_counter(reg, "beta:sub_total", "b", NULL);
    assert_render(reg, "# HELP alpha_total a\n# TYPE alpha_total counter\nalpha_total 0\n"
                       "# HELP beta:sub_total b\n# TYPE beta:sub_total counter\n"
                       "beta:sub_total 0\n"
                       "# HELP zeta z\n# TYPE zeta gauge\nzeta 0\n");
    ckube_metrics_registry_free(reg);
}

static void test_registration_rules(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    const char *const lab[] = {"a", "b", NULL};
    ckube_metric_family *f = ckube_metrics_counter(reg, "x_total", "h", lab);
    assert_non_null(f);
    /* Same name and shape: the same family. */
    assert_ptr_equal(f, ckube_metrics_counter(reg, "x_total", "other help", lab));

    char *err = NULL;
    ckube_metric_opts o = {.name = "x_total", .type = CKUBE_METRIC_GAUGE, .label_names = lab};
    assert_null(ckube_metrics_register(reg, &o, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "x_total"));
    assert_non_null(strstr(err, "counter"));
    free(err);

    o.type = CKUBE_METRIC_COUNTER;
    o.label_names = (const char *const[]){"a", NULL};
    assert_null(ckube_metrics_register(reg, &o, &err));
    assert_non_null(strstr(err, "labels"));
    free(err);

    const double b1[] = {1, 2}, b2[] = {1, 3};
    ckube_metric_opts h = {
        .name = "h", .type = CKUBE_METRIC_HISTOGRAM, .buckets = b1, .n_buckets = 2};
    ckube_metric_family *hf = ckube_metrics_register(reg, &h, &err);
    assert_non_null(hf);
    assert_null(err);
    assert_ptr_equal(hf, ckube_metrics_register(reg, &h, NULL));
    h.buckets = b2;
    assert_null(ckube_metrics_register(reg, &h, &err));
    free(err);

    struct {
        ckube_metric_opts o;
        const char *msg;
    } bad[] = {
        {{.name = "", .type = CKUBE_METRIC_GAUGE}, "invalid metric name"},
        {{.name = "9lives", .type = CKUBE_METRIC_GAUGE}, "invalid metric name"},
        {{.name = "a-b", .type = CKUBE_METRIC_GAUGE}, "invalid metric name"},
        {{.name = NULL, .type = CKUBE_METRIC_GAUGE}, "invalid metric name"},
        {{.name = "ok", .type = (ckube_metric_type)7}, "unknown type"},
        {{.name = "ok",
          .type = CKUBE_METRIC_GAUGE,
          .label_names = (const char *const[]){"a:b", NULL}},
         "invalid label name"},
        {{.name = "ok",
          .type = CKUBE_METRIC_GAUGE,
          .label_names = (const char *const[]){"__x", NULL}},
         "invalid label name"},
        {{.name = "ok",
          .type = CKUBE_METRIC_GAUGE,
          .label_names = (const char *const[]){"a", "a", NULL}},
         "duplicate label"},
        {{.name = "ok",
          .type = CKUBE_METRIC_HISTOGRAM,
          .label_names = (const char *const[]){"le", NULL}},
         "reserved"},
        {{.name = "ok",
          .type = CKUBE_METRIC_HISTOGRAM,
          .buckets = (const double[]){2, 1},
          .n_buckets = 2},
         "strictly increasing"},
        {{.name = "ok",
          .type = CKUBE_METRIC_HISTOGRAM,
          .buckets = (const double[]){1, 1},
          .n_buckets = 2},
         "strictly increasing"},
        {{.name = "ok",
          .type = CKUBE_METRIC_HISTOGRAM,
          .buckets = (const double[]){NAN},
          .n_buckets = 1},
         "strictly increasing"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        assert_null(ckube_metrics_register(reg, &bad[i].o, &err));
        if (!err || !strstr(err, bad[i].msg))
            fail_msg("case %zu: error \"%s\" lacks \"%s\"", i, err ? err : "(null)", bad[i].msg);
        free(err);
    }
    assert_null(ckube_metrics_register(NULL, &o, NULL));
    assert_null(ckube_metrics_register(reg, NULL, NULL));
    /* Failed registrations left nothing behind named "ok". */
    char *text = ckube_metrics_render(reg, NULL);
    assert_null(strstr(text, "\nok"));
    free(text);
    ckube_metrics_registry_free(reg);
}

static void test_float_format(void **state)
{
    (void)state;
    struct {
        double v;
        const char *s;
    } cases[] = {
        {0, "0"},
        {1, "1"},
        {-1, "-1"},
        {1.5, "1.5"},
        {0.1, "0.1"},
        {0.30000000000000004, "0.30000000000000004"},
        {123456, "123456"},
        {1234567, "1.234567e+06"},
        {1e6, "1e+06"},
        {0.0001, "0.0001"},
        {0.00001, "1e-05"},
        {1e-8, "1e-08"},
        {1e21, "1e+21"},
        {1e100, "1e+100"},
        {-2.5e-7, "-2.5e-07"},
        {INFINITY, "+Inf"},
        {-INFINITY, "-Inf"},
        {NAN, "NaN"},
        {9007199254740993.0, "9.007199254740992e+15"},
    };
    char buf[48];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_string_equal(ckube_metrics_format_float(cases[i].v, buf, sizeof(buf)), cases[i].s);
}

static void test_bucket_helpers(void **state)
{
    (void)state;
    double b[10];
    assert_int_equal(ckube_metrics_exponential_buckets(1e-8, 10, 10, b), 0);
    /* Bit-identical to Go's prometheus.ExponentialBuckets(10e-9, 10, 10). */
    const char *want[] = {"1e-08",
                          "1e-07",
                          "1e-06",
                          "9.999999999999999e-06",
                          "9.999999999999999e-05",
                          "0.001",
                          "0.01",
                          "0.1",
                          "1",
                          "10"};
    char buf[48];
    for (int i = 0; i < 10; i++)
        assert_string_equal(ckube_metrics_format_float(b[i], buf, sizeof(buf)), want[i]);
    assert_int_equal(ckube_metrics_exponential_buckets(0, 10, 3, b), -1);
    assert_int_equal(ckube_metrics_exponential_buckets(1, 1, 3, b), -1);
    assert_int_equal(ckube_metrics_exponential_buckets(1, 2, 0, b), -1);
    assert_int_equal(ckube_metrics_linear_buckets(1, 0.5, 3, b), 0);
    assert_true(b[0] == 1 && b[1] == 1.5 && b[2] == 2);
    assert_int_equal(ckube_metrics_linear_buckets(1, 0, 3, b), -1);
}

typedef struct collect_ctx {
    ckube_metric *g;
    int calls;
} collect_ctx;

static void collect(void *ctx)
{
    collect_ctx *c = ctx;
    c->calls++;
    ckube_gauge_set(c->g, c->calls * 10);
}

static void test_collectors(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    collect_ctx c = {.g = ckube_metric_with(ckube_metrics_gauge(reg, "g", "h", NULL), NULL)};
    ckube_metrics_collector *h = ckube_metrics_add_collector(reg, collect, &c);
    assert_non_null(h);
    assert_int_equal(c.calls, 0);
    assert_render(reg, "# HELP g h\n# TYPE g gauge\ng 10\n");
    assert_render(reg, "# HELP g h\n# TYPE g gauge\ng 20\n");
    ckube_metrics_remove_collector(reg, h);
    assert_render(reg, "# HELP g h\n# TYPE g gauge\ng 20\n");
    assert_int_equal(c.calls, 2);
    assert_null(ckube_metrics_add_collector(reg, NULL, NULL));
    /* A collector left registered is freed with the registry. */
    assert_non_null(ckube_metrics_add_collector(reg, collect, &c));
    ckube_metrics_registry_free(reg);
}

static void test_default_registry_and_nulls(void **state)
{
    (void)state;
    ckube_metrics_registry *d = ckube_metrics_default();
    assert_non_null(d);
    assert_ptr_equal(d, ckube_metrics_default());
    ckube_metrics_registry_free(d); /* no-op */
    assert_ptr_equal(d, ckube_metrics_default());
    ckube_metrics_registry_free(NULL);
    /* Updates on NULL children are no-ops, reads are 0. */
    ckube_counter_inc(NULL);
    ckube_counter_add(NULL, 1);
    ckube_gauge_set(NULL, 1);
    ckube_gauge_add(NULL, 1);
    ckube_gauge_inc(NULL);
    ckube_gauge_dec(NULL);
    ckube_histogram_observe(NULL, 1);
    assert_true(ckube_metric_value(NULL) == 0);
    assert_int_equal(ckube_histogram_count(NULL), 0);
    assert_null(ckube_metric_with(NULL, NULL));
    assert_null(ckube_metrics_render(NULL, NULL));
}

/* ---- concurrency smoke ---- */

#define THREADS 4
#define ITERS 20000

typedef struct smoke {
    ckube_metrics_registry *reg;
    ckube_metric_family *c, *g, *h;
    int id;
} smoke;

static void *smoke_worker(void *arg)
{
    smoke *s = arg;
    char mine[16];
    snprintf(mine, sizeof(mine), "t%d", s->id);
    for (int i = 0; i < ITERS; i++) {
        /* Shared child (contention) and a per-thread child looked up
         * each time (get-or-create under concurrency). */
        ckube_counter_inc(ckube_metric_with(s->c, (const char *[]){"shared"}));
        ckube_counter_add(ckube_metric_with(s->c, (const char *[]){mine}), 0.5);
        ckube_gauge_add(ckube_metric_with(s->g, NULL), 1);
        ckube_histogram_observe(ckube_metric_with(s->h, NULL), (i % 4) * 0.25);
        if (i % 1000 == 0) {
            char name[32];
            snprintf(name, sizeof(name), "fam_%d_total", i % 3000);
            /* Concurrent registration of the same names: one family each. */
            ckube_metric_family *f = ckube_metrics_counter(s->reg, name, "s", NULL);
            assert_non_null(f);
            assert_ptr_equal(f, ckube_metrics_counter(s->reg, name, "s", NULL));
        }
    }
    return NULL;
}

static void *smoke_renderer(void *arg)
{
    ckube_metrics_registry *reg = arg;
    for (int i = 0; i < 50; i++) {
        char *t = ckube_metrics_render(reg, NULL);
        assert_non_null(t);
        free(t);
    }
    return NULL;
}

static void test_concurrency_smoke(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    smoke s[THREADS];
    pthread_t th[THREADS], r;
    ckube_metric_family *c =
        ckube_metrics_counter(reg, "c_total", "c", (const char *[]){"t", NULL});
    ckube_metric_family *g = ckube_metrics_gauge(reg, "g", "g", NULL);
    ckube_metric_family *h = ckube_metrics_histogram(reg, "h", "h", NULL, NULL, 0);
    pthread_create(&r, NULL, smoke_renderer, reg);
    for (int i = 0; i < THREADS; i++) {
        s[i] = (smoke){.reg = reg, .c = c, .g = g, .h = h, .id = i};
        pthread_create(&th[i], NULL, smoke_worker, &s[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_join(r, NULL);
    assert_true(ckube_metric_value(ckube_metric_with(c, (const char *[]){"shared"})) ==
                THREADS * ITERS);
    assert_true(ckube_metric_value(ckube_metric_with(c, (const char *[]){"t2"})) == ITERS * 0.5);
    assert_true(ckube_metric_value(ckube_metric_with(g, NULL)) == THREADS * ITERS);
    ckube_metric *hm = ckube_metric_with(h, NULL);
    assert_int_equal(ckube_histogram_count(hm), THREADS * ITERS);
    /* (0 + .25 + .5 + .75) per 4 observations: exact in binary. */
    assert_true(ckube_metric_value(hm) == THREADS * ITERS / 4 * 1.5);
    char *t = ckube_metrics_render(reg, NULL);
    assert_non_null(strstr(t, "c_total{t=\"shared\"} 80000\n"));
    assert_non_null(strstr(t, "c_total{t=\"t0\"} 10000\n"));
    assert_non_null(strstr(t, "h_bucket{le=\"0.25\"} 40000\n"));
    assert_non_null(strstr(t, "h_count 80000\n"));
    free(t);
    ckube_metrics_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_without_labels),
        cmocka_unit_test(test_gauge_labels_sorted_and_escaped),
        cmocka_unit_test(test_histogram_render),
        cmocka_unit_test(test_default_buckets_and_nan),
        cmocka_unit_test(test_families_sorted_empty_vec_omitted),
        cmocka_unit_test(test_registration_rules),
        cmocka_unit_test(test_float_format),
        cmocka_unit_test(test_bucket_helpers),
        cmocka_unit_test(test_collectors),
        cmocka_unit_test(test_default_registry_and_nulls),
        cmocka_unit_test(test_concurrency_smoke),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
