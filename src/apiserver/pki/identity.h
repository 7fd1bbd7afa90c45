/* identity.h - one cluster identity for several servers on one datastore
 * (issue #23).
 *
 * Servers that share an etcd must trust one another's clients: a
 * kubeconfig written by one (a client certificate signed by its CA, a
 * serving certificate the kubeconfig's CA vouches for) and a
 * ServiceAccount token signed by one must work on all. So they share the
 * cluster CA (ca.crt, ca.key) and the ServiceAccount key (sa.key, sa.pub);
 * each still makes its own serving and client certificates from that CA
 * (pki.h), with its own host names.
 *
 * As k3s does, the shared files travel through the datastore, encrypted
 * with a token the first server makes (DATA_DIR/token) and the others are
 * given (--token or --token-file): AES-256-GCM under a key derived from
 * the token with PBKDF2-HMAC-SHA256 and a random salt. Whoever can read
 * etcd but has no token learns nothing; a wrong token fails to decrypt
 * (GCM's tag), it never installs garbage.
 *
 * The sealed form is text: "ckube-identity-v1:" then base64 of salt (16
 * bytes), nonce (12), tag (16) and the ciphertext of a JSON object mapping
 * each file name to its PEM text.
 */
#ifndef CKUBE_APISERVER_PKI_IDENTITY_H
#define CKUBE_APISERVER_PKI_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>

/* A new random token (32 bytes of the OS's randomness, in hex), malloc'd;
 * NULL if there is no randomness. */
char *identity_token_new(void);

/* Seals the identity files of `dir` (ca.crt, ca.key, sa.key, sa.pub, all
 * of which must exist, and front-proxy-ca.crt and .key when they do) with
 * `token`. Returns 0 with *blob (malloc'd, the
 * caller frees) and *len, or -1 with *err (malloc'd) naming the file or
 * the failure. */
int identity_seal(const char *dir, const char *token, char **blob, size_t *len, char **err);

/* Opens `blob` with `token` and installs its files in `dir` (created 0700
 * if missing; keys written 0600, certificates 0644, each through a
 * temporary file renamed into place). A file already there with the same
 * content is kept; one with other content is an error naming it unless
 * `replace`, but for the front proxy's CA, which the cluster's always
 * replaces (a server made its own before the identity carried one). A
 * blob without the front proxy's CA leaves the local one. *changed says
 * whether any file was written (leaf certificates must then be made
 * again). Returns 0, or -1 with *err: a token that does not open the
 * blob says so, and nothing is written then. */
int identity_unseal(const char *dir, const char *token, const char *blob, size_t len, bool replace,
                    bool *changed, char **err);

#endif
