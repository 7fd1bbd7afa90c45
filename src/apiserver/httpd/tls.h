/* tls.h - the server's TLS configuration, shared by every HTTP loop.
 *
 * One httpd_tls holds the serving certificate and key and the CAs that
 * client certificates are checked against, as an OpenSSL SSL_CTX that
 * each accepted connection is made from. The files are read at start and
 * again when they change (checked at most once a second, when a
 * connection is accepted): a renewed certificate is served to new
 * connections without a restart, as kube-apiserver's dynamic serving
 * certificates are. A change that does not load (a key that does not
 * match its certificate, a file half written) is logged and the previous
 * configuration stays.
 *
 * What a connection gets, as kube-apiserver's Go TLS configuration:
 *  - TLS 1.2 or 1.3, OpenSSL's default cipher suites, no renegotiation,
 *    no compression; ALPN "http/1.1" when the client offers it (never
 *    h2: the server speaks HTTP/1.1);
 *  - the client's certificate is asked for, not required (tls
 *    RequestClientCert): a handshake never fails because of it. Whether
 *    it verifies against the client CAs is recorded and judged by the
 *    x509 authenticator, so a bad certificate is a 401, not a broken
 *    handshake.
 *
 * Thread-safe: loops accept concurrently.
 */
#ifndef CKUBE_APISERVER_HTTPD_TLS_H
#define CKUBE_APISERVER_HTTPD_TLS_H

struct ssl_st;

typedef struct httpd_tls httpd_tls;

/* PEM files (borrowed: copied by httpd_tls_new). */
typedef struct httpd_tls_files {
    const char *cert; /* the serving certificate, then its chain */
    const char *key;  /* its private key */
    /* CAs that client certificates may chain to: the user's
     * --client-ca-file and the cluster's own CA, either NULL. With
     * neither, no client certificate is asked for. */
    const char *client_ca[2];
} httpd_tls_files;

/* Loads the files. NULL with *err (malloc'd) saying which file and why. */
httpd_tls *httpd_tls_new(const httpd_tls_files *files, char **err);

/* A new server-side connection on `fd` (the caller keeps the descriptor
 * and frees the SSL with SSL_free), from the configuration current at the
 * call, reloading the files first if they changed. NULL if OpenSSL fails
 * (out of memory). */
struct ssl_st *httpd_tls_accept(httpd_tls *t, int fd);

/* How many times the files were (re)loaded; 1 after httpd_tls_new. */
unsigned httpd_tls_generation(httpd_tls *t);

/* Frees the configuration; connections made from it keep what they use. */
void httpd_tls_free(httpd_tls *t);

#endif
