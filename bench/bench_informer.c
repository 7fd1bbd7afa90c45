/* bench_informer - how fast a libckube shared informer syncs, and how much
 * memory its cache takes per object (a benchmark program, not a test).
 *
 *   bench_informer --server URL --namespace NS --expect N
 *                  [--resource configmaps] [--timeout 120] [-v LEVEL]
 *                  [--qps Q] [--page-size N] [--tree-handler]
 *
 * It does what a controller does, with the options a user gets by default:
 * a client from a config that names only the server (plain http, no auth;
 * so the default client-side rate limit of 5 QPS / burst 10 applies), a
 * shared informer factory with no options, the informer of `resource` in
 * NS, one event handler, start, then waits until the
 * informer has synced, the handler has seen the initial list and the store
 * holds at least N objects. It prints ONE JSON line on stdout:
 *
 *   {"informer_sync_ms": wall ms from creating the client to synced,
 *    "informer_bytes_per_object": heap growth / N,
 *    "informer_rss_bytes_per_object": VmRSS growth / N,
 *    "json_bytes_per_object": mean compact JSON size of the cached objects,
 *    "objects": objects in the store,
 *    "informer_store_bytes_per_object": the library's own estimate
 *        (ckube_shared_informer_bytes) / objects,
 *    "heap_bytes": heap growth, "rss_bytes": RSS growth}
 *
 * The cache holds each object as its compact JSON text (ckube/informer.h):
 * the heap figure is that, the store's index, and nothing else after a
 * sync whose handler kept no objects; jansson trees are built for the
 * handler's calls and for lister reads, and a reader that keeps them
 * (or reads everything continually) holds trees as well.
 *
 * Heap = bytes handed out by glibc malloc and not yet freed: mallinfo2()'s
 * uordblks + hblkhd (in this glibc it sums every arena, so the objects the
 * reflector thread allocates in its own arena are counted; the man page's
 * "main arena only" is out of date), measured after malloc_trim(0) before
 * the client is created and after sync. RSS = VmRSS growth over the same
 * span; it also holds what the sync's peak left behind (freed memory that
 * malloc keeps, thread stacks).
 * libcurl's global state is initialised before the first measurement (a
 * fixed cost of loading the library, like importing a module in node).
 *
 * The handler does what a controller's handler does with an added object:
 * it takes its key (and counts it). It is the ckube_object form of the
 * callback, the one ckube_controller registers, which decodes nothing it
 * is not asked for. With --tree-handler it is the json_t form instead,
 * which builds a jansson tree of every object for the handler (what a
 * handler that reads the whole object pays).
 *
 * --qps, --page-size and --tree-handler are for investigations only (what
 * would change with other settings); the benchmark figures use none. --qps sets the
 * client's ckube_config.qps (-1 = no client-side limit) and burst; with
 * --page-size the informer is made with ckube_shared_informer_new and that
 * ckube_informer_opts.page_size instead of by the factory (which has no
 * such option; otherwise the same options).
 *
 * Exit status: 0 with the JSON line; 1 with a message on stderr on a bad
 * argument, a client error or a timeout; nothing is printed on stdout
 * then.
 */
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/informer.h>
#include <ckube/json.h>
#include <ckube/log.h>

#include <curl/curl.h>
#include <getopt.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct args {
    const char *server;
    const char *ns;
    const char *resource; /* "configmaps" or "group/version/resource" */
    long expect;
    double timeout_s;
    int verbosity;
    double qps;        /* 0 = the library's default */
    long page_size;    /* 0 = the library's default (use the factory) */
    bool tree_handler; /* the json_t callback instead of the ckube_object one */
} args;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_informer --server URL --namespace NS --expect N\n"
            "                      [--resource configmaps|GROUP/VERSION/RESOURCE]\n"
            "                      [--timeout SECONDS (120)] [-v LEVEL]\n"
            "                      [--qps Q (-1 = unlimited)] [--page-size N] [--tree-handler]\n");
}

static int parse_args(int argc, char **argv, args *a)
{
    static const struct option opts[] = {{"server", required_argument, NULL, 's'},
                                         {"namespace", required_argument, NULL, 'n'},
                                         {"expect", required_argument, NULL, 'e'},
                                         {"resource", required_argument, NULL, 'r'},
                                         {"timeout", required_argument, NULL, 't'},
                                         {"v", required_argument, NULL, 'v'},
                                         {"qps", required_argument, NULL, 'q'},
                                         {"page-size", required_argument, NULL, 'p'},
                                         {"tree-handler", no_argument, NULL, 'T'},
                                         {"help", no_argument, NULL, 'h'},
                                         {0, 0, 0, 0}};
    *a = (args){.resource = "configmaps", .expect = -1, .timeout_s = 120};
    int ch;
    char *end;
    while ((ch = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
        switch (ch) {
        case 's':
            a->server = optarg;
            break;
        case 'n':
            a->ns = optarg;
            break;
        case 'e':
            a->expect = strtol(optarg, &end, 10);
            if (*end || a->expect < 0) {
                fprintf(stderr, "bench_informer: bad --expect \"%s\"\n", optarg);
                return -1;
            }
            break;
        case 'r':
            a->resource = optarg;
            break;
        case 't':
            a->timeout_s = strtod(optarg, &end);
            if (*end || a->timeout_s <= 0) {
                fprintf(stderr, "bench_informer: bad --timeout \"%s\"\n", optarg);
                return -1;
            }
            break;
        case 'v':
            a->verbosity = atoi(optarg);
            break;
        case 'q':
            a->qps = strtod(optarg, &end);
            if (*end || a->qps == 0) {
                fprintf(stderr, "bench_informer: bad --qps \"%s\"\n", optarg);
                return -1;
            }
            break;
        case 'p':
            a->page_size = strtol(optarg, &end, 10);
            if (*end || a->page_size <= 0) {
                fprintf(stderr, "bench_informer: bad --page-size \"%s\"\n", optarg);
                return -1;
            }
            break;
        case 'T':
            a->tree_handler = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind != argc || !a->server || !a->ns || a->expect < 0) {
        usage(stderr);
        return -1;
    }
    return 0;
}

/* "configmaps" is core/v1; anything else must be "group/version/resource"
 * (group may be empty: "/v1/secrets"). The strings point into `spec`,
 * which is modified (owned by the caller, e.g. argv). */
static int parse_gvr(char *spec, ckube_gvr *gvr)
{
    char *s1 = strchr(spec, '/');
    if (!s1) {
        *gvr = (ckube_gvr){.group = "", .version = "v1", .resource = spec};
        return 0;
    }
    char *s2 = strchr(s1 + 1, '/');
    if (!s2 || strchr(s2 + 1, '/') || !s2[1] || s2 == s1 + 1)
        return -1;
    *s1 = *s2 = '\0';
    *gvr = (ckube_gvr){.group = spec, .version = s1 + 1, .resource = s2 + 1};
    return 0;
}

/* ---------------------------------------------------------------- memory */

/* Bytes allocated with malloc and not freed, over every arena. Trims
 * first so freed memory at the top of each heap goes back to the system
 * (that only matters for the RSS figure taken next). */
static size_t heap_in_use(void)
{
    malloc_trim(0);
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* VmRSS from /proc/self/status, in bytes (0 when unreadable). */
static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = strtoull(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kb * 1024;
}

/* Mean compact JSON size of every cached object (0 for an empty store). */
static double json_bytes_per_object(ckube_shared_informer *inf)
{
    ckube_obj_list l = {0};
    if (ckube_store_list(ckube_shared_informer_store(inf), &l) != 0 || l.n == 0) {
        ckube_obj_list_free(&l);
        return 0;
    }
    size_t total = 0;
    for (size_t i = 0; i < l.n; i++)
        total += json_dumpb(l.items[i], NULL, 0, JSON_COMPACT);
    double mean = (double)total / (double)l.n;
    ckube_obj_list_free(&l);
    return mean;
}

/* --------------------------------------------------------------- informer */

static atomic_long adds;

static atomic_size_t key_bytes; /* so the key read is not optimised away */

static void on_add_object(void *ud, const ckube_object *obj, bool initial)
{
    (void)ud;
    (void)initial;
    atomic_fetch_add_explicit(&key_bytes, strlen(ckube_object_key(obj)), memory_order_relaxed);
    atomic_fetch_add_explicit(&adds, 1, memory_order_relaxed);
}

static void on_add_tree(void *ud, const json_t *obj, bool initial)
{
    (void)ud;
    (void)initial;
    const char *name = ckube_obj_name(obj);
    atomic_fetch_add_explicit(&key_bytes, name ? strlen(name) : 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&adds, 1, memory_order_relaxed);
}

/* Waits (polling each millisecond) for sync, the handler's sync and
 * `expect` objects. Returns false at the deadline. */
static bool wait_synced(ckube_shared_informer *inf, ckube_handler_reg *reg, long expect,
                        double deadline_ms)
{
    const struct timespec tick = {.tv_nsec = 1000000};
    while (now_ms() < deadline_ms) {
        if (ckube_shared_informer_has_synced(inf) && ckube_handler_reg_has_synced(reg) &&
            ckube_shared_informer_object_count(inf) >= (size_t)expect)
            return true;
        nanosleep(&tick, NULL);
    }
    return false;
}

static double per_object(double bytes, size_t n)
{
    return n ? bytes / (double)n : 0;
}

int main(int argc, char **argv)
{
    args a;
    ckube_gvr gvr;
    if (parse_args(argc, argv, &a) != 0)
        return 1;
    char *resource = strdup(a.resource);
    if (!resource || parse_gvr(resource, &gvr) != 0) {
        fprintf(stderr, "bench_informer: bad --resource \"%s\"\n", a.resource);
        free(resource);
        return 1;
    }
    ckube_log_set_verbosity(a.verbosity);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    size_t heap0 = heap_in_use(), rss0 = rss_bytes();
    double t0 = now_ms();

    ckube_config cfg = {.host = (char *)a.server, .qps = a.qps};
    if (a.qps > 0)
        cfg.burst = (int)(a.qps < 10 ? 10 : a.qps);
    ckube_status *st = NULL;
    ckube_client *client = ckube_client_new(&cfg, &st);
    if (!client) {
        fprintf(stderr, "bench_informer: client: %s\n", st && st->message ? st->message : "?");
        ckube_status_free(st);
        free(resource);
        return 1;
    }
    /* Either the factory owns the informer, or (--page-size) `own` does. */
    ckube_informer_factory *factory = NULL;
    ckube_shared_informer *own = NULL, *inf = NULL;
    if (a.page_size) {
        ckube_informer_opts io = {.page_size = a.page_size};
        ckube_list_watch *lw = ckube_list_watch_new_client(client, &gvr, a.ns, NULL, NULL);
        inf = own = lw ? ckube_shared_informer_new(lw, &io) : NULL;
    } else {
        factory = ckube_informer_factory_new(client, NULL);
        inf = factory ? ckube_informer_factory_for_namespace(factory, &gvr, a.ns) : NULL;
    }
    ckube_event_handler h = a.tree_handler ? (ckube_event_handler){.on_add = on_add_tree}
                                           : (ckube_event_handler){.on_add_object = on_add_object};
    ckube_handler_reg *reg = inf ? ckube_shared_informer_add_handler(inf, &h) : NULL;
    if (!reg ||
        (factory ? ckube_informer_factory_start(factory) : ckube_shared_informer_start(own)) != 0) {
        fprintf(stderr, "bench_informer: could not create or start the informer\n");
        ckube_shared_informer_free(own);
        ckube_informer_factory_free(factory);
        ckube_client_free(client);
        free(resource);
        return 1;
    }
    bool ok = wait_synced(inf, reg, a.expect, t0 + a.timeout_s * 1e3);
    double sync_ms = now_ms() - t0;
    if (!ok) {
        fprintf(stderr,
                "bench_informer: timed out after %.0f s: synced=%d, %zu of %ld objects in the "
                "store, %ld adds handled\n",
                a.timeout_s, ckube_shared_informer_has_synced(inf),
                ckube_shared_informer_object_count(inf), a.expect, atomic_load(&adds));
        /* No cleanup: stopping waits for an in-flight list, which a hung
         * server may never finish, and the time bound must hold. */
        _exit(1);
    }
    size_t heap1 = heap_in_use(), rss1 = rss_bytes();
    size_t n = ckube_shared_informer_object_count(inf);
    double heap = (double)heap1 - (double)heap0, rss = (double)rss1 - (double)rss0;
    /* In this order: the library's estimate first, as the cache is after
     * the sync; json_bytes_per_object reads every object through the
     * store (which then holds jansson trees of them too, see informer.h). */
    double store_bytes = (double)ckube_shared_informer_bytes(inf);
    double json_bytes = json_bytes_per_object(inf);
    printf("{\"informer_sync_ms\": %.1f, \"informer_bytes_per_object\": %.1f, "
           "\"informer_rss_bytes_per_object\": %.1f, \"json_bytes_per_object\": %.1f, "
           "\"objects\": %zu, \"informer_store_bytes_per_object\": %.1f, "
           "\"heap_bytes\": %.0f, \"rss_bytes\": %.0f}\n",
           sync_ms, per_object(heap, n), per_object(rss, n), json_bytes, n,
           per_object(store_bytes, n), heap, rss);
    fflush(stdout);
    ckube_shared_informer_free(own);
    ckube_informer_factory_free(factory);
    ckube_client_free(client);
    curl_global_cleanup();
    free(resource);
    return 0;
}
