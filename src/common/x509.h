/* x509.h - making X.509 certificates with OpenSSL 3: the server's cluster
 * PKI (apiserver/pki) and libckube's self-signed serving certificate
 * (runtime/secure_serving, as k8s.io/client-go's cert.GenerateSelfSigned
 * CertKey). Pure: no files, no global state; thread-safe as OpenSSL is. */
#ifndef CKUBE_COMMON_X509_H
#define CKUBE_COMMON_X509_H

#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

/* What a certificate is for (its basicConstraints, keyUsage and
 * extendedKeyUsage). */
#define CKUBE__CERT_CA 'c'     /* CA:TRUE, keyCertSign */
#define CKUBE__CERT_SERVER 's' /* serverAuth */
#define CKUBE__CERT_CLIENT 'u' /* clientAuth (a user) */

/* A new X.509 v3 certificate for `key` (borrowed) with subject CN=cn and,
 * when org is not NULL, O=org; signed by ca_key as ca (both borrowed), or
 * self-signed when both are NULL. A random 127-bit serial, valid from an
 * hour ago for `days` days, subject and authority key identifiers, and
 * `sans` (IP addresses as inet_pton reads them, else DNS names) as its
 * subjectAltName. `kind` is one of CKUBE__CERT_*. SHA-256. The caller
 * frees the result with X509_free; NULL when OpenSSL fails (its error
 * queue says why). */
X509 *ckube__x509_make(EVP_PKEY *key, const char *cn, const char *org, X509 *ca, EVP_PKEY *ca_key,
                       char kind, int days, const char *const *sans, size_t nsans);

#endif
