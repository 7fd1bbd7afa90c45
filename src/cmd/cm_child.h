/* cm_child.h - `ckube server`'s controller-manager, run as a child process.
 *
 * The built-in controllers are libckube clients (libcurl and its TLS and
 * auth dependency tree). Running them in a process of their own keeps that
 * tree out of the server's address space, so an idle server maps only what
 * it serves with, and a crashing controller cannot take the API down: the
 * split kube-apiserver and kube-controller-manager have, supervised here.
 *
 * Single-threaded contract: every function is called from the server's
 * main thread, which also receives SIGCHLD synchronously (sigwait) with the
 * signal blocked in every thread. The child is told to die with that
 * thread (PR_SET_PDEATHSIG), so it never outlives a killed server. */
#ifndef CKUBE_CMD_CM_CHILD_H
#define CKUBE_CMD_CM_CHILD_H

#include <stdint.h>

typedef struct cm_child cm_child;

/* The ckube-controller-manager binary beside the running executable
 * (/proc/self/exe's directory), or NULL when it is not there or not
 * executable. Caller frees. */
char *cm_child_find_binary(void);

/* A supervisor for `binary args...` (both copied; args is NULL-terminated,
 * without argv[0]). Nothing runs until cm_child_start. NULL on OOM. */
cm_child *cm_child_new(const char *binary, const char *const *args);

/* Forks and executes the child. 0, or -1 when fork failed (logged). */
int cm_child_start(cm_child *c);

/* Reaps the child if it exited and restarts it when its back-off delay
 * has passed (1 s doubling to 30 s; a child that ran for a minute starts
 * over at 1 s). Call on SIGCHLD and whenever cm_child_timeout_ms expires.
 * now_ns is CLOCK_MONOTONIC. */
void cm_child_poll(cm_child *c, uint64_t now_ns);

/* Milliseconds until a pending restart is due, or -1 when none is. */
long cm_child_timeout_ms(const cm_child *c, uint64_t now_ns);

/* SIGTERM, then up to grace_ms for it to exit (it releases its Lease
 * through the still-running API), then SIGKILL. Always reaps. Returns 0
 * when no child ran, it exited with status 0 or the SIGTERM ended it
 * before it had handlers; -1 otherwise (logged):
 * a dirty shutdown (a sanitizer report, say) fails the server's too. */
int cm_child_stop(cm_child *c, long grace_ms);

void cm_child_free(cm_child *c);

#endif
