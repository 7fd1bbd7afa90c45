/* log.c - the audit log backend and its lumberjack-style rotation (see
 * log.h). Locks: `mu` guards the file (fd, size, rotation); the mill and
 * the batch queue have a mutex and condition each and never take `mu`
 * while holding theirs, except the batch writer, which takes `mu` only
 * through write_line after letting go of the queue's. */
#include "apiserver/audit/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "ckube/log.h"
#include "common/xalloc.h"

#define MEGABYTE ((int64_t)1024 * 1024)
#define GZ_SUFFIX ".gz"

struct audit_log {
    audit_log_format format;
    audit_log_mode mode;
    bool rotating; /* max size set, a real file */
    int max_backups, max_age_days;
    bool compress;
    char *path, *dir;
    char *prefix, *ext; /* "audit-" and ".log": what old files are named */
    int64_t max;
    /* The time in the last old file's name: names only move forward, so
     * the mill's newest-first order is the order they were made in. */
    int64_t last_backup_ms;

    pthread_mutex_t mu;
    int fd; /* -1 until the first write of a rotating log */
    bool is_stdout;
    int64_t size;

    /* the mill: one pending run at most, as lumberjack's millCh */
    bool mill_on;
    pthread_t mill;
    pthread_mutex_t mill_mu;
    pthread_cond_t mill_cv;
    bool mill_pending, mill_stop;

    /* batch mode: a ring of lines */
    bool batch_on;
    pthread_t batch;
    pthread_mutex_t batch_mu;
    pthread_cond_t batch_cv;
    char **q;
    size_t *qlen;
    size_t qcap, qhead, qn;
    bool batch_stop;
};

/* ---- options ----------------------------------------------------------------- */

void audit_log_opts_init(audit_log_opts *o)
{
    *o = (audit_log_opts){
        .path = NULL,
        .max_age_days = 366,
        .max_backups = 100,
        .max_size_mb = 100,
        .format = AUDIT_LOG_FORMAT_JSON,
        .compress = false,
        .mode = AUDIT_LOG_MODE_BLOCKING,
        .batch_buffer_size = 10000,
        .batch_max_size = 1,
        .group_version = "audit.k8s.io/v1",
    };
}

int audit_log_parse_format(const char *s, audit_log_format *out, char **err)
{
    if (err)
        *err = NULL;
    if (s && !strcmp(s, "json")) {
        *out = AUDIT_LOG_FORMAT_JSON;
        return 0;
    }
    if (s && !strcmp(s, "legacy")) {
        *out = AUDIT_LOG_FORMAT_LEGACY;
        return 0;
    }
    if (err)
        *err = xasprintf("invalid audit log format %s, allowed formats are \"legacy,json\"",
                         s ? s : "");
    return -1;
}

int audit_log_parse_mode(const char *s, audit_log_mode *out, char **err)
{
    static const char *const names[] = {"blocking", "blocking-strict", "batch"};
    if (err)
        *err = NULL;
    for (int i = 0; i < 3; i++) {
        if (s && !strcmp(s, names[i])) {
            *out = (audit_log_mode)i;
            return 0;
        }
    }
    if (err)
        *err = xasprintf("invalid audit log mode %s, allowed modes are "
                         "\"batch,blocking,blocking-strict\"",
                         s ? s : "");
    return -1;
}

int audit_log_opts_validate(const audit_log_opts *o, char **err)
{
    if (err)
        *err = NULL;
    if (!o->path || !*o->path)
        return 0;
    char *msgs[8];
    int n = 0;
    if (o->mode == AUDIT_LOG_MODE_BATCH) {
        if (o->batch_buffer_size <= 0)
            msgs[n++] = xasprintf("invalid audit batch log buffer size %d, must be a positive "
                                  "number",
                                  o->batch_buffer_size);
        else if (o->batch_max_size <= 0)
            msgs[n++] = xasprintf("invalid audit batch log max batch size %d, must be a positive "
                                  "number",
                                  o->batch_max_size);
    } else if (o->mode != AUDIT_LOG_MODE_BLOCKING && o->mode != AUDIT_LOG_MODE_BLOCKING_STRICT) {
        msgs[n++] = xasprintf("invalid audit log mode %d, allowed modes are "
                              "\"batch,blocking,blocking-strict\"",
                              (int)o->mode);
    }
    if (o->group_version && strcmp(o->group_version, "audit.k8s.io/v1")) {
        if (strchr(o->group_version, '/') && strchr(strchr(o->group_version, '/') + 1, '/'))
            msgs[n++] = xasprintf("unexpected GroupVersion string: %s", o->group_version);
        else
            msgs[n++] = xstrdup("invalid group version, allowed versions are "
                                "[\"audit.k8s.io/v1\"]");
    }
    if (o->format != AUDIT_LOG_FORMAT_JSON && o->format != AUDIT_LOG_FORMAT_LEGACY)
        msgs[n++] = xasprintf("invalid audit log format %d, allowed formats are \"legacy,json\"",
                              (int)o->format);
    if (o->max_age_days < 0)
        msgs[n++] = xasprintf("--audit-log-maxage %d can't be a negative number", o->max_age_days);
    if (o->max_backups < 0)
        msgs[n++] =
            xasprintf("--audit-log-maxbackup %d can't be a negative number", o->max_backups);
    if (o->max_size_mb < 0)
        msgs[n++] = xasprintf("--audit-log-maxsize %d can't be a negative number", o->max_size_mb);
    if (!n)
        return 0;
    size_t total = 3;
    for (int i = 0; i < n; i++)
        total += strlen(msgs[i]) + 2;
    char *out = xmalloc(total);
    char *p = out;
    if (n > 1)
        *p++ = '[';
    for (int i = 0; i < n; i++) {
        if (i) {
            memcpy(p, ", ", 2);
            p += 2;
        }
        size_t l = strlen(msgs[i]);
        memcpy(p, msgs[i], l);
        p += l;
        free(msgs[i]);
    }
    if (n > 1)
        *p++ = ']';
    *p = '\0';
    if (err)
        *err = out;
    else
        free(out);
    return -1;
}

/* ---- files ------------------------------------------------------------------- */

/* Go prints syscall errors in lower case. */
static const char *go_err(int e, char *buf, size_t n)
{
    snprintf(buf, n, "%s", strerror(e));
    if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
        buf[0] = (char)(buf[0] - 'A' + 'a');
    return buf;
}

/* os.MkdirAll: 0 or -1 with errno, *failed the path that failed. */
static int mkdir_all(const char *dir, mode_t mode, char **failed)
{
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return 0;
        *failed = xstrdup(dir);
        errno = ENOTDIR;
        return -1;
    }
    char *p = xstrdup(dir);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
    char *slash = strrchr(p, '/');
    if (slash && slash != p) {
        *slash = '\0';
        if (mkdir_all(p, mode, failed) < 0) {
            free(p);
            return -1;
        }
        *slash = '/';
    }
    if (mkdir(p, mode) < 0 && errno != EEXIST) {
        *failed = p;
        return -1;
    }
    free(p);
    return 0;
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return xstrdup(".");
    if (slash == path)
        return xstrdup("/");
    return xstrndup(path, (size_t)(slash - path));
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* dir/prefix + 2006-01-02T15-04-05.000 (UTC) + ext. */
static char *backup_name(const audit_log *l, int64_t ms)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    return xasprintf("%s/%s%04d-%02d-%02dT%02d-%02d-%02d.%03d%s", l->dir, l->prefix,
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (int)(ms % 1000), l->ext);
}

static void mill(audit_log *l);

/* lumberjack's openNew: the current file (if any) moved aside, a new one
 * with its mode. *err set on failure. */
static int open_new(audit_log *l, char **err)
{
    char eb[128];
    char *failed = NULL;
    if (mkdir_all(l->dir, 0755, &failed) < 0) {
        *err = xasprintf("can't make directories for new logfile: mkdir %s: %s", failed,
                         go_err(errno, eb, sizeof eb));
        free(failed);
        return -1;
    }
    mode_t mode = 0600;
    struct stat st;
    if (stat(l->path, &st) == 0) {
        mode = st.st_mode & 07777;
        int64_t ms = now_ms();
        if (ms <= l->last_backup_ms)
            ms = l->last_backup_ms + 1;
        char *name = backup_name(l, ms);
        struct stat st2;
        /* Never replace an old file: move a millisecond on instead. */
        for (int i = 0; i < 100000 && lstat(name, &st2) == 0; i++) {
            free(name);
            name = backup_name(l, ++ms);
        }
        if (rename(l->path, name) < 0) {
            *err = xasprintf("can't rename log file: rename %s %s: %s", l->path, name,
                             go_err(errno, eb, sizeof eb));
            free(name);
            return -1;
        }
        free(name);
        l->last_backup_ms = ms;
    }
    int fd = open(l->path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) {
        *err =
            xasprintf("can't open new logfile: open %s: %s", l->path, go_err(errno, eb, sizeof eb));
        return -1;
    }
    l->fd = fd;
    l->size = 0;
    return 0;
}

static int rotate(audit_log *l, char **err)
{
    if (l->fd >= 0) {
        close(l->fd);
        l->fd = -1;
    }
    if (open_new(l, err) < 0)
        return -1;
    mill(l);
    return 0;
}

/* lumberjack's openExistingOrNew, at the first write. */
static int open_existing_or_new(audit_log *l, size_t len, char **err)
{
    char eb[128];
    mill(l);
    struct stat st;
    if (stat(l->path, &st) < 0) {
        if (errno == ENOENT)
            return open_new(l, err);
        *err = xasprintf("error getting log file info: stat %s: %s", l->path,
                         go_err(errno, eb, sizeof eb));
        return -1;
    }
    if ((int64_t)st.st_size + (int64_t)len >= l->max)
        return rotate(l, err);
    int fd = open(l->path, O_APPEND | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return open_new(l, err);
    l->fd = fd;
    l->size = st.st_size;
    return 0;
}

static int write_all(int fd, const char *p, size_t n, bool nl, char **err)
{
    char eb[128];
    struct iovec iov[2] = {{(void *)p, n}, {(void *)"\n", nl ? 1 : 0}};
    int cnt = nl ? 2 : 1;
    struct iovec *v = iov;
    while (cnt > 0) {
        ssize_t w = writev(fd, v, cnt);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            *err = xasprintf("write: %s", go_err(errno, eb, sizeof eb));
            return -1;
        }
        size_t left = (size_t)w;
        while (cnt > 0 && left >= v->iov_len) {
            left -= v->iov_len;
            v++;
            cnt--;
        }
        if (cnt > 0) {
            v->iov_base = (char *)v->iov_base + left;
            v->iov_len -= left;
        }
    }
    return 0;
}

static void plugin_error(const char *plugin, const char *msg)
{
    CKUBE_ERROR("Error in audit plugin '%s' affecting 1 audit events: %s", plugin, msg);
}

/* One line to the file, rotating first when due. */
static int write_line(audit_log *l, const char *line, size_t len)
{
    bool nl = len == 0 || line[len - 1] != '\n';
    size_t total = len + (nl ? 1 : 0);
    char *err = NULL;
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    if (l->rotating) {
        if ((int64_t)total > l->max) {
            err = xasprintf("write length %zu exceeds maximum file size %lld", total,
                            (long long)l->max);
            rc = -1;
        } else if (l->fd < 0 && open_existing_or_new(l, total, &err) < 0) {
            rc = -1;
        } else if (l->size + (int64_t)total > l->max && rotate(l, &err) < 0) {
            rc = -1;
        }
    }
    if (rc == 0 && l->fd >= 0) {
        rc = write_all(l->fd, line, len, nl, &err);
        if (rc == 0)
            l->size += (int64_t)total;
    } else if (rc == 0) {
        err = xstrdup("the log file is not open");
        rc = -1;
    }
    pthread_mutex_unlock(&l->mu);
    if (rc < 0) {
        plugin_error("log", err);
        free(err);
    }
    return rc;
}

/* ---- the mill ------------------------------------------------------------------ */

typedef struct old_file {
    char *name;
    int64_t ms;
} old_file;

/* time.Parse("2006-01-02T15-04-05.000", s), exactly that shape, in UTC. */
static bool parse_stamp(const char *s, size_t n, int64_t *ms)
{
    static const char shape[] = "dddd-dd-ddTdd-dd-dd.ddd";
    if (n != sizeof shape - 1)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (shape[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != shape[i])
            return false;
    }
    int v[7];
    static const int at[7] = {0, 5, 8, 11, 14, 17, 20}, width[7] = {4, 2, 2, 2, 2, 2, 3};
    for (int k = 0; k < 7; k++) {
        v[k] = 0;
        for (int i = 0; i < width[k]; i++)
            v[k] = v[k] * 10 + (s[at[k] + i] - '0');
    }
    if (v[1] < 1 || v[1] > 12 || v[2] < 1 || v[3] > 23 || v[4] > 59 || v[5] > 59)
        return false;
    struct tm tm = {.tm_year = v[0] - 1900,
                    .tm_mon = v[1] - 1,
                    .tm_mday = v[2],
                    .tm_hour = v[3],
                    .tm_min = v[4],
                    .tm_sec = v[5]};
    time_t t = timegm(&tm);
    if (tm.tm_mday != v[2]) /* the day does not exist in the month */
        return false;
    *ms = (int64_t)t * 1000 + v[6];
    return true;
}

static int by_time_desc(const void *a, const void *b)
{
    const old_file *x = a, *y = b;
    return (x->ms < y->ms) - (x->ms > y->ms);
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* The old files of this log in its directory, newest first. */
static old_file *old_files(const audit_log *l, size_t *count)
{
    *count = 0;
    DIR *d = opendir(l->dir);
    if (!d) {
        char eb[128];
        CKUBE_ERROR("can't read log file directory: open %s: %s", l->dir,
                    go_err(errno, eb, sizeof eb));
        return NULL;
    }
    old_file *v = NULL;
    size_t n = 0, cap = 0;
    size_t pl = strlen(l->prefix);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        size_t len = strlen(name);
        if (len <= pl || memcmp(name, l->prefix, pl))
            continue;
        char *full = xasprintf("%s/%s", l->dir, name);
        struct stat st;
        bool is_dir = stat(full, &st) == 0 && S_ISDIR(st.st_mode);
        free(full);
        if (is_dir)
            continue;
        int64_t ms;
        size_t el = strlen(l->ext), gl = el + strlen(GZ_SUFFIX);
        bool ok = false;
        if (ends_with(name, len, l->ext) && len >= pl + el)
            ok = parse_stamp(name + pl, len - pl - el, &ms);
        if (!ok && len >= pl + gl && ends_with(name, len, GZ_SUFFIX) &&
            !memcmp(name + len - gl, l->ext, el))
            ok = parse_stamp(name + pl, len - pl - gl, &ms);
        if (!ok)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            v = xrealloc(v, cap * sizeof *v);
        }
        v[n++] = (old_file){xstrdup(name), ms};
    }
    closedir(d);
    if (n)
        qsort(v, n, sizeof *v, by_time_desc);
    *count = n;
    return v;
}

/* gzip src into dst (src's mode), then remove src (lumberjack's
 * compressLogFile). */
static int compress_file(const char *src, const char *dst)
{
    char eb[128];
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        CKUBE_ERROR("failed to open log file: open %s: %s", src, go_err(errno, eb, sizeof eb));
        return -1;
    }
    struct stat st;
    if (fstat(in, &st) < 0) {
        close(in);
        return -1;
    }
    int out = open(dst, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, st.st_mode & 07777);
    if (out < 0) {
        CKUBE_ERROR("failed to open compressed log file: open %s: %s", dst,
                    go_err(errno, eb, sizeof eb));
        close(in);
        return -1;
    }
    gzFile gz = gzdopen(out, "wb");
    if (!gz) {
        close(out);
        close(in);
        unlink(dst);
        return -1;
    }
    char buf[65536];
    bool bad = false;
    for (;;) {
        ssize_t got = read(in, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            bad = true;
            break;
        }
        if (got == 0)
            break;
        if (gzwrite(gz, buf, (unsigned)got) != (int)got) {
            bad = true;
            break;
        }
    }
    if (gzclose(gz) != Z_OK) /* closes `out` */
        bad = true;
    close(in);
    if (bad) {
        CKUBE_ERROR("failed to compress log file: %s", src);
        unlink(dst);
        return -1;
    }
    return unlink(src);
}

/* lumberjack's millRunOnce. */
static void mill_run_once(audit_log *l)
{
    if (!l->max_backups && !l->max_age_days && !l->compress)
        return;
    size_t n;
    old_file *files = old_files(l, &n);
    bool *gone = xcalloc(n ? n : 1, sizeof *gone);
    if (l->max_backups > 0 && (size_t)l->max_backups < n) {
        /* Keep the newest max_backups names (a file and its .gz are one). */
        char **seen = xcalloc(n, sizeof *seen);
        size_t nseen = 0;
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(files[i].name);
            if (ends_with(files[i].name, len, GZ_SUFFIX))
                len -= strlen(GZ_SUFFIX);
            bool known = false;
            for (size_t j = 0; j < nseen && !known; j++)
                known = strlen(seen[j]) == len && !memcmp(seen[j], files[i].name, len);
            if (!known)
                seen[nseen++] = xstrndup(files[i].name, len);
            if (nseen > (size_t)l->max_backups)
                gone[i] = true;
        }
        for (size_t j = 0; j < nseen; j++)
            free(seen[j]);
        free(seen);
    }
    if (l->max_age_days > 0) {
        int64_t cutoff = now_ms() - (int64_t)l->max_age_days * 24 * 3600 * 1000;
        for (size_t i = 0; i < n; i++)
            if (!gone[i] && files[i].ms < cutoff)
                gone[i] = true;
    }
    for (size_t i = 0; i < n; i++) {
        if (!gone[i])
            continue;
        char *full = xasprintf("%s/%s", l->dir, files[i].name);
        if (unlink(full) < 0 && errno != ENOENT) {
            char eb[128];
            CKUBE_ERROR("can't remove old audit log file %s: %s", full,
                        go_err(errno, eb, sizeof eb));
        }
        free(full);
    }
    if (l->compress) {
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(files[i].name);
            if (gone[i] || ends_with(files[i].name, len, GZ_SUFFIX))
                continue;
            char *src = xasprintf("%s/%s", l->dir, files[i].name);
            char *dst = xasprintf("%s" GZ_SUFFIX, src);
            compress_file(src, dst);
            free(src);
            free(dst);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(files[i].name);
    free(files);
    free(gone);
}

static void *mill_main(void *arg)
{
    audit_log *l = arg;
    pthread_mutex_lock(&l->mill_mu);
    for (;;) {
        while (!l->mill_pending && !l->mill_stop)
            pthread_cond_wait(&l->mill_cv, &l->mill_mu);
        if (!l->mill_pending)
            break; /* stopping, nothing left to do */
        l->mill_pending = false;
        pthread_mutex_unlock(&l->mill_mu);
        mill_run_once(l);
        pthread_mutex_lock(&l->mill_mu);
    }
    pthread_mutex_unlock(&l->mill_mu);
    return NULL;
}

/* Asks for a mill run; several asked before it starts make one. */
static void mill(audit_log *l)
{
    if (!l->mill_on)
        return;
    pthread_mutex_lock(&l->mill_mu);
    l->mill_pending = true;
    pthread_cond_signal(&l->mill_cv);
    pthread_mutex_unlock(&l->mill_mu);
}

/* ---- batch mode ------------------------------------------------------------------ */

static void *batch_main(void *arg)
{
    audit_log *l = arg;
    pthread_mutex_lock(&l->batch_mu);
    for (;;) {
        while (!l->qn && !l->batch_stop)
            pthread_cond_wait(&l->batch_cv, &l->batch_mu);
        if (!l->qn)
            break; /* stopping and drained */
        char *line = l->q[l->qhead];
        size_t len = l->qlen[l->qhead];
        l->qhead = (l->qhead + 1) % l->qcap;
        l->qn--;
        pthread_mutex_unlock(&l->batch_mu);
        write_line(l, line, len);
        free(line);
        pthread_mutex_lock(&l->batch_mu);
    }
    pthread_mutex_unlock(&l->batch_mu);
    return NULL;
}

static int enqueue(audit_log *l, const char *line, size_t len)
{
    pthread_mutex_lock(&l->batch_mu);
    if (l->qn == l->qcap || l->batch_stop) {
        pthread_mutex_unlock(&l->batch_mu);
        plugin_error("buffered",
                     l->batch_stop ? "audit backend shut down" : "audit buffer queue blocked");
        return -1;
    }
    char *copy = xmalloc(len ? len : 1);
    memcpy(copy, line, len);
    size_t at = (l->qhead + l->qn) % l->qcap;
    l->q[at] = copy;
    l->qlen[at] = len;
    l->qn++;
    pthread_cond_signal(&l->batch_cv);
    pthread_mutex_unlock(&l->batch_mu);
    return 0;
}

/* ---- the log ------------------------------------------------------------------------ */

audit_log *audit_log_open(const audit_log_opts *o, char **err)
{
    char eb[128];
    if (err)
        *err = NULL;
    if (!o->path || !*o->path)
        return NULL;
    char *verr = NULL;
    if (audit_log_opts_validate(o, &verr) < 0) {
        if (err)
            *err = verr;
        else
            free(verr);
        return NULL;
    }
    audit_log *l = xcalloc(1, sizeof *l);
    l->format = o->format;
    l->mode = o->mode;
    l->max_backups = o->max_backups;
    l->max_age_days = o->max_age_days;
    l->compress = o->compress;
    l->fd = -1;
    l->path = xstrdup(o->path);
    l->dir = dir_of(o->path);
    const char *base = strrchr(o->path, '/') ? strrchr(o->path, '/') + 1 : o->path;
    const char *dot = strrchr(base, '.');
    l->ext = xstrdup(dot ? dot : "");
    l->prefix = xasprintf("%.*s-", (int)(dot ? (size_t)(dot - base) : strlen(base)), base);
    l->max = o->max_bytes ? (int64_t)o->max_bytes : (int64_t)o->max_size_mb * MEGABYTE;
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->mill_mu, NULL);
    pthread_cond_init(&l->mill_cv, NULL);
    pthread_mutex_init(&l->batch_mu, NULL);
    pthread_cond_init(&l->batch_cv, NULL);

    if (!strcmp(o->path, "-")) {
        l->is_stdout = true;
        l->fd = STDOUT_FILENO;
    } else {
        /* ensureLogFile: the directory and the file, or fail now. */
        char *failed = NULL;
        int fd = -1;
        if (mkdir_all(l->dir, 0700, &failed) < 0) {
            if (err)
                *err =
                    xasprintf("ensureLogFile: mkdir %s: %s", failed, go_err(errno, eb, sizeof eb));
            free(failed);
        } else if ((fd = open(l->path, O_CREAT | O_APPEND | O_RDWR | O_CLOEXEC, 0600)) < 0) {
            if (err)
                *err =
                    xasprintf("ensureLogFile: open %s: %s", l->path, go_err(errno, eb, sizeof eb));
        }
        if (fd < 0) {
            audit_log_close(l);
            return NULL;
        }
        close(fd);
        if (o->max_size_mb == 0) {
            l->fd = open(l->path, O_APPEND | O_WRONLY | O_CLOEXEC);
            if (l->fd < 0) {
                if (err)
                    *err = xasprintf("open %s: %s", l->path, go_err(errno, eb, sizeof eb));
                audit_log_close(l);
                return NULL;
            }
        } else {
            l->rotating = true;
            if (l->max_backups || l->max_age_days || l->compress) {
                if (pthread_create(&l->mill, NULL, mill_main, l) == 0)
                    l->mill_on = true;
                else
                    CKUBE_ERROR("audit log: no thread for removing old files");
            }
        }
    }
    if (l->mode == AUDIT_LOG_MODE_BATCH) {
        l->qcap = (size_t)o->batch_buffer_size;
        l->q = xcalloc(l->qcap, sizeof *l->q);
        l->qlen = xcalloc(l->qcap, sizeof *l->qlen);
        if (pthread_create(&l->batch, NULL, batch_main, l) != 0) {
            if (err)
                *err = xstrdup("audit log: cannot start the batch writer thread");
            audit_log_close(l);
            return NULL;
        }
        l->batch_on = true;
    }
    return l;
}

audit_log_format audit_log_get_format(const audit_log *l)
{
    return l->format;
}

int audit_log_write(audit_log *l, const char *line, size_t len)
{
    if (l->batch_on)
        return enqueue(l, line, len);
    return write_line(l, line, len);
}

int audit_log_write_event(audit_log *l, const audit_event *e)
{
    size_t len;
    char *line = l->format == AUDIT_LOG_FORMAT_LEGACY ? audit_event_encode_legacy(e, &len)
                                                      : audit_event_encode(e, &len);
    int rc = audit_log_write(l, line, len);
    free(line);
    return rc;
}

void audit_log_close(audit_log *l)
{
    if (!l)
        return;
    if (l->batch_on) {
        pthread_mutex_lock(&l->batch_mu);
        l->batch_stop = true;
        pthread_cond_signal(&l->batch_cv);
        pthread_mutex_unlock(&l->batch_mu);
        pthread_join(l->batch, NULL);
    }
    if (l->mill_on) {
        pthread_mutex_lock(&l->mill_mu);
        l->mill_stop = true;
        pthread_cond_signal(&l->mill_cv);
        pthread_mutex_unlock(&l->mill_mu);
        pthread_join(l->mill, NULL);
    }
    if (l->fd >= 0 && !l->is_stdout)
        close(l->fd);
    free(l->q);
    free(l->qlen);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->mill_mu);
    pthread_cond_destroy(&l->mill_cv);
    pthread_mutex_destroy(&l->batch_mu);
    pthread_cond_destroy(&l->batch_cv);
    free(l->path);
    free(l->dir);
    free(l->prefix);
    free(l->ext);
    free(l);
}
