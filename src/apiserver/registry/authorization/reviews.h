/* reviews.h - authorization.k8s.io and authentication.k8s.io's review
 * types (SelfSubjectAccessReview, SubjectAccessReview, ..., SelfSubjectReview):
 * created, answered, never stored. */
#ifndef CKUBE_APISERVER_REGISTRY_AUTHORIZATION_REVIEWS_H
#define CKUBE_APISERVER_REGISTRY_AUTHORIZATION_REVIEWS_H

#include "apiserver/registry/rest/registry.h"

/* Adds the review types to `reg`. 0, or -1. */
int authorization_install(registry *reg);

#endif
