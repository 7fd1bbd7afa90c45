/* test_secure_serving.c - the manager's secure serving (ckube/manager.h's
 * ckube_secure_serving_options; runtime/delegated_auth.c and
 * runtime/secure_serving.c): first the pure parts (always-allowed paths,
 * users from certificates and TokenReview answers, the
 * SubjectAccessReview asked, the 403 message, the TLS contexts), then a
 * manager serving HTTPS against a real `ckube server`:
 *  - /healthz is open to anyone, /metrics is not: 403 with upstream's
 *    Status, word for word;
 *  - the admin's client certificate (system:masters, verified against the
 *    CA the server publishes in kube-system/extension-apiserver-
 *    authentication) is allowed without a review;
 *  - a ServiceAccount token is reviewed: refused until a binding to
 *    system:monitoring, allowed after;
 *  - a garbage token and a certificate of another CA are 401 even on
 *    /healthz, as upstream's authentication runs before authorization;
 *  - answers are cached for their TTL (a fake clock): a denial stands
 *    until the TTL passes, then the new binding counts. */
#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/json.h>
#include <ckube/manager.h>
#include <ckube/metrics.h>

#include <curl/curl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "common/x509.h"
#include "runtime/delegated_auth.h"
#include "runtime/secure_serving.h"
#include "util/curl_util.h"
#include "util/server_util.h"

/* ---- the pure parts ---------------------------------------------------------- */

static void test_path_matches(void **state)
{
    (void)state;
    static const char *const p[] = {"/healthz", "readyz", "/debug/*", NULL};
    assert_true(delegated_path_matches(p, "/healthz"));
    assert_true(delegated_path_matches(p, "/readyz")); /* the pattern's '/' is optional */
    assert_true(delegated_path_matches(p, "/debug/pprof/heap"));
    assert_true(delegated_path_matches(p, "/debug/"));
    assert_false(delegated_path_matches(p, "/healthz/ping")); /* exact, not a prefix */
    assert_false(delegated_path_matches(p, "/healthzx"));
    assert_false(delegated_path_matches(p, "/metrics"));
    static const char *const none[] = {NULL};
    assert_false(delegated_path_matches(none, "/healthz"));
}

/* A client certificate for cn/org, self-signed. */
static X509 *cert_for(const char *cn, const char *org, EVP_PKEY **key)
{
    *key = EVP_EC_gen("P-256");
    assert_non_null(*key);
    X509 *x = ckube__x509_make(*key, cn, org, NULL, NULL, CKUBE__CERT_CLIENT, 1, NULL, 0);
    assert_non_null(x);
    return x;
}

static void test_user_from_cert(void **state)
{
    (void)state;
    EVP_PKEY *k;
    X509 *x = cert_for("alice", "dev", &k);
    delegated_user u;
    assert_int_equal(delegated_user_from_cert(x, &u), 0);
    assert_string_equal(u.name, "alice");
    assert_int_equal(u.ngroups, 2);
    assert_string_equal(u.groups[0], "dev");
    assert_string_equal(u.groups[1], "system:authenticated");
    assert_null(u.uid);
    delegated_user_clear(&u);
    X509_free(x);
    EVP_PKEY_free(k);
    /* no CN: no user */
    assert_int_equal(delegated_user_from_cert(NULL, &u), -1);
}

static json_t *loads(const char *s)
{
    json_t *j = ckube_json_loads(s, strlen(s), NULL);
    assert_non_null(j);
    return j;
}

static void test_user_from_token_review(void **state)
{
    (void)state;
    json_t *tr = loads(
        "{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"system:serviceaccount:a:b\","
        "\"uid\":\"u-1\",\"groups\":[\"system:serviceaccounts\",\"system:authenticated\"],"
        "\"extra\":{\"k\":[\"v\"]}}}}");
    assert_non_null(tr);
    delegated_user u;
    assert_int_equal(delegated_user_from_token_review(tr, &u), 0);
    assert_string_equal(u.name, "system:serviceaccount:a:b");
    assert_string_equal(u.uid, "u-1");
    assert_int_equal(u.ngroups, 2); /* system:authenticated not added twice */
    assert_string_equal(json_string_value(json_array_get(json_object_get(u.extra, "k"), 0)), "v");

    /* the SubjectAccessReview asked for that user */
    json_t *sar = delegated_sar_new(&u, "get", "/metrics");
    char *s = ckube_json_dumps(sar, NULL);
    assert_string_equal(
        s,
        "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\","
        "\"spec\":{\"user\":\"system:serviceaccount:a:b\",\"groups\":[\"system:serviceaccounts\","
        "\"system:authenticated\"],\"nonResourceAttributes\":{\"path\":\"/metrics\",\"verb\":"
        "\"get\"},\"uid\":\"u-1\",\"extra\":{\"k\":[\"v\"]}}}");
    free(s);
    json_decref(sar);
    delegated_user_clear(&u);
    json_decref(tr);

    /* not authenticated, or no username: no user */
    tr = loads("{\"status\":{\"authenticated\":false,\"error\":\"bad\"}}");
    assert_int_equal(delegated_user_from_token_review(tr, &u), -1);
    json_decref(tr);
    tr = loads("{\"status\":{\"authenticated\":true,\"user\":{}}}");
    assert_int_equal(delegated_user_from_token_review(tr, &u), -1);
    json_decref(tr);
    /* a user without system:authenticated gets it */
    tr = loads("{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"x\"}}}");
    assert_int_equal(delegated_user_from_token_review(tr, &u), 0);
    assert_int_equal(u.ngroups, 1);
    assert_string_equal(u.groups[0], "system:authenticated");
    delegated_user_clear(&u);
    json_decref(tr);
}

static void test_forbidden_message(void **state)
{
    (void)state;
    delegated_user u = {.name = "system:anonymous"};
    ckube_status *st = delegated_forbidden(&u, "get", "/metrics", NULL);
    assert_int_equal(st->code, 403);
    assert_string_equal(st->reason, "Forbidden");
    assert_string_equal(st->message, "forbidden: User \"system:anonymous\" cannot get path "
                                     "\"/metrics\"");
    ckube_status_free(st);
    st = delegated_forbidden(&u, "post", "/x", "no RBAC policy matched");
    assert_string_equal(st->message, "forbidden: User \"system:anonymous\" cannot post path "
                                     "\"/x\": no RBAC policy matched");
    ckube_status_free(st);
}

static void test_tls_contexts(void **state)
{
    (void)state;
    char *err = NULL;
    /* self-signed: a certificate for localhost and 127.0.0.1 */
    SSL_CTX *ctx = secure_serving_ctx_new(NULL, NULL, NULL, 0, &err);
    assert_non_null(ctx);
    X509 *x = SSL_CTX_get0_certificate(ctx);
    assert_non_null(x);
    char cn[128];
    X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof cn);
    assert_true(strncmp(cn, "localhost@", 10) == 0);
    assert_int_equal(X509_check_host(x, "localhost", 0, 0, NULL), 1);
    assert_int_equal(X509_check_ip_asc(x, "127.0.0.1", 0), 1);
    SSL_CTX_free(ctx);

    /* a certificate without its key, missing files, a bundle of no CA */
    assert_null(secure_serving_ctx_new("/nonexistent.crt", NULL, NULL, 0, &err));
    assert_string_equal(err, "a serving certificate and its key go together: both or neither");
    free(err);
    err = NULL;
    assert_null(secure_serving_ctx_new("/nonexistent.crt", "/nonexistent.key", NULL, 0, &err));
    assert_non_null(strstr(err, "cannot load the serving certificate /nonexistent.crt"));
    free(err);
    err = NULL;
    assert_null(secure_serving_ctx_new(NULL, NULL, "garbage", 7, &err));
    assert_string_equal(err, "the client CA bundle holds no PEM certificate");
    free(err);
}

/* ---- against a real server ------------------------------------------------------ */

typedef struct fixture {
    struct test_server srv;
    ckube_client *admin;
    ckube_manager *m;
    int port;
    char ca[700], cert[700], key[700];
    char *token; /* of ServiceAccount default/metrics-reader */
} fixture;

/* The manager's Status body and code for one request. */
typedef struct answer {
    long code;
    tu_body body;
} answer;

/* GET path on the secure port, with a bearer token and/or a client
 * certificate (NULL: none). The server's certificate is self-signed:
 * not verified. */
static answer get(const fixture *f, const char *path, const char *token, const char *cert,
                  const char *key)
{
    answer a = {0};
    CURL *e = curl_easy_init();
    assert_non_null(e);
    char url[256], auth[2048];
    snprintf(url, sizeof url, "https://127.0.0.1:%d%s", f->port, path);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, tu_collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &a.body);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
    struct curl_slist *h = NULL;
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        h = curl_slist_append(h, auth);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    }
    if (cert) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, cert);
        curl_easy_setopt(e, CURLOPT_SSLKEY, key);
    }
    CURLcode rc = curl_easy_perform(e);
    if (rc != CURLE_OK)
        fail_msg("GET %s: %s", url, curl_easy_strerror(rc));
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &a.code);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    return a;
}

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    fixture *f = calloc(1, sizeof *f);
    f->srv.no_controller_manager = true;
    if (tsu_start(&f->srv, "memory") != 0)
        return -1;
    snprintf(f->ca, sizeof f->ca, "%s/data/pki/ca.crt", f->srv.dir);
    snprintf(f->cert, sizeof f->cert, "%s/data/pki/admin.crt", f->srv.dir);
    snprintf(f->key, sizeof f->key, "%s/data/pki/admin.key", f->srv.dir);
    f->admin = tsu_client(&f->srv);
    assert_non_null(f->admin);
    /* a ServiceAccount and a token of it */
    f->token = tsu_sa_token(f->admin, "default", "metrics-reader");

    /* something to serve at /metrics */
    ckube_metrics_counter(ckube_metrics_default(), "test_secure_serving_total",
                          "A counter for the test.", NULL);
    /* the manager: secure serving only, answers not cached (each request
     * is reviewed) */
    ckube_manager_options o = {
        .client = f->admin,
        .metrics_bind_address = "0",
        .health_probe_bind_address = "0",
        .secure_serving = {.bind_address = "127.0.0.1:0", .cache_ttl_ns = -1},
    };
    char *err = NULL;
    f->m = ckube_manager_new(&o, &err);
    if (!f->m)
        fail_msg("manager: %s", err);
    assert_int_equal(ckube_manager_start(f->m), 0);
    f->port = ckube_manager_secure_port(f->m);
    assert_true(f->port > 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ckube_manager_stop(f->m);
    ckube_manager_free(f->m);
    ckube_client_free(f->admin);
    free(f->token);
    assert_int_equal(tsu_stop(&f->srv, SIGTERM), 0);
    free(f);
    curl_global_cleanup();
    return 0;
}

static const char FORBIDDEN_ANON[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"forbidden: User \\\"system:anonymous\\\" cannot get path \\\"/metrics\\\"\","
    "\"reason\":\"Forbidden\",\"code\":403}";
static const char UNAUTHORIZED[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}";

static void test_anonymous(void **state)
{
    fixture *f = *state;
    answer a = get(f, "/healthz", NULL, NULL, NULL);
    assert_int_equal(a.code, 200);
    assert_string_equal(a.body.text, "ok");
    a = get(f, "/readyz", NULL, NULL, NULL);
    assert_int_equal(a.code, 200);
    a = get(f, "/metrics", NULL, NULL, NULL);
    assert_int_equal(a.code, 403);
    assert_string_equal(a.body.text, FORBIDDEN_ANON);
    /* authorized, and then not found: a path the manager does not serve */
    a = get(f, "/livez", NULL, NULL, NULL);
    assert_int_equal(a.code, 404);
}

static void test_client_certificates(void **state)
{
    fixture *f = *state;
    /* the admin: system:masters, always allowed */
    answer a = get(f, "/metrics", NULL, f->cert, f->key);
    assert_int_equal(a.code, 200);
    assert_non_null(strstr(a.body.text, "# TYPE"));

    /* a certificate of another CA claiming system:masters: 401, even on
     * an always-allowed path */
    EVP_PKEY *k;
    X509 *x = cert_for("mallory", "system:masters", &k);
    char cp[700], kp[700];
    snprintf(cp, sizeof cp, "%s/mallory.crt", f->srv.dir);
    snprintf(kp, sizeof kp, "%s/mallory.key", f->srv.dir);
    FILE *fc = fopen(cp, "w"), *fk = fopen(kp, "w");
    assert_true(fc && fk);
    PEM_write_X509(fc, x);
    PEM_write_PrivateKey(fk, k, NULL, NULL, 0, NULL, NULL);
    fclose(fc);
    fclose(fk);
    X509_free(x);
    EVP_PKEY_free(k);
    a = get(f, "/metrics", NULL, cp, kp);
    assert_int_equal(a.code, 401);
    assert_string_equal(a.body.text, UNAUTHORIZED);
    a = get(f, "/healthz", NULL, cp, kp);
    assert_int_equal(a.code, 401);
}

static void test_tokens(void **state)
{
    fixture *f = *state;
    /* garbage: 401 everywhere */
    answer a = get(f, "/healthz", "not-a-token", NULL, NULL);
    assert_int_equal(a.code, 401);
    assert_string_equal(a.body.text, UNAUTHORIZED);

    /* the ServiceAccount: authenticated, but not allowed /metrics */
    a = get(f, "/healthz", f->token, NULL, NULL);
    assert_int_equal(a.code, 200);
    a = get(f, "/metrics", f->token, NULL, NULL);
    assert_int_equal(a.code, 403);
    assert_non_null(strstr(a.body.text,
                           "forbidden: User "
                           "\\\"system:serviceaccount:default:metrics-reader\\\" cannot "
                           "get path \\\"/metrics\\\""));

    /* bound to system:monitoring: allowed */
    tsu_do_json(
        f->admin, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "{\"metadata\":{\"name\":\"metrics-reader\"},\"roleRef\":{\"apiGroup\":"
        "\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"system:monitoring\"},"
        "\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"metrics-reader\","
        "\"namespace\":\"default\"}]}",
        NULL);
    a = get(f, "/metrics", f->token, NULL, NULL);
    assert_int_equal(a.code, 200);
    assert_non_null(strstr(a.body.text, "# TYPE"));
}

/* The caches, on a fake clock: delegated_auth alone, on the real server. */
static void test_cache_ttl(void **state)
{
    fixture *f = *state;
    ckube_clock *clock = ckube_fake_clock_new(CKUBE_SEC(1000));
    delegated_auth_opts o = {.client = f->admin, .clock = clock}; /* 10 s */
    delegated_auth *a = delegated_auth_new(&o);
    assert_non_null(a);
    tsu_do_json(f->admin, "POST", "/api/v1/namespaces/default/serviceaccounts",
                "{\"metadata\":{\"name\":\"cached\"}}", NULL);
    json_t *tr = NULL;
    tsu_do_json(f->admin, "POST", "/api/v1/namespaces/default/serviceaccounts/cached/token",
                "{\"spec\":{}}", &tr);
    const char *tok = json_string_value(json_object_get(json_object_get(tr, "status"), "token"));
    char authz[2048];
    snprintf(authz, sizeof authz, "Bearer %s", tok);

    delegated_user u;
    assert_int_equal(delegated_authenticate(a, NULL, false, authz, &u), 0);
    assert_string_equal(u.name, "system:serviceaccount:default:cached");
    char *reason = NULL;
    ckube_status *err = NULL;
    assert_int_equal(delegated_authorize(a, &u, "get", "/metrics", &reason, &err), 0);
    free(reason);

    /* allowed now, but the denial is cached for 10 s */
    tsu_do_json(
        f->admin, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "{\"metadata\":{\"name\":\"cached\"},\"roleRef\":{\"apiGroup\":"
        "\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"system:monitoring\"},"
        "\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"cached\","
        "\"namespace\":\"default\"}]}",
        NULL);
    ckube_fake_clock_advance(clock, CKUBE_SEC(9));
    assert_int_equal(delegated_authorize(a, &u, "get", "/metrics", &reason, &err), 0);
    free(reason);
    ckube_fake_clock_advance(clock, CKUBE_SEC(2));
    assert_int_equal(delegated_authorize(a, &u, "get", "/metrics", &reason, &err), 1);
    assert_null(reason);
    delegated_user_clear(&u);

    /* the token's user is cached too: the ServiceAccount deleted, its token
     * still authenticates until the TTL passes, then it is refused (the
     * answer of 11 s ago has expired: this one is cached anew) */
    assert_int_equal(delegated_authenticate(a, NULL, false, authz, &u), 0);
    delegated_user_clear(&u);
    ckube_request rq = {.method = "DELETE",
                        .path = "/api/v1/namespaces/default/serviceaccounts/cached"};
    ckube_response resp = {0};
    assert_int_equal(ckube_client_do(f->admin, &rq, &resp, &err), 0);
    ckube_response_free(&resp);
    assert_int_equal(delegated_authenticate(a, NULL, false, authz, &u), 0);
    delegated_user_clear(&u);
    ckube_fake_clock_advance(clock, CKUBE_SEC(11));
    assert_int_equal(delegated_authenticate(a, NULL, false, authz, &u), -1);

    /* always allowed: system:masters and the health paths, no review */
    delegated_user masters = {.name = "x"};
    char *g = "system:masters";
    masters.groups = &g;
    masters.ngroups = 1;
    assert_int_equal(delegated_authorize(a, &masters, "delete", "/anything", &reason, &err), 1);
    delegated_user anon = {.name = "system:anonymous"};
    assert_int_equal(delegated_authorize(a, &anon, "get", "/livez", &reason, &err), 1);

    json_decref(tr);
    delegated_auth_free(a);
    ckube_fake_clock_free(clock);
}

int main(void)
{
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(test_path_matches),           cmocka_unit_test(test_user_from_cert),
        cmocka_unit_test(test_user_from_token_review), cmocka_unit_test(test_forbidden_message),
        cmocka_unit_test(test_tls_contexts),
    };
    const struct CMUnitTest served[] = {
        cmocka_unit_test(test_anonymous),
        cmocka_unit_test(test_client_certificates),
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_cache_ttl),
    };
    int rc = cmocka_run_group_tests_name("pure", pure, NULL, NULL);
    return rc | cmocka_run_group_tests_name("served", served, setup, teardown);
}
