/* snapshot.c - online copies of a SQLite store and their installation
 * (see snapshot.h).
 *
 * The copy uses SQLite's online backup API with a single
 * sqlite3_backup_step(-1) rather than `VACUUM INTO`:
 *  - one step is one read transaction, so the copy is the database as of
 *    one commit; in WAL mode a reader does not block the server's writer,
 *    so a running server keeps committing (and acknowledging) while the
 *    copy is made. (Copying in several steps would let the server's
 *    commits, made on another connection, restart the copy at every step:
 *    under steady writes it might never end.)
 *  - it copies pages as they are: no index is rebuilt, so the copy costs
 *    the server's machine a sequential read and write, where VACUUM INTO
 *    re-inserts every row and rebuilds kv's index;
 *  - it needs only a read-only connection to the store (VACUUM INTO would
 *    too, but pulls each row through the VDBE).
 * The copy then leaves WAL mode (journal_mode=DELETE) so that the
 * snapshot is one self-contained file; the server turns WAL back on when
 * it opens a restored store. */
#include "storage/sqlite/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/text.h"
#include "common/xalloc.h"
#include "storage/sqlite/sqlite.h"

#define SNAP_BUSY_TIMEOUT_MS 5000
#define SNAP_BUSY_RETRIES 100 /* of 50 ms, beyond the busy timeout */
#define SNAP_COPY_BUF (1u << 20)

/* ---- files ---- */

/* fsyncs `path` (a file, or a directory for the entries in it). */
static int fsync_path(const char *path, bool dir, char **err)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) {
        ckube__set_err(err, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0) {
        ckube__set_err(err, "fsync %s: %s", path, strerror(e));
        return -1;
    }
    return 0;
}

/* fsyncs the directory that holds `file`, so that a rename into it is
 * durable. */
static int fsync_parent(const char *file, char **err)
{
    char *dir = xstrdup(file);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        slash[1] = '\0'; /* "/file": the root */
    else
        *slash = '\0';
    int rc = fsync_path(dir, true, err);
    free(dir);
    return rc;
}

/* Removes `path` if it exists. */
static int unlink_if_present(const char *path, char **err)
{
    if (unlink(path) != 0 && errno != ENOENT) {
        ckube__set_err(err, "cannot remove %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Makes `path` a new empty file of mode 0600 (it may hold Secrets), in
 * place of any leftover of an earlier, interrupted run. */
static int create_empty(const char *path, char **err)
{
    int fd = -1;
    if (unlink(path) == 0 || errno == ENOENT)
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        ckube__set_err(err, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    close(fd);
    return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Copies `in` to `out` and fsyncs `out`. 0, or -1 with errno set and
 * *what naming the call that failed. */
static int copy_fd(int in, int out, const char **what)
{
    char *buf = xmalloc(SNAP_COPY_BUF);
    int rc = 0;
    for (;;) {
        ssize_t n = read(in, buf, SNAP_COPY_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            *what = "read";
            break;
        }
        if (write_all(out, buf, (size_t)n) != 0) {
            rc = -1;
            *what = "write";
            break;
        }
    }
    int e = errno;
    free(buf);
    errno = e;
    if (rc == 0 && fsync(out) != 0) {
        rc = -1;
        *what = "fsync";
    }
    return rc;
}

/* Copies the regular file `from` to the new file `to` (mode 0600) and
 * fsyncs it. On failure `to` is removed. */
static int copy_file(const char *from, const char *to, char **err)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        ckube__set_err(err, "cannot open %s: %s", from, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
        ckube__set_err(err, "%s is not a regular file", from);
        close(in);
        return -1;
    }
    if (create_empty(to, err) != 0) {
        close(in);
        return -1;
    }
    const char *what = "open";
    int out = open(to, O_WRONLY | O_CLOEXEC);
    int rc = out < 0 ? -1 : copy_fd(in, out, &what);
    if (rc != 0)
        ckube__set_err(err, "copying %s to %s: %s: %s", from, to, what, strerror(errno));
    if (out >= 0 && close(out) != 0 && rc == 0) {
        ckube__set_err(err, "copying %s to %s: close: %s", from, to, strerror(errno));
        rc = -1;
    }
    close(in);
    if (rc != 0)
        unlink(to);
    return rc;
}

/* ---- the check ---- */

/* The first column of the first row of `sql` (with ?1 bound to `arg`
 * when given) as text, malloc'd into *out (NULL for no row or NULL). */
static int query_text(sqlite3 *db, const char *sql, const char *arg, char **out)
{
    *out = NULL;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK && arg)
        sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const char *t = (const char *)sqlite3_column_text(st, 0);
            *out = t ? xstrdup(t) : NULL;
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE) {
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* As query_text, as a number; -1 for no row or NULL. */
static int query_int64(sqlite3 *db, const char *sql, const char *arg, int64_t *out)
{
    char *t = NULL;
    int rc = query_text(db, sql, arg, &t);
    *out = t ? strtoll(t, NULL, 10) : -1;
    free(t);
    return rc;
}

/* The names of `table`'s columns (or an index's), in order,
 * comma-separated: "" when it does not exist. */
static int column_list(sqlite3 *db, const char *pragma, const char *name, char **out)
{
    char *sql = xasprintf("SELECT group_concat(name, ',') FROM"
                          " (SELECT name FROM pragma_%s(?1) ORDER BY %s)",
                          pragma, strcmp(pragma, "table_info") ? "seqno" : "cid");
    int rc = query_text(db, sql, name, out);
    free(sql);
    if (rc == SQLITE_OK && !*out)
        *out = xstrdup("");
    return rc;
}

/* Compares one table's or index's columns with what sqlite.c makes. */
static int check_columns(sqlite3 *db, const char *pragma, const char *name, const char *want,
                         char **err)
{
    char *got = NULL;
    int rc = column_list(db, pragma, name, &got);
    if (rc != SQLITE_OK) {
        ckube__set_err(err, "%s", sqlite3_errmsg(db));
    } else if (!*got) {
        ckube__set_err(err, "it has no %s %s", strcmp(pragma, "table_info") ? "index" : "table",
                       name);
        rc = SQLITE_ERROR;
    } else if (strcmp(got, want) != 0) {
        ckube__set_err(err, "%s has columns (%s), not (%s)", name, got, want);
        rc = SQLITE_ERROR;
    }
    free(got);
    return rc == SQLITE_OK ? 0 : -1;
}

/* The checks storage_sqlite_check makes, on an open connection. */
static int check_db(sqlite3 *db, storage_sqlite_info *info, char **err)
{
    char *ok = NULL;
    /* SQLite's own check first: a file that is not a database, or a
     * damaged one, fails here with SQLite's words. */
    if (query_text(db, "PRAGMA integrity_check(1)", NULL, &ok) != SQLITE_OK) {
        ckube__set_err(err, "%s", sqlite3_errmsg(db));
        return -1;
    }
    if (!ok || strcmp(ok, "ok") != 0) {
        ckube__set_err(err, "integrity_check: %s", ok ? ok : "no answer");
        free(ok);
        return -1;
    }
    free(ok);
    if (check_columns(db, "table_info", "kv", "id,key,value,create_rev,prev_rev,deleted", err) ||
        check_columns(db, "table_info", "meta", "name,value", err) ||
        check_columns(db, "index_info", "kv_key_id", "key,id", err))
        return -1;
    const char *meta = "SELECT value FROM meta WHERE name = ?1";
    int64_t schema, max_id;
    if (query_int64(db, meta, "schema", &schema) != SQLITE_OK ||
        query_int64(db, meta, "rev", &info->rev) != SQLITE_OK ||
        query_int64(db, meta, "compacted", &info->compacted) != SQLITE_OK ||
        query_int64(db, "SELECT coalesce(max(id), 0) FROM kv", NULL, &max_id) != SQLITE_OK ||
        query_int64(db,
                    "SELECT count(*) FROM kv AS a WHERE deleted = 0 AND NOT EXISTS"
                    " (SELECT 1 FROM kv AS b WHERE b.key = a.key AND b.id > a.id)",
                    NULL, &info->objects) != SQLITE_OK) {
        ckube__set_err(err, "%s", sqlite3_errmsg(db));
        return -1;
    }
    if (schema != STORAGE_SQLITE_SCHEMA_VERSION) {
        ckube__set_err(err, "schema version %lld, this ckube reads %d", (long long)schema,
                       STORAGE_SQLITE_SCHEMA_VERSION);
        return -1;
    }
    if (info->rev < 0 || info->compacted < 0 || info->compacted > info->rev || max_id > info->rev) {
        ckube__set_err(err, "damaged meta table (revision %lld, compacted %lld, newest row %lld)",
                       (long long)info->rev, (long long)info->compacted, (long long)max_id);
        return -1;
    }
    return 0;
}

/* SQLite's words for a file that is none of its databases. */
#define NOT_A_DATABASE "file is not a database"

/* Whether `file` starts as every SQLite database does. (SQLite itself
 * takes an empty file for an empty database: no ckube store either.) */
static bool has_sqlite_magic(const char *file)
{
    static const char magic[16] = "SQLite format 3"; /* and its NUL */
    char head[sizeof magic];
    FILE *f = fopen(file, "rb");
    if (!f)
        return false;
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return n == sizeof head && memcmp(head, magic, sizeof magic) == 0;
}

/* storage_sqlite_check without the file's name in *why. */
static int check_file(const char *file, storage_sqlite_info *out, char **why)
{
    storage_sqlite_info info = {0};
    struct stat st;
    if (stat(file, &st) != 0) {
        ckube__set_err(why, "%s", strerror(errno));
        return -1;
    }
    info.bytes = (int64_t)st.st_size;
    if (!has_sqlite_magic(file)) {
        ckube__set_err(why, NOT_A_DATABASE);
        return -1;
    }
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(file, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(db, SNAP_BUSY_TIMEOUT_MS);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "PRAGMA query_only=1", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        ckube__set_err(why, "%s", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    else
        rc = check_db(db, &info, why) == 0 ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_close(db);
    if (rc != SQLITE_OK)
        return -1;
    if (out)
        *out = info;
    return 0;
}

/* Sets *err to "NAME is not a ckube store: WHY" and frees why. */
static void not_a_store(char **err, const char *name, char *why)
{
    ckube__set_err(err, "%s is not a ckube store: %s", name, why ? why : "unknown error");
    free(why);
}

int storage_sqlite_check(const char *file, storage_sqlite_info *out, char **err)
{
    char *why = NULL;
    if (check_file(file, out, &why) == 0)
        return 0;
    not_a_store(err, file, why);
    return -1;
}

/* ---- backup ---- */

/* Copies the store at `path` into the empty database file `tmp` in one
 * backup step (one read transaction), then takes the copy out of WAL
 * mode. */
static int copy_store(const char *path, const char *tmp, char **err)
{
    sqlite3 *src = NULL, *dst = NULL;
    int rc = sqlite3_open_v2(path, &src, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(src, SNAP_BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK) {
        ckube__set_err(err, "cannot open %s: %s", path,
                       src ? sqlite3_errmsg(src) : sqlite3_errstr(rc));
        goto out;
    }
    rc = sqlite3_open_v2(tmp, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        ckube__set_err(err, "cannot open %s: %s", tmp,
                       dst ? sqlite3_errmsg(dst) : sqlite3_errstr(rc));
        goto out;
    }
    sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
    if (!b) {
        rc = SQLITE_ERROR;
        ckube__set_err(err, "cannot copy %s: %s", path, sqlite3_errmsg(dst));
        goto out;
    }
    /* BUSY only while the read lock cannot be had (the server recovering
     * its WAL index, say): the backup may be stepped again. */
    for (int tries = 0;; tries++) {
        rc = sqlite3_backup_step(b, -1);
        if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || tries == SNAP_BUSY_RETRIES)
            break;
        sqlite3_sleep(50);
    }
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE) {
        ckube__set_err(err, "cannot copy %s: %s", path, sqlite3_errstr(rc));
        goto out;
    }
    rc = sqlite3_exec(dst, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        ckube__set_err(err, "%s: cannot leave WAL mode: %s", tmp, sqlite3_errmsg(dst));
out:
    sqlite3_close(dst);
    sqlite3_close(src);
    return rc == SQLITE_OK || rc == SQLITE_DONE ? 0 : -1;
}

/* Whether `a` and `b` name the same existing file. */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int storage_sqlite_backup(const char *dir, const char *file, bool force, storage_sqlite_info *out,
                          char **err)
{
    char *path = xasprintf("%s/" STORAGE_SQLITE_DB, dir);
    char *tmp = xasprintf("%s.tmp", file);
    storage_sqlite_info info;
    int rc = -1;
    struct stat st;
    if (stat(path, &st) != 0) {
        ckube__set_err(err, "no ckube store at %s: %s", path, strerror(errno));
        goto out;
    }
    if (same_file(path, file)) {
        ckube__set_err(err, "%s is the store itself; back up to another file", file);
        goto out;
    }
    if (!force && access(file, F_OK) == 0) {
        ckube__set_err(err, "%s exists; pass --force to overwrite it", file);
        goto out;
    }
    if (create_empty(tmp, err) != 0)
        goto out;
    if (copy_store(path, tmp, err) != 0)
        goto fail;
    char *why = NULL;
    if (check_file(tmp, &info, &why) != 0) {
        not_a_store(err, path, why); /* what was copied is what is wrong */
        goto fail;
    }
    if (fsync_path(tmp, false, err) != 0)
        goto fail;
    if (rename(tmp, file) != 0) {
        ckube__set_err(err, "cannot rename %s to %s: %s", tmp, file, strerror(errno));
        goto fail;
    }
    if (fsync_parent(file, err) != 0)
        goto out;
    if (out)
        *out = info;
    rc = 0;
    goto out;
fail:
    unlink(tmp);
out:
    free(tmp);
    free(path);
    return rc;
}

/* ---- restore ---- */

/* mkdir -p `dir`, mode 0700 as the server makes it. */
static int make_dirs(const char *dir, char **err)
{
    char *p = xstrdup(dir);
    int rc = 0;
    for (char *q = p + 1; rc == 0; q++) {
        if (*q != '/' && *q != '\0')
            continue;
        char c = *q;
        *q = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            ckube__set_err(err, "cannot create directory %s: %s", p, strerror(errno));
            rc = -1;
        }
        *q = c;
        if (c == '\0')
            break;
    }
    free(p);
    return rc;
}

/* With the lock held: copy, check, clear the old WAL, rename. */
static int install(const char *file, const char *dir, bool force, storage_sqlite_info *info,
                   char **err)
{
    char *path = xasprintf("%s/" STORAGE_SQLITE_DB, dir);
    char *tmp = xasprintf("%s.tmp", path);
    char *tmp_wal = xasprintf("%s-wal", tmp), *tmp_shm = xasprintf("%s-shm", tmp);
    char *wal = xasprintf("%s-wal", path), *shm = xasprintf("%s-shm", path);
    int rc = -1;
    if (!force && access(path, F_OK) == 0) {
        ckube__set_err(err, "%s exists; pass --force to replace it", path);
        goto out;
    }
    if (copy_file(file, tmp, err) != 0)
        goto out;
    char *why = NULL;
    if (check_file(tmp, info, &why) != 0) {
        not_a_store(err, file, why); /* the file the user named, not our copy */
        goto fail;
    }
    /* The check's connection is closed: these are only its leftovers. */
    if (unlink_if_present(tmp_wal, err) || unlink_if_present(tmp_shm, err) ||
        unlink_if_present(wal, err) || unlink_if_present(shm, err))
        goto fail;
    if (rename(tmp, path) != 0) {
        ckube__set_err(err, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto fail;
    }
    rc = fsync_path(dir, true, err);
    goto out;
fail:
    unlink(tmp);
out:
    free(tmp);
    free(tmp_wal);
    free(tmp_shm);
    free(wal);
    free(shm);
    free(path);
    return rc;
}

/* The first look restore takes, so that a wrong file is refused before
 * DIR is touched. */
static int check_source(const char *file, char **err)
{
    struct stat st;
    if (stat(file, &st) != 0 || access(file, R_OK) != 0) {
        ckube__set_err(err, "cannot read %s: %s", file, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        ckube__set_err(err, "%s is not a regular file", file);
        return -1;
    }
    if (!has_sqlite_magic(file)) {
        ckube__set_err(err, "%s is not a ckube store: " NOT_A_DATABASE, file);
        return -1;
    }
    return 0;
}

int storage_sqlite_restore(const char *file, const char *dir, bool force, bool *busy,
                           storage_sqlite_info *out, char **err)
{
    if (busy)
        *busy = false;
    if (check_source(file, err) != 0)
        return -1;
    if (make_dirs(dir, err) != 0)
        return -1;
    int lock = storage_sqlite_lock(dir, busy, err);
    if (lock < 0)
        return -1;
    storage_sqlite_info info;
    int rc = install(file, dir, force, &info, err);
    close(lock); /* a server may open the store from here on */
    if (rc == 0 && out)
        *out = info;
    return rc;
}
