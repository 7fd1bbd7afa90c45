/* The client-certificate authenticator (x509.h). */
#include "apiserver/authentication/x509.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/objects.h>
#include <openssl/x509_vfy.h>

#include "common/text.h"
#include "common/xalloc.h"

/* The value of the `i`th entry of `name` as UTF-8 (malloc'd), or NULL. */
static char *entry_utf8(const X509_NAME *name, int i)
{
    const X509_NAME_ENTRY *e = X509_NAME_get_entry(name, i);
    unsigned char *utf8 = NULL;
    int n = e ? ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(e)) : -1;
    if (n < 0)
        return NULL;
    char *s = xstrndup((const char *)utf8, (size_t)n);
    OPENSSL_free(utf8);
    return s;
}

int auth_x509(X509 *cert, long verify, auth_user **out, char **err)
{
    *out = NULL;
    if (!cert)
        return 0;
    if (verify != X509_V_OK) {
        /* Go's words where they differ from OpenSSL's, so logs read as
         * kube-apiserver's. */
        const char *why =
            verify == X509_V_ERR_CERT_HAS_EXPIRED || verify == X509_V_ERR_CERT_NOT_YET_VALID
                ? "x509: certificate has expired or is not yet valid"
            : verify == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                    verify == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
                    verify == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
                    verify == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT ||
                    verify == X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE
                ? "x509: certificate signed by unknown authority"
            : verify == X509_V_ERR_INVALID_PURPOSE
                ? "x509: certificate specifies an incompatible key usage"
                : NULL;
        ckube__set_err(err, "%s (%s)", why ? why : "x509: certificate is not valid",
                       X509_verify_cert_error_string(verify));
        return -1;
    }
    const X509_NAME *subj = X509_get_subject_name(cert);
    int cn = subj ? X509_NAME_get_index_by_NID(subj, NID_commonName, -1) : -1;
    char *name = cn >= 0 ? entry_utf8(subj, cn) : NULL;
    if (!name || !*name) {
        free(name);
        return 0; /* upstream: no CommonName, no user */
    }
    auth_user *u = auth_user_new(name, NULL, NULL, 0, NULL);
    free(name);
    for (int i = -1; (i = X509_NAME_get_index_by_NID(subj, NID_organizationName, i)) >= 0;) {
        char *o = entry_utf8(subj, i);
        if (o)
            auth_user_add_group(u, o);
        free(o);
    }
    *out = u;
    return 1;
}
