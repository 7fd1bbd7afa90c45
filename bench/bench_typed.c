/* bench_typed - typed objects (ckube-gen's structs, ckube/typed.h) next to
 * the jansson trees untyped code uses (not a test).
 *
 * Built by CMake as build/bench_typed with code generated from the
 * Network CRD and the server's core/v1 and apps/v1 OpenAPI documents
 * (tests/unit/gen/openapi/); bench/run.py runs it (phase "typed").
 * Run: ./bench_typed [--json]
 *
 * For three objects (a Network, a Deployment, a Pod with three
 * containers), per object, the median of 5 runs of a loop:
 *  - decode: json_loadb (jansson) vs the kind's T_decode (which parses
 *    with jansson and fills the struct);
 *  - encode: json_dumps of the tree vs T_encode of the struct;
 *  - memory held per object: the jansson tree, the typed struct (what an
 *    informer keeps next to its cache block once a reader asked for the
 *    typed view), and the compact JSON text (the informer's block holds
 *    about that), measured as malloc's in-use bytes over 2,000 copies.
 *
 * --json prints one JSON line: {"typed": [{"object": ..., ...}, ...]}. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "k8s.h"
#include "samplecrd.h"

enum { COPIES = 2000, RUNS = 5 };

static const char NETWORK[] =
    "{\"apiVersion\":\"samplecrd.k8s.io/v1\",\"kind\":\"Network\",\"metadata\":{\"name\":"
    "\"example-network\",\"namespace\":\"default\",\"uid\":\"0c5f4b5e-8e9b-4c59-9d1e-"
    "3f6a2d7c1b11\",\"resourceVersion\":\"479015\",\"generation\":1,\"creationTimestamp\":"
    "\"2026-11-27T10:00:00Z\",\"finalizers\":[\"samplecrd.k8s.io/network-cleanup\"]},"
    "\"spec\":{\"cidr\":\"192.168.0.0/16\",\"gateway\":\"192.168.0.1\"},\"status\":{\"phase\":"
    "\"Ready\",\"observedGeneration\":1,\"bridge\":\"ckbr-3f2a1c9d\",\"conditions\":[{\"type\":"
    "\"Ready\",\"status\":\"True\",\"reason\":\"NetworkReady\",\"message\":\"bridge ckbr-"
    "3f2a1c9d carries 192.168.0.1/16\",\"lastTransitionTime\":\"2026-11-27T10:00:01Z\","
    "\"observedGeneration\":1}]}}";

static const char DEPLOYMENT[] =
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\","
    "\"namespace\":\"default\",\"uid\":\"6b2d7c1b-3f6a-4c59-9d1e-0c5f4b5e8e9b\","
    "\"resourceVersion\":\"1200\",\"generation\":3,\"creationTimestamp\":"
    "\"2026-11-27T10:00:00Z\",\"labels\":{\"app\":\"web\",\"tier\":\"frontend\"},"
    "\"annotations\":{\"deployment.kubernetes.io/revision\":\"3\"}},\"spec\":{\"replicas\":3,"
    "\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":{\"labels\":"
    "{\"app\":\"web\",\"tier\":\"frontend\"}},\"spec\":{\"containers\":[{\"name\":\"nginx\","
    "\"image\":\"nginx:1.27\",\"ports\":[{\"containerPort\":80,\"protocol\":\"TCP\"}],"
    "\"resources\":{\"requests\":{\"cpu\":\"100m\",\"memory\":\"64Mi\"},\"limits\":{\"cpu\":"
    "\"500m\",\"memory\":\"128Mi\"}},\"env\":[{\"name\":\"MODE\",\"value\":\"prod\"}]}],"
    "\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30}},\"strategy\":"
    "{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxUnavailable\":\"25%\",\"maxSurge\":"
    "\"25%\"}},\"revisionHistoryLimit\":10,\"progressDeadlineSeconds\":600},\"status\":"
    "{\"observedGeneration\":3,\"replicas\":3,\"updatedReplicas\":3,\"readyReplicas\":3,"
    "\"availableReplicas\":3}}";

static const char POD[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-7d4b9c-x2k8p\","
    "\"namespace\":\"default\",\"uid\":\"9d1e0c5f-4b5e-8e9b-6b2d-7c1b3f6a4c59\","
    "\"resourceVersion\":\"1300\",\"creationTimestamp\":\"2026-11-27T10:00:02Z\",\"labels\":"
    "{\"app\":\"web\",\"pod-template-hash\":\"7d4b9c\"},\"ownerReferences\":[{\"apiVersion\":"
    "\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"web-7d4b9c\",\"uid\":\"1b3f6a4c-5990-"
    "1e0c-5f4b-5e8e9b6b2d7c\",\"controller\":true,\"blockOwnerDeletion\":true}]},\"spec\":"
    "{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx:1.27\",\"ports\":[{"
    "\"containerPort\":80}],\"resources\":{\"requests\":{\"cpu\":\"100m\"}},\"env\":[{\"name\":"
    "\"A\",\"value\":\"1\"},{\"name\":\"B\",\"value\":\"2\"}]},{\"name\":\"sidecar\",\"image\":"
    "\"busybox:1.36\",\"args\":[\"sh\",\"-c\",\"sleep infinity\"]},{\"name\":\"metrics\","
    "\"image\":\"prom/node-exporter:v1.8\",\"ports\":[{\"containerPort\":9100,\"name\":"
    "\"metrics\"}]}],\"restartPolicy\":\"Always\",\"nodeName\":\"node-1\","
    "\"serviceAccountName\":\"default\"},\"status\":{\"phase\":\"Running\",\"podIP\":"
    "\"10.244.1.7\",\"hostIP\":\"172.18.0.2\",\"startTime\":\"2026-11-27T10:00:02Z\"}}";

typedef struct sample {
    const char *name;
    const char *json;
    const ckube_struct_info *si;
} sample;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

/* Microseconds per call of op over a loop of about 0.2 s. */
static double time_us(void (*op)(const sample *, void *), const sample *s, void *arg)
{
    double runs[RUNS];
    for (int r = 0; r < RUNS; r++) {
        long n = 0;
        double t0 = now_s(), t;
        do {
            for (int i = 0; i < 100; i++)
                op(s, arg);
            n += 100;
        } while ((t = now_s() - t0) < 0.2);
        runs[r] = t * 1e6 / (double)n;
    }
    return median(runs, RUNS);
}

static void jansson_decode(const sample *s, void *arg)
{
    (void)arg;
    json_decref(json_loadb(s->json, strlen(s->json), 0, NULL));
}

static void typed_decode(const sample *s, void *arg)
{
    (void)arg;
    ckube_struct_free(s->si, ckube_struct_decode(s->si, s->json, strlen(s->json), NULL));
}

static void jansson_encode(const sample *s, void *arg)
{
    (void)s;
    free(json_dumps(arg, JSON_COMPACT));
}

static void typed_encode(const sample *s, void *arg)
{
    free(ckube_struct_encode(s->si, arg));
}

static size_t in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* Bytes malloc holds per object for COPIES trees / structs / texts. */
static double held_bytes(const sample *s, int what)
{
    void **v = calloc(COPIES, sizeof *v);
    size_t before = in_use();
    for (int i = 0; i < COPIES; i++) {
        if (what == 0)
            v[i] = json_loadb(s->json, strlen(s->json), 0, NULL);
        else if (what == 1)
            v[i] = ckube_struct_decode(s->si, s->json, strlen(s->json), NULL);
        else
            v[i] = strdup(s->json);
    }
    double per = (double)(in_use() - before) / COPIES;
    for (int i = 0; i < COPIES; i++) {
        if (what == 0)
            json_decref(v[i]);
        else if (what == 1)
            ckube_struct_free(s->si, v[i]);
        else
            free(v[i]);
    }
    free(v);
    return per;
}

int main(int argc, char **argv)
{
    bool as_json = argc > 1 && !strcmp(argv[1], "--json");
    sample samples[] = {
        {"network", NETWORK, &samplecrd_v1_network_info},
        {"deployment", DEPLOYMENT, &k8s_v1_deployment_info},
        {"pod", POD, &k8s_v1_pod_info},
    };
    if (as_json)
        printf("{\"typed\": [");
    else
        printf("%-11s %6s %9s %9s %9s %9s %8s %8s %8s\n", "object", "bytes", "dec jans",
               "dec typed", "enc jans", "enc typed", "tree B", "typed B", "text B");
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++) {
        const sample *s = &samples[i];
        ckube_status *err = NULL;
        void *obj = ckube_struct_decode(s->si, s->json, strlen(s->json), &err);
        if (!obj) {
            fprintf(stderr, "bench_typed: %s does not decode: %s\n", s->name,
                    err ? err->message : "?");
            return 1;
        }
        json_t *tree = json_loads(s->json, 0, NULL);
        double jd = time_us(jansson_decode, s, NULL), td = time_us(typed_decode, s, NULL);
        double je = time_us(jansson_encode, s, tree), te = time_us(typed_encode, s, obj);
        double tb = held_bytes(s, 0), sb = held_bytes(s, 1), xb = held_bytes(s, 2);
        if (as_json)
            printf("%s{\"object\": \"%s\", \"bytes\": %zu, \"jansson_decode_us\": %.3f, "
                   "\"typed_decode_us\": %.3f, \"jansson_encode_us\": %.3f, \"typed_encode_us\": "
                   "%.3f, \"tree_bytes\": %.0f, \"typed_bytes\": %.0f, \"text_bytes\": %.0f}",
                   i ? ", " : "", s->name, strlen(s->json), jd, td, je, te, tb, sb, xb);
        else
            printf("%-11s %6zu %8.2fus %8.2fus %8.2fus %8.2fus %8.0f %8.0f %8.0f\n", s->name,
                   strlen(s->json), jd, td, je, te, tb, sb, xb);
        json_decref(tree);
        ckube_struct_free(s->si, obj);
    }
    if (as_json)
        printf("]}\n");
    return 0;
}
