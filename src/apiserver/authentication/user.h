/* user.h - who a request is from, once authenticated: upstream's
 * user.Info (name, uid, groups, extra), as the authenticators make it and
 * authorization, audit and SelfSubjectReview read it.
 *
 * Immutable once made and reference-counted (atomically): a connection's
 * client-certificate user is made once and shared by every request on it,
 * which may finish on other threads.
 */
#ifndef CKUBE_APISERVER_AUTHENTICATION_USER_H
#define CKUBE_APISERVER_AUTHENTICATION_USER_H

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>

/* The names upstream gives (k8s.io/apiserver/pkg/authentication/user). */
#define AUTH_USER_ANONYMOUS "system:anonymous"
#define AUTH_GROUP_UNAUTHENTICATED "system:unauthenticated"
#define AUTH_GROUP_AUTHENTICATED "system:authenticated"
#define AUTH_GROUP_MASTERS "system:masters"
/* The identity of plain-HTTP requests (--plain-http), as kube-apiserver's
 * old insecure port had it. */
#define AUTH_USER_UNSECURED "system:unsecured"

typedef struct auth_user {
    atomic_int refs;
    char *name;
    char *uid;     /* "" when none */
    char **groups; /* ngroups strings */
    size_t ngroups;
    json_t *extra; /* an object of string arrays, or NULL */
} auth_user;

/* A new user (one reference) named `name`, with `uid` (NULL: ""), the
 * groups copied from groups[0..n), and `extra` (a reference taken; NULL:
 * none). */
auth_user *auth_user_new(const char *name, const char *uid, const char *const *groups, size_t n,
                         json_t *extra);

/* Adds `group` unless the user has it already (only before the user is
 * shared: users are immutable once published). */
void auth_user_add_group(auth_user *u, const char *group);

/* Whether the user is in `group`. */
int auth_user_in_group(const auth_user *u, const char *group);

auth_user *auth_user_ref(auth_user *u);
void auth_user_unref(auth_user *u); /* NULL: nothing */

/* authentication.k8s.io UserInfo: {"username", "uid"?, "groups"?,
 * "extra"?}, the fields left out when empty as upstream's omitempty. A
 * new reference. */
json_t *auth_user_info_json(const auth_user *u);

#endif
