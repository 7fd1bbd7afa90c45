/* test_snapshot.c - the SQLite store's backup, check and restore
 * (storage/sqlite/snapshot.h) and its lock (storage_sqlite_lock):
 *  - a backup of an open store holds exactly its state (keys, values,
 *    create and mod revisions, the revision counter), and a store restored
 *    from it opens with that state;
 *  - the lock is held while a store is open: restore refuses then (busy),
 *    and refuses an existing store without force;
 *  - a stale WAL beside the replaced store is not replayed onto the
 *    restored one;
 *  - files that are not ckube stores (garbage, empty, another schema, a
 *    newer schema version) are refused with a reason and leave no store.
 * The online part (a server writing during the backup) is
 * tests/e2e/test_backup_restore.sh's. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "storage/sqlite/snapshot.h"
#include "storage/sqlite/sqlite.h"
#include "storage/storage.h"

static char base_dir[PATH_MAX];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("CKUBE_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0700);
    snprintf(base_dir, sizeof base_dir, "%s/snapshot-XXXXXX", base);
    return mkdtemp(base_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    nftw(base_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* base_dir/NAME, in static buffer `slot` (a call keeps its result while
 * it uses no other call's slot). */
static const char *path_of(int slot, const char *name)
{
    static char buf[8][PATH_MAX + 64];
    int n = snprintf(buf[slot], sizeof buf[slot], "%.*s/%s", PATH_MAX - 1, base_dir, name);
    assert_true(n > 0 && (size_t)n < sizeof buf[slot]);
    return buf[slot];
}

/* ---- writes, waited for ---- */

struct waited {
    storage_op op;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

static void waited_done(storage_op *op, void *arg)
{
    (void)op;
    struct waited *w = arg;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void write_one(storage *st, storage_op_type type, const char *key, const char *value)
{
    struct waited w = {.op = {.type = type,
                              .key = key,
                              .value = value,
                              .value_len = value ? strlen(value) : 0,
                              .done = waited_done}};
    w.op.arg = &w;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    assert_int_equal(storage_submit(st, &w.op), STORAGE_OK);
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    assert_int_equal(w.op.result, STORAGE_OK);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
}

/* Fills a store: `n` creates under PREFIX, every 7th updated, every 11th
 * deleted. */
static void fill(storage *st, const char *prefix, int n)
{
    char key[128], value[256];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "/registry/%s/k%03d", prefix, i);
        snprintf(value, sizeof value, "{\"%s\":%d,\"pad\":\"%0128d\"}", prefix, i, i);
        write_one(st, STORAGE_OP_CREATE, key, value);
    }
    for (int i = 0; i < n; i += 7) {
        snprintf(key, sizeof key, "/registry/%s/k%03d", prefix, i);
        snprintf(value, sizeof value, "{\"%s\":%d,\"updated\":true}", prefix, i);
        write_one(st, STORAGE_OP_UPDATE, key, value);
    }
    for (int i = 3; i < n; i += 11) {
        snprintf(key, sizeof key, "/registry/%s/k%03d", prefix, i);
        write_one(st, STORAGE_OP_DELETE, key, NULL);
    }
}

/* ---- the state of a store as text ---- */

struct dump {
    char *buf;
    size_t len;
    size_t n;
};

static int dump_fn(void *arg, const storage_kv *kv)
{
    struct dump *d = arg;
    char *line = NULL;
    int len = asprintf(&line, "%s\t%.*s\t%" PRId64 "\t%" PRId64 "\n", kv->key, (int)kv->value_len,
                       kv->value, kv->create_rev, kv->mod_rev);
    assert_true(len > 0);
    d->buf = realloc(d->buf, d->len + (size_t)len + 1);
    memcpy(d->buf + d->len, line, (size_t)len + 1);
    d->len += (size_t)len;
    d->n++;
    free(line);
    return 0;
}

/* Every live key with value and revisions, then the revision (malloc'd). */
static char *dump_store(storage *st, size_t *n)
{
    struct dump d = {0};
    int64_t rev = 0;
    assert_int_equal(storage_range(st, "", dump_fn, &d, &rev), STORAGE_OK);
    char *out = NULL;
    assert_true(asprintf(&out, "%srev %" PRId64 "\n", d.buf ? d.buf : "", rev) > 0);
    free(d.buf);
    if (n)
        *n = d.n;
    return out;
}

static storage *open_store(const char *dir)
{
    char *err = NULL;
    storage *st = storage_sqlite_open(dir, &err);
    if (!st)
        fail_msg("open %s: %s", dir, err ? err : "?");
    return st;
}

static char *dump_dir(const char *dir)
{
    storage *st = open_store(dir);
    char *d = dump_store(st, NULL);
    storage_close(st);
    return d;
}

static void copy_bytes(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* ---- tests ---- */

static void test_backup_restore_roundtrip(void **state)
{
    (void)state;
    const char *dir = path_of(0, "x"), *file = path_of(1, "x.snap"), *rdir = path_of(2, "r");
    storage *st = open_store(dir);
    fill(st, "x", 60);
    size_t live = 0;
    char *want = dump_store(st, &live);

    /* the open store holds its lock */
    bool busy = false;
    char *err = NULL;
    assert_int_equal(storage_sqlite_lock(dir, &busy, &err), -1);
    assert_true(busy);
    free(err);

    storage_sqlite_info info;
    err = NULL;
    if (storage_sqlite_backup(dir, file, false, &info, &err) != 0)
        fail_msg("backup: %s", err);
    assert_int_equal(info.rev, storage_current_rev(st));
    assert_int_equal(info.objects, (int64_t)live);
    assert_true(info.bytes > 0);
    struct stat sb;
    assert_int_equal(stat(file, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    char tmp[PATH_MAX + 128];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    assert_int_not_equal(access(tmp, F_OK), 0);

    /* an existing file only with force */
    err = NULL;
    assert_int_equal(storage_sqlite_backup(dir, file, false, NULL, &err), -1);
    assert_non_null(strstr(err, "exists"));
    free(err);
    err = NULL;
    assert_int_equal(storage_sqlite_backup(dir, file, true, NULL, &err), 0);

    /* not while the store is open; then into a new directory */
    err = NULL;
    assert_int_equal(storage_sqlite_restore(file, dir, true, &busy, NULL, &err), -1);
    assert_true(busy);
    free(err);
    storage_close(st);
    err = NULL;
    if (storage_sqlite_restore(file, rdir, false, &busy, &info, &err) != 0)
        fail_msg("restore: %s", err);
    assert_false(busy);
    assert_int_equal(info.objects, (int64_t)live);
    char *got = dump_dir(rdir);
    assert_string_equal(got, want);
    free(got);

    /* an existing store only with force */
    err = NULL;
    assert_int_equal(storage_sqlite_restore(file, rdir, false, &busy, NULL, &err), -1);
    assert_false(busy);
    assert_non_null(strstr(err, "exists; pass --force"));
    free(err);
    err = NULL;
    assert_int_equal(storage_sqlite_restore(file, rdir, true, NULL, NULL, &err), 0);
    got = dump_dir(rdir);
    assert_string_equal(got, want);
    free(got);
    free(want);
}

/* A WAL left beside a store (a server killed) belongs to that store: the
 * restored file must not get its frames. */
static void test_restore_drops_stale_wal(void **state)
{
    (void)state;
    const char *xdir = path_of(0, "wx"), *ydir = path_of(1, "wy"), *file = path_of(2, "wx.snap");
    const char *rdir = path_of(3, "wr"), *ywal = path_of(4, "wy/state.db-wal");
    const char *rwal = path_of(5, "wr/state.db-wal");
    storage *x = open_store(xdir);
    fill(x, "x", 30);
    char *want = dump_store(x, NULL);
    char *err = NULL;
    if (storage_sqlite_backup(xdir, file, false, NULL, &err) != 0)
        fail_msg("backup: %s", err);
    storage_close(x);
    err = NULL;
    assert_int_equal(storage_sqlite_restore(file, rdir, false, NULL, NULL, &err), 0);

    /* another store's WAL, with frames, copied in as a crash leaves one */
    storage *y = open_store(ydir);
    fill(y, "y", 40);
    assert_int_equal(access(ywal, F_OK), 0);
    copy_bytes(ywal, rwal);
    storage_close(y);

    err = NULL;
    if (storage_sqlite_restore(file, rdir, true, NULL, NULL, &err) != 0)
        fail_msg("restore: %s", err);
    char *got = dump_dir(rdir);
    assert_string_equal(got, want);
    free(got);
    free(want);
}

/* Makes `path` a SQLite database by running `sql`. */
static void make_db(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
    sqlite3_close(db);
}

static void expect_refused(const char *file, const char *why)
{
    const char *rdir = path_of(7, "refused");
    char *err = NULL;
    assert_int_equal(storage_sqlite_check(file, NULL, &err), -1);
    if (!strstr(err, why))
        fail_msg("check %s: [%s] does not say [%s]", file, err, why);
    free(err);
    err = NULL;
    assert_int_equal(storage_sqlite_restore(file, rdir, true, NULL, NULL, &err), -1);
    if (!strstr(err, "is not a ckube store") || !strstr(err, why))
        fail_msg("restore %s: [%s] does not say [%s]", file, err, why);
    free(err);
    char db[PATH_MAX + 128];
    snprintf(db, sizeof db, "%s/state.db", rdir);
    assert_int_not_equal(access(db, F_OK), 0);
}

static void test_refuses_what_is_no_store(void **state)
{
    (void)state;
    const char *garbage = path_of(0, "garbage"), *empty = path_of(1, "empty");
    const char *other = path_of(2, "other.db"), *wrong = path_of(3, "wrong.db");
    const char *newer = path_of(4, "newer.db");
    FILE *f = fopen(garbage, "wb");
    assert_non_null(f);
    for (int i = 0; i < 4096; i++)
        fputc((i * 7919) & 0xff, f);
    fclose(f);
    fclose(fopen(empty, "wb"));
    expect_refused(garbage, "file is not a database");
    expect_refused(empty, "file is not a database");
    make_db(other, "CREATE TABLE t (x)");
    expect_refused(other, "it has no table kv");
    make_db(wrong, "CREATE TABLE kv (id INTEGER PRIMARY KEY, key TEXT);"
                   "CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER)");
    expect_refused(wrong, "kv has columns (id,key)");

    /* a real store with a schema version this build does not know */
    const char *dir = path_of(5, "n");
    storage *st = open_store(dir);
    fill(st, "n", 5);
    char *err = NULL;
    if (storage_sqlite_backup(dir, newer, false, NULL, &err) != 0)
        fail_msg("backup: %s", err);
    storage_close(st);
    make_db(newer, "UPDATE meta SET value = 2 WHERE name = 'schema'");
    expect_refused(newer, "schema version 2");
    make_db(newer, "UPDATE meta SET value = 1 WHERE name = 'schema';"
                   "UPDATE meta SET value = 1 WHERE name = 'rev'");
    expect_refused(newer, "damaged meta table");
}

static void test_backup_of_missing_store(void **state)
{
    (void)state;
    const char *dir = path_of(0, "none"), *file = path_of(1, "none.snap");
    char *err = NULL;
    assert_int_equal(storage_sqlite_backup(dir, file, false, NULL, &err), -1);
    assert_non_null(strstr(err, "no ckube store at"));
    free(err);
    assert_int_not_equal(access(dir, F_OK), 0);
    assert_int_not_equal(access(file, F_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backup_restore_roundtrip),
        cmocka_unit_test(test_restore_drops_stale_wal),
        cmocka_unit_test(test_refuses_what_is_no_store),
        cmocka_unit_test(test_backup_of_missing_store),
    };
    return cmocka_run_group_tests_name("storage/sqlite/snapshot", tests, setup, teardown);
}
