/* secure_serving.h - the TLS side of the manager's secure serving (not
 * installed): its serving certificate (the user's files, or a self-signed
 * CA and certificate made in memory as k8s.io/apiserver's
 * MaybeDefaultWithSelfSignedCerts makes them) and the client CA that
 * client certificates are verified against (a file, or the ConfigMap
 * kube-system/extension-apiserver-authentication that kube-apiserver and
 * ckube server publish). The requests themselves are manager_http.c's;
 * who they come from and what they may do, delegated_auth.c's. */
#ifndef CKUBE_RUNTIME_SECURE_SERVING_H
#define CKUBE_RUNTIME_SECURE_SERVING_H

#include <ckube/client.h>

#include <jansson.h>
#include <stddef.h>

#include <openssl/ssl.h>

/* A server SSL_CTX (TLS 1.2 or later) with the certificate chain and key
 * of cert_file/key_file (PEM), or, both NULL, a self-signed CA
 * "localhost-ca@<unix time>" and a certificate "localhost@<unix time>" it
 * signed for localhost and 127.0.0.1 (P-256, one year). With client_ca
 * (PEM bytes, `len` long; may be NULL) it asks for client certificates
 * and verifies them against those CAs for client authentication, without
 * failing the handshake: the request learns the result
 * (SSL_get_verify_result) and answers 401, as upstream. NULL with *err
 * (malloc'd) on failure. */
SSL_CTX *secure_serving_ctx_new(const char *cert_file, const char *key_file, const char *client_ca,
                                size_t len, char **err);

/* The serving certificate of a secure listener, as k8s.io/apiserver's
 * dynamic serving content and controller-runtime's certwatcher: with
 * cert_file and key_file, a context made by secure_serving_ctx_new from
 * them and made again when either file changes (looked at, at most once a
 * second, when serving_cert_ctx is called: when a connection comes, so an
 * idle server does no work), so a rotated certificate reaches the next
 * connection without a restart; with both NULL, the self-signed one, made
 * once. client_ca (len bytes, may be NULL) as secure_serving_ctx_new's,
 * copied. `who` names the server in the logs ("webhook server"). The
 * first context must be made: NULL with *err (malloc'd) otherwise. */
typedef struct serving_cert serving_cert;
serving_cert *serving_cert_new(const char *cert_file, const char *key_file, const char *client_ca,
                               size_t len, const char *who, char **err);

/* The current context (borrowed: valid until the next call or
 * serving_cert_free; an SSL made from it keeps its own reference). A new
 * one when the files changed and load; when they do not (a rotation
 * half-written, a key that is not the certificate's), the one that
 * worked, with the reason logged. One thread at a time (the listener's
 * loop). */
SSL_CTX *serving_cert_ctx(serving_cert *c);

void serving_cert_free(serving_cert *c);

/* The CAs of a PEM bundle (len bytes) as a store verifying client
 * certificates for client authentication (a new store; NULL when the
 * bundle holds no certificate); with names_out, their subjects too (a
 * new stack, for SSL_CTX_set_client_CA_list). */
X509_STORE *secure_serving_client_ca_store(const char *pem, size_t len,
                                           STACK_OF(X509_NAME) * *names_out);

/* The data of ConfigMap kube-system/extension-apiserver-authentication,
 * read with `c`: a new reference (an empty object when it has none), or
 * NULL with *err (malloc'd). */
json_t *secure_serving_auth_configmap(ckube_client *c, char **err);

/* The client-ca-file of ConfigMap
 * kube-system/extension-apiserver-authentication, read with `c`: malloc'd
 * PEM bytes (*len long). NULL with *err (malloc'd) when it cannot be read
 * or has no such key. */
char *secure_serving_lookup_client_ca(ckube_client *c, size_t *len, char **err);

#endif
