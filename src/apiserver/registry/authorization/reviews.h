/* reviews.h - authorization.k8s.io and authentication.k8s.io's review
 * types (SelfSubjectAccessReview, SubjectAccessReview, ..., SelfSubjectReview):
 * created, answered, never stored. */
#ifndef CKUBE_APISERVER_REGISTRY_AUTHORIZATION_REVIEWS_H
#define CKUBE_APISERVER_REGISTRY_AUTHORIZATION_REVIEWS_H

#include "apiserver/authorization/rbac/authorizer.h"
#include "apiserver/registry/rest/registry.h"

/* Adds the review types to `reg`. 0, or -1. */
int authorization_install(registry *reg);

/* Hands the access and rules reviews the index they answer from
 * (borrowed; it must outlive the registry's use of them). Until then
 * they allow nothing, and list no rules. */
void authorization_set_authorizer(registry *reg, rbac_index *ix);

#endif
