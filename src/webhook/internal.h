/* internal.h - what the webhook server's files share: the server
 * (server.c: listening, TLS, the thread, metrics) and its handlers,
 * whose reviews review.c answers. */
#ifndef CKUBE_WEBHOOK_INTERNAL_H
#define CKUBE_WEBHOOK_INTERNAL_H

#include <ckube/webhook.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "runtime/http_serve.h"

typedef enum { WH_ADMISSION, WH_DEFAULTER, WH_VALIDATOR, WH_CONVERSION } wh_kind;

typedef struct wh_handler {
    char *path;
    wh_kind kind;
    ckube_admission_fn admission;
    ckube_typed_default_fn defaulter;
    ckube_typed_validate_fn validator;
    ckube_conversion_fn conversion;
    const ckube_scheme *scheme;
    void *ctx;
    ckube_webhook_server *server;
    ckube_metric *latency, *in_flight;
} wh_handler;

struct ckube_webhook_server {
    char *host;
    int port, bound_port;
    unsigned workers; /* handler threads (options'); 0: the loop calls them */
    char *cert_path, *key_path;
    serving_cert *tls; /* once started: read again when the files change */
    wh_handler *handlers;
    size_t nhandlers;
    http_serve *serve; /* once started; NULL when stopped */
    atomic_bool serving;
    ckube_metric_family *requests, *latency_fam, *in_flight_fam;
    ckube_runnable runnable;
};

/* An answer: HTTP status and the JSON body (malloc'd). */
typedef struct wh_reply {
    int code;
    char *body;
    size_t len;
} wh_reply;

/* Registers a copy of h (its path copied). 0, or -1. */
int wh_add_handler(ckube_webhook_server *s, const wh_handler *h);
/* Answers a review body with h. */
void wh_serve(wh_handler *h, const char *body, size_t len, wh_reply *out);
/* A 400 review answer (for bodies that are no review). */
void wh_bad_request(wh_handler *h, wh_reply *out, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int wh_runnable_start(void *ctx);
void wh_runnable_stop(void *ctx);

#endif
