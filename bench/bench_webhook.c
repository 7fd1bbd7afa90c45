/* bench_webhook - an admission webhook for `make bench`'s webhook phase:
 * libckube's webhook server (ckube/webhook.h) answering every review on
 * /validate with allowed, on 127.0.0.1 and a free port, with the
 * certificate in the directory given. Prints {"port": N} once serving,
 * and serves until stdin closes or SIGTERM; then prints {"reviews": N}.
 *
 *   bench_webhook CERT_DIR */
#include <ckube/log.h>
#include <ckube/webhook.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static atomic_long reviews;

static void allow(void *ctx, const ckube_admission_request *req, ckube_admission_response *resp)
{
    (void)ctx;
    (void)req;
    (void)resp;
    atomic_fetch_add(&reviews, 1);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: bench_webhook CERT_DIR\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    ckube_webhook_server_options o = {
        .host = "127.0.0.1", .port = CKUBE_WEBHOOK_ANY_PORT, .cert_dir = argv[1]};
    char *err = NULL;
    ckube_webhook_server *s = ckube_webhook_server_new(&o, &err);
    if (!s || ckube_webhook_server_admission(s, "/validate", allow, NULL) ||
        ckube_webhook_server_start(s, &err)) {
        fprintf(stderr, "bench_webhook: %s\n", err ? err : "cannot start");
        return 1;
    }
    printf("{\"port\": %d}\n", ckube_webhook_server_port(s));
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
    ckube_webhook_server_free(s);
    printf("{\"reviews\": %ld}\n", atomic_load(&reviews));
    return 0;
}
