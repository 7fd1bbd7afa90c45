/* impersonation.h - acting as another user (`kubectl --as`), as
 * kube-apiserver's impersonation filter (k8s.io/apiserver/pkg/endpoints/
 * filters/impersonation.go) between authentication and authorization:
 *
 *   Impersonate-User: NAME       (system:serviceaccount:NS:NAME is a
 *                                 ServiceAccount)
 *   Impersonate-Group: GROUP     (one line per group)
 *   Impersonate-Uid: UID
 *   Impersonate-Extra-KEY: VALUE (KEY lowercased, then %-unescaped)
 *
 * Each thing asked for is authorized for the requester with the verb
 * "impersonate": users, groups and serviceaccounts (core group), uids
 * and userextras (authentication.k8s.io; the extra's key as the
 * subresource). The request then goes on as the impersonated user:
 * the groups given, else a ServiceAccount's two groups; plus
 * system:authenticated (system:unauthenticated for system:anonymous)
 * unless the groups already say which.
 */
#ifndef CKUBE_APISERVER_ENDPOINTS_FILTERS_IMPERSONATION_H
#define CKUBE_APISERVER_ENDPOINTS_FILTERS_IMPERSONATION_H

#include "apiserver/authentication/user.h"
#include "apiserver/authorization/rbac/authorizer.h"
#include "apiserver/httpd/httpd.h"
#include "ckube/status.h"

typedef enum {
    IMPERSONATE_NONE,    /* no Impersonate-* header: go on as the requester */
    IMPERSONATE_AS,      /* *as: the user to act as (a new reference) */
    IMPERSONATE_DENIED,  /* *denied: upstream's 403 (a new Status) */
    IMPERSONATE_INVALID, /* *text: upstream's plain-text 500 body (malloc'd) */
} impersonate_result;

/* Reads req's Impersonate-* headers for `requester` (borrowed), deciding
 * with the authorizer over ix. The out parameter of the result is set;
 * the others are left alone. `uri` is the request target, which the 500
 * body quotes. Thread-safe. */
impersonate_result impersonate(rbac_index *ix, const auth_user *requester, const httpd_req *req,
                               const char *uri, auth_user **as, ckube_status **denied,
                               char **text);

#endif
