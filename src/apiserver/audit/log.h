/* log.h - the audit log backend (--audit-log-*), as kube-apiserver's
 * (k8s.io/apiserver/plugin/pkg/audit/log, pkg/server/options/audit.go)
 * with its file rotation, which upstream delegates to lumberjack v2
 * (gopkg.in/natefinch/lumberjack.v2):
 *
 *  - path "-" is standard output (never rotated); any other path gets its
 *    directories (0700) and the file (0600) made at open, so a bad path
 *    fails the start-up as upstream's ensureLogFile does;
 *  - max_size_mb 0: the file is only appended to; else, before a write
 *    that would take the file past max_size_mb MiB, the file is renamed
 *    to NAME-<UTC time>.EXT (audit-2026-11-27T09-00-00.000.log, lumberjack's
 *    format and its default of UTC) and a new one started with the old
 *    one's mode; a single line longer than the limit is dropped ("write
 *    length N exceeds maximum file size M"). At the first write an
 *    existing file at least that full is rotated first (lumberjack's
 *    openExistingOrNew);
 *  - after each rotation (and at the first write), a background thread
 *    ("the mill") removes the old files beyond the max_backups newest
 *    and those whose name says they are older than max_age_days days,
 *    then gzips the remaining ones (NAME-<time>.EXT.gz) when compress is
 *    set; 0 means no such limit. Old files are found by name in the
 *    file's directory, whoever wrote them, as lumberjack does;
 *  - a rotation never overwrites an old file: when two rotations fall in
 *    one millisecond the later name is moved on by a millisecond
 *    (lumberjack would replace the earlier file);
 *  - mode: blocking and blocking-strict write in the caller's thread (the
 *    two differ only in what the request path does with a failure:
 *    blocking-strict fails a request whose RequestReceived event was not
 *    written); batch copies the line into a queue of batch_buffer_size
 *    lines written by a thread of the log's own, and drops it when the
 *    queue is full ("audit buffer queue blocked"), as upstream's buffered
 *    backend does.
 *
 * Each line goes to the file with one write(2) under the log's mutex, so
 * lines from any number of threads never interleave, and nothing is held
 * back in memory: a line is in the kernel when audit_log_write returns
 * (blocking modes) or when audit_log_close returns (batch). There is no
 * fsync, as upstream has none. A failed write is logged ("Error in audit
 * plugin 'log' affecting 1 audit events: ...") and reported to the caller.
 *
 * Thread-safety: audit_log_write and audit_log_write_event may be called
 * from any number of threads; audit_log_open and audit_log_close from one
 * thread, with no write running or starting. */
#ifndef CKUBE_APISERVER_AUDIT_LOG_H
#define CKUBE_APISERVER_AUDIT_LOG_H

#include <stdbool.h>
#include <stddef.h>

#include "apiserver/audit/event.h"

typedef enum audit_log_format {
    AUDIT_LOG_FORMAT_JSON = 0,   /* "json": one Event as JSON a line */
    AUDIT_LOG_FORMAT_LEGACY = 1, /* "legacy": audit_event_encode_legacy */
} audit_log_format;

typedef enum audit_log_mode {
    AUDIT_LOG_MODE_BLOCKING = 0,
    AUDIT_LOG_MODE_BLOCKING_STRICT = 1,
    AUDIT_LOG_MODE_BATCH = 2,
} audit_log_mode;

/* The flags, with upstream's names and defaults (audit_log_opts_init). */
typedef struct audit_log_opts {
    const char *path;          /* --audit-log-path; NULL or "": no log backend */
    int max_age_days;          /* --audit-log-maxage (366) */
    int max_backups;           /* --audit-log-maxbackup (100) */
    int max_size_mb;           /* --audit-log-maxsize (100) */
    audit_log_format format;   /* --audit-log-format (json) */
    bool compress;             /* --audit-log-compress (false) */
    audit_log_mode mode;       /* --audit-log-mode (blocking) */
    int batch_buffer_size;     /* --audit-log-batch-buffer-size (10000) */
    int batch_max_size;        /* --audit-log-batch-max-size (1): checked, then unused */
    const char *group_version; /* --audit-log-version ("audit.k8s.io/v1") */
    /* Tests: the rotation limit in bytes, instead of max_size_mb MiB,
     * when not 0 (max_size_mb must still be non-zero to rotate). */
    size_t max_bytes;
} audit_log_opts;

/* Fills *o with upstream's defaults (borrowed static strings). */
void audit_log_opts_init(audit_log_opts *o);

/* Parses --audit-log-format and --audit-log-mode values. 0, or -1 with
 * *err (malloc'd) in upstream's words: `invalid audit log format xml,
 * allowed formats are "legacy,json"`, `invalid audit log mode x, allowed
 * modes are "batch,blocking,blocking-strict"`. */
int audit_log_parse_format(const char *s, audit_log_format *out, char **err);
int audit_log_parse_mode(const char *s, audit_log_mode *out, char **err);

/* Upstream's AuditLogOptions.Validate (only when a path is set): the
 * batch buffer and batch size positive in batch mode, the group version
 * audit.k8s.io/v1, no negative maxage, maxbackup or maxsize
 * ("--audit-log-maxage -1 can't be a negative number"). 0, or -1 with
 * *err (malloc'd): one message, or several as "[a, b]". */
int audit_log_opts_validate(const audit_log_opts *o, char **err);

typedef struct audit_log audit_log;

/* Opens the log backend `o` describes (o and its strings are copied).
 * NULL with *err (malloc'd) when the file or its directory cannot be
 * made ("ensureLogFile: open /x/audit.log: permission denied"), or the
 * options do not validate. With no path the backend is off: NULL and
 * *err NULL. */
audit_log *audit_log_open(const audit_log_opts *o, char **err);

/* The format the log was opened with (the caller may encode itself). */
audit_log_format audit_log_get_format(const audit_log *l);

/* Writes one line (`len` bytes, borrowed; a newline is added when it
 * does not end in one). 0 when written (or queued, in batch mode), -1
 * when dropped (already logged). */
int audit_log_write(audit_log *l, const char *line, size_t len);

/* Encodes `e` in the log's format and writes it: audit_log_write's
 * result. */
int audit_log_write_event(audit_log *l, const audit_event *e);

/* Writes what batch mode still queues, waits for the mill's work to end,
 * closes the file and frees the log (NULL is fine). After a clean close
 * every line accepted is in the file. */
void audit_log_close(audit_log *l);

#endif
