/* bench_workqueue - throughput of the workqueue's hot paths (not a test).
 *
 * Built by CMake as build/bench_workqueue (use a Release or RelWithDebInfo
 * build without sanitizers for meaningful figures); bench/run.py runs it.
 * Run: ./bench_workqueue [--json] [seconds-per-case, default 1]
 *
 * One "op" below is a full add + get + done cycle of one key. The
 * machine's load matters: run it on an idle box, a few times.
 *
 * --json (for bench/run.py) prints exactly one JSON line instead of the
 * table:
 *   {"workqueue_ops_per_s": N, "workqueue_ops_per_s_with_metrics": N,
 *    "workqueue_ops_per_s_borrowed": N}
 * Each is the median of 3 runs of one thread doing add + get + done of
 * one key at a time (queue depth 1) on a queue made with default options:
 *  - workqueue_ops_per_s: no name (so no metrics), ckube_workqueue_get
 *    (a malloc'd copy, freed after done), as ckube_controller's workers do;
 *  - ..._with_metrics: the same on a named queue with a metrics registry,
 *    which is what a ckube_controller creates (it names its queue);
 *  - ..._borrowed: no metrics, ckube_workqueue_get_borrowed (no copy).
 */
#include <ckube/workqueue.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NKEYS 1024

static char keys[NKEYS][32];
static double seconds = 1.0;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static ckube_workqueue *make_queue(const char *name, ckube_metrics_registry *reg)
{
    ckube_workqueue_config cfg = {.name = name, .metrics = reg};
    return ckube_workqueue_new(&cfg);
}

static void report(const char *what, unsigned long ops, double secs)
{
    printf("%-58s %10.2f M ops/s  (%.1f ns/op)\n", what, (double)ops / secs / 1e6,
           secs * 1e9 / (double)ops);
}

/* add, get, done one key at a time (queue depth 1) for `seconds`; returns
 * ops per second. */
static double run_cycle(const char *name, int borrowed)
{
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_workqueue *q = make_queue(name, reg);
    unsigned long ops = 0;
    double t0 = now_s(), t;
    do {
        for (int i = 0; i < 4096; i++) {
            ckube_workqueue_add(q, keys[ops & (NKEYS - 1)]);
            if (borrowed) {
                const char *k = ckube_workqueue_get_borrowed(q);
                ckube_workqueue_done(q, k);
            } else {
                char *k = ckube_workqueue_get(q);
                ckube_workqueue_done(q, k);
                free(k);
            }
            ops++;
        }
        t = now_s() - t0;
    } while (t < seconds);
    ckube_workqueue_free(q);
    ckube_metrics_registry_free(reg);
    return (double)ops / t;
}

static void bench_cycle(const char *what, const char *name, int borrowed)
{
    double rate = run_cycle(name, borrowed);
    printf("%-58s %10.2f M ops/s  (%.1f ns/op)\n", what, rate / 1e6, 1e9 / rate);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of 3 runs of run_cycle. */
static double median_cycle(const char *name, int borrowed)
{
    double r[3];
    for (int i = 0; i < 3; i++)
        r[i] = run_cycle(name, borrowed);
    qsort(r, 3, sizeof r[0], cmp_double);
    return r[1];
}

/* Add NKEYS keys (each 3 times: 2 merged), then drain them. */
static void bench_batch(const char *what, const char *name)
{
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_workqueue *q = make_queue(name, reg);
    unsigned long ops = 0;
    double t0 = now_s(), t;
    do {
        for (int r = 0; r < 3; r++)
            for (int i = 0; i < NKEYS; i++)
                ckube_workqueue_add(q, keys[i]);
        for (int i = 0; i < NKEYS; i++) {
            const char *k = ckube_workqueue_get_borrowed(q);
            ckube_workqueue_done(q, k);
        }
        ops += NKEYS;
        t = now_s() - t0;
    } while (t < seconds);
    report(what, ops, t);
    ckube_workqueue_free(q);
    ckube_metrics_registry_free(reg);
}

typedef struct mt {
    ckube_workqueue *q;
    volatile int *stop;
    unsigned long done;
} mt;

/* Closed loop: take a key, finish it, add it back (it goes to the tail). */
static void *mt_worker(void *arg)
{
    mt *m = arg;
    const char *k;
    while ((k = ckube_workqueue_get_borrowed(m->q)) != NULL) {
        char copy[32];
        strcpy(copy, k);
        ckube_workqueue_done(m->q, k);
        m->done++;
        if (!__atomic_load_n(m->stop, __ATOMIC_RELAXED))
            ckube_workqueue_add(m->q, copy);
    }
    return NULL;
}

/* `workers` threads contending on one queue pre-filled with NKEYS keys. */
static void bench_threads(const char *what, int workers)
{
    ckube_workqueue *q = make_queue(NULL, NULL);
    for (int i = 0; i < NKEYS; i++)
        ckube_workqueue_add(q, keys[i]);
    volatile int stop = 0;
    mt m[8];
    pthread_t th[8];
    double t0 = now_s();
    for (int i = 0; i < workers; i++) {
        m[i] = (mt){.q = q, .stop = &stop};
        pthread_create(&th[i], NULL, mt_worker, &m[i]);
    }
    struct timespec ts = {.tv_sec = (time_t)seconds,
                          .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    ckube_workqueue_shutdown(q);
    unsigned long processed = 0;
    for (int i = 0; i < workers; i++) {
        pthread_join(th[i], NULL);
        processed += m[i].done;
    }
    report(what, processed, now_s() - t0);
    ckube_workqueue_free(q);
}

int main(int argc, char **argv)
{
    int json = 0, have_seconds = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (!have_seconds && (seconds = strtod(argv[i], &end)) > 0 && !*end) {
            have_seconds = 1;
        } else {
            fprintf(stderr, "usage: bench_workqueue [--json] [seconds-per-case]\n");
            return 2;
        }
    }
    for (int i = 0; i < NKEYS; i++)
        snprintf(keys[i], sizeof(keys[i]), "default/pod-%d", i);
    if (json) {
        if (!have_seconds)
            seconds = 0.5;
        double plain = median_cycle(NULL, 0);
        double metrics = median_cycle("bench", 0);
        double borrowed = median_cycle(NULL, 1);
        printf("{\"workqueue_ops_per_s\": %.0f, \"workqueue_ops_per_s_with_metrics\": %.0f, "
               "\"workqueue_ops_per_s_borrowed\": %.0f}\n",
               plain, metrics, borrowed);
        return 0;
    }
    bench_cycle("1 thread, add+get_borrowed+done, no metrics", NULL, 1);
    bench_cycle("1 thread, add+get(malloc)+done+free, no metrics", NULL, 0);
    bench_cycle("1 thread, add+get_borrowed+done, metrics", "bench", 1);
    bench_batch("1 thread, 3x add (2 merged) then get+done, no metrics", NULL);
    bench_batch("1 thread, 3x add (2 merged) then get+done, metrics", "bench");
    bench_threads("1 worker thread, get_borrowed+done+add, no metrics", 1);
    bench_threads("2 worker threads, get_borrowed+done+add, no metrics", 2);
    bench_threads("4 worker threads, get_borrowed+done+add, no metrics", 4);
    return 0;
}
