/* klog-compatible logging; see ckube/log.h. */
#include "ckube/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static atomic_int verbosity;

void ckube_log_set_verbosity(int level)
{
    atomic_store(&verbosity, level);
}

int ckube_log_verbosity(void)
{
    return atomic_load_explicit(&verbosity, memory_order_relaxed);
}

void ckube_log_vwrite(enum ckube_log_severity sev, const char *file, int line, const char *fmt,
                      va_list ap)
{
    static const char letters[] = "IWEF";
    char buf[4096];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    int n = snprintf(buf, sizeof buf, "%c%02d%02d %02d:%02d:%02d.%06ld %7ld %s:%d] ",
                     letters[sev & 3], tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (long)tv.tv_usec, (long)syscall(SYS_gettid), base, line);
    if (n < 0)
        return;
    if ((size_t)n < sizeof buf)
        n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    if ((size_t)n >= sizeof buf - 1)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
}

void ckube_log_write(enum ckube_log_severity sev, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ckube_log_vwrite(sev, file, line, fmt, ap);
    va_end(ap);
}
