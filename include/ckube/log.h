/* ckube/log.h - klog-format logging with -v levels.
 *
 * Lines look exactly like Kubernetes components' logs:
 *   I1121 18:34:11.123456   12345 server.c:84] Serving on 127.0.0.1:6443
 * Severity letter, month+day, wall time with microseconds, thread id, the
 * source file and line, then the message. Output goes to stderr.
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
/* CKUBE_V(2, "fmt", ...) logs at info severity when verbosity >= 2. */
#define CKUBE_V(level, ...)                                                                        \
    do {                                                                                           \
        if (ckube_log_verbosity() >= (level))                                                      \
            ckube_log_write(CKUBE_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__);                      \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
