/* window_vfs.h - an SQLite VFS that maps the database file a window at a
 * time, for reading a whole store once (storage_load at start-up).
 *
 * Why: reading a 2 GB store through pread copies every page from the
 * kernel's page cache into SQLite's, one system call per page: at a
 * million objects that was a fifth of a start's CPU time, all of it on
 * the one thread that reads (docs/performance.md, "Start-up at a
 * million"). SQLite's own memory map (PRAGMA mmap_size) reads the pages
 * where they are, but maps the file from its start up to the limit, so
 * the whole file would count in the server's resident set while the
 * cache is built beside it: the start-up peak would be twice the steady
 * state. This VFS serves SQLite's memory-mapped reads (xFetch) from
 * windows of WINDOW_VFS_WINDOW bytes, and unmaps a window as soon as
 * SQLite holds no page of it and a later one is in use, so at most a few
 * windows are mapped at once.
 *
 * Everything else is the default VFS's ("unix"): locking, the WAL and its
 * shared memory, reads of pages in the WAL (SQLite reads those with
 * xRead), writes. It takes effect only on a connection opened with
 * window_vfs_name() whose mmap_size is above 0; any positive limit means
 * "map", as the windows never add up to more than a few of them. The
 * store's file must not shrink while such a connection reads (a mapped
 * page past the end would fault): ckube never truncates it (no VACUUM,
 * no auto_vacuum). */
#ifndef CKUBE_STORAGE_SQLITE_WINDOW_VFS_H
#define CKUBE_STORAGE_SQLITE_WINDOW_VFS_H

/* Bytes per window: 8 MiB, 2,048 pages of 4 KiB. */
#define WINDOW_VFS_WINDOW ((long long)8 << 20)

/* Registers the VFS with SQLite on the first call (thread-safe; not as
 * the default) and returns its name, for sqlite3_open_v2; NULL if the
 * default VFS cannot be wrapped (then open without it). */
const char *window_vfs_name(void);

#endif
