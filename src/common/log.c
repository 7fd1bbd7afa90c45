/* klog-compatible logging; see ckube/log.h.
 *
 * The flags follow klog's (k8s.io/klog/v2) meanings and pflag's error
 * words, as Kubernetes components print them. Flags are set at start-up,
 * before other threads run; afterwards the state is only read: the
 * verbosity and whether vmodule is on are atomics, the rest is fixed. */
#include "ckube/log.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static atomic_int verbosity;

/* --vmodule: patterns with their levels (levels of 0 are dropped, as
 * klog drops them). */
struct module_pat {
    char *pattern;
    int level;
};
static struct module_pat *vmodule;
static size_t nvmodule;
static atomic_bool vmodule_on;
static char *vmodule_text; /* as given, for ckube_log_flag_args */

/* Where lines go: klog's logtostderr (default true), alsologtostderr,
 * and log-file (used only when logtostderr is false). */
static bool to_stderr = true, also_to_stderr;
static char *log_file;
static int log_fd = -1;

void ckube_log_set_verbosity(int level)
{
    atomic_store(&verbosity, level);
}

int ckube_log_verbosity(void)
{
    return atomic_load_explicit(&verbosity, memory_order_relaxed);
}

/* The level --vmodule gives `file` (its base name without extension), 0
 * when no pattern matches. The first matching pattern wins, as in klog. */
static int vmodule_level(const char *file)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    char name[256];
    snprintf(name, sizeof name, "%s", base);
    char *dot = strrchr(name, '.');
    if (dot)
        *dot = '\0';
    for (size_t i = 0; i < nvmodule; i++)
        if (fnmatch(vmodule[i].pattern, name, 0) == 0)
            return vmodule[i].level;
    return 0;
}

int ckube_log_v(int level, const char *file)
{
    if (ckube_log_verbosity() >= level)
        return 1;
    return atomic_load_explicit(&vmodule_on, memory_order_relaxed) && vmodule_level(file) >= level;
}

/* ---- flags ---- */

static int flag_error(char **err, const char *value, const char *flag, const char *why)
{
    if (err && asprintf(err, "invalid argument \"%s\" for \"%s\" flag: %s", value, flag, why) < 0)
        *err = NULL;
    return -1;
}

/* Go's strconv.ParseInt(s, 10, 32); 0 or the error text (static). */
static const char *parse_int32(const char *s, int *out, char *why, size_t n)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    /* Go takes no spaces and no empty string; strtol would skip spaces. */
    if (!*s || *s == ' ' || *s == '\t' || *end) {
        snprintf(why, n, "strconv.ParseInt: parsing \"%s\": invalid syntax", s);
        return why;
    }
    if (errno == ERANGE || v < INT32_MIN || v > INT32_MAX) {
        snprintf(why, n, "strconv.ParseInt: parsing \"%s\": value out of range", s);
        return why;
    }
    *out = (int)v;
    return NULL;
}

/* Go's strconv.ParseBool. */
static int parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (!strcmp(s, yes[i])) {
            *out = true;
            return 0;
        }
        if (!strcmp(s, no[i])) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

static void vmodule_free(struct module_pat *pats, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(pats[i].pattern);
    free(pats);
}

/* klog's moduleSpec.Set: "recordio=2,file=1,gfs*=3". */
static int set_vmodule(const char *value, char **err)
{
    static const char syntax[] = "syntax error: expect comma-separated list of filename=N";
    char *copy = strdup(value);
    if (!copy)
        return flag_error(err, value, "--vmodule", "out of memory");
    struct module_pat *pats = NULL;
    size_t n = 0;
    const char *why = NULL;
    char buf[128];
    for (char *save = NULL, *pat = strtok_r(copy, ",", &save); pat && !why;
         pat = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(pat, '=');
        if (!eq || eq == pat || !eq[1] || strchr(eq + 1, '=')) {
            why = syntax;
            break;
        }
        *eq = '\0';
        int level;
        if (parse_int32(eq + 1, &level, buf, sizeof buf)) {
            why = syntax;
            break;
        }
        if (level < 0) {
            why = "negative value for vmodule level";
            break;
        }
        if (level == 0)
            continue; /* klog: harmless, and not worth a lookup */
        struct module_pat *grown = realloc(pats, (n + 1) * sizeof *pats);
        char *p = strdup(pat);
        if (!grown || !p) {
            free(p);
            if (grown)
                pats = grown;
            why = "out of memory";
            break;
        }
        pats = grown;
        pats[n].pattern = p;
        pats[n++].level = level;
    }
    free(copy);
    if (why) {
        vmodule_free(pats, n);
        return flag_error(err, value, "--vmodule", why);
    }
    char *text = strdup(value);
    if (!text) {
        vmodule_free(pats, n);
        return flag_error(err, value, "--vmodule", "out of memory");
    }
    atomic_store(&vmodule_on, false);
    vmodule_free(vmodule, nvmodule);
    free(vmodule_text);
    vmodule = pats;
    nvmodule = n;
    vmodule_text = text;
    atomic_store(&vmodule_on, n > 0);
    return 0;
}

/* Opens the log file (appending, as klog's log_file does) once
 * logtostderr is false and a file is named. */
static int update_output(char **err)
{
    if (log_fd >= 0) {
        close(log_fd);
        log_fd = -1;
    }
    if (to_stderr || !log_file || !*log_file)
        return 0;
    log_fd = open(log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        if (err && asprintf(err, "cannot open log file %s: %s", log_file, strerror(errno)) < 0)
            *err = NULL;
        return -1;
    }
    return 0;
}

int ckube_log_set_flag(const char *name, const char *value, char **err)
{
    if (err)
        *err = NULL;
    char why[160];
    if (!strcmp(name, "v")) {
        int level;
        if (!value || parse_int32(value, &level, why, sizeof why))
            return flag_error(err, value ? value : "", "-v, --v",
                              value ? why : "flag needs an argument");
        ckube_log_set_verbosity(level);
        return 0;
    }
    if (!strcmp(name, "vmodule"))
        return set_vmodule(value ? value : "", err);
    if (!strcmp(name, "log-file")) {
        char *f = strdup(value ? value : "");
        if (!f)
            return flag_error(err, value, "--log-file", "out of memory");
        free(log_file);
        log_file = f;
        return update_output(err);
    }
    bool b = true;
    if (!strcmp(name, "logtostderr") || !strcmp(name, "alsologtostderr")) {
        if (value && parse_bool(value, &b)) {
            snprintf(why, sizeof why, "strconv.ParseBool: parsing \"%s\": invalid syntax", value);
            return flag_error(err, value, name[0] == 'l' ? "--logtostderr" : "--alsologtostderr",
                              why);
        }
        if (name[0] == 'l')
            to_stderr = b;
        else
            also_to_stderr = b;
        return update_output(err);
    }
    if (err && asprintf(err, "unknown flag: --%s", name) < 0)
        *err = NULL;
    return -1;
}

int ckube_log_getopt(int ch, const char *arg, char **err)
{
    const char *name;
    switch (ch) {
    case 'v':
        name = "v";
        /* getopt reads `-v=4` as -v with "=4"; pflag takes it as 4. */
        if (arg && *arg == '=')
            arg++;
        break;
    case CKUBE_LOG_OPT_VMODULE:
        name = "vmodule";
        break;
    case CKUBE_LOG_OPT_LOG_FILE:
        name = "log-file";
        break;
    case CKUBE_LOG_OPT_LOGTOSTDERR:
        name = "logtostderr";
        break;
    case CKUBE_LOG_OPT_ALSOLOGTOSTDERR:
        name = "alsologtostderr";
        break;
    default:
        return 0;
    }
    return ckube_log_set_flag(name, arg, err) < 0 ? -1 : 1;
}

const char *const *ckube_log_flag_args(void)
{
    static char v[32], vm[4096], lf[4096], ts[32], ats[32];
    static const char *args[6];
    size_t n = 0;
    snprintf(v, sizeof v, "--v=%d", ckube_log_verbosity());
    args[n++] = v;
    if (vmodule_text && *vmodule_text) {
        snprintf(vm, sizeof vm, "--vmodule=%s", vmodule_text);
        args[n++] = vm;
    }
    if (log_file && *log_file) {
        snprintf(lf, sizeof lf, "--log-file=%s", log_file);
        args[n++] = lf;
    }
    if (!to_stderr) {
        snprintf(ts, sizeof ts, "--logtostderr=false");
        args[n++] = ts;
    }
    if (also_to_stderr) {
        snprintf(ats, sizeof ats, "--alsologtostderr=true");
        args[n++] = ats;
    }
    args[n] = NULL;
    return args;
}

/* ---- writing ---- */

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
    /* One write(2) per line: lines of concurrent threads never mix. */
    ssize_t w;
    if (log_fd >= 0) {
        w = write(log_fd, buf, (size_t)n);
        if (!also_to_stderr)
            return;
    }
    w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
}

void ckube_log_write(enum ckube_log_severity sev, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ckube_log_vwrite(sev, file, line, fmt, ap);
    va_end(ap);
}
