/* test_webhook_server.c - the webhook server's handler threads
 * (ckube/webhook.h, options.workers):
 *  - with workers, that many reviews are answered at once (each handler
 *    waits for the others), over HTTPS, and the metrics count each;
 *  - without, one at a time, as before (the handler that waits for a
 *    second one waits alone);
 *  - stopping while a handler runs waits for it; its request ends
 *    without an answer and the in-flight gauge comes back to 0;
 *  - a worker count over the limit is refused in the server's words. */
#include <curl/curl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <ckube/metrics.h>
#include <ckube/webhook.h>

#include "util/cert_util.h"
#include "util/curl_util.h"
#include "util/meet_util.h"

static char dir[256]; /* the test's files, under CKUBE_TEST_TMP */
static tu_certs certs;

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("CKUBE_TEST_TMP");
    snprintf(dir, sizeof dir, "%s/webhook_server-XXXXXX", base && *base ? base : "/tmp");
    char mk[300];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", base && *base ? base : "/tmp");
    if (system(mk) != 0 || !mkdtemp(dir))
        return -1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* the server's default file names in its directory */
    certs = tu_make_certs(dir, "tls", "webhook");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    int rc = system(rm);
    curl_global_cleanup();
    return rc == 0 ? 0 : -1;
}

/* ---- a handler that waits for company ------------------------------------------- */

/* Each call waits for company or the gate (tu_meet); one that waited in
 * vain denies ("alone"). */
static void wait_for_company(void *ctx, const ckube_admission_request *req,
                             ckube_admission_response *resp)
{
    (void)req;
    bool alone;
    tu_meet_wait(ctx, &alone);
    if (alone)
        ckube_admission_deny(resp, 0, "alone");
}

/* ---- the client ----------------------------------------------------------------- */

#define REVIEW                                                                                     \
    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"           \
    "\"uid\":\"u-%d\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"ConfigMap\"},"        \
    "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"configmaps\"},"                \
    "\"name\":\"cm-%d\",\"namespace\":\"default\",\"operation\":\"CREATE\","                       \
    "\"userInfo\":{\"username\":\"tester\"},\"object\":{\"apiVersion\":\"v1\","                    \
    "\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm-%d\",\"namespace\":\"default\"}}}}"

typedef struct call {
    CURL *e;
    struct curl_slist *hdr;
    char review[1024];
    tu_body body;
    long code;
    CURLcode rc;
} call;

static void call_init(call *c, int port, int i)
{
    memset(c, 0, sizeof *c);
    snprintf(c->review, sizeof c->review, REVIEW, i, i, i);
    c->e = curl_easy_init();
    assert_non_null(c->e);
    char url[128];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/validate", port);
    c->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c->e, CURLOPT_URL, url);
    curl_easy_setopt(c->e, CURLOPT_CAINFO, certs.ca);
    curl_easy_setopt(c->e, CURLOPT_HTTPHEADER, c->hdr);
    curl_easy_setopt(c->e, CURLOPT_POSTFIELDS, c->review);
    curl_easy_setopt(c->e, CURLOPT_WRITEFUNCTION, tu_collect);
    curl_easy_setopt(c->e, CURLOPT_WRITEDATA, &c->body);
    curl_easy_setopt(c->e, CURLOPT_TIMEOUT, 15L);
}

static void call_cleanup(call *c)
{
    curl_easy_cleanup(c->e);
    curl_slist_free_all(c->hdr);
}

/* n reviews at once (curl's multi interface: n connections). */
static void call_many(int port, call *calls, int n)
{
    CURLM *m = curl_multi_init();
    for (int i = 0; i < n; i++) {
        call_init(&calls[i], port, i);
        curl_multi_add_handle(m, calls[i].e);
    }
    int running = n;
    while (running) {
        assert_int_equal(curl_multi_perform(m, &running), CURLM_OK);
        if (running)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m, &left)))
        for (int i = 0; i < n; i++)
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == calls[i].e)
                calls[i].rc = msg->data.result;
    for (int i = 0; i < n; i++) {
        curl_easy_getinfo(calls[i].e, CURLINFO_RESPONSE_CODE, &calls[i].code);
        curl_multi_remove_handle(m, calls[i].e);
    }
    curl_multi_cleanup(m);
}

static ckube_webhook_server *serve(unsigned workers, tu_meet *c, ckube_metrics_registry *reg,
                                   int *port)
{
    ckube_webhook_server_options o = {.host = "127.0.0.1",
                                      .port = CKUBE_WEBHOOK_ANY_PORT,
                                      .cert_dir = dir,
                                      .metrics = reg,
                                      .workers = workers};
    char *err = NULL;
    ckube_webhook_server *s = ckube_webhook_server_new(&o, &err);
    assert_non_null(s);
    assert_int_equal(ckube_webhook_server_admission(s, "/validate", wait_for_company, c), 0);
    if (ckube_webhook_server_start(s, &err) != 0)
        fail_msg("start: %s", err);
    *port = ckube_webhook_server_port(s);
    assert_true(*port > 0);
    return s;
}

/* Whether the registry's text has the line `want`. */
static bool has_line(ckube_metrics_registry *reg, const char *want)
{
    size_t len;
    char *text = ckube_metrics_render(reg, &len);
    assert_non_null(text);
    bool found = false;
    size_t wl = strlen(want);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, want, wl) && (p[wl] == '\n' || p[wl] == '\0'))
            found = true;
    if (!found)
        print_message("no line \"%s\" in:\n%s\n", want, text);
    free(text);
    return found;
}

/* ---- tests ---------------------------------------------------------------------- */

static void test_workers_answer_at_once(void **state)
{
    (void)state;
    tu_meet c;
    tu_meet_init(&c, 4, 10000);
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    int port;
    ckube_webhook_server *s = serve(4, &c, reg, &port);
    call calls[4];
    call_many(port, calls, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(calls[i].rc, CURLE_OK);
        assert_int_equal(calls[i].code, 200);
        char uid[32];
        snprintf(uid, sizeof uid, "\"uid\":\"u-%d\"", i);
        if (!strstr(calls[i].body.text, uid) || !strstr(calls[i].body.text, "\"allowed\":true"))
            fail_msg("answer %d: %s", i, calls[i].body.text);
        call_cleanup(&calls[i]);
    }
    assert_true(has_line(
        reg, "controller_runtime_webhook_requests_total{webhook=\"/validate\",code=\"200\"} 4"));
    assert_true(
        has_line(reg, "controller_runtime_webhook_requests_in_flight{webhook=\"/validate\"} 0"));
    assert_true(
        has_line(reg, "controller_runtime_webhook_latency_seconds_count{webhook=\"/validate\"} 4"));
    ckube_webhook_server_free(s); /* its threads joined: their writes are seen */
    assert_int_equal(c.max_at_once, 4);
    ckube_metrics_registry_free(reg);
    tu_meet_free(&c);
}

/* The default: the loop calls the handlers, so the first of two waits
 * alone (and denies), then the second comes. */
static void test_no_workers_one_at_a_time(void **state)
{
    (void)state;
    tu_meet c;
    tu_meet_init(&c, 2, 300);
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    int port;
    ckube_webhook_server *s = serve(0, &c, reg, &port);
    call calls[2];
    call_many(port, calls, 2);
    int denied = 0;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(calls[i].rc, CURLE_OK);
        assert_int_equal(calls[i].code, 200);
        if (strstr(calls[i].body.text, "\"allowed\":false") && strstr(calls[i].body.text, "alone"))
            denied++;
        call_cleanup(&calls[i]);
    }
    assert_int_equal(denied, 1);
    ckube_webhook_server_free(s);
    assert_int_equal(c.max_at_once, 1);
    ckube_metrics_registry_free(reg);
    tu_meet_free(&c);
}

typedef struct client_thread {
    int port;
    call c;
} client_thread;

static void *one_call(void *arg)
{
    client_thread *t = arg;
    call_init(&t->c, t->port, 7);
    t->c.rc = curl_easy_perform(t->c.e);
    curl_easy_getinfo(t->c.e, CURLINFO_RESPONSE_CODE, &t->c.code);
    return NULL;
}

static void test_stop_with_a_handler_running(void **state)
{
    (void)state;
    tu_meet c;
    tu_meet_init(&c, 99, 10000);
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    int port;
    ckube_webhook_server *s = serve(2, &c, reg, &port);
    client_thread t = {.port = port};
    pthread_t client, opener;
    assert_int_equal(pthread_create(&client, NULL, one_call, &t), 0);
    for (int i = 0; i < 500 && tu_meet_read(&c, &c.arrived) == 0; i++)
        poll(NULL, 0, 10);
    assert_int_equal(tu_meet_read(&c, &c.arrived), 1);
    assert_true(
        has_line(reg, "controller_runtime_webhook_requests_in_flight{webhook=\"/validate\"} 1"));
    assert_int_equal(pthread_create(&opener, NULL, tu_meet_open_later, &c), 0);
    ckube_webhook_server_stop(s); /* waits for the handler the opener lets go */
    pthread_join(opener, NULL);
    pthread_join(client, NULL);
    assert_int_not_equal(t.c.rc, CURLE_OK); /* the connection closed unanswered */
    assert_int_equal(t.c.code, 0);
    call_cleanup(&t.c);
    assert_true(
        has_line(reg, "controller_runtime_webhook_requests_in_flight{webhook=\"/validate\"} 0"));
    assert_int_equal(ckube_webhook_server_port(s), -1);
    ckube_webhook_server_free(s);
    ckube_metrics_registry_free(reg);
    tu_meet_free(&c);
}

static void test_workers_limit(void **state)
{
    (void)state;
    ckube_webhook_server_options o = {.workers = CKUBE_WEBHOOK_MAX_WORKERS + 1};
    char *err = NULL;
    assert_null(ckube_webhook_server_new(&o, &err));
    assert_string_equal(err, "invalid webhook server workers 1025: at most 1024");
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workers_answer_at_once),
        cmocka_unit_test(test_no_workers_one_at_a_time),
        cmocka_unit_test(test_stop_with_a_handler_running),
        cmocka_unit_test(test_workers_limit),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, setup, teardown);
}
