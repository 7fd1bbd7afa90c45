/* vfs.h - ckube's two SQLite VFS shims over the default VFS ("unix"):
 * one for reading a whole store once, one for the writer connection.
 *
 * The window VFS (vfs_window_name) maps the database file a window at a
 * time, for storage_load at start-up. Why: reading a 2 GB store through
 * pread copies every page from the kernel's page cache into SQLite's, one
 * system call per page: at a million objects that was a fifth of a
 * start's CPU time, all of it on the one thread that reads
 * (docs/performance.md, "Start-up at a million"). SQLite's own memory map
 * (PRAGMA mmap_size) reads the pages where they are, but maps the file
 * from its start up to the limit, so the whole file would count in the
 * server's resident set while the cache is built beside it: the start-up
 * peak would be twice the steady state. This VFS serves SQLite's
 * memory-mapped reads (xFetch) from windows of VFS_WINDOW bytes, and
 * unmaps a window as soon as SQLite holds no page of it and a later one
 * is in use, so at most a few windows are mapped at once. It takes effect
 * only on a connection whose mmap_size is above 0; any positive limit
 * means "map", as the windows never add up to more than a few of them.
 * The store's file must not shrink while such a connection reads (a
 * mapped page past the end would fault): ckube never truncates it (no
 * VACUUM, no auto_vacuum).
 *
 * The writer VFS (vfs_writer_name) combines the writes to a WAL file that
 * follow one another into one system call. Why: SQLite writes each WAL
 * frame as two pwrites, its 24-byte header and its page, so a commit of
 * 20 creates (about 31 frames) made 62 system calls, each page of the
 * kernel's cache touched by two of them: a fifth of the committer
 * thread's time (docs/performance.md, "Durable creates"). The writes are
 * held in a buffer of VFS_WAL_BUFFER bytes and written (in pieces of
 * VFS_WAL_PIECE) when the next one does not follow the last, before any
 * read, size, truncate or sync of the file, and at close. Nothing is lost by waiting: SQLite
 * makes a commit visible to other connections (in the WAL's shared-memory
 * index) only after it has synced the WAL, and a sync writes the buffer
 * first. That holds only for a connection that syncs at every commit:
 * open it with PRAGMA synchronous=FULL (or EXTRA), as the store's writer
 * is; with NORMAL or OFF other connections would read frames still in the
 * buffer. An error writing the buffer is the error of the call that wrote
 * it (a sync, a read), so the transaction fails as if the write had.
 *
 * Everything else is the default VFS's: locking, the WAL's shared memory,
 * reads of pages in the WAL (SQLite reads those with xRead), the
 * database file's writes. Connections of either VFS and of the default
 * one share a store as default ones do (their files are the default
 * VFS's underneath). */
#ifndef CKUBE_STORAGE_SQLITE_VFS_H
#define CKUBE_STORAGE_SQLITE_VFS_H

#include <stdint.h>

/* Bytes per window: 8 MiB, 2,048 pages of 4 KiB. */
#define VFS_WINDOW ((long long)8 << 20)
/* Bytes of WAL writes combined at most: 64 frames of 4 KiB pages. */
#define VFS_WAL_BUFFER (64 * (4096 + 24))
/* Bytes per write of the combined ones: the default VFS takes at most
 * 128 KiB - 1 per write (its unixWrite masks the length with 0x1ffff, as
 * SQLite itself never writes more than a 64 KiB page and its header). */
#define VFS_WAL_PIECE (31 * 4096)

/* These register the VFSes with SQLite on the first call (thread-safe;
 * not as the default) and return a name for sqlite3_open_v2; NULL if the
 * default VFS cannot be wrapped (then open without it). */
const char *vfs_window_name(void);
const char *vfs_writer_name(void);

/* Counts of the writer VFS since the process started, for tests: writes
 * SQLite asked for on WAL files, and system calls that wrote them. */
typedef struct vfs_writer_counts {
    uint64_t writes;
    uint64_t syscalls;
} vfs_writer_counts;
void vfs_writer_counts_get(vfs_writer_counts *out);

#endif
