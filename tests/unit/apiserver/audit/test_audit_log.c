/* The audit log backend (apiserver/audit/log.h): the file, lumberjack's
 * rotation (size, maxbackup, maxage, gzip), concurrent writers and batch
 * mode, the flags' checks. Every test works in a directory of its own
 * under $CKUBE_TEST_TMP, removed whatever the outcome. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "apiserver/audit/log.h"
#include "ckube/log.h"

static char base[512]; /* the group's directory */
static int seq;

/* Removes a directory tree (the tests make no deeper than two levels,
 * but this does not count on it). */
static void rm_rf(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            rm_rf(sub);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static int group_setup(void **state)
{
    (void)state;
    /* Dropped lines are logged; keep the test's output readable. */
    ckube_log_set_flag("logtostderr", "false", NULL);
    ckube_log_set_flag("log-file", "/dev/null", NULL);
    const char *tmp = getenv("CKUBE_TEST_TMP");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    mkdir(tmp, 0755);
    snprintf(base, sizeof base, "%s/audit-log-XXXXXX", tmp);
    return mkdtemp(base) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    rm_rf(base);
    return 0;
}

/* Each test: a fresh directory, removed by teardown even on failure. */
static char dir[600];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "%s/t%d", base, seq++);
    return mkdir(dir, 0755);
}

static int teardown(void **state)
{
    (void)state;
    rm_rf(dir);
    return 0;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *p = malloc(cap + 1);
    size_t got;
    while ((got = fread(p + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            p = realloc(p, cap + 1);
        }
    }
    fclose(f);
    p[n] = '\0';
    if (len)
        *len = n;
    return p;
}

/* The names in `d` (sorted), a NULL-terminated array; free with free_names. */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char **names_in(const char *d, size_t *n)
{
    DIR *dd = opendir(d);
    assert_non_null(dd);
    char **v = NULL;
    size_t k = 0;
    struct dirent *e;
    while ((e = readdir(dd))) {
        if (e->d_name[0] == '.')
            continue;
        v = realloc(v, (k + 2) * sizeof *v);
        v[k++] = strdup(e->d_name);
    }
    closedir(dd);
    if (k)
        qsort(v, k, sizeof *v, cmp_str);
    if (!v)
        v = malloc(sizeof *v);
    v[k] = NULL;
    *n = k;
    return v;
}

static void free_names(char **v)
{
    for (size_t i = 0; v[i]; i++)
        free(v[i]);
    free(v);
}

/* lumberjack's backup name: audit-2006-01-02T15-04-05.000.log[.gz] */
static bool is_backup_name(const char *name, const char *suffix)
{
    const char *shape = "audit-####-##-##T##-##-##.###";
    size_t n = strlen(shape);
    if (strlen(name) != n + strlen(suffix) || strcmp(name + n, suffix))
        return false;
    for (size_t i = 0; i < n; i++)
        if (shape[i] == '#' ? (name[i] < '0' || name[i] > '9') : name[i] != shape[i])
            return false;
    return true;
}

static void opts_for(audit_log_opts *o, const char *path)
{
    audit_log_opts_init(o);
    o->path = path;
}

/* A 100-byte line (newline included) naming its writer and number. */
static void make_line(char *buf, int writer, int i)
{
    int n = snprintf(buf, 101, "{\"w\":%d,\"i\":%06d,\"pad\":\"", writer, i);
    memset(buf + n, 'p', (size_t)(100 - n - 3));
    memcpy(buf + 97, "\"}\n", 3);
    buf[100] = '\0';
}

static void test_defaults_and_flags(void **state)
{
    (void)state;
    audit_log_opts o;
    audit_log_opts_init(&o);
    assert_null(o.path);
    assert_int_equal(o.max_size_mb, 100);
    assert_int_equal(o.max_backups, 100);
    assert_int_equal(o.max_age_days, 366);
    assert_int_equal(o.format, AUDIT_LOG_FORMAT_JSON);
    assert_int_equal(o.mode, AUDIT_LOG_MODE_BLOCKING);
    assert_int_equal(o.batch_buffer_size, 10000);
    assert_false(o.compress);
    assert_string_equal(o.group_version, "audit.k8s.io/v1");

    audit_log_format f;
    audit_log_mode m;
    char *err = NULL;
    assert_int_equal(audit_log_parse_format("legacy", &f, &err), 0);
    assert_int_equal(f, AUDIT_LOG_FORMAT_LEGACY);
    assert_int_equal(audit_log_parse_format("xml", &f, &err), -1);
    assert_string_equal(err, "invalid audit log format xml, allowed formats are \"legacy,json\"");
    free(err);
    assert_int_equal(audit_log_parse_mode("blocking-strict", &m, &err), 0);
    assert_int_equal(m, AUDIT_LOG_MODE_BLOCKING_STRICT);
    assert_int_equal(audit_log_parse_mode("async", &m, &err), -1);
    assert_string_equal(err, "invalid audit log mode async, allowed modes are "
                             "\"batch,blocking,blocking-strict\"");
    free(err);

    /* no path: the backend is off, nothing checked */
    o.max_size_mb = -1;
    assert_int_equal(audit_log_opts_validate(&o, &err), 0);
    assert_null(audit_log_open(&o, &err));
    assert_null(err);
    o.path = "/x/audit.log";
    assert_int_equal(audit_log_opts_validate(&o, &err), -1);
    assert_string_equal(err, "--audit-log-maxsize -1 can't be a negative number");
    free(err);
    o.max_age_days = -2;
    o.max_backups = -3;
    o.mode = AUDIT_LOG_MODE_BATCH;
    o.batch_buffer_size = 0;
    o.group_version = "audit.k8s.io/v1beta1";
    assert_null(audit_log_open(&o, &err));
    assert_string_equal(err, "[invalid audit batch log buffer size 0, must be a positive number, "
                             "invalid group version, allowed versions are [\"audit.k8s.io/v1\"], "
                             "--audit-log-maxage -2 can't be a negative number, "
                             "--audit-log-maxbackup -3 can't be a negative number, "
                             "--audit-log-maxsize -1 can't be a negative number]");
    free(err);
}

static void test_open_makes_file(void **state)
{
    (void)state;
    char path[800], sub[700];
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    snprintf(path, sizeof path, "%s/audit.log", sub);
    audit_log_opts o;
    opts_for(&o, path);
    char *err = NULL;
    audit_log *l = audit_log_open(&o, &err);
    assert_non_null(l);
    assert_null(err);
    struct stat st;
    assert_int_equal(stat(path, &st), 0); /* made at open, before any write */
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(stat(sub, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(audit_log_write(l, "one\n", 4), 0);
    assert_int_equal(audit_log_write(l, "two", 3), 0); /* the newline is added */
    audit_log_close(l);
    char *s = slurp(path, NULL);
    assert_string_equal(s, "one\ntwo\n");
    free(s);
    /* reopened, appended to */
    l = audit_log_open(&o, &err);
    assert_non_null(l);
    assert_int_equal(audit_log_write(l, "three\n", 6), 0);
    audit_log_close(l);
    s = slurp(path, NULL);
    assert_string_equal(s, "one\ntwo\nthree\n");
    free(s);

    /* a path that cannot be made */
    char file[700], bad[800];
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    fclose(f);
    snprintf(bad, sizeof bad, "%s/sub/audit.log", file);
    o.path = bad;
    assert_null(audit_log_open(&o, &err));
    char want[1000];
    snprintf(want, sizeof want, "ensureLogFile: mkdir %s: not a directory", file);
    assert_string_equal(err, want);
    free(err);
}

/* Upstream's --audit-log-maxsize=0: appended to, never rotated. */
static void test_no_rotation(void **state)
{
    (void)state;
    char path[700], line[101];
    snprintf(path, sizeof path, "%s/audit.log", dir);
    audit_log_opts o;
    opts_for(&o, path);
    o.max_size_mb = 0;
    o.max_bytes = 500; /* ignored: maxsize 0 turns rotation off */
    audit_log *l = audit_log_open(&o, NULL);
    assert_non_null(l);
    for (int i = 0; i < 20; i++) {
        make_line(line, 0, i);
        assert_int_equal(audit_log_write(l, line, 100), 0);
    }
    audit_log_close(l);
    size_t n, len;
    char **names = names_in(dir, &n);
    assert_int_equal(n, 1);
    free_names(names);
    free(slurp(path, &len));
    assert_int_equal(len, 2000);
}

static void test_rotation_maxbackup(void **state)
{
    (void)state;
    char path[700], line[101];
    snprintf(path, sizeof path, "%s/audit.log", dir);
    audit_log_opts o;
    opts_for(&o, path);
    o.max_bytes = 1000; /* ten lines a file */
    o.max_backups = 2;
    o.max_age_days = 0;
    audit_log *l = audit_log_open(&o, NULL);
    assert_non_null(l);
    for (int i = 0; i < 50; i++) {
        make_line(line, 0, i);
        assert_int_equal(audit_log_write(l, line, 100), 0);
    }
    /* longer than a whole file: dropped, reported */
    char big[1200];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\n';
    assert_int_equal(audit_log_write(l, big, sizeof big), -1);
    audit_log_close(l);

    size_t n;
    char **names = names_in(dir, &n);
    assert_int_equal(n, 3); /* audit.log and the two newest old files */
    assert_true(is_backup_name(names[0], ".log"));
    assert_true(is_backup_name(names[1], ".log"));
    assert_string_equal(names[2], "audit.log");
    /* oldest to newest: lines 20-29, 30-39, then 40-49 in audit.log */
    for (int f = 0; f < 3; f++) {
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", dir, names[f]);
        size_t len = 0;
        char *s = slurp(p, &len);
        assert_int_equal(len, 1000);
        for (int k = 0; k < 10; k++) {
            make_line(line, 0, 20 + f * 10 + k);
            assert_memory_equal(s + k * 100, line, 100);
        }
        free(s);
    }
    free_names(names);
}

/* A file already at least full at the first write is rotated first. */
static void test_rotation_existing_file(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/audit.log", dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 95; i++)
        fputs("123456789\n", f);
    fclose(f);
    audit_log_opts o;
    opts_for(&o, path);
    o.max_bytes = 1000;
    audit_log *l = audit_log_open(&o, NULL);
    assert_non_null(l);
    char line[101];
    make_line(line, 1, 1);
    assert_int_equal(audit_log_write(l, line, 100), 0); /* 950 + 100 >= 1000 */
    audit_log_close(l);
    size_t n;
    char **names = names_in(dir, &n);
    assert_int_equal(n, 2);
    assert_true(is_backup_name(names[0], ".log"));
    char p[1400];
    snprintf(p, sizeof p, "%s/%s", dir, names[0]);
    size_t len = 0;
    free(slurp(p, &len));
    assert_int_equal(len, 950);
    char *s = slurp(path, &len);
    assert_int_equal(len, 100);
    assert_memory_equal(s, line, 100);
    free(s);
    free_names(names);
}

static void touch(const char *name)
{
    char p[1400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("old\n", f);
    fclose(f);
}

static bool exists(const char *name)
{
    char p[1400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return stat(p, &st) == 0;
}

static void test_maxage(void **state)
{
    (void)state;
    touch("audit-2020-01-01T00-00-00.000.log");
    touch("audit-2020-01-02T00-00-00.000.log.gz");
    touch("audit-2020-13-01T00-00-00.000.log"); /* no such month: not a backup */
    touch("audit-notes.txt");
    touch("other-2020-01-01T00-00-00.000.log");
    char path[700], line[101];
    snprintf(path, sizeof path, "%s/audit.log", dir);
    audit_log_opts o;
    opts_for(&o, path);
    o.max_bytes = 200;
    o.max_backups = 0;
    o.max_age_days = 30;
    audit_log *l = audit_log_open(&o, NULL);
    for (int i = 0; i < 3; i++) { /* one rotation */
        make_line(line, 0, i);
        assert_int_equal(audit_log_write(l, line, 100), 0);
    }
    audit_log_close(l);
    assert_false(exists("audit-2020-01-01T00-00-00.000.log"));
    assert_false(exists("audit-2020-01-02T00-00-00.000.log.gz"));
    assert_true(exists("audit-2020-13-01T00-00-00.000.log"));
    assert_true(exists("audit-notes.txt"));
    assert_true(exists("other-2020-01-01T00-00-00.000.log"));
    size_t n;
    char **names = names_in(dir, &n);
    assert_int_equal(n, 5); /* the three kept, the new old file, audit.log */
    free_names(names);
}

static void test_compress(void **state)
{
    (void)state;
    char path[700], line[101];
    snprintf(path, sizeof path, "%s/audit.log", dir);
    audit_log_opts o;
    opts_for(&o, path);
    o.max_bytes = 1000;
    o.max_backups = 0;
    o.max_age_days = 0;
    o.compress = true;
    audit_log *l = audit_log_open(&o, NULL);
    for (int i = 0; i < 25; i++) {
        make_line(line, 0, i);
        assert_int_equal(audit_log_write(l, line, 100), 0);
    }
    audit_log_close(l);
    size_t n;
    char **names = names_in(dir, &n);
    assert_int_equal(n, 3);
    for (int f = 0; f < 2; f++) {
        assert_true(is_backup_name(names[f], ".log.gz"));
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", dir, names[f]);
        gzFile gz = gzopen(p, "rb");
        assert_non_null(gz);
        char buf[2000];
        int got = gzread(gz, buf, sizeof buf);
        gzclose(gz);
        assert_int_equal(got, 1000);
        for (int k = 0; k < 10; k++) {
            make_line(line, 0, f * 10 + k);
            assert_memory_equal(buf + k * 100, line, 100);
        }
    }
    assert_string_equal(names[2], "audit.log");
    free_names(names);
}

/* ---- several writers ---- */

#define WRITERS 4
#define LINES 2500

typedef struct writer_arg {
    audit_log *l;
    int w;
    int failed;
} writer_arg;

static void *writer(void *p)
{
    writer_arg *a = p;
    char line[101];
    for (int i = 0; i < LINES; i++) {
        make_line(line, a->w, i);
        if (audit_log_write(a->l, line, 100) != 0)
            a->failed++;
    }
    return NULL;
}

/* Every line of every writer present once, whole, in its writer's order,
 * across the old files (oldest first) and the current one. */
static void check_all_lines(void)
{
    size_t n;
    char **names = names_in(dir, &n);
    int next[WRITERS] = {0};
    char want[101];
    for (size_t f = 0; f < n; f++) {
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", dir, names[f]);
        size_t len = 0;
        char *s = slurp(p, &len);
        assert_non_null(s);
        assert_int_equal(len % 100, 0);
        for (size_t off = 0; off < len; off += 100) {
            int w = -1, i = -1;
            assert_int_equal(sscanf(s + off, "{\"w\":%d,\"i\":%d,", &w, &i), 2);
            assert_true(w >= 0 && w < WRITERS);
            assert_int_equal(i, next[w]);
            make_line(want, w, i);
            assert_memory_equal(s + off, want, 100);
            next[w]++;
        }
        free(s);
    }
    for (int w = 0; w < WRITERS; w++)
        assert_int_equal(next[w], LINES);
    free_names(names);
}

static void run_writers(audit_log *l)
{
    pthread_t t[WRITERS];
    writer_arg a[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        a[w] = (writer_arg){l, w, 0};
        assert_int_equal(pthread_create(&t[w], NULL, writer, &a[w]), 0);
    }
    for (int w = 0; w < WRITERS; w++) {
        pthread_join(t[w], NULL);
        assert_int_equal(a[w].failed, 0);
    }
}

static void test_concurrent_writers(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/audit.log", dir);
    audit_log_opts o;
    opts_for(&o, path);
    o.max_bytes = 64 * 1024; /* rotations while the writers race */
    o.max_backups = 0;
    o.max_age_days = 0;
    audit_log *l = audit_log_open(&o, NULL);
    assert_non_null(l);
    run_writers(l);
    audit_log_close(l);
    check_all_lines();
}

static void test_batch_mode(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/audit.log", dir);
    audit_log_opts o;
    opts_for(&o, path);
    o.mode = AUDIT_LOG_MODE_BATCH;
    o.batch_buffer_size = WRITERS * LINES; /* room for all: nothing dropped */
    o.max_bytes = 64 * 1024;
    o.max_backups = 0;
    o.max_age_days = 0;
    audit_log *l = audit_log_open(&o, NULL);
    assert_non_null(l);
    run_writers(l);
    audit_log_close(l); /* writes what is still queued */
    check_all_lines();
}

static void test_stdout_and_events(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/stdout.txt", dir);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    dup2(fd, STDOUT_FILENO);
    close(fd);
    audit_log_opts o;
    opts_for(&o, "-");
    o.format = AUDIT_LOG_FORMAT_LEGACY;
    o.max_bytes = 10; /* stdout is never rotated */
    audit_log *l = audit_log_open(&o, NULL);
    audit_event e = {.audit_id = "x",
                     .stage = AUDIT_STAGE_RESPONSE_COMPLETE,
                     .verb = "get",
                     .request_uri = "/version",
                     .request_received = {1795770000, 0}};
    int rc1 = l ? audit_log_write_event(l, &e) : -2;
    audit_log_close(l);
    o.format = AUDIT_LOG_FORMAT_JSON;
    l = audit_log_open(&o, NULL);
    int rc2 = l ? audit_log_write_event(l, &e) : -2;
    audit_log_close(l);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    assert_int_equal(rc1, 0);
    assert_int_equal(rc2, 0);
    char *s = slurp(path, NULL);
    char *nl = strchr(s, '\n');
    assert_non_null(nl);
    assert_non_null(strstr(s, " AUDIT: id=\"x\" stage=\"ResponseComplete\""));
    assert_true(!strncmp(nl + 1, "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\"", 46));
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_flags),
        cmocka_unit_test_setup_teardown(test_open_makes_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_rotation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation_maxbackup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation_existing_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_maxage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compress, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stdout_and_events, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
