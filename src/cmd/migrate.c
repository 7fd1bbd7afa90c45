/* `ckube migrate`: copies every object of a data directory's SQLite store
 * into an empty etcd, through the storage interface, so that `ckube
 * server --storage etcd` serves the same cluster.
 *
 * What is kept: each object's value as stored, so its uid,
 * creationTimestamp and everything else in metadata; and the order of
 * resourceVersions (objects are written one at a time in increasing
 * SQLite mod revision, so etcd's revisions grow in the same order). What
 * changes: the numbers (etcd counts its own revisions), so clients must
 * relist, as after any etcd restore; and the history (deleted objects and
 * old versions are not copied, as a compaction would drop them). */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckube/log.h"
#include "cmd/cmd.h"
#include "cmd/storage_open.h"
#include "common/xalloc.h"
#include "storage/sqlite/sqlite.h"
#include "storage/storage.h"

/* The keyspace of ckube's objects in SQLite (and the server's internal
 * keys everywhere); in etcd they are laid out under --etcd-prefix as
 * kube-apiserver's (storage/etcd/keymap.h). */
#define MIGRATE_PREFIX "/registry/"

static void migrate_usage(FILE *f)
{
    fprintf(f, "Usage: ckube migrate [--data-dir DIR] --etcd-servers URL[,URL...]\n"
               "                     [--etcd-prefix /registry] [--etcd-cafile F --etcd-certfile F\n"
               "                     --etcd-keyfile F]\n\n"
               "Copies every object of DIR's SQLite store into etcd, for `ckube server\n"
               "--storage etcd --etcd-servers URL` to serve. Stop the server on DIR first\n"
               "(migrate takes its lock): writes made after the copy would be lost. The etcd\n"
               "prefix must hold no keys.\n\n"
               "Objects keep their uids and creationTimestamps, and sorting them by\n"
               "resourceVersion gives the same order as before; the resourceVersions\n"
               "themselves become etcd's revisions, so clients must relist (as after any\n"
               "etcd restore). History (old versions, deletions) is not copied. DIR/pki is\n"
               "not touched: start the etcd-backed server with the same --data-dir (or a copy\n"
               "of DIR/pki) to keep the cluster's CA and ServiceAccount key.\n\n"
               "Flags:\n"
               "  --data-dir DIR           the SQLite server's data directory (default ./.ckube)\n"
               "  --etcd-servers URL,...   etcd members, as for ckube server\n"
               "  --etcd-prefix PREFIX     where objects go (default /registry), as the\n"
               "                           server's --etcd-prefix\n"
               "  --etcd-cafile, --etcd-certfile, --etcd-keyfile PATH\n"
               "                           TLS to etcd\n"
               "  -v, --v N                log verbosity (klog levels)\n"
               "  -h, --help               this help\n");
}

/* ---- the objects, read from SQLite ---- */

/* Every live object of the store, copied out (owned: free with
 * objects_free). */
typedef struct objects {
    storage_kv *kv;
    size_t n, cap;
    const char *bad_key; /* borrowed from kv: the first outside MIGRATE_PREFIX */
} objects;

static int collect(void *arg, const storage_kv *kv)
{
    objects *o = arg;
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 1024;
        o->kv = xrealloc(o->kv, o->cap * sizeof *o->kv);
    }
    storage_kv *c = &o->kv[o->n++];
    c->key = xstrdup(kv->key);
    c->value = xmalloc(kv->value_len + 1);
    memcpy(c->value, kv->value, kv->value_len);
    c->value[kv->value_len] = '\0';
    c->value_len = kv->value_len;
    c->create_rev = kv->create_rev;
    c->mod_rev = kv->mod_rev;
    if (!o->bad_key && strncmp(kv->key, MIGRATE_PREFIX, strlen(MIGRATE_PREFIX)) != 0)
        o->bad_key = c->key;
    return 0;
}

static void objects_free(objects *o)
{
    for (size_t i = 0; i < o->n; i++)
        storage_kv_release(&o->kv[i]);
    free(o->kv);
}

static int by_mod_rev(const void *a, const void *b)
{
    int64_t x = ((const storage_kv *)a)->mod_rev, y = ((const storage_kv *)b)->mod_rev;
    return (x > y) - (x < y);
}

/* ---- etcd ---- */

/* Stops the range at the first key and keeps it (malloc'd). */
static int first_key(void *arg, const storage_kv *kv)
{
    *(char **)arg = xstrdup(kv->key);
    return 1;
}

/* A write submitted and waited for: the interface is asynchronous, and
 * only one write in flight keeps etcd's revisions in our order (the etcd
 * backend runs queued writes on several workers at once). */
typedef struct sync_op {
    storage_op op;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} sync_op;

static void sync_done(storage_op *op, void *arg)
{
    sync_op *s = arg;
    pthread_mutex_lock(&s->mu);
    s->done = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Creates kv's key in `st`. Returns a STORAGE_ERR_* or OK, and the
 * write's revision in *rev. */
static int create_one(storage *st, const storage_kv *kv, int64_t *rev)
{
    sync_op s = {.op = {.type = STORAGE_OP_CREATE,
                        .key = kv->key,
                        .value = kv->value,
                        .value_len = kv->value_len,
                        .done = sync_done}};
    s.op.arg = &s;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    int rc = storage_submit(st, &s.op);
    if (rc == STORAGE_OK) {
        pthread_mutex_lock(&s.mu);
        while (!s.done)
            pthread_cond_wait(&s.cv, &s.mu);
        pthread_mutex_unlock(&s.mu);
        rc = s.op.result;
        *rev = s.op.rev;
    }
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    return rc;
}

/* ---- the command ---- */

typedef struct migrate_opts {
    const char *data_dir, *servers, *prefix;
    etcd_tls tls;
} migrate_opts;

enum { OPT_SERVERS_ = 256, OPT_PREFIX_, OPT_CAFILE_, OPT_CERTFILE_, OPT_KEYFILE_ };

/* Parses the flags into *o. Returns -1 to go on, else the exit code. */
static int parse_flags(int argc, char **argv, migrate_opts *o)
{
    static const struct option opts[] = {
        {"data-dir", required_argument, NULL, 'd'},
        {"etcd-servers", required_argument, NULL, OPT_SERVERS_},
        {"etcd-prefix", required_argument, NULL, OPT_PREFIX_},
        {"etcd-cafile", required_argument, NULL, OPT_CAFILE_},
        {"etcd-certfile", required_argument, NULL, OPT_CERTFILE_},
        {"etcd-keyfile", required_argument, NULL, OPT_KEYFILE_},
        CKUBE_LOG_GETOPT_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
        char *lerr = NULL;
        int logflag = ckube_log_getopt(c, optarg, &lerr);
        if (logflag < 0) {
            fprintf(stderr, "ckube migrate: %s\n", lerr ? lerr : "out of memory");
            free(lerr);
            return 2;
        }
        if (logflag > 0)
            continue;
        switch (c) {
        case 'd':
            o->data_dir = optarg;
            break;
        case OPT_SERVERS_:
            o->servers = optarg;
            break;
        case OPT_PREFIX_:
            o->prefix = optarg;
            break;
        case OPT_CAFILE_:
            o->tls.ca_file = optarg;
            break;
        case OPT_CERTFILE_:
            o->tls.cert_file = optarg;
            break;
        case OPT_KEYFILE_:
            o->tls.key_file = optarg;
            break;
        case 'h':
            migrate_usage(stdout);
            return 0;
        default:
            migrate_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ckube migrate: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    if (!o->servers) {
        fprintf(stderr, "ckube migrate: --etcd-servers is required\n");
        return 2;
    }
    return -1;
}

/* Opens the SQLite store, refusing clearly when it is missing or a server
 * runs on it. NULL after saying why. */
static storage *open_sqlite(const char *dir)
{
    char db[4096];
    struct stat st;
    snprintf(db, sizeof db, "%s/" STORAGE_SQLITE_DB, dir);
    if (stat(db, &st) != 0) { /* storage_sqlite_open would make an empty one */
        fprintf(stderr, "ckube migrate: no ckube store at %s\n", db);
        return NULL;
    }
    char *err = NULL;
    bool busy = false;
    int lock = storage_sqlite_lock(dir, &busy, &err);
    if (lock < 0) {
        if (busy)
            fprintf(stderr,
                    "ckube migrate: a ckube server is running on %s; stop it first (writes "
                    "after the copy would be lost)\n",
                    dir);
        else
            fprintf(stderr, "ckube migrate: %s\n", err ? err : "cannot lock the store");
        free(err);
        return NULL;
    }
    /* Released for storage_sqlite_open to take (flock locks are per open
     * file, so this process would conflict with itself). */
    close(lock);
    storage *sq = storage_sqlite_open(dir, &err);
    if (!sq) {
        fprintf(stderr, "ckube migrate: %s\n", err ? err : "cannot open the store");
        free(err);
    }
    return sq;
}

/* Fails unless etcd holds no key under the prefix: objects already there
 * would clash with ours, or be another cluster's. */
static int check_empty(storage *et, const char *servers, const char *prefix)
{
    char *key = NULL;
    int rc = storage_range(et, "", first_key, &key, NULL);
    if (rc != STORAGE_OK) {
        fprintf(stderr, "ckube migrate: reading etcd at %s: %s\n", servers, storage_strerror(rc));
        return -1;
    }
    if (key) {
        fprintf(stderr,
                "ckube migrate: etcd at %s already holds objects under %s (%s, ...); migrate "
                "only into an empty prefix\n",
                servers, prefix, key);
        free(key);
        return -1;
    }
    return 0;
}

/* Writes the objects to etcd in increasing SQLite mod revision. Returns
 * the number written; *first and *last get the etcd revisions. */
static size_t copy_objects(storage *et, objects *o, int64_t *first, int64_t *last)
{
    qsort(o->kv, o->n, sizeof *o->kv, by_mod_rev);
    size_t i;
    for (i = 0; i < o->n; i++) {
        int64_t rev = 0;
        int rc = create_one(et, &o->kv[i], &rev);
        if (rc != STORAGE_OK) {
            fprintf(stderr, "ckube migrate: writing %s to etcd: %s\n", o->kv[i].key,
                    storage_strerror(rc));
            break;
        }
        if (i == 0)
            *first = rev;
        *last = rev;
    }
    return i;
}

/* Reads SQLite, checks etcd, copies. The exit code. */
static int migrate(storage *sq, storage *et, const migrate_opts *o)
{
    if (check_empty(et, o->servers, o->prefix) != 0)
        return 1;
    objects objs = {0};
    int64_t sq_rev = 0, first = 0, last = 0;
    int rc = storage_range(sq, "", collect, &objs, &sq_rev);
    if (rc != STORAGE_OK) {
        fprintf(stderr, "ckube migrate: reading %s: %s\n", o->data_dir, storage_strerror(rc));
        objects_free(&objs);
        return 1;
    }
    if (objs.bad_key) {
        fprintf(stderr, "ckube migrate: %s holds %s, outside " MIGRATE_PREFIX "; nothing copied\n",
                o->data_dir, objs.bad_key);
        objects_free(&objs);
        return 1;
    }
    size_t done = copy_objects(et, &objs, &first, &last);
    int code = 0;
    if (done < objs.n) {
        fprintf(stderr,
                "ckube migrate: %zu of %zu objects copied; delete the keys under %s in etcd "
                "(etcdctl del --prefix %s) before trying again\n",
                done, objs.n, o->prefix, o->prefix);
        code = 1;
    } else {
        printf("Migrated %zu objects from %s/" STORAGE_SQLITE_DB " (revision %" PRId64
               ") to etcd at %s under %s",
               objs.n, o->data_dir, sq_rev, o->servers, o->prefix);
        if (objs.n)
            printf(" (etcd revisions %" PRId64 " to %" PRId64 ")", first, last);
        printf("\nresourceVersions are now etcd's revisions, in the same order: clients must "
               "relist\n");
    }
    objects_free(&objs);
    return code;
}

int cmd_migrate(int argc, char **argv)
{
    migrate_opts o = {.data_dir = "./.ckube", .prefix = "/registry"};
    int code = parse_flags(argc, argv, &o);
    if (code >= 0)
        return code;
    storage *sq = open_sqlite(o.data_dir);
    if (!sq)
        return 1;
    char *err = NULL;
    storage *et = cmd_storage_open_etcd(o.servers, o.prefix, &o.tls, &err);
    if (!et) {
        fprintf(stderr, "ckube migrate: %s\n", err ? err : "cannot open the etcd storage");
        free(err);
        storage_close(sq);
        return 1;
    }
    code = migrate(sq, et, &o);
    storage_close(et);
    storage_close(sq);
    return code;
}
