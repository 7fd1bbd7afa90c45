/* vfs.c - ckube's SQLite VFS shims: memory-mapped reads a window at a
 * time, and a writer's WAL writes combined (see vfs.h).
 *
 * The shape is SQLite's VFS shim: a file of these VFSes is a small header
 * followed by the default VFS's own file (szOsFile is the sum), and every
 * method forwards to that inner file but where a feature of the file's
 * takes over. The two VFSes share the methods; a file has the features
 * its VFS and its kind give it at open.
 *
 * Windows (the window VFS's main database file):
 *  - xFetch hands out a pointer into the window holding the page, mapping
 *    the window first if it is not mapped (read-only, shared, from a
 *    descriptor of our own on the database file);
 *  - xUnfetch drops the page's reference; a window nobody references is
 *    unmapped unless it is the newest (the scan goes on there);
 *  - xFileControl(SQLITE_FCNTL_MMAP_SIZE) switches the mapping on (> 0)
 *    or off, and is not passed on, so the inner file never maps the whole
 *    database itself.
 * A fetch that cannot be served (no descriptor, mapping off, a page past
 * the file's end when its window was mapped, mmap failing) answers NULL,
 * and SQLite reads that page with xRead: never an error. SQLite holds a
 * fetched page until it releases the page; the pages a scan holds at once
 * are the b-tree path from the root to the current leaf, so a handful of
 * windows are mapped at a time: the leaves' one and those of interior
 * pages above them.
 *
 * Combined writes (the writer VFS's WAL files): xWrite appends to the
 * file's buffer a write that starts where the buffered bytes end; any
 * other write, and every other method that looks at the file's bytes
 * (xRead, xFileSize, xTruncate, xSync, xFileControl, xClose), writes the
 * buffer out first. A write of a piece or more (VFS_WAL_PIECE) goes
 * straight through. The buffer is allocated at a transaction's first
 * write and freed at its sync.
 *
 * Files are used by one connection on one thread at a time (SQLite's
 * contract for a file), so nothing here locks but the counters. */
#include "storage/sqlite/vfs.h"

#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct window {
    sqlite3_int64 off; /* in the file; a multiple of VFS_WINDOW */
    size_t len;        /* mapped bytes: the window, or up to the file's end */
    char *map;
    int refs; /* pages of it SQLite holds */
    struct window *next;
} window;

typedef struct vfile {
    sqlite3_file base;   /* pMethods: &wmethods once open */
    sqlite3_file *inner; /* the default VFS's file, right after this header */
    /* windows: the window VFS's files (mapping its main database file) */
    bool windowed;
    int fd;              /* read-only, the main database only; else -1 */
    sqlite3_int64 limit; /* the connection's mmap_size: > 0 maps */
    window *windows;     /* newest first */
    /* combined writes: the writer VFS's WAL files */
    char *buf;          /* VFS_WAL_BUFFER bytes from a commit's first write to its sync */
    bool combine;       /* writes are combined (buf may still be NULL) */
    size_t len;         /* bytes in buf */
    sqlite3_int64 boff; /* file offset of buf[0] */
} vfile;

static sqlite3_vfs *parent; /* the default VFS, wrapped */
static sqlite3_vfs window_vfs, writer_vfs;
static bool registered;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t wal_writes, wal_syscalls;

static sqlite3_file *inner(sqlite3_file *f)
{
    return ((vfile *)f)->inner;
}

/* ---- windows ---------------------------------------------------------- */

static void window_unmap(vfile *wf, window *w)
{
    window **pp = &wf->windows;
    while (*pp != w)
        pp = &(*pp)->next;
    *pp = w->next;
    munmap(w->map, w->len);
    free(w);
}

/* Unmaps every window no page is held of, but `keep`. */
static void windows_trim(vfile *wf, const window *keep)
{
    window *w = wf->windows;
    while (w) {
        window *next = w->next;
        if (w != keep && w->refs == 0)
            window_unmap(wf, w);
        w = next;
    }
}

static window *window_at(vfile *wf, sqlite3_int64 off)
{
    for (window *w = wf->windows; w; w = w->next)
        if (w->off == off)
            return w;
    return NULL;
}

/* Maps the window at `off` (which must reach `need`, an offset past the
 * wanted page), makes it the newest and unmaps the idle ones. NULL when
 * it cannot: the file is shorter than `need`, or no memory. */
static window *window_map(vfile *wf, sqlite3_int64 off, sqlite3_int64 need)
{
    struct stat st;
    if (fstat(wf->fd, &st) != 0 || st.st_size < need)
        return NULL;
    sqlite3_int64 len = st.st_size - off;
    if (len > VFS_WINDOW)
        len = VFS_WINDOW;
    window *w = malloc(sizeof *w);
    if (!w)
        return NULL;
    w->map = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, wf->fd, (off_t)off);
    if (w->map == MAP_FAILED) {
        free(w);
        return NULL;
    }
    w->off = off;
    w->len = (size_t)len;
    w->refs = 0;
    w->next = wf->windows;
    wf->windows = w;
    windows_trim(wf, w);
    return w;
}

/* ---- combined writes ------------------------------------------------- */

/* Writes the buffered bytes, if any, in pieces of at most VFS_WAL_PIECE;
 * the buffer is empty afterwards even when a write failed (SQLite rolls
 * the transaction back then, and writes the frames it wants again). */
static int combined_flush(vfile *vf)
{
    size_t done = 0, n = vf->len;
    vf->len = 0;
    while (done < n) {
        size_t piece = n - done < VFS_WAL_PIECE ? n - done : VFS_WAL_PIECE;
        atomic_fetch_add_explicit(&wal_syscalls, 1, memory_order_relaxed);
        int rc = inner(&vf->base)->pMethods->xWrite(inner(&vf->base), vf->buf + done, (int)piece,
                                                    vf->boff + (sqlite3_int64)done);
        if (rc != SQLITE_OK)
            return rc;
        done += piece;
    }
    return SQLITE_OK;
}

static int w_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 off)
{
    vfile *vf = (vfile *)f;
    if (!vf->combine)
        return inner(f)->pMethods->xWrite(inner(f), b, n, off);
    atomic_fetch_add_explicit(&wal_writes, 1, memory_order_relaxed);
    if (!vf->buf && !(vf->buf = malloc(VFS_WAL_BUFFER)))
        vf->combine = false; /* no memory: every write goes through */
    if (vf->len > 0 && off == vf->boff + (sqlite3_int64)vf->len &&
        (size_t)n <= VFS_WAL_BUFFER - vf->len) {
        memcpy(vf->buf + vf->len, b, (size_t)n);
        vf->len += (size_t)n;
        return SQLITE_OK;
    }
    int rc = combined_flush(vf);
    if (rc != SQLITE_OK)
        return rc;
    if (!vf->combine || n <= 0 || (size_t)n >= VFS_WAL_PIECE) {
        atomic_fetch_add_explicit(&wal_syscalls, 1, memory_order_relaxed);
        return inner(f)->pMethods->xWrite(inner(f), b, n, off);
    }
    memcpy(vf->buf, b, (size_t)n);
    vf->len = (size_t)n;
    vf->boff = off;
    return SQLITE_OK;
}

void vfs_writer_counts_get(vfs_writer_counts *out)
{
    out->writes = atomic_load(&wal_writes);
    out->syscalls = atomic_load(&wal_syscalls);
}

/* ---- windows: the methods of their own -------------------------------- */

static int w_fetch(sqlite3_file *f, sqlite3_int64 off, int amt, void **pp)
{
    vfile *wf = (vfile *)f;
    *pp = NULL;
    if (wf->fd < 0 || wf->limit <= 0 || amt <= 0 || off < 0)
        return SQLITE_OK;
    sqlite3_int64 woff = off - off % VFS_WINDOW, end = off + amt;
    if (end > woff + VFS_WINDOW)
        return SQLITE_OK; /* across two windows (not a page): read it */
    window *w = window_at(wf, woff);
    if (!w && !(w = window_map(wf, woff, end)))
        return SQLITE_OK;
    if (end > w->off + (sqlite3_int64)w->len)
        return SQLITE_OK; /* the file grew after the window was mapped */
    w->refs++;
    *pp = w->map + (off - w->off);
    return SQLITE_OK;
}

static int w_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    vfile *wf = (vfile *)f;
    if (!p) { /* SQLite: any mapping may be stale now */
        windows_trim(wf, NULL);
        return SQLITE_OK;
    }
    window *w = window_at(wf, off - off % VFS_WINDOW);
    if (w && w->refs > 0 && --w->refs == 0 && w != wf->windows)
        window_unmap(wf, w);
    return SQLITE_OK;
}

static int w_file_control(sqlite3_file *f, int op, void *arg)
{
    vfile *vf = (vfile *)f, *wf = vf;
    if (op == SQLITE_FCNTL_MMAP_SIZE && wf->windowed) {
        sqlite3_int64 want = *(sqlite3_int64 *)arg;
        *(sqlite3_int64 *)arg = wf->limit; /* as the default VFS: the old limit */
        if (want >= 0)
            wf->limit = want;
        if (wf->limit <= 0)
            windows_trim(wf, NULL);
        return SQLITE_OK;
    }
    int rc = combined_flush(vf);
    return rc != SQLITE_OK ? rc : inner(f)->pMethods->xFileControl(inner(f), op, arg);
}

static int w_close(sqlite3_file *f)
{
    vfile *wf = (vfile *)f;
    while (wf->windows) /* SQLite releases its pages before closing */
        window_unmap(wf, wf->windows);
    if (wf->fd >= 0)
        close(wf->fd);
    wf->fd = -1;
    int rc = combined_flush(wf);
    free(wf->buf);
    wf->buf = NULL;
    int crc = inner(f)->pMethods->xClose(inner(f));
    return rc != SQLITE_OK ? rc : crc;
}

/* ---- forwarded -------------------------------------------------------- */

static int w_read(sqlite3_file *f, void *b, int n, sqlite3_int64 off)
{
    int rc = combined_flush((vfile *)f);
    return rc != SQLITE_OK ? rc : inner(f)->pMethods->xRead(inner(f), b, n, off);
}

static int w_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    int rc = combined_flush((vfile *)f);
    return rc != SQLITE_OK ? rc : inner(f)->pMethods->xTruncate(inner(f), size);
}

static int w_sync(sqlite3_file *f, int flags)
{
    vfile *vf = (vfile *)f;
    int rc = combined_flush(vf);
    /* A commit's end: an idle server keeps no buffer (its pages would
     * stay in the resident set); the next commit takes one again. */
    free(vf->buf);
    vf->buf = NULL;
    return rc != SQLITE_OK ? rc : inner(f)->pMethods->xSync(inner(f), flags);
}

static int w_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    int rc = combined_flush((vfile *)f);
    return rc != SQLITE_OK ? rc : inner(f)->pMethods->xFileSize(inner(f), size);
}

static int w_lock(sqlite3_file *f, int lock)
{
    return inner(f)->pMethods->xLock(inner(f), lock);
}

static int w_unlock(sqlite3_file *f, int lock)
{
    return inner(f)->pMethods->xUnlock(inner(f), lock);
}

static int w_check_reserved(sqlite3_file *f, int *out)
{
    return inner(f)->pMethods->xCheckReservedLock(inner(f), out);
}

static int w_sector_size(sqlite3_file *f)
{
    return inner(f)->pMethods->xSectorSize(inner(f));
}

static int w_device_characteristics(sqlite3_file *f)
{
    return inner(f)->pMethods->xDeviceCharacteristics(inner(f));
}

static int w_shm_map(sqlite3_file *f, int region, int size, int extend, void volatile **pp)
{
    return inner(f)->pMethods->xShmMap(inner(f), region, size, extend, pp);
}

static int w_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    return inner(f)->pMethods->xShmLock(inner(f), offset, n, flags);
}

static void w_shm_barrier(sqlite3_file *f)
{
    inner(f)->pMethods->xShmBarrier(inner(f));
}

static int w_shm_unmap(sqlite3_file *f, int del)
{
    return inner(f)->pMethods->xShmUnmap(inner(f), del);
}

static const sqlite3_io_methods wmethods = {
    .iVersion = 3, /* 3: xFetch and xUnfetch are called */
    .xClose = w_close,
    .xRead = w_read,
    .xWrite = w_write,
    .xTruncate = w_truncate,
    .xSync = w_sync,
    .xFileSize = w_file_size,
    .xLock = w_lock,
    .xUnlock = w_unlock,
    .xCheckReservedLock = w_check_reserved,
    .xFileControl = w_file_control,
    .xSectorSize = w_sector_size,
    .xDeviceCharacteristics = w_device_characteristics,
    .xShmMap = w_shm_map,
    .xShmLock = w_shm_lock,
    .xShmBarrier = w_shm_barrier,
    .xShmUnmap = w_shm_unmap,
    .xFetch = w_fetch,
    .xUnfetch = w_unfetch,
};

/* ---- the VFS ---------------------------------------------------------- */

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out_flags)
{
    vfile *wf = (vfile *)f;
    wf->base.pMethods = NULL; /* SQLite closes only what opened */
    wf->inner = (sqlite3_file *)(wf + 1);
    wf->windowed = vfs == &window_vfs;
    wf->fd = -1;
    wf->limit = 0;
    wf->windows = NULL;
    wf->buf = NULL;
    wf->combine = vfs == &writer_vfs && (flags & SQLITE_OPEN_WAL);
    wf->len = 0;
    wf->boff = 0;
    int rc = parent->xOpen(parent, name, wf->inner, flags, out_flags);
    if (rc != SQLITE_OK)
        return rc;
    /* The inner file's methods must have what ours forward to. */
    if (!wf->inner->pMethods || wf->inner->pMethods->iVersion < 2) {
        if (wf->inner->pMethods)
            wf->inner->pMethods->xClose(wf->inner);
        return SQLITE_CANTOPEN;
    }
    if (wf->windowed && name && (flags & SQLITE_OPEN_MAIN_DB))
        wf->fd = open(name, O_RDONLY | O_CLOEXEC); /* -1: served by xRead */
    wf->base.pMethods = &wmethods;
    return SQLITE_OK;
}

static int v_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    (void)vfs;
    return parent->xDelete(parent, name, sync_dir);
}

static int v_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
    (void)vfs;
    return parent->xAccess(parent, name, flags, out);
}

static int v_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
    (void)vfs;
    return parent->xFullPathname(parent, name, n, out);
}

static void *v_dl_open(sqlite3_vfs *vfs, const char *name)
{
    (void)vfs;
    return parent->xDlOpen(parent, name);
}

static void v_dl_error(sqlite3_vfs *vfs, int n, char *msg)
{
    (void)vfs;
    parent->xDlError(parent, n, msg);
}

static void (*v_dl_sym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
    (void)vfs;
    return parent->xDlSym(parent, h, sym);
}

static void v_dl_close(sqlite3_vfs *vfs, void *h)
{
    (void)vfs;
    parent->xDlClose(parent, h);
}

static int v_randomness(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    return parent->xRandomness(parent, n, out);
}

static int v_sleep(sqlite3_vfs *vfs, int us)
{
    (void)vfs;
    return parent->xSleep(parent, us);
}

static int v_current_time(sqlite3_vfs *vfs, double *out)
{
    (void)vfs;
    return parent->xCurrentTime(parent, out);
}

static int v_last_error(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    return parent->xGetLastError(parent, n, out);
}

static int v_current_time64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
    (void)vfs;
    return parent->xCurrentTimeInt64(parent, out);
}

static void register_vfs(void)
{
    parent = sqlite3_vfs_find(NULL);
    if (!parent || parent->iVersion < 2 || !parent->xCurrentTimeInt64)
        return;
    window_vfs = (sqlite3_vfs){
        .iVersion = 2, /* no system-call overrides: those are the parent's */
        .szOsFile = (int)sizeof(vfile) + parent->szOsFile,
        .mxPathname = parent->mxPathname,
        .zName = "ckube-window",
        .xOpen = v_open,
        .xDelete = v_delete,
        .xAccess = v_access,
        .xFullPathname = v_full_pathname,
        .xDlOpen = v_dl_open,
        .xDlError = v_dl_error,
        .xDlSym = v_dl_sym,
        .xDlClose = v_dl_close,
        .xRandomness = v_randomness,
        .xSleep = v_sleep,
        .xCurrentTime = v_current_time,
        .xGetLastError = v_last_error,
        .xCurrentTimeInt64 = v_current_time64,
    };
    writer_vfs = window_vfs;
    writer_vfs.zName = "ckube-writer";
    registered = sqlite3_vfs_register(&window_vfs, 0) == SQLITE_OK &&
                 sqlite3_vfs_register(&writer_vfs, 0) == SQLITE_OK;
}

const char *vfs_window_name(void)
{
    pthread_once(&once, register_vfs);
    return registered ? window_vfs.zName : NULL;
}

const char *vfs_writer_name(void)
{
    pthread_once(&once, register_vfs);
    return registered ? writer_vfs.zName : NULL;
}
