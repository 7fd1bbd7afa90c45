/* controller.h - the Network controller of the seed articles.
 *
 * Desired state: Network objects (samplecrd.k8s.io/v1, spec.cidr and
 * spec.gateway). Actual state: the networks of a backend (backend.h).
 * Two libckube controllers share one netctl:
 *
 *   "network": for every Network key, the sync handler reads the lister
 *     and drives the backend: NotFound -> remove the real network; being
 *     deleted -> remove it, then the finalizer; otherwise validate the
 *     spec, refuse a CIDR that overlaps an older Network, and create or
 *     update the real network when it differs. It writes status (phase,
 *     observedGeneration, a Ready condition) and records Events. Every
 *     successful sync is repeated after the resync period, so drift made
 *     by hand (a deleted bridge) is repaired.
 *
 *   "network-deployments" (the seed's extension): for every Deployment
 *     labelled samplecrd.k8s.io/network=NAME, makes sure Network NAME
 *     exists in its namespace, owned by the Deployment so the garbage
 *     collector deletes it with the last such Deployment.
 */
#ifndef NETCTL_CONTROLLER_H
#define NETCTL_CONTROLLER_H
#include "backend.h"

#include <ckube/client.h>
#include <ckube/controller.h>
#include <ckube/events.h>
#include <ckube/informer.h>

#define NETCTL_GROUP "samplecrd.k8s.io"
#define NETCTL_FINALIZER "samplecrd.k8s.io/network-cleanup"
#define NETCTL_DEPLOYMENT_LABEL "samplecrd.k8s.io/network"
#define NETCTL_CIDR_ANNOTATION "samplecrd.k8s.io/network-cidr"
#define NETCTL_GATEWAY_ANNOTATION "samplecrd.k8s.io/network-gateway"
#define NETCTL_CREATED_BY_ANNOTATION "samplecrd.k8s.io/created-by"
#define NETCTL_COMPONENT "network-controller"

extern const ckube_gvr NETCTL_NETWORKS;
extern const ckube_gvr NETCTL_DEPLOYMENTS;

typedef struct netctl_options {
    ckube_client *client;               /* borrowed */
    ckube_shared_informer *networks;    /* borrowed; required */
    ckube_shared_informer *deployments; /* borrowed; NULL = no Deployment extension */
    netctl_backend *backend;            /* borrowed; required */
    ckube_event_recorder *recorder;     /* borrowed; NULL = no Events */
    int workers;                        /* Network workers (threadiness); 0 = 2 */
    uint64_t resync_ns;                 /* re-check of actual state; 0 = 30 s */
    const char *auto_cidr_pool;         /* Deployment networks; NULL = "10.200.0.0/16" */
    int auto_prefix_len;                /* their size; 0 = 24 */
} netctl_options;

typedef struct netctl netctl;

/* Builds both controllers (not started). NULL with *err (malloc'd) on bad
 * options. */
netctl *netctl_new(const netctl_options *o, char **err);
/* Frees both controllers (stopping them if running). */
void netctl_free(netctl *n);

/* The controllers, borrowed, to add to a manager or start by hand. The
 * Deployment one is NULL without a Deployment informer. */
ckube_controller *netctl_network_controller(netctl *n);
ckube_controller *netctl_deployment_controller(netctl *n);

/* Removes real networks whose Network no longer exists (deleted while no
 * controller ran and without our finalizer, e.g. created before the
 * controller was first deployed). Call once the Network cache synced. */
void netctl_cleanup_orphans(netctl *n);

#endif
