/* The shared cluster identity (apiserver/pki/identity.h): sealed with a
 * token, opened only with it, installed without clobbering another
 * cluster's files, never half-written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "apiserver/pki/identity.h"
#include "apiserver/pki/pki.h"

static const char *const FILES[] = {
    "ca.crt", "ca.key", "sa.key", "sa.pub", "front-proxy-ca.crt", "front-proxy-ca.key"};

static char base[512];

static void rm_rf(const char *path)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("CKUBE_TEST_TMP");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    mkdir(tmp, 0755);
    snprintf(base, sizeof base, "%s/identity-XXXXXX", tmp);
    return mkdtemp(base) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    rm_rf(base);
    return 0;
}

/* A fresh pki directory under base: what pki_ensure makes. */
static void make_pki(const char *name, char *dir, size_t n)
{
    snprintf(dir, n, "%s/%s", base, name);
    const char *sans[] = {"localhost"};
    pki_options o = {.dir = dir, .sans = sans, .nsans = 1};
    pki_files f;
    char *err = NULL;
    assert_int_equal(pki_ensure(&o, &f, &err), 0);
}

static char *slurp(const char *dir, const char *name, size_t *len)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    *len = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    return buf;
}

static bool same_file(const char *a, const char *b, const char *name)
{
    size_t la = 0, lb = 0;
    char *x = slurp(a, name, &la), *y = slurp(b, name, &lb);
    bool same = x && y && la == lb && !memcmp(x, y, la);
    free(x);
    free(y);
    return same;
}

static void test_token(void **state)
{
    (void)state;
    char *a = identity_token_new(), *b = identity_token_new();
    assert_non_null(a);
    assert_int_equal(strlen(a), 64);
    assert_int_equal(strspn(a, "0123456789abcdef"), 64);
    assert_string_not_equal(a, b);
    free(a);
    free(b);
}

/* Sealed on one server, installed on another's empty directory: the same
 * files, keys 0600; the blob shows none of them in the clear. */
static void test_round_trip(void **state)
{
    (void)state;
    char a[600], b[600];
    make_pki("a", a, sizeof a);
    snprintf(b, sizeof b, "%s/b", base);
    char *blob = NULL, *err = NULL;
    size_t len = 0;
    bool changed = false;
    assert_int_equal(identity_seal(a, "tok", &blob, &len, &err), 0);
    assert_int_equal(strncmp(blob, "ckube-identity-v1:", 18), 0);
    assert_null(strstr(blob, "BEGIN"));
    assert_int_equal(identity_unseal(b, "tok", blob, len, false, &changed, &err), 0);
    assert_true(changed);
    for (size_t i = 0; i < 6; i++)
        assert_true(same_file(a, b, FILES[i]));
    struct stat st;
    char path[700];
    snprintf(path, sizeof path, "%s/ca.key", b);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    snprintf(path, sizeof path, "%s/ca.crt", b);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    /* again: everything already there and the same, nothing to do */
    assert_int_equal(identity_unseal(b, "tok", blob, len, false, &changed, &err), 0);
    assert_false(changed);
    /* two seals of the same files differ (salt and nonce) */
    char *blob2 = NULL;
    size_t len2 = 0;
    assert_int_equal(identity_seal(a, "tok", &blob2, &len2, &err), 0);
    assert_false(len == len2 && !memcmp(blob, blob2, len));
    free(blob);
    free(blob2);
}

/* The wrong token, a damaged blob, a foreign form: errors, nothing written. */
static void test_refusals(void **state)
{
    (void)state;
    char a[600], c[600];
    make_pki("a", a, sizeof a);
    snprintf(c, sizeof c, "%s/c", base);
    char *blob = NULL, *err = NULL;
    size_t len = 0;
    bool changed = false;
    assert_int_equal(identity_seal(a, "right", &blob, &len, &err), 0);
    assert_int_equal(identity_unseal(c, "wrong", blob, len, false, &changed, &err), -1);
    assert_non_null(strstr(err, "the token does not open the cluster identity"));
    free(err);
    err = NULL;
    struct stat st;
    assert_int_not_equal(stat(c, &st), 0);            /* not even the directory */
    blob[len / 2] = blob[len / 2] == 'A' ? 'B' : 'A'; /* one changed character */
    assert_int_equal(identity_unseal(c, "right", blob, len, false, &changed, &err), -1);
    assert_non_null(err);
    free(err);
    err = NULL;
    assert_int_equal(identity_unseal(c, "right", "garbage", 7, false, &changed, &err), -1);
    assert_non_null(strstr(err, "not in a form this server reads"));
    free(err);
    err = NULL;
    assert_int_equal(
        identity_unseal(c, "right", "ckube-identity-v1:AAAA", 22, false, &changed, &err), -1);
    assert_non_null(strstr(err, "damaged"));
    free(err);
    err = NULL;
    free(blob);
    /* a missing file cannot be sealed, and says which */
    char path[700];
    snprintf(path, sizeof path, "%s/sa.pub", a);
    unlink(path);
    assert_int_equal(identity_seal(a, "t", &blob, &len, &err), -1);
    assert_non_null(strstr(err, "sa.pub is missing"));
    free(err);
}

/* Another cluster's files are kept unless replacing is allowed (a CA
 * this start made); then they become the cluster's. */
static void test_conflict_and_replace(void **state)
{
    (void)state;
    char a[600], b[600];
    make_pki("a", a, sizeof a);
    make_pki("b", b, sizeof b);
    assert_false(same_file(a, b, "ca.key"));
    char *blob = NULL, *err = NULL;
    size_t len = 0;
    bool changed = false;
    assert_int_equal(identity_seal(a, "tok", &blob, &len, &err), 0);
    assert_int_equal(identity_unseal(b, "tok", blob, len, false, &changed, &err), -1);
    assert_non_null(strstr(err, "is not the cluster's"));
    free(err);
    err = NULL;
    assert_false(same_file(a, b, "ca.crt")); /* nothing written */
    assert_false(same_file(a, b, "sa.key"));
    assert_int_equal(identity_unseal(b, "tok", blob, len, true, &changed, &err), 0);
    for (size_t i = 0; i < 6; i++)
        assert_true(same_file(a, b, FILES[i]));
    free(blob);
}

/* The front proxy's CA: a server's own (made before the identity carried
 * one) gives way to the cluster's without `replace`, and an identity
 * sealed without it (an older first server's) leaves the local one. */
static void test_front_proxy_ca(void **state)
{
    (void)state;
    char a[600], b[600], path[700];
    make_pki("a", a, sizeof a);
    make_pki("b", b, sizeof b);
    char *blob = NULL, *err = NULL;
    size_t len = 0;
    bool changed = false;
    /* b shares a's cluster CA and key already, but has its own front proxy CA */
    for (size_t i = 0; i < 4; i++) {
        char cmd[1600];
        snprintf(cmd, sizeof cmd, "cp '%s/%s' '%s/%s'", a, FILES[i], b, FILES[i]);
        assert_int_equal(system(cmd), 0);
    }
    assert_false(same_file(a, b, "front-proxy-ca.key"));
    assert_int_equal(identity_seal(a, "tok", &blob, &len, &err), 0);
    assert_int_equal(identity_unseal(b, "tok", blob, len, false, &changed, &err), 0);
    assert_true(changed);
    assert_true(same_file(a, b, "front-proxy-ca.crt"));
    assert_true(same_file(a, b, "front-proxy-ca.key"));
    free(blob);
    /* a's identity without the front proxy's CA (as sealed before) */
    snprintf(path, sizeof path, "%s/front-proxy-ca.crt", a);
    unlink(path);
    snprintf(path, sizeof path, "%s/front-proxy-ca.key", a);
    unlink(path);
    assert_int_equal(identity_seal(a, "tok", &blob, &len, &err), 0);
    assert_int_equal(identity_unseal(b, "tok", blob, len, false, &changed, &err), 0);
    assert_false(changed);
    snprintf(path, sizeof path, "%s/front-proxy-ca.key", b);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    free(blob);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conflict_and_replace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_front_proxy_ca, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
