/* The controller-manager child of `ckube server`: start, reap, restart
 * with back-off, stop. See cm_child.h for the threading contract. */
#include "cmd/cm_child.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckube/json.h"
#include "ckube/log.h"

#define BACKOFF_FIRST_NS 1000000000ull
#define BACKOFF_MAX_NS 30000000000ull
/* A child that lived this long is considered healthy: the next crash
 * restarts after the first delay again. */
#define HEALTHY_RUN_NS 60000000000ull

struct cm_child {
    char **argv;         /* argv[0] = binary; owned, NULL-terminated */
    pid_t pid;           /* 0 when not running */
    uint64_t started_ns; /* when the current child started */
    uint64_t restart_ns; /* when a restart is due; 0 = none pending */
    uint64_t backoff_ns; /* the next delay */
};

char *cm_child_find_binary(void)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return NULL;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash)
        return NULL;
    slash[1] = 0;
    char *path = NULL;
    if (asprintf(&path, "%sckube-controller-manager", self) < 0)
        return NULL;
    if (access(path, X_OK) != 0) {
        free(path);
        return NULL;
    }
    return path;
}

cm_child *cm_child_new(const char *binary, const char *const *args)
{
    size_t n = 0;
    while (args[n])
        n++;
    cm_child *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->argv = calloc(n + 2, sizeof *c->argv);
    if (!c->argv) {
        free(c);
        return NULL;
    }
    c->backoff_ns = BACKOFF_FIRST_NS;
    bool ok = (c->argv[0] = strdup(binary)) != NULL;
    for (size_t i = 0; ok && i < n; i++)
        ok = (c->argv[i + 1] = strdup(args[i])) != NULL;
    if (!ok) {
        cm_child_free(c);
        return NULL;
    }
    return c;
}

/* Runs in the forked child of a multi-threaded process: only
 * async-signal-safe calls until execv. */
static void exec_child(char **argv, pid_t parent)
{
    /* Die with the server's main thread (the one that forked), even when
     * the server is killed with SIGKILL; the check after closes the race
     * with a parent that died before prctl. SIGKILL, not SIGTERM: a
     * server that died without stopping its child leaves the child no API
     * to finish its work through, and the kernel sends the signal again
     * each time the child is handed to another of the dying server's
     * threads, so a SIGTERM arrives several times and its second copy
     * means "exit now" (status 1, sanitizers reporting half-stopped
     * threads) anyway. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(0);
    /* The server blocks SIGTERM/SIGINT/SIGCHLD and ignores SIGPIPE; a mask
     * and ignored dispositions survive execve, so undo both. */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGPIPE, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* The server's descriptors (listeners, the database) are not the
     * child's business, whether or not their owners set O_CLOEXEC. */
    close_range(3, ~0u, 0);
    execv(argv[0], argv);
    static const char msg[] = "ckube server: cannot execute the controller-manager\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
}

int cm_child_start(cm_child *c)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        CKUBE_ERROR("cannot start the controller-manager: fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0)
        exec_child(c->argv, parent);
    c->pid = pid;
    c->started_ns = ckube_monotonic_ns();
    c->restart_ns = 0;
    CKUBE_INFO("controller-manager started as process %d (%s)", (int)pid, c->argv[0]);
    return 0;
}

static void describe_exit(int status, char *buf, size_t n)
{
    if (WIFEXITED(status))
        snprintf(buf, n, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, n, "signal %s", strsignal(WTERMSIG(status)));
    else
        snprintf(buf, n, "status %#x", (unsigned)status);
}

void cm_child_poll(cm_child *c, uint64_t now_ns)
{
    if (c->pid > 0) {
        int status;
        pid_t r = waitpid(c->pid, &status, WNOHANG);
        if (r != c->pid)
            return;
        c->pid = 0;
        if (now_ns - c->started_ns >= HEALTHY_RUN_NS)
            c->backoff_ns = BACKOFF_FIRST_NS;
        char why[64];
        describe_exit(status, why, sizeof why);
        CKUBE_ERROR("controller-manager (process %d) ended with %s; restarting in %llus",
                    (int)r, why, (unsigned long long)(c->backoff_ns / 1000000000ull));
        c->restart_ns = now_ns + c->backoff_ns;
        c->backoff_ns = c->backoff_ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : c->backoff_ns * 2;
        return;
    }
    if (c->restart_ns && now_ns >= c->restart_ns && cm_child_start(c) != 0)
        c->restart_ns = now_ns + c->backoff_ns;
}

long cm_child_timeout_ms(const cm_child *c, uint64_t now_ns)
{
    if (c->pid > 0 || !c->restart_ns)
        return -1;
    if (now_ns >= c->restart_ns)
        return 0;
    return (long)((c->restart_ns - now_ns + 999999) / 1000000);
}

/* Waits up to ms for the child to exit; true once reaped (*status set). */
static bool reap_within(cm_child *c, long ms, int *status)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    uint64_t deadline = ckube_monotonic_ns() + (uint64_t)ms * 1000000ull;
    for (;;) {
        if (waitpid(c->pid, status, WNOHANG) == c->pid)
            return true;
        uint64_t now = ckube_monotonic_ns();
        if (now >= deadline)
            return false;
        /* Wake on SIGCHLD, or at least every 100 ms in case it was
         * consumed elsewhere. */
        uint64_t left = deadline - now;
        if (left > 100000000ull)
            left = 100000000ull;
        struct timespec ts = {.tv_sec = (time_t)(left / 1000000000ull),
                              .tv_nsec = (long)(left % 1000000000ull)};
        sigtimedwait(&chld, NULL, &ts);
    }
}

int cm_child_stop(cm_child *c, long grace_ms)
{
    c->restart_ns = 0;
    if (c->pid <= 0)
        return 0;
    int status = 0;
    kill(c->pid, SIGTERM);
    if (!reap_within(c, grace_ms, &status)) {
        CKUBE_ERROR("controller-manager (process %d) did not stop within %ld ms; killing it",
                    (int)c->pid, grace_ms);
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        c->pid = 0;
        return -1;
    }
    c->pid = 0;
    /* Killed by our SIGTERM itself: a child stopped before it installed
     * its handlers. */
    if ((WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
        (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM))
        return 0;
    char why[64];
    describe_exit(status, why, sizeof why);
    CKUBE_ERROR("controller-manager ended its shutdown with %s", why);
    return -1;
}

void cm_child_free(cm_child *c)
{
    if (!c)
        return;
    for (char **a = c->argv; a && *a; a++)
        free(*a);
    free(c->argv);
    free(c);
}
