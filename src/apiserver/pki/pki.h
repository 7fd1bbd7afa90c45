/* pki.h - the cluster's certificates and keys (issue #21): what `ckube
 * server` creates under its data directory on first start and reads back
 * after, as kube-apiserver's self-signed serving certificate and k3s's
 * bootstrap do.
 *
 *   ca.crt, ca.key            the cluster CA (ECDSA P-256, 10 years); it
 *                             signs the serving and client certificates
 *                             and is what a kubeconfig trusts
 *   serving.crt, serving.key  the HTTPS certificate (1 year) with the SANs
 *                             asked for (localhost, 127.0.0.1, ::1, the
 *                             host name, the listen address, --tls-san)
 *   admin.crt, admin.key      a client certificate for CN=system:admin,
 *                             O=system:masters (1 year): the written
 *                             kubeconfig's identity
 *   controller-manager.crt, controller-manager.key
 *                             a client certificate for
 *                             CN=system:kube-controller-manager, no
 *                             organization (1 year): the identity of the
 *                             controller-manager child, which the
 *                             bootstrap policy's system:kube-controller-manager
 *                             ClusterRole binds, as kubeadm's
 *                             controller-manager.conf
 *   front-proxy-ca.crt, front-proxy-ca.key
 *                             a CA of its own for the aggregator's
 *                             front proxy (10 years), as kubeadm makes
 *                             one: extension API servers trust requests
 *                             with X-Remote-User headers only from a
 *                             client it signed
 *   front-proxy-client.crt, front-proxy-client.key
 *                             the aggregator's client certificate,
 *                             CN=front-proxy-client (1 year)
 *   sa.key, sa.pub            the ServiceAccount token signing key (RSA
 *                             2048, RS256 as kube-apiserver signs by
 *                             default) and its public half
 *
 * Keys are written 0600 and certificates 0644, each through a temporary
 * file renamed into place, so a crash never leaves half a file. Nothing
 * that exists is replaced except a serving or client certificate that
 * no longer fits (below): a CA or key the user put there is theirs.
 *
 * OpenSSL 3. Not thread-safe per directory: one server owns its data
 * directory (the storage's lock says so).
 */
#ifndef CKUBE_APISERVER_PKI_PKI_H
#define CKUBE_APISERVER_PKI_PKI_H

#include <stdbool.h>
#include <stddef.h>

/* What pki_ensure should make. */
typedef struct pki_options {
    const char *dir; /* where the files live (created 0700 if missing) */
    /* Subject alternative names of the serving certificate: each an IP
     * address (v4 or v6, as inet_pton reads it) or a DNS name. Borrowed. */
    const char *const *sans;
    size_t nsans;
    /* Renewal: a serving or client certificate that expires within this
     * many days is made again. 0: 90. */
    int renew_days;
} pki_options;

/* The files' paths (under the options' dir) and what pki_ensure did. */
typedef struct pki_files {
    char ca_crt[4096], ca_key[4096];
    char serving_crt[4096], serving_key[4096];
    char admin_crt[4096], admin_key[4096];
    char cm_crt[4096], cm_key[4096]; /* the controller-manager's */
    char sa_key[4096], sa_pub[4096];
    char fp_ca_crt[4096], fp_ca_key[4096];         /* the front-proxy CA */
    char fp_client_crt[4096], fp_client_key[4096]; /* its client, CN=front-proxy-client */
    /* Which were made by this call (the rest were there and kept). */
    bool made_ca, made_serving, made_admin, made_cm, made_sa, made_fp_ca, made_fp_client;
} pki_files;

/* Makes whatever is missing: the CA and the ServiceAccount key when
 * absent; the serving certificate when absent, not signed by the CA,
 * missing one of the SANs asked for, or expiring within renew_days; the
 * admin and controller-manager certificates likewise (without SANs). Returns 0 with *out filled,
 * or -1 with *err (malloc'd, the caller frees) saying which file and why
 * (an unreadable CA or key is an error, never overwritten). */
int pki_ensure(const pki_options *o, pki_files *out, char **err);

#endif
