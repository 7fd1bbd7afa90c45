/* test_clientbuilder.c - the controllers' clients of
 * --use-service-account-credentials (controllers/clientbuilder.h): the
 * pure parts (how long a token is used, when a fetch is due, reading a
 * TokenRequest answer), then against a real `ckube server` (HTTPS, no
 * controller-manager of its own): a client's requests are its
 * ServiceAccount's, which the builder makes; a token is fetched once and
 * then only when due on the builder's clock; a ServiceAccount deleted and
 * made again (its tokens refused: 401) gets a new token at once; the
 * builder's clients carry none of the root's credentials. */
#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/config.h>
#include <ckube/json.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "controllers/clientbuilder.h"
#include "util/server_util.h"

static const ckube_gvr SAS = {"", "v1", "serviceaccounts"};

/* ---- the pure parts ---------------------------------------------------------- */

static void test_expiration_seconds(void **state)
{
    (void)state;
    assert_int_equal(clientbuilder_expiration_seconds(0), 3600);
    assert_int_equal(clientbuilder_expiration_seconds(7200), 7200);
    /* never below the server's minimum: a test's short lifetime asks for
     * 10 minutes and uses the token for less */
    assert_int_equal(clientbuilder_expiration_seconds(20), 600);
    assert_int_equal(clientbuilder_expiration_seconds(600), 600);
}

static void test_use_seconds(void **state)
{
    (void)state;
    int64_t now = 1700000000;
    /* upstream's defaults: an hour's token is replaced after 48 minutes */
    assert_int_equal(clientbuilder_use_seconds(now, now + 3600, 3600, 20), 2880);
    assert_int_equal(clientbuilder_use_seconds(now, now + 3600, 0, 0), 2880);
    /* a longer grant than asked for: capped by the lifetime asked for */
    assert_int_equal(clientbuilder_use_seconds(now, now + 7200, 3600, 20), 2880);
    /* a test's 20 s out of a 10-minute token */
    assert_int_equal(clientbuilder_use_seconds(now, now + 600, 20, 20), 16);
    /* clocks that disagree (the token seems to expire in 100 s, or to
     * have expired): pinned to 10 minutes, as upstream */
    assert_int_equal(clientbuilder_use_seconds(now, now + 100, 0, 20), 480);
    assert_int_equal(clientbuilder_use_seconds(now, now - 50, 3600, 20), 480);
    /* other leeways; out of range is the default */
    assert_int_equal(clientbuilder_use_seconds(now, now + 1000, 0, 50), 500);
    assert_int_equal(clientbuilder_use_seconds(now, now + 1000, 0, 100), 800);
    /* never 0: a token is used at least a second */
    assert_int_equal(clientbuilder_use_seconds(now, now + 600, 1, 20), 1);
}

static void test_fetch_due(void **state)
{
    (void)state;
    /* no token: always, whatever the times */
    assert_true(clientbuilder_fetch_due(false, 0, 100, 200));
    /* a token before it is due: no */
    assert_false(clientbuilder_fetch_due(true, 99, 100, 0));
    /* due: yes, from that instant */
    assert_true(clientbuilder_fetch_due(true, 100, 100, 0));
    assert_true(clientbuilder_fetch_due(true, 500, 100, 0));
    /* due, but a fetch failed less than a second ago: the old token */
    assert_false(clientbuilder_fetch_due(true, 500, 100, 900));
    assert_true(clientbuilder_fetch_due(true, 900, 100, 900));
}

static void test_parse_token(void **state)
{
    (void)state;
    const char *why = NULL;
    char *token = NULL;
    int64_t exp = 0;
    json_t *tr = json_pack("{s:{s:s,s:s}}", "status", "token", "abc.def.ghi", "expirationTimestamp",
                           "2026-11-27T10:00:00Z");
    assert_int_equal(clientbuilder_parse_token(tr, &token, &exp, &why), 0);
    assert_string_equal(token, "abc.def.ghi");
    assert_int_equal(exp, ckube_parse_rfc3339("2026-11-27T10:00:00Z"));
    free(token);
    json_decref(tr);
    tr = json_pack("{s:{s:s}}", "status", "expirationTimestamp", "2026-11-27T10:00:00Z");
    assert_int_equal(clientbuilder_parse_token(tr, &token, &exp, &why), -1);
    assert_null(token);
    assert_string_equal(why, "the TokenRequest answer has no status.token");
    json_decref(tr);
    tr = json_pack("{s:{s:s,s:s}}", "status", "token", "t", "expirationTimestamp", "tomorrow");
    assert_int_equal(clientbuilder_parse_token(tr, &token, &exp, &why), -1);
    assert_string_equal(why, "the TokenRequest answer has no valid status.expirationTimestamp");
    json_decref(tr);
    assert_int_equal(clientbuilder_parse_token(NULL, &token, &exp, &why), -1);
}

/* ---- against a server --------------------------------------------------------- */

static struct test_server srv;
static ckube_client *root;
static ckube_config *base;

static int server_setup(void **state)
{
    (void)state;
    srv.no_controller_manager = true;
    if (tsu_start(&srv, "memory") != 0)
        return -1;
    root = tsu_client(&srv);
    ckube_status *err = NULL;
    ckube_config_overrides ov = {.kubeconfig = srv.kubeconfig};
    if (!root || ckube_config_load(&ov, &base, &err) != 0) {
        ckube_status_free(err);
        return -1;
    }
    base->qps = -1;
    return 0;
}

static int server_teardown(void **state)
{
    (void)state;
    ckube_config_free(base);
    ckube_client_free(root);
    return tsu_stop(&srv, SIGTERM) == 0 ? 0 : -1;
}

/* Who the server says `c` is (a SelfSubjectReview), malloc'd. */
static char *whoami(ckube_client *c)
{
    const char *body = "{\"apiVersion\":\"authentication.k8s.io/v1\","
                       "\"kind\":\"SelfSubjectReview\"}";
    ckube_request rq = {.method = "POST",
                        .path = "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                        .body = body,
                        .body_len = strlen(body)};
    ckube_response resp = {0};
    ckube_status *err = NULL;
    if (ckube_client_do(c, &rq, &resp, &err) != 0) {
        fail_msg("SelfSubjectReview: %d %s", err ? err->code : -1,
                 err && err->message ? err->message : "?");
    }
    json_t *j = json_loads(resp.body, 0, NULL);
    const char *u = json_string_value(ckube_json_get_path(j, "status.userInfo.username"));
    char *name = strdup(u ? u : "(none)");
    json_decref(j);
    ckube_response_free(&resp);
    return name;
}

static char *sa_uid(const char *name)
{
    json_t *sa = NULL;
    ckube_status *err = NULL;
    if (ckube_get(root, &SAS, "kube-system", name, &sa, &err) != 0) {
        ckube_status_free(err);
        return NULL;
    }
    char *uid = strdup(ckube_obj_uid(sa));
    json_decref(sa);
    return uid;
}

static void test_against_server(void **state)
{
    (void)state;
    ckube_clock *clock = ckube_fake_clock_new(CKUBE_SEC(1000));
    /* 100 s: used for 80 s */
    clientbuilder_opts o = {.lifetime_seconds = 100, .clock = clock};
    clientbuilder *b = clientbuilder_new(root, base, &o);
    assert_non_null(b);
    ckube_status *err = NULL;
    ckube_client *c = clientbuilder_client(b, "test-controller", &err);
    assert_non_null(c);
    assert_ptr_equal(clientbuilder_client(b, "test-controller", &err), c);
    /* nothing happened yet: no ServiceAccount, no token */
    assert_null(sa_uid("test-controller"));
    assert_int_equal(clientbuilder_fetches(b, "test-controller"), 0);

    /* the first request makes the ServiceAccount and fetches its token;
     * the server sees the ServiceAccount, not the root's admin */
    char *who = whoami(c);
    assert_string_equal(who, "system:serviceaccount:kube-system:test-controller");
    free(who);
    char *uid1 = sa_uid("test-controller");
    assert_non_null(uid1);
    assert_int_equal(clientbuilder_fetches(b, "test-controller"), 1);
    /* later requests reuse it until it is due */
    ckube_fake_clock_advance(clock, CKUBE_SEC(79));
    free(whoami(c));
    assert_int_equal(clientbuilder_fetches(b, "test-controller"), 1);
    /* at 80% of its lifetime, the next request fetches the next */
    ckube_fake_clock_advance(clock, CKUBE_SEC(1));
    free(whoami(c));
    assert_int_equal(clientbuilder_fetches(b, "test-controller"), 2);
    free(whoami(c));
    assert_int_equal(clientbuilder_fetches(b, "test-controller"), 2);

    /* the ServiceAccount deleted (and with it its tokens): the next
     * request gets a 401, the token is dropped, the ServiceAccount made
     * again and a new token fetched, and the request succeeds */
    assert_int_equal(ckube_delete(root, &SAS, "kube-system", "test-controller", NULL, NULL, &err),
                     0);
    who = whoami(c);
    assert_string_equal(who, "system:serviceaccount:kube-system:test-controller");
    free(who);
    assert_int_equal(clientbuilder_fetches(b, "test-controller"), 3);
    char *uid2 = sa_uid("test-controller");
    assert_non_null(uid2);
    assert_string_not_equal(uid1, uid2);
    free(uid1);
    free(uid2);

    /* prepare: the ServiceAccount and a token now, before any request */
    assert_non_null(clientbuilder_client(b, "other-controller", &err));
    assert_null(sa_uid("other-controller"));
    assert_int_equal(clientbuilder_prepare(b, "other-controller", &err), 0);
    assert_int_equal(clientbuilder_fetches(b, "other-controller"), 1);
    uid1 = sa_uid("other-controller");
    assert_non_null(uid1);
    free(uid1);
    assert_int_equal(clientbuilder_prepare(b, "other-controller", &err), 0);
    assert_int_equal(clientbuilder_fetches(b, "other-controller"), 1);
    /* no such client */
    assert_int_equal(clientbuilder_prepare(b, "nobody", &err), -1);
    assert_int_equal(clientbuilder_fetches(b, "nobody"), 0);

    /* a ServiceAccount's rights are its own: this one has none */
    json_t *list = NULL;
    assert_int_equal(ckube_list(c, &SAS, "kube-system", NULL, &list, &err), -1);
    assert_int_equal(err->code, 403);
    ckube_status_free(err);
    err = NULL;
    clientbuilder_free(b);
    ckube_fake_clock_free(clock);
}

/* A root that cannot make tokens: the client's request fails with the
 * reason, and works once the root can. */
static void test_fetch_failure(void **state)
{
    (void)state;
    /* a root with no credentials is system:anonymous: 403 on the GET of
     * the ServiceAccount */
    ckube_config *anon = ckube_config_dup(base);
    free(anon->cert_data);
    free(anon->key_data);
    anon->cert_data = anon->key_data = NULL;
    anon->cert_data_len = anon->key_data_len = 0;
    ckube_status *err = NULL;
    ckube_client *anon_root = ckube_client_new(anon, &err);
    assert_non_null(anon_root);
    clientbuilder *b = clientbuilder_new(anon_root, base, NULL);
    ckube_client *c = clientbuilder_client(b, "denied-controller", &err);
    assert_non_null(c);
    json_t *list = NULL;
    assert_int_equal(ckube_list(c, &SAS, "kube-system", NULL, &list, &err), -1);
    assert_int_equal(err->code, 403);
    assert_non_null(strstr(err->message, "system:anonymous"));
    ckube_status_free(err);
    err = NULL;
    assert_int_equal(clientbuilder_prepare(b, "denied-controller", &err), -1);
    assert_non_null(err);
    ckube_status_free(err);
    assert_int_equal(clientbuilder_fetches(b, "denied-controller"), 0);
    clientbuilder_free(b);
    ckube_client_free(anon_root);
    ckube_config_free(anon);
}

int main(void)
{
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(test_expiration_seconds),
        cmocka_unit_test(test_use_seconds),
        cmocka_unit_test(test_fetch_due),
        cmocka_unit_test(test_parse_token),
    };
    const struct CMUnitTest server[] = {
        cmocka_unit_test(test_against_server),
        cmocka_unit_test(test_fetch_failure),
    };
    int rc = cmocka_run_group_tests(pure, NULL, NULL);
    return rc | cmocka_run_group_tests(server, server_setup, server_teardown);
}
