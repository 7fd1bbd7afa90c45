/* test_apiext_server.c - the extension API server's workers
 * (ckube/apiext.h, options.workers), against a real `ckube server`:
 *  - with four workers, four requests of a ServiceAccount are served at
 *    once: their TokenReviews and SubjectAccessReviews go to the API
 *    server from the workers, and the provider (which waits for the other
 *    three) is called four times together;
 *  - without workers, one at a time: of two requests, the first's
 *    provider waits alone (a 500 with its message), then the second;
 *  - a worker count over the limit is refused in the server's words. */
#include <ckube/apiext.h>
#include <ckube/client.h>
#include <ckube/json.h>

#include <curl/curl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "util/curl_util.h"
#include "util/meet_util.h"
#include "util/server_util.h"

typedef struct fixture {
    struct test_server srv;
    ckube_client *admin;
    char *token; /* of ServiceAccount default/widget-reader */
} fixture;

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    fixture *f = calloc(1, sizeof *f);
    f->srv.no_controller_manager = true;
    if (tsu_start(&f->srv, "memory") != 0)
        return -1;
    f->admin = tsu_client(&f->srv);
    assert_non_null(f->admin);
    /* a ServiceAccount that may list widgets.test.ckube.io, and its token */
    f->token = tsu_sa_token(f->admin, "default", "widget-reader");
    tsu_do_json(f->admin, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                "{\"metadata\":{\"name\":\"widget-reader\"},\"rules\":[{\"apiGroups\":"
                "[\"test.ckube.io\"],\"resources\":[\"widgets\"],\"verbs\":[\"get\",\"list\"]}]}",
                NULL);
    tsu_do_json(
        f->admin, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "{\"metadata\":{\"name\":\"widget-reader\"},\"roleRef\":{\"apiGroup\":"
        "\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"widget-reader\"},"
        "\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"widget-reader\","
        "\"namespace\":\"default\"}]}",
        NULL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ckube_client_free(f->admin);
    free(f->token);
    assert_int_equal(tsu_stop(&f->srv, SIGTERM), 0);
    free(f);
    curl_global_cleanup();
    return 0;
}

/* ---- a provider that waits for company ------------------------------------------ */

/* Each call waits for three others (tu_meet); one that waited in vain
 * fails ("alone"). */
static json_t *list_widgets(void *ctx, const char *ns, char **message)
{
    bool alone;
    tu_meet_wait(ctx, &alone);
    if (alone) {
        *message = strdup("alone");
        return NULL;
    }
    return json_pack("[{s:{s:s,s:s}}]", "metadata", "name", "w1", "namespace", ns);
}

static ckube_apiext_server *serve(fixture *f, unsigned workers, tu_meet *c)
{
    ckube_apiext_options o = {.client = f->admin,
                              .group = "test.ckube.io",
                              .version = "v1",
                              .bind_address = "127.0.0.1",
                              .workers = workers};
    char *err = NULL;
    ckube_apiext_server *s = ckube_apiext_server_new(&o, &err);
    if (!s)
        fail_msg("new: %s", err);
    ckube_apiext_resource r = {
        .plural = "widgets", .kind = "Widget", .namespaced = true, .list = list_widgets, .ctx = c};
    assert_int_equal(ckube_apiext_server_add_resource(s, &r), 0);
    if (ckube_apiext_server_start(s, &err) != 0)
        fail_msg("start: %s", err);
    return s;
}

typedef struct call {
    CURL *e;
    struct curl_slist *hdr;
    tu_body body;
    long code;
} call;

/* n lists of widgets at once with the ServiceAccount's token (curl's
 * multi interface: n connections). The server's certificate is its own
 * self-signed one: not verified, as an APIService with
 * insecureSkipTLSVerify. */
static void get_many(int port, const char *path, const char *token, call *calls, int n)
{
    CURLM *m = curl_multi_init();
    char url[300], auth[4096];
    snprintf(url, sizeof url, "https://127.0.0.1:%d%s", port, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token ? token : "");
    for (int i = 0; i < n; i++) {
        call *c = &calls[i];
        memset(c, 0, sizeof *c);
        c->e = curl_easy_init();
        c->hdr = token ? curl_slist_append(NULL, auth) : NULL;
        curl_easy_setopt(c->e, CURLOPT_URL, url);
        curl_easy_setopt(c->e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c->e, CURLOPT_SSL_VERIFYHOST, 0L);
        curl_easy_setopt(c->e, CURLOPT_HTTPHEADER, c->hdr);
        curl_easy_setopt(c->e, CURLOPT_WRITEFUNCTION, tu_collect);
        curl_easy_setopt(c->e, CURLOPT_WRITEDATA, &c->body);
        curl_easy_setopt(c->e, CURLOPT_TIMEOUT, 20L);
        curl_multi_add_handle(m, c->e);
    }
    int running = n;
    while (running) {
        assert_int_equal(curl_multi_perform(m, &running), CURLM_OK);
        if (running)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    for (int i = 0; i < n; i++) {
        curl_easy_getinfo(calls[i].e, CURLINFO_RESPONSE_CODE, &calls[i].code);
        curl_multi_remove_handle(m, calls[i].e);
        curl_easy_cleanup(calls[i].e);
        curl_slist_free_all(calls[i].hdr);
    }
    curl_multi_cleanup(m);
}

/* n lists of widgets in default at once with the ServiceAccount's token. */
static void list_many(const fixture *f, int port, call *calls, int n)
{
    get_many(port, "/apis/test.ckube.io/v1/namespaces/default/widgets", f->token, calls, n);
}

static void test_workers_serve_at_once(void **state)
{
    fixture *f = *state;
    tu_meet c;
    tu_meet_init(&c, 4, 15000);
    ckube_apiext_server *s = serve(f, 4, &c);
    call calls[4];
    list_many(f, ckube_apiext_server_port(s), calls, 4);
    for (int i = 0; i < 4; i++) {
        if (calls[i].code != 200 || !strstr(calls[i].body.text, "\"kind\":\"WidgetList\"") ||
            !strstr(calls[i].body.text, "\"name\":\"w1\""))
            fail_msg("answer %d: %ld %s", i, calls[i].code, calls[i].body.text);
    }
    ckube_apiext_server_free(s); /* its threads joined: their writes are seen */
    assert_int_equal(c.max_at_once, 4);
    tu_meet_free(&c);
}

static void test_no_workers_one_at_a_time(void **state)
{
    fixture *f = *state;
    tu_meet c;
    tu_meet_init(&c, 2, 300);
    ckube_apiext_server *s = serve(f, 0, &c);
    call calls[2];
    list_many(f, ckube_apiext_server_port(s), calls, 2);
    int ok = 0, alone = 0;
    for (int i = 0; i < 2; i++) {
        if (calls[i].code == 200 && strstr(calls[i].body.text, "\"name\":\"w1\""))
            ok++;
        else if (calls[i].code == 500 && strstr(calls[i].body.text, "\"message\":\"alone\""))
            alone++;
        else
            fail_msg("answer %d: %ld %s", i, calls[i].code, calls[i].body.text);
    }
    assert_int_equal(ok, 1);
    assert_int_equal(alone, 1);
    ckube_apiext_server_free(s);
    assert_int_equal(c.max_at_once, 1);
    tu_meet_free(&c);
}

/* The OpenAPI document, read by eight clients at once on four workers
 * (one encoding shared, no JSON tree: TSan checks), and refused to a
 * token the TokenReview refuses and to anonymous, in upstream's words. */
static void test_openapi_at_once_and_refused(void **state)
{
    fixture *f = *state;
    tu_meet c;
    tu_meet_init(&c, 1, 0);
    ckube_apiext_server *s = serve(f, 4, &c);
    int port = ckube_apiext_server_port(s);
    call calls[8];
    get_many(port, "/openapi/v3/apis/test.ckube.io/v1", f->token, calls, 8);
    for (int i = 0; i < 8; i++) {
        if (calls[i].code != 200 || !strstr(calls[i].body.text, "\"io.ckube.test.v1.Widget\"") ||
            strcmp(calls[i].body.text, calls[0].body.text))
            fail_msg("answer %d: %ld %s", i, calls[i].code, calls[i].body.text);
    }
    get_many(port, "/openapi/v3", "not-a-token", calls, 1);
    assert_int_equal(calls[0].code, 401);
    assert_non_null(strstr(calls[0].body.text, "\"reason\":\"Unauthorized\""));
    get_many(port, "/openapi/v3", NULL, calls, 1);
    assert_int_equal(calls[0].code, 403);
    assert_non_null(strstr(calls[0].body.text, "forbidden: User \\\"system:anonymous\\\" cannot "
                                               "get path \\\"/openapi/v3\\\""));
    ckube_apiext_server_free(s);
    tu_meet_free(&c);
}

static void test_workers_limit(void **state)
{
    fixture *f = *state;
    ckube_apiext_options o = {.client = f->admin,
                              .group = "test.ckube.io",
                              .version = "v1",
                              .workers = CKUBE_APIEXT_MAX_WORKERS + 1};
    char *err = NULL;
    assert_null(ckube_apiext_server_new(&o, &err));
    assert_string_equal(err, "invalid workers 1025: at most 1024");
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workers_serve_at_once),
        cmocka_unit_test(test_no_workers_one_at_a_time),
        cmocka_unit_test(test_openapi_at_once_and_refused),
        cmocka_unit_test(test_workers_limit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
