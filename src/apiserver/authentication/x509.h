/* x509.h - the client-certificate authenticator, as kube-apiserver's
 * (k8s.io/apiserver/pkg/authentication/request/x509): a certificate that
 * chains to a client CA, valid now and for client authentication, is the
 * user named by its subject's CommonName, in the groups named by its
 * Organization values.
 *
 * The chain is verified during the TLS handshake (httpd/tls.c asks for
 * the certificate and lets every handshake through); this judges
 * OpenSSL's verdict and reads the subject.
 */
#ifndef CKUBE_APISERVER_AUTHENTICATION_X509_H
#define CKUBE_APISERVER_AUTHENTICATION_X509_H

#include <openssl/x509.h>

#include "apiserver/authentication/user.h"

/* `cert`: the client's certificate (NULL: none was sent); `verify`: what
 * OpenSSL's verification of it gave (SSL_get_verify_result). Returns 1
 * with *out (a new user, groups as the certificate says: the caller adds
 * system:authenticated), 0 when the certificate names nobody (none sent,
 * or an empty CommonName: other authenticators may still say who it is),
 * or -1 with *err (malloc'd) when it does not verify (the request is
 * then unauthorized, whatever else it carries). */
int auth_x509(X509 *cert, long verify, auth_user **out, char **err);

#endif
