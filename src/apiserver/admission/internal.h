/* internal.h - what admission's files share: a webhook compiled from its
 * configuration, and the snapshot of all of them (config.c), which the
 * runs (dispatch.c) hold a reference to while they call out. */
#ifndef CKUBE_APISERVER_ADMISSION_INTERNAL_H
#define CKUBE_APISERVER_ADMISSION_INTERNAL_H

#include "apiserver/webhook/client.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "apiserver/admission/admission.h"
#include "ckube/metrics.h"
#include "ckube/selector.h"

enum {
    ADM_OP_CREATE = 1,
    ADM_OP_UPDATE = 2,
    ADM_OP_DELETE = 4,
    ADM_OP_CONNECT = 8,
    ADM_OP_ALL = 15
};
enum { ADM_SCOPE_ALL, ADM_SCOPE_CLUSTER, ADM_SCOPE_NAMESPACED, ADM_SCOPE_NONE };

typedef struct adm_rule {
    unsigned ops; /* ADM_OP_* bits */
    char **groups, **versions, **resources;
    size_t ngroups, nversions, nresources;
    int scope; /* ADM_SCOPE_* */
} adm_rule;

typedef struct adm_hook {
    char *config, *name;
    bool mutating;
    adm_rule *rules;
    size_t nrules;
    bool ignore;                      /* failurePolicy: Ignore */
    ckube_selector *ns_sel, *obj_sel; /* NULL: everything */
    bool side_effects_none;           /* None or NoneOnDryRun */
    bool side_effects_set;
    unsigned timeout_s;
    const char *review_version; /* "v1", "v1beta1" (static), NULL: none known */
    bool reinvoke;              /* reinvocationPolicy: IfNeeded */
    bool exact;                 /* matchPolicy: Exact (else Equivalent) */
    bool has_match_conditions;
    hook_client client; /* clientConfig */
} adm_hook;

typedef struct adm_snapshot {
    atomic_int refs;
    adm_hook *mutating, *validating;
    size_t nmutating, nvalidating;
} adm_snapshot;

struct admission {
    cacher *cache;
    atomic_ulong generation; /* bumped by the cacher listener */
    pthread_mutex_t mu;
    adm_snapshot *snap; /* guarded by mu */
    unsigned long snap_generation;
    /* apiserver_admission_webhook_{request_total,admission_duration_seconds,
     * rejection_count,fail_open_count}: admission_set_metrics (NULL: not
     * counted). Set before any run; read-only after. */
    ckube_metric_family *m_requests, *m_latency, *m_rejections, *m_fail_open;
    /* apiserver_admission_step_admission_duration_seconds and
     * apiserver_admission_controller_admission_duration_seconds, observed
     * on every ask of admission (the webhooks are ckube's admission
     * plugins in those phases). Their children are resolved once each,
     * on first use, by whichever loop comes first:
     * [mutating][operation: CREATE, UPDATE, DELETE, CONNECT][rejected]. */
    ckube_metric_family *m_step, *m_controller;
    _Atomic(ckube_metric *) step_child[2][4][2], controller_child[2][4][2];
};

/* The current snapshot (a reference). */
adm_snapshot *adm_snapshot_get(admission *a);
void adm_snapshot_unref(adm_snapshot *s);

/* For the fuzzer (tests/fuzz/fuzz_admission_answer.c): takes `body` as
 * a webhook's answer (HTTP `status`) to a review whose uid is
 * ADM_FUZZ_UID, patching obj (borrowed; NULL: a delete) when mutating.
 * Returns whether obj changed; *st is the Status the answer ends in
 * (NULL: allowed; the caller frees it). */
#define ADM_FUZZ_UID "00000000-0000-4000-8000-000000000000"
bool adm__answer(bool mutating, int status, const char *body, size_t len, json_t *obj,
                 ckube_status **st);

#endif
