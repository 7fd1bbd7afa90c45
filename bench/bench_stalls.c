/* bench_stalls - how often this machine takes a running thread off its CPU
 * (a program for bench/run.py, not a test).
 *
 * The latency tails bench/run.py measures (GET p99 at 20k/s, watch
 * fan-out p99) are a few milliseconds on a shared 2-core VM, and they move
 * by 3x from run to run. This probe tells a reader of the results whether
 * the machine, not ckube, made them: T threads (default: one per online
 * CPU) each spin on CLOCK_MONOTONIC for --duration seconds and count the
 * gaps between consecutive readings. A gap is time the thread did not run:
 * preemption by another task, an interrupt storm, or the hypervisor
 * running another guest on the vCPU. A quiet machine shows none over 1 ms;
 * a busy one shows several per second, and a server thread stalled that
 * long delays every request on its connections by as much.
 *
 * Prints one JSON object:
 *   {"threads": T, "duration_s": D, "gaps_over_1ms_per_s": ...,
 *    "gaps_over_3ms_per_s": ..., "max_gap_ms": ..., "lost_pct": ...}
 * where rates are per thread-second and lost_pct is the share of the
 * threads' time spent in gaps over 0.1 ms.
 *
 * Usage: bench_stalls [--threads T] [--duration S]
 */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct probe {
    uint64_t duration_ns;
    long over_1ms, over_3ms;
    uint64_t max_gap_ns, lost_ns; /* lost: the sum of gaps over 0.1 ms */
};

static void *spin(void *arg)
{
    struct probe *p = arg;
    uint64_t prev = mono_ns(), end = prev + p->duration_ns;
    for (;;) {
        uint64_t t = mono_ns(), gap = t - prev;
        prev = t;
        if (gap > 100000) {
            p->lost_ns += gap;
            if (gap > 1000000)
                p->over_1ms++;
            if (gap > 3000000)
                p->over_3ms++;
            if (gap > p->max_gap_ns)
                p->max_gap_ns = gap;
        }
        if (t >= end)
            return NULL;
    }
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"threads", required_argument, NULL, 't'},
        {"duration", required_argument, NULL, 'd'},
        {NULL, 0, NULL, 0},
    };
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    double duration = 3;
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (ch == 't')
            threads = atol(optarg);
        else if (ch == 'd')
            duration = atof(optarg);
        else
            goto usage;
    }
    if (threads < 1 || threads > 256 || duration <= 0 || duration > 60)
        goto usage;

    struct probe *p = calloc((size_t)threads, sizeof *p);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    if (!p || !th)
        return 1;
    for (long i = 0; i < threads; i++) {
        p[i].duration_ns = (uint64_t)(duration * 1e9);
        if (pthread_create(&th[i], NULL, spin, &p[i]) != 0) {
            fprintf(stderr, "bench_stalls: cannot start thread %ld\n", i);
            return 1;
        }
    }
    long over_1ms = 0, over_3ms = 0;
    uint64_t max_gap = 0, lost = 0;
    for (long i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        over_1ms += p[i].over_1ms;
        over_3ms += p[i].over_3ms;
        lost += p[i].lost_ns;
        if (p[i].max_gap_ns > max_gap)
            max_gap = p[i].max_gap_ns;
    }
    double thread_s = duration * (double)threads;
    printf("{\"threads\": %ld, \"duration_s\": %.3f, \"gaps_over_1ms_per_s\": %.2f, "
           "\"gaps_over_3ms_per_s\": %.2f, \"max_gap_ms\": %.3f, \"lost_pct\": %.3f}\n",
           threads, duration, (double)over_1ms / thread_s, (double)over_3ms / thread_s,
           (double)max_gap / 1e6, (double)lost / 1e9 / thread_s * 100.0);
    free(p);
    free(th);
    return 0;

usage:
    fprintf(stderr, "usage: bench_stalls [--threads T (1-256)] [--duration S (0-60)]\n");
    return 2;
}
