/* test_storage_crash.c - an acknowledged SQLite write survives kill -9.
 *
 * A child process opens the store and keeps several threads submitting
 * creates; each done callback with result OK writes the key to a pipe (one
 * write(2) per line, so lines never interleave). The parent SIGKILLs the
 * child in the middle of the burst, reads every acknowledgement that made it
 * into the pipe, reopens the store and checks that each acknowledged key is
 * there with its value. Several rounds run on the same directory, so
 * recovery of a store that was itself recovered is covered too. */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "storage/storage.h"
#include "storage/sqlite/sqlite.h"

#define ROUNDS 3
#define KILL_AFTER 1500 /* acknowledgements before the SIGKILL */
#define CHILD_THREADS 6
#define WAVE 48 /* ops in flight per child thread */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* The value stored under a key: derived from it, longer than the key, and
 * with a NUL inside, so that a torn or misplaced value is detected. */
static size_t value_for(const char *key, char *buf, size_t len)
{
    int n = snprintf(buf, len, "value-of:%s:", key);
    size_t k = (size_t)n;
    buf[k++] = '\0';
    for (size_t i = 0; i < 64 && k < len; i++)
        buf[k++] = key[i % strlen(key)];
    return k;
}

/* ---- child ---- */

struct child_op {
    storage_op op;
    char key[48];
    char value[160];
};

struct child_thread {
    storage *st;
    int round, id, fd;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
};

static void child_done(storage_op *op, void *arg)
{
    struct child_thread *t = arg;
    if (op->result == STORAGE_OK) {
        char line[64];
        int n = snprintf(line, sizeof line, "%s\n", op->key);
        if (write(t->fd, line, (size_t)n) != n)
            _exit(3);
    }
    pthread_mutex_lock(&t->mu);
    t->pending--;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static void *child_thread_main(void *p)
{
    struct child_thread *t = p;
    struct child_op *ops = calloc(WAVE, sizeof *ops);
    if (!ops)
        _exit(4);
    for (long wave = 0;; wave++) {
        t->pending = WAVE;
        for (int i = 0; i < WAVE; i++) {
            struct child_op *o = &ops[i];
            snprintf(o->key, sizeof o->key, "/crash/r%d/t%d/%06ld", t->round, t->id,
                     wave * WAVE + i);
            size_t vlen = value_for(o->key, o->value, sizeof o->value);
            o->op = (storage_op){.type = STORAGE_OP_CREATE,
                                 .key = o->key,
                                 .value = o->value,
                                 .value_len = vlen,
                                 .done = child_done,
                                 .arg = t};
            if (storage_submit(t->st, &o->op) != STORAGE_OK)
                _exit(5);
        }
        pthread_mutex_lock(&t->mu);
        while (t->pending > 0)
            pthread_cond_wait(&t->cv, &t->mu);
        pthread_mutex_unlock(&t->mu);
    }
    return NULL;
}

static _Noreturn void child_main(const char *dir, int round, int fd)
{
    char *err = NULL;
    storage *st = storage_sqlite_open(dir, &err);
    if (!st) {
        fprintf(stderr, "child: %s\n", err ? err : "?");
        _exit(2);
    }
    struct child_thread t[CHILD_THREADS];
    pthread_t th[CHILD_THREADS];
    for (int i = 0; i < CHILD_THREADS; i++) {
        t[i] = (struct child_thread){.st = st, .round = round, .id = i, .fd = fd};
        pthread_mutex_init(&t[i].mu, NULL);
        pthread_cond_init(&t[i].cv, NULL);
        pthread_create(&th[i], NULL, child_thread_main, &t[i]);
    }
    for (;;)
        pause(); /* until SIGKILL */
}

/* ---- parent ---- */

struct acks {
    char **keys;
    size_t n, cap;
};

static void acks_add(struct acks *a, const char *key)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 1024;
        a->keys = realloc(a->keys, a->cap * sizeof *a->keys);
        assert_non_null(a->keys);
    }
    a->keys[a->n] = strdup(key);
    assert_non_null(a->keys[a->n]);
    a->n++;
}

static void acks_free(struct acks *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->keys[i]);
    free(a->keys);
}

/* Runs one child, kills it after KILL_AFTER acks, collects all acks. */
static void crash_round(const char *dir, int round, struct acks *acks)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        child_main(dir, round, p[1]);
    }
    close(p[1]);
    FILE *in = fdopen(p[0], "r");
    assert_non_null(in);
    char line[128];
    bool killed = false;
    size_t start = acks->n;
    while (fgets(line, sizeof line, in)) {
        size_t len = strlen(line);
        assert_true(len > 0 && line[len - 1] == '\n'); /* whole lines only */
        line[len - 1] = '\0';
        acks_add(acks, line);
        if (!killed && acks->n - start >= KILL_AFTER) {
            kill(pid, SIGKILL);
            killed = true;
        }
    }
    fclose(in);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
        fail_msg("child did not die by SIGKILL (status %d): it failed on its own", status);
}

static void check_acks(storage *st, const struct acks *a)
{
    char want[160];
    for (size_t i = 0; i < a->n; i++) {
        storage_kv kv = {0};
        int rc = storage_get(st, a->keys[i], &kv);
        if (rc != STORAGE_OK)
            fail_msg("acknowledged key %s lost after kill -9: %s", a->keys[i],
                     storage_strerror(rc));
        size_t wlen = value_for(a->keys[i], want, sizeof want);
        assert_int_equal(kv.value_len, wlen);
        assert_memory_equal(kv.value, want, wlen);
        assert_int_equal(kv.create_rev, kv.mod_rev);
        storage_kv_release(&kv);
    }
}

struct rev_check {
    size_t n;
    int64_t max_rev;
};

static int count_fn(void *arg, const storage_kv *kv)
{
    struct rev_check *c = arg;
    c->n++;
    if (kv->mod_rev > c->max_rev)
        c->max_rev = kv->mod_rev;
    return 0;
}

static void test_kill9_durability(void **state)
{
    (void)state;
    const char *base = getenv("CKUBE_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0700);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/storage-crash-XXXXXX", base);
    assert_non_null(mkdtemp(dir));

    struct acks all = {0};
    for (int round = 0; round < ROUNDS; round++) {
        crash_round(dir, round, &all);
        char *err = NULL;
        storage *st = storage_sqlite_open(dir, &err);
        if (!st)
            fail_msg("reopen after kill -9: %s", err ? err : "?");
        check_acks(st, &all);
        /* The counter covers every committed write, even unacknowledged
         * ones, and new revisions continue above them. */
        struct rev_check c = {0};
        int64_t rev = 0;
        assert_int_equal(storage_range(st, "/crash/", count_fn, &c, &rev), STORAGE_OK);
        assert_true(c.n >= all.n);
        assert_int_equal(rev, storage_current_rev(st));
        assert_true(rev >= c.max_rev && rev >= (int64_t)c.n);
        print_message("      round %d: %zu acknowledged, %zu present, revision %" PRId64 "\n",
                      round, all.n, c.n, rev);
        storage_close(st);
    }
    acks_free(&all);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_kill9_durability)};
    return cmocka_run_group_tests_name("storage/crash", tests, NULL, NULL);
}
