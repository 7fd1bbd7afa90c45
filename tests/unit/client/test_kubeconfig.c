/* Tests for ckube/config.h: kubeconfig loading and merging as kubectl
 * does it, overrides, relative paths, data fields, validation errors,
 * in-cluster configuration, and the config checks of ckube_client_new. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ckube/client.h"
#include "ckube/config.h"
#include "util/client_test_util.h"

#define CA_PEM "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
#define CERT_PEM "-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n"
#define CERT_B64                                                                                   \
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNMSUVOVAotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="
#define KEY_PEM "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n"
#define KEY_B64 "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCktFWQotLS0tLUVORCBQUklWQVRFIEtFWS0tLS0tCg=="

static char *g_dir;  /* this test's temp dir */
static char *g_home; /* an empty $HOME */

static int setup(void **state)
{
    (void)state;
    g_dir = ctu_tmpdir("kubeconfig");
    g_home = ctu_tmpdir("home");
    if (!g_dir || !g_home)
        return -1;
    setenv("HOME", g_home, 1);
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("POD_NAMESPACE");
    char *sa = ctu_fmt("%s/no-serviceaccount", g_dir);
    setenv("CKUBE_SERVICEACCOUNT_DIR", sa, 1);
    free(sa);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(g_dir);
    free(g_home);
    g_dir = g_home = NULL;
    return 0;
}

/* Loads with overrides; fails the test on error. */
static ckube_config *load_ok(const ckube_config_overrides *o)
{
    ckube_config *c = NULL;
    ckube_status *err = NULL;
    if (ckube_config_load(o, &c, &err) != 0)
        fail_msg("ckube_config_load: %s", err && err->message ? err->message : "(no message)");
    assert_null(err);
    assert_non_null(c);
    return c;
}

/* Loads expecting an error whose message contains `want`. */
static void load_err(const ckube_config_overrides *o, const char *want)
{
    ckube_config *c = NULL;
    ckube_status *err = NULL;
    assert_int_equal(ckube_config_load(o, &c, &err), -1);
    assert_null(c);
    assert_non_null(err);
    assert_int_equal(err->code, 0);
    assert_non_null(err->message);
    if (!strstr(err->message, want))
        fail_msg("error \"%s\" does not contain \"%s\"", err->message, want);
    ckube_status_free(err);
}

static ckube_config *data_ok(const char *yaml, const char *dir, const ckube_config_overrides *o)
{
    ckube_config *c = NULL;
    ckube_status *err = NULL;
    if (ckube_config_from_kubeconfig_data(yaml, strlen(yaml), dir, o, &c, &err) != 0)
        fail_msg("from_kubeconfig_data: %s", err && err->message ? err->message : "?");
    return c;
}

static void data_err(const char *yaml, const ckube_config_overrides *o, const char *want)
{
    ckube_config *c = NULL;
    ckube_status *err = NULL;
    assert_int_equal(ckube_config_from_kubeconfig_data(yaml, strlen(yaml), g_dir, o, &c, &err), -1);
    assert_null(c);
    assert_non_null(err);
    if (!err->message || !strstr(err->message, want))
        fail_msg("error \"%s\" does not contain \"%s\"", err->message ? err->message : "", want);
    ckube_status_free(err);
}

static const char *FILE1 = "apiVersion: v1\n"
                           "kind: Config\n"
                           "current-context: one\n"
                           "clusters:\n"
                           "- name: shared\n"
                           "  cluster:\n"
                           "    server: https://one.example:6443\n"
                           "    insecure-skip-tls-verify: true\n"
                           "contexts:\n"
                           "- name: one\n"
                           "  context: {cluster: shared, user: u1, namespace: ns-one}\n"
                           "users:\n"
                           "- name: u1\n"
                           "  user: {token: token-one}\n";

static const char *FILE2 = "apiVersion: v1\n"
                           "kind: Config\n"
                           "current-context: two\n"
                           "clusters:\n"
                           "- name: shared\n"
                           "  cluster: {server: https://two.example:6443}\n"
                           "- name: other\n"
                           "  cluster: {server: https://other.example, tls-server-name: "
                           "api.internal, proxy-url: http://proxy:3128}\n"
                           "contexts:\n"
                           "- name: two\n"
                           "  context: {cluster: other, user: u2}\n"
                           "- name: one\n"
                           "  context: {cluster: other, user: u2, namespace: ignored}\n"
                           "users:\n"
                           "- name: u1\n"
                           "  user: {token: ignored}\n"
                           "- name: u2\n"
                           "  user: {username: admin, password: secret}\n";

/* $KUBECONFIG lists merge entry by entry; the first file wins each name
 * and the current-context; missing files and repeats are skipped. */
static void test_kubeconfig_env_merge(void **state)
{
    (void)state;
    char *f1 = ctu_write(g_dir, "one.yaml", FILE1);
    char *f2 = ctu_write(g_dir, "two.yaml", FILE2);
    char *list = ctu_fmt("%s/missing.yaml::%s:%s:%s", g_dir, f1, f2, f1);
    setenv("KUBECONFIG", list, 1);

    ckube_config *c = load_ok(NULL);
    assert_string_equal(c->host, "https://one.example:6443");
    assert_true(c->insecure_skip_tls_verify);
    assert_string_equal(c->bearer_token, "token-one");
    assert_string_equal(c->namespace_, "ns-one");
    assert_null(c->username);
    ckube_config_free(c);

    /* --context selects file 2's context "two": cluster other, user u2 */
    ckube_config_overrides o = {.context = "two"};
    c = load_ok(&o);
    assert_string_equal(c->host, "https://other.example");
    assert_string_equal(c->tls_server_name, "api.internal");
    assert_string_equal(c->proxy_url, "http://proxy:3128");
    assert_string_equal(c->username, "admin");
    assert_string_equal(c->password, "secret");
    assert_null(c->bearer_token);
    assert_null(c->namespace_); /* the client defaults it to "default" */
    assert_false(c->insecure_skip_tls_verify);
    ckube_config_free(c);

    /* overrides of each piece */
    o = (ckube_config_overrides){.cluster = "other", .user = "u1", .namespace_ = "flag-ns"};
    c = load_ok(&o);
    assert_string_equal(c->host, "https://other.example");
    assert_string_equal(c->bearer_token, "token-one");
    assert_string_equal(c->namespace_, "flag-ns");
    ckube_config_free(c);

    o = (ckube_config_overrides){.master = "https://10.1.2.3:8443"};
    c = load_ok(&o);
    assert_string_equal(c->host, "https://10.1.2.3:8443");
    assert_string_equal(c->bearer_token, "token-one"); /* still context one's user */
    ckube_config_free(c);

    o = (ckube_config_overrides){.context = "nope"};
    load_err(&o, "context \"nope\" does not exist");
    o = (ckube_config_overrides){.cluster = "nope"};
    load_err(&o, "cluster \"nope\" does not exist");
    o = (ckube_config_overrides){.user = "nope"};
    load_err(&o, "auth info \"nope\" does not exist");

    /* an explicit --kubeconfig wins over $KUBECONFIG */
    o = (ckube_config_overrides){.kubeconfig = f2};
    c = load_ok(&o);
    assert_string_equal(c->host, "https://other.example");
    ckube_config_free(c);
    free(list);
    free(f1);
    free(f2);
}

static void test_kubeconfig_explicit_and_home(void **state)
{
    (void)state;
    char *missing = ctu_fmt("%s/absent.yaml", g_dir);
    ckube_config_overrides o = {.kubeconfig = missing};
    load_err(&o, "absent.yaml");
    free(missing);

    /* nothing anywhere and not in a cluster */
    load_err(NULL, "no configuration has been provided");
    /* ... but --server alone is enough, as with kubectl */
    o = (ckube_config_overrides){.master = "http://127.0.0.1:8080"};
    ckube_config *c = load_ok(&o);
    assert_string_equal(c->host, "http://127.0.0.1:8080");
    ckube_config_free(c);

    /* ~/.kube/config */
    char *kdir = ctu_fmt("%s/.kube", g_home);
    mkdir(kdir, 0700);
    char *f = ctu_write(kdir, "config", FILE2);
    c = load_ok(NULL);
    assert_string_equal(c->host, "https://other.example");
    ckube_config_free(c);
    free(f);
    free(kdir);
}

/* Relative paths resolve against the directory of the file naming them. */
static void test_kubeconfig_relative_paths(void **state)
{
    (void)state;
    char *sub = ctu_fmt("%s/conf", g_dir);
    mkdir(sub, 0700);
    char *ca = ctu_write(sub, "ca.crt", CA_PEM);
    char *crt = ctu_write(sub, "client.crt", CERT_PEM);
    char *key = ctu_write(g_dir, "client.key", KEY_PEM);
    char *tok = ctu_write(sub, "token", "  file-token\n");
    char *f = ctu_write(sub, "config",
                        "current-context: c\n"
                        "clusters:\n- name: k\n  cluster:\n"
                        "    server: https://k.example\n"
                        "    certificate-authority: ./ca.crt\n"
                        "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                        "users:\n- name: u\n  user:\n"
                        "    client-certificate: client.crt\n"
                        "    client-key: ../client.key\n"
                        "    tokenFile: token\n");
    ckube_config_overrides o = {.kubeconfig = f};
    ckube_config *c = load_ok(&o);
    assert_string_equal(c->ca_file, ca);
    assert_string_equal(c->cert_file, crt);
    assert_string_equal(c->key_file, key);
    assert_string_equal(c->bearer_token_file, tok);
    assert_string_equal(c->bearer_token, "file-token"); /* read now, trimmed */
    ckube_config_free(c);

    /* relative to the file, not to the working directory */
    char *cwd = getcwd(NULL, 0);
    assert_int_equal(chdir("/"), 0);
    c = load_ok(&o);
    assert_string_equal(c->ca_file, ca);
    ckube_config_free(c);
    assert_int_equal(chdir(cwd), 0);
    free(cwd);

    /* exec: a command with a slash is a path relative to the file; a bare
     * name is left for $PATH */
    char *f2 = ctu_write(sub, "exec",
                         "current-context: c\n"
                         "clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
                         "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                         "users:\n- name: u\n  user:\n    exec:\n"
                         "      command: ./bin/plugin\n"
                         "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                         "      args: [get-token, --x]\n"
                         "      env: [{name: A, value: b}, {name: EMPTY}]\n"
                         "      provideClusterInfo: true\n"
                         "      installHint: install it\n");
    o.kubeconfig = f2;
    c = load_ok(&o);
    assert_non_null(c->exec);
    char *want = ctu_fmt("%s/bin/plugin", sub);
    assert_string_equal(c->exec->command, want);
    free(want);
    assert_string_equal(c->exec->api_version, "client.authentication.k8s.io/v1beta1");
    assert_int_equal(c->exec->nargs, 2);
    assert_string_equal(c->exec->args[1], "--x");
    assert_int_equal(c->exec->nenv, 2);
    assert_string_equal(c->exec->env[0], "A=b");
    assert_string_equal(c->exec->env[1], "EMPTY=");
    assert_true(c->exec->provide_cluster_info);
    assert_string_equal(c->exec->interactive_mode, "IfAvailable"); /* v1beta1 default */
    assert_string_equal(c->exec->install_hint, "install it");
    ckube_config *d = ckube_config_dup(c);
    assert_string_equal(d->exec->args[0], "get-token");
    assert_string_equal(d->exec->env[0], "A=b");
    ckube_config_free(d);
    ckube_config_free(c);

    c = data_ok("current-context: c\n"
                "clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
                "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                "users: [{name: u, user: {exec: {command: kubelogin, apiVersion: "
                "client.authentication.k8s.io/v1, interactiveMode: Never}}}]\n",
                g_dir, NULL);
    assert_string_equal(c->exec->command, "kubelogin");
    assert_string_equal(c->exec->interactive_mode, "Never");
    ckube_config_free(c);
    free(ca);
    free(crt);
    free(key);
    free(tok);
    free(f);
    free(f2);
    free(sub);
}

static void test_kubeconfig_data_fields(void **state)
{
    (void)state;
    ckube_config *c = data_ok("current-context: c\n"
                              "clusters: [{name: k, cluster: {server: 'https://k', "
                              "certificate-authority-data: " CA_B64 "}}]\n"
                              "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                              "users: [{name: u, user: {client-certificate-data: " CERT_B64
                              ", client-key-data: " KEY_B64 ", token: tok}}]\n",
                              g_dir, NULL);
    assert_int_equal(c->ca_data_len, strlen(CA_PEM));
    assert_memory_equal(c->ca_data, CA_PEM, strlen(CA_PEM));
    assert_int_equal(c->cert_data_len, strlen(CERT_PEM));
    assert_memory_equal(c->cert_data, CERT_PEM, strlen(CERT_PEM));
    assert_memory_equal(c->key_data, KEY_PEM, strlen(KEY_PEM));
    assert_null(c->ca_file);
    assert_string_equal(c->bearer_token, "tok");
    ckube_config *d = ckube_config_dup(c);
    assert_memory_equal(d->cert_data, CERT_PEM, strlen(CERT_PEM));
    assert_int_equal(d->key_data_len, c->key_data_len);
    ckube_config_free(d);
    ckube_config_free(c);

    /* JSON kubeconfigs load too */
    c = data_ok("{\"current-context\":\"c\",\"clusters\":[{\"name\":\"k\",\"cluster\":"
                "{\"server\":\"https://json\"}}],\"contexts\":[{\"name\":\"c\",\"context\":"
                "{\"cluster\":\"k\"}}]}",
                NULL, NULL);
    assert_string_equal(c->host, "https://json");
    ckube_config_free(c);
}

/* Plain http servers never get credentials or TLS settings (clientcmd's
 * IsConfigTransportTLS). */
static void test_kubeconfig_http_drops_credentials(void **state)
{
    (void)state;
    ckube_config *c = data_ok("current-context: c\n"
                              "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1', "
                              "insecure-skip-tls-verify: true}}]\n"
                              "contexts: [{name: c, context: {cluster: k, user: u, namespace: "
                              "team}}]\n"
                              "users: [{name: u, user: {token: secret}}]\n",
                              g_dir, NULL);
    assert_string_equal(c->host, "http://127.0.0.1:1");
    assert_null(c->bearer_token);
    assert_false(c->insecure_skip_tls_verify);
    assert_string_equal(c->namespace_, "team");
    ckube_config_free(c);
}

static void test_kubeconfig_validation_errors(void **state)
{
    (void)state;
    const char *head = "current-context: c\n"
                       "contexts: [{name: c, context: {cluster: k, user: u}}]\n";
    char *y;
#define CHECK(users_and_clusters, want)                                                            \
    do {                                                                                           \
        y = ctu_fmt("%s%s", head, users_and_clusters);                                             \
        data_err(y, NULL, want);                                                                   \
        free(y);                                                                                   \
    } while (0)
    CHECK("clusters: [{name: k, cluster: {server: 'https://k'}}]\n",
          "user \"u\" named by context \"c\" does not exist");
    CHECK("users: [{name: u, user: {}}]\n", "cluster \"k\" named by context \"c\" does not exist");
    CHECK("clusters: [{name: k, cluster: {}}]\nusers: [{name: u, user: {}}]\n",
          "no server found for cluster \"k\"");
    CHECK("clusters: [{name: k, cluster: {server: 'https://k', certificate-authority: "
          "/nonexistent/ca.crt}}]\nusers: [{name: u, user: {}}]\n",
          "unable to read certificate-authority /nonexistent/ca.crt for k");
    CHECK("clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
          "users: [{name: u, user: {token: t, username: a, password: b}}]\n",
          "more than one authentication method found for u; found [token basicAuth]");
    CHECK("clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
          "users: [{name: u, user: {client-certificate-data: " CERT_B64 "}}]\n",
          "client-key-data or client-key must be specified for u");
    CHECK("clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
          "users: [{name: u, user: {exec: {command: x, apiVersion: "
          "client.authentication.k8s.io/v1}}}]\n",
          "interactiveMode must be specified for u to use exec authentication plugin");
    CHECK("clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
          "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
          "interactiveMode: Sometimes}}}]\n",
          "invalid configuration: [command must be specified for u to use exec authentication "
          "plugin, invalid interactiveMode for u: \"Sometimes\"]");
    CHECK("clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
          "users: [{name: u, user: {auth-provider: {name: gcp}}}]\n",
          "auth-provider \"gcp\"");
    CHECK("clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
          "users: [{name: u, user: {tokenFile: /nonexistent/token}}]\n",
          "open /nonexistent/token");
#undef CHECK
    data_err("current-context: gone\nclusters: []\n", NULL,
             "context was not found for specified context: gone");
}

/* Malformed files fail with the file's name and the problem. */
static void test_kubeconfig_bad_files(void **state)
{
    (void)state;
    struct {
        const char *content, *want;
    } cases[] = {
        {"clusters: [\n", "yaml: line"},
        {"- a\n- b\n", "expected a mapping at the top level"},
        {"clusters: {a: b}\n", "clusters: expected a list"},
        {"clusters: [{cluster: {server: x}}]\n", "clusters[0]: name is required"},
        {"clusters: [{name: a, cluster: {server: [1]}}]\n",
         "clusters[\"a\"].cluster.server: expected a string"},
        {"clusters: [{name: a, cluster: {insecure-skip-tls-verify: maybe}}]\n",
         "insecure-skip-tls-verify: expected a boolean"},
        {"clusters: [{name: a, cluster: {certificate-authority-data: '!!notbase64'}}]\n",
         "certificate-authority-data: illegal base64 data at input byte 0"},
        {"clusters: [{name: a, cluster: {}}, {name: a, cluster: {}}]\n",
         "clusters: duplicate name \"a\""},
        {"users: [{name: u, user: {exec: {args: [ok, {}]}}}]\n", "exec.args[1]: expected a string"},
        {"current-context: [x]\n", "current-context: expected a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *f = ctu_write(g_dir, "bad.yaml", cases[i].content);
        ckube_config_overrides o = {.kubeconfig = f};
        char *want = ctu_fmt("error loading config file \"%s\": ", f);
        load_err(&o, want);
        load_err(&o, cases[i].want);
        free(want);
        free(f);
    }
    /* an empty file is an empty config, not an error of its own */
    char *f = ctu_write(g_dir, "empty.yaml", "");
    ckube_config_overrides o = {.kubeconfig = f};
    load_err(&o, "no configuration has been provided");
    free(f);
}

static void write_sa(const char *dir, const char *ns)
{
    mkdir(dir, 0700);
    free(ctu_write(dir, "token", "sa-token-1\n"));
    free(ctu_write(dir, "ca.crt", CA_PEM));
    if (ns)
        free(ctu_write(dir, "namespace", ns));
}

static void test_in_cluster(void **state)
{
    (void)state;
    ckube_config *c = NULL;
    ckube_status *err = NULL;
    assert_int_equal(ckube_config_in_cluster(&c, &err), -1);
    assert_non_null(strstr(err->message, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT"));
    ckube_status_free(err);
    err = NULL;

    char *sa = ctu_fmt("%s/sa", g_dir);
    write_sa(sa, "kube-team\n");
    setenv("CKUBE_SERVICEACCOUNT_DIR", sa, 1);
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    assert_int_equal(ckube_config_in_cluster(&c, &err), 0);
    assert_string_equal(c->host, "https://10.96.0.1:443");
    assert_string_equal(c->bearer_token, "sa-token-1");
    char *tf = ctu_fmt("%s/token", sa), *caf = ctu_fmt("%s/ca.crt", sa);
    assert_string_equal(c->bearer_token_file, tf);
    assert_string_equal(c->ca_file, caf);
    assert_string_equal(c->namespace_, "kube-team");
    ckube_config_free(c);

    /* IPv6 service host gets brackets; POD_NAMESPACE wins over the file */
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    setenv("POD_NAMESPACE", "from-env", 1);
    assert_int_equal(ckube_config_in_cluster(&c, &err), 0);
    assert_string_equal(c->host, "https://[fd00::1]:443");
    assert_string_equal(c->namespace_, "from-env");
    ckube_config_free(c);
    unsetenv("POD_NAMESPACE");

    /* ckube_config_load falls back to in-cluster when no kubeconfig
     * exists, keeping --namespace */
    ckube_config_overrides o = {.namespace_ = "flag"};
    c = load_ok(&o);
    assert_string_equal(c->host, "https://[fd00::1]:443");
    assert_string_equal(c->namespace_, "flag");
    ckube_config_free(c);

    /* ... but a kubeconfig, when present, wins */
    char *f = ctu_write(g_dir, "k.yaml", FILE2);
    setenv("KUBECONFIG", f, 1);
    c = load_ok(NULL);
    assert_string_equal(c->host, "https://other.example");
    ckube_config_free(c);
    unsetenv("KUBECONFIG");

    /* token missing: an error naming the file */
    unlink(tf);
    assert_int_equal(ckube_config_in_cluster(&c, &err), -1);
    assert_non_null(strstr(err->message, tf));
    ckube_status_free(err);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    free(f);
    free(tf);
    free(caf);
    free(sa);
}

/* ckube_client_new refuses unusable configurations up front. */
static void test_client_new_checks(void **state)
{
    (void)state;
    struct {
        ckube_config cfg;
        const char *want;
    } cases[] = {
        {{.host = NULL}, "no server"},
        {{.host = "ftp://x"}, "host must be a URL or a host:port pair"},
        {{.host = "https://x", .ca_file = "/nonexistent/ca"},
         "unable to read certificate-authority"},
        {{.host = "https://x", .cert_file = "/nonexistent/c", .key_data = "k", .key_data_len = 1},
         "unable to read client-cert"},
        {{.host = "https://x", .cert_data = "c", .cert_data_len = 1},
         "client certificate set without a client key"},
        {{.host = "https://x", .ca_data = "c", .ca_data_len = 1, .insecure_skip_tls_verify = true},
         "specifying a root certificates file with the insecure flag is not allowed"},
        {{.host = "https://x", .bearer_token = "t", .username = "u"},
         "username/password or bearer token may be set, but not both"},
        {{.host = "https://x", .bearer_token_file = "/nonexistent/token"},
         "reading bearer token file \"/nonexistent/token\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ckube_status *err = NULL;
        ckube_client *c = ckube_client_new(&cases[i].cfg, &err);
        assert_null(c);
        assert_non_null(err);
        if (!strstr(err->message, cases[i].want))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err->message, cases[i].want);
        ckube_status_free(err);
    }
    /* a token file that cannot be read is fine next to a static token */
    ckube_config ok = {.host = "10.0.0.1:443",
                       .bearer_token = "t",
                       .bearer_token_file = "/nonexistent/token",
                       .namespace_ = "x"};
    ckube_client *c = ckube_client_new(&ok, NULL);
    assert_non_null(c);
    assert_string_equal(ckube_client_namespace(c), "x");
    assert_string_equal(ckube_client_host(c), "http://10.0.0.1:443");
    ckube_client_free(c);
    ckube_config tls = {.host = "10.0.0.1", .insecure_skip_tls_verify = true};
    c = ckube_client_new(&tls, NULL);
    assert_string_equal(ckube_client_host(c), "https://10.0.0.1");
    assert_string_equal(ckube_client_namespace(c), "default");
    ckube_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kubeconfig_env_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_explicit_and_home, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_relative_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_data_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_http_drops_credentials, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_validation_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_bad_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_cluster, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_new_checks, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
