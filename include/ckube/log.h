/* ckube/log.h - klog-format logging with -v levels.
 *
 * Lines look exactly like Kubernetes components' logs:
 *   I1121 18:34:11.123456   12345 server.c:84] Serving on 127.0.0.1:6443
 * Severity letter, month+day, wall time with microseconds, thread id, the
 * source file and line, then the message. Output goes to stderr (or a
 * --log-file, as klog's flags say).
 */
#ifndef CKUBE_LOG_H
#define CKUBE_LOG_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

enum ckube_log_severity {
    CKUBE_LOG_INFO = 0,
    CKUBE_LOG_WARNING = 1,
    CKUBE_LOG_ERROR = 2,
    CKUBE_LOG_FATAL = 3,
};

/* Sets the verbosity: CKUBE_V(n) lines print when n <= level. Default 0.
 * Thread-safe (an atomic store). */
void ckube_log_set_verbosity(int level);
int ckube_log_verbosity(void);

/* Whether CKUBE_V(level) in source `file` prints: the verbosity is at
 * least `level`, or a --vmodule pattern matching the file's base name
 * (without its extension, as klog matches Go files) gives it a level at
 * least `level` (vmodule only raises, as klog's). */
int ckube_log_v(int level, const char *file);

/* klog's flags, as Kubernetes components and klog-based tools take them:
 *   v                level (a 32-bit integer)
 *   vmodule          comma-separated pattern=N (glob on the file's base name)
 *   log-file         a file to write to; as in klog, it takes effect only
 *                    with logtostderr=false (logtostderr defaults to true)
 *   logtostderr      bool, default true: log to stderr only
 *   alsologtostderr  bool: with logtostderr=false, to stderr as well
 * Sets flag `name` (without dashes) to `value` (NULL for a bool flag given
 * bare: true). Returns 0; or -1 with *err (when err is non-NULL) a malloc'd
 * message in pflag's words: `invalid argument "x" for "-v, --v" flag:
 * strconv.ParseInt: parsing "x": invalid syntax`. Call while one thread
 * runs (start-up). */
int ckube_log_set_flag(const char *name, const char *value, char **err);

/* The flags above as getopt_long(3) entries, for a program's option table
 * (include <getopt.h>); -v stays the short option 'v'. ckube_log_getopt
 * handles what getopt_long returned for them (`-v=4` too, which getopt
 * reads as -v with "=4"): 1 when `ch` was a logging flag and it was set,
 * 0 when `ch` is not one of them, -1 on a bad value (*err as above). */
#define CKUBE_LOG_OPT_VMODULE 0x4c01
#define CKUBE_LOG_OPT_LOG_FILE 0x4c02
#define CKUBE_LOG_OPT_LOGTOSTDERR 0x4c03
#define CKUBE_LOG_OPT_ALSOLOGTOSTDERR 0x4c04
/* clang-format off */
#define CKUBE_LOG_GETOPT_OPTIONS                                                  \
    {"v", required_argument, NULL, 'v'},                                          \
    {"vmodule", required_argument, NULL, CKUBE_LOG_OPT_VMODULE},                  \
    {"log-file", required_argument, NULL, CKUBE_LOG_OPT_LOG_FILE},                \
    {"logtostderr", optional_argument, NULL, CKUBE_LOG_OPT_LOGTOSTDERR},          \
    {"alsologtostderr", optional_argument, NULL, CKUBE_LOG_OPT_ALSOLOGTOSTDERR}
/* clang-format on */
int ckube_log_getopt(int ch, const char *arg, char **err);

/* The logging flags in effect, as arguments that give another ckube
 * program the same logging ("--v=2", "--vmodule=...", ...): a
 * NULL-terminated array owned by the log module, valid until the next
 * ckube_log_set_flag. */
const char *const *ckube_log_flag_args(void);

/* Writes one line. `file` is the source path (only its base name is
 * printed). The line is written with one write(2) so concurrent threads
 * never interleave. */
void ckube_log_write(enum ckube_log_severity sev, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void ckube_log_vwrite(enum ckube_log_severity sev, const char *file, int line, const char *fmt,
                      va_list ap);

#define CKUBE_INFO(...) ckube_log_write(CKUBE_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define CKUBE_WARN(...) ckube_log_write(CKUBE_LOG_WARNING, __FILE__, __LINE__, __VA_ARGS__)
#define CKUBE_ERROR(...) ckube_log_write(CKUBE_LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__)
/* CKUBE_V(2, "fmt", ...) logs at info severity when verbosity >= 2 (or
 * --vmodule raises this file's). */
#define CKUBE_V(level, ...)                                                                        \
    do {                                                                                           \
        if (ckube_log_v((level), __FILE__))                                                        \
            ckube_log_write(CKUBE_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__);                      \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
