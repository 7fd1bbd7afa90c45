#!/usr/bin/env bash
# test_network_controller_in_cluster.sh - issue #21's acceptance: the
# seed's Network controller runs in-cluster style with its manifests'
# ServiceAccount (examples/network-controller/manifests/rbac.yaml), against
# the server over TLS, on the memory backend.
#
#  - the admin applies crd.yaml and rbac.yaml; the ServiceAccount's token
#    comes from `kubectl create token`, the CA from the kube-root-ca.crt
#    ConfigMap of its namespace (what a pod gets projected): token, ca.crt
#    and namespace in a directory, and the controller runs with only
#    KUBERNETES_SERVICE_HOST/PORT and that directory (no kubeconfig);
#  - the ClusterRole grants what the controller asks and no more
#    (`kubectl auth can-i --as` the ServiceAccount);
#  - it holds Lease kube-system/network-controller, reconciles the seed's
#    example Network to Ready (finalizer, status subresource, Events),
#    makes Network web-net for Deployment web, removes its finalizer when a
#    Network is deleted; the server refused none of its requests;
#  - least privilege bites: the ClusterRoleBinding deleted, its writes are
#    refused with upstream's 403 (naming the ServiceAccount's user) and the
#    Network stays unreconciled; the binding applied again, it catches up;
#  - SIGTERM: it exits 0 and releases the Lease.
source "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "jq is required"
NETCTL=${CKUBE_NETCTL:-$SRC/build/ckube-network-controller}
[ -x "$NETCTL" ] || fail "ckube-network-controller not built ($NETCTL)"
export HOME=$TMP/home
mkdir -p "$HOME"
MANIFESTS=$SRC/examples/network-controller/manifests
SA_USER=system:serviceaccount:network-system:network-controller
STATE=$TMP/networks.json
SADIR=$TMP/serviceaccount
CTL_LOG=$TMP/ctl.log
CTL_PID=

trap 'rc=$?; set +e
if [ -n "$CTL_PID" ]; then kill -KILL "$CTL_PID" 2>/dev/null; wait "$CTL_PID" 2>/dev/null; fi
if [ $rc -ne 0 ]; then echo "---- $CTL_LOG (tail)" >&2; tail -n 40 "$CTL_LOG" >&2; fi
(exit $rc); cleanup' EXIT

free_port() { python3 "$SRC/tests/e2e/free_port.py"; }
jpath() { kubectl get network "$1" -o jsonpath="$2" 2>/dev/null; }
# actual KEY: the addresses the memory backend holds for KEY.
actual() {
    [ -f "$STATE" ] || return 0
    jq -r --arg k "$1" '.networks[$k].addresses // [] | join(" ")' "$STATE" 2>/dev/null || true
}
wait_actual() { # KEY WANT [SECONDS]
    local got=""
    for _ in $(seq 1 $((${3:-15} * 10))); do
        got=$(actual "$1")
        [ "$got" = "$2" ] && return 0
        sleep 0.1
    done
    fail "network $1: expected [$2], got [$got]"
}
wait_ready() { # NAME
    for _ in $(seq 1 150); do
        [ "$(jpath "$1" '{.status.phase}/{.status.observedGeneration}')" = "Ready/$(jpath "$1" '{.metadata.generation}')" ] &&
            return 0
        sleep 0.1
    done
    fail "network $1: status [$(jpath "$1" '{.status}')], wanted Ready at its generation"
}
wait_log() { # FILE TEXT [SECONDS]
    for _ in $(seq 1 $((${3:-15} * 10))); do
        grep -qF -- "$2" "$1" && return 0
        sleep 0.1
    done
    fail "no [$2] in $1 within ${3:-15} s"
}
wait_gone() { # KIND NAME
    for _ in $(seq 1 150); do
        kubectl get "$1" "$2" >/dev/null 2>&1 || return 0
        sleep 0.1
    done
    fail "$1 $2 still exists: $(kubectl get "$1" "$2" -o jsonpath='{.metadata}' 2>&1)"
}
# refusals: the server's 403 replies to the ServiceAccount (its -v=2 line
# for every Status reply: "METHOD TARGET: 403 MESSAGE").
refusals() { grep -F ": 403 " "$TMP/server.log" | grep -cF "User \"$SA_USER\"" || true; }
can_i() { kubectl auth can-i --as "$SA_USER" "$@" 2>/dev/null || true; }

# -v=2: every Status reply (403s included) is in the server's log.
start_server -v=2
expect_eq "${SERVER_URL%%://*}" https "the server serves TLS"

echo "--- 1. the admin applies the CRD and the RBAC manifests"
kubectl apply -f "$MANIFESTS/crd.yaml" >/dev/null
kubectl wait --for=condition=Established crd/networks.samplecrd.k8s.io --timeout=15s >/dev/null
out=$(kubectl apply -f "$MANIFESTS/rbac.yaml")
for o in namespace/network-system serviceaccount/network-controller \
    clusterrole.rbac.authorization.k8s.io/network-controller \
    clusterrolebinding.rbac.authorization.k8s.io/network-controller \
    role.rbac.authorization.k8s.io/network-controller-leader-election \
    rolebinding.rbac.authorization.k8s.io/network-controller-leader-election; do
    expect_contains "$out" "$o created" "kubectl apply -f rbac.yaml"
done
expect_contains "$(kubectl apply -f "$MANIFESTS/rbac.yaml")" "clusterrole.rbac.authorization.k8s.io/network-controller unchanged" \
    "rbac.yaml applied again"

echo "--- 2. the ServiceAccount may do what the controller does, nothing more"
for yes in "list networks.samplecrd.k8s.io -A" "watch networks.samplecrd.k8s.io -A" \
    "create networks.samplecrd.k8s.io -n default" "patch networks.samplecrd.k8s.io -n default" \
    "patch networks.samplecrd.k8s.io --subresource=status -n default" \
    "list deployments.apps -A" "watch deployments.apps -A" \
    "create events -n default" "patch events -n default" \
    "create leases.coordination.k8s.io -n kube-system" \
    "get leases.coordination.k8s.io/network-controller -n kube-system" \
    "update leases.coordination.k8s.io/network-controller -n kube-system"; do
    # shellcheck disable=SC2086
    expect_eq "$(can_i $yes)" yes "can-i $yes"
done
for no in "get networks.samplecrd.k8s.io -n default" "update networks.samplecrd.k8s.io -n default" \
    "delete networks.samplecrd.k8s.io -n default" "update networks.samplecrd.k8s.io --subresource=status -n default" \
    "get deployments.apps -n default" "patch deployments.apps -n default" \
    "list events -n default" "delete events -n default" \
    "get leases.coordination.k8s.io/kube-controller-manager -n kube-system" \
    "update leases.coordination.k8s.io/kube-scheduler -n kube-system" \
    "create leases.coordination.k8s.io -n default" \
    "list secrets -A" "get configmaps -n network-system" "create pods -n default"; do
    # shellcheck disable=SC2086
    expect_eq "$(can_i $no)" no "can-i $no"
done

echo "--- 3. the pod's view: token, ca.crt, namespace; no kubeconfig"
TOKEN=$(kubectl create token network-controller -n network-system --duration=10m)
[ -n "$TOKEN" ] || fail "no token"
mkdir -p "$SADIR" "$TMP/ctlhome"
# kubelet projects ca.crt from the namespace's kube-root-ca.crt ConfigMap
ca=""
for _ in $(seq 1 100); do
    ca=$(kubectl get cm kube-root-ca.crt -n network-system -o jsonpath='{.data.ca\.crt}' 2>/dev/null || true)
    [ -n "$ca" ] && break
    sleep 0.1
done
[ -n "$ca" ] || fail "no kube-root-ca.crt in network-system"
printf '%s\n' "$ca" >"$SADIR/ca.crt"
printf '%s' "$TOKEN" >"$SADIR/token"
printf '%s' network-system >"$SADIR/namespace"
HPORT=$(free_port)
MPORT=$(free_port)
env -i PATH="$PATH" HOME="$TMP/ctlhome" KUBERNETES_SERVICE_HOST=127.0.0.1 \
    KUBERNETES_SERVICE_PORT="$PORT" CKUBE_SERVICEACCOUNT_DIR="$SADIR" \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    "$NETCTL" --backend memory --memory-state-file "$STATE" --resync-period 30s \
    --leader-elect-lease-duration 4s --leader-elect-renew-deadline 3s \
    --leader-elect-retry-period 500ms --metrics-bind-address "127.0.0.1:$MPORT" \
    --health-probe-bind-address "127.0.0.1:$HPORT" -v 2 --vmodule config=4 >"$CTL_LOG" 2>&1 &
CTL_PID=$!
wait_log "$CTL_LOG" "Using in-cluster configuration" 5
wait_log "$CTL_LOG" "successfully acquired lease kube-system/network-controller"
wait_log "$CTL_LOG" 'Starting workers controller="network"'
wait_log "$CTL_LOG" 'Starting workers controller="network-deployments"'
holder=$(kubectl get lease network-controller -n kube-system -o jsonpath='{.spec.holderIdentity}')
[ -n "$holder" ] || fail "Lease kube-system/network-controller has no holder"
renew=$(kubectl get lease network-controller -n kube-system -o jsonpath='{.spec.renewTime}')
for _ in $(seq 1 30); do
    [ "$(kubectl get lease network-controller -n kube-system -o jsonpath='{.spec.renewTime}')" != "$renew" ] && break
    sleep 0.1
done
[ "$(kubectl get lease network-controller -n kube-system -o jsonpath='{.spec.renewTime}')" != "$renew" ] ||
    fail "the leader does not renew its Lease"
expect_eq "$(kubectl get lease network-controller -n kube-system -o jsonpath='{.spec.holderIdentity}')" "$holder" "the Lease's holder"

echo "--- 4. the seed's example Network: Ready"
kubectl apply -f "$SRC/examples/network/example-network.yaml" >/dev/null
wait_actual default/example-network 192.168.0.1/16
wait_ready example-network
expect_eq "$(jpath example-network '{.status.conditions[0].type}={.status.conditions[0].status}')" "Ready=True" "Ready condition"
expect_contains "$(jpath example-network '{.metadata.finalizers}')" "samplecrd.k8s.io/network-cleanup" "finalizer"
for _ in $(seq 1 100); do
    ev=$(kubectl get events --field-selector involvedObject.name=example-network,reason=Created \
        -o jsonpath='{.items[*].message}' 2>/dev/null || true)
    [ -n "$ev" ] && break
    sleep 0.1
done
expect_contains "$ev" "with 192.168.0.1/16" "the Created Event"

echo "--- 5. a Deployment-owned Network"
kubectl apply -f "$MANIFESTS/deployment.yaml" >/dev/null
for _ in $(seq 1 150); do kubectl get network web-net >/dev/null 2>&1 && break; sleep 0.1; done
expect_eq "$(jpath web-net '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].uid}')" \
    "Deployment/web/$(kubectl get deploy web -o jsonpath='{.metadata.uid}')" "web-net's owner"
wait_actual default/web-net 10.200.0.1/24
wait_ready web-net
for _ in $(seq 1 100); do
    ev=$(kubectl get events --field-selector involvedObject.kind=Deployment,involvedObject.name=web,reason=NetworkCreated \
        -o jsonpath='{.items[*].message}' 2>/dev/null || true)
    [ -n "$ev" ] && break
    sleep 0.1
done
expect_contains "$ev" "Created Network web-net" "the NetworkCreated Event"

echo "--- 6. a Network deleted: the network goes, then the finalizer"
kubectl delete network example-network --wait=false >/dev/null
wait_actual default/example-network ""
wait_gone network example-network
# (web-net is the garbage collector's once Deployment web goes; the
# controller then removes its network and finalizer. The collector finds
# the CRD's resource at its next discovery resync, which under
# ThreadSanitizer can take most of a minute: as network_walkthrough.sh,
# allow 45 s)
kubectl delete deployment web >/dev/null
for _ in $(seq 1 450); do kubectl get network web-net >/dev/null 2>&1 || break; sleep 0.1; done
wait_gone network web-net
wait_actual default/web-net ""
expect_eq "$(refusals)" 0 "403s for $SA_USER with the manifests' RBAC: $(grep -F "$SA_USER" "$TMP/server.log" | tail -n 3)"
grep -qi forbidden "$CTL_LOG" && fail "forbidden in the controller's log: $(grep -i forbidden "$CTL_LOG" | head -n 3)"
kill -0 "$CTL_PID" || fail "the controller exited"

echo "--- 7. least privilege bites: the ClusterRoleBinding deleted"
kubectl delete clusterrolebinding network-controller >/dev/null
for _ in $(seq 1 50); do [ "$(can_i patch networks.samplecrd.k8s.io -n default)" = no ] && break; sleep 0.1; done
expect_eq "$(can_i patch networks.samplecrd.k8s.io -n default)" no "the binding's removal is in force"
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: samplecrd.k8s.io/v1
kind: Network
metadata:
  name: revoked
spec:
  cidr: 10.70.0.0/24
  gateway: 10.70.0.1
EOF
want="networks.samplecrd.k8s.io \"revoked\" is forbidden: User \"$SA_USER\" cannot patch resource \"networks\" in API group \"samplecrd.k8s.io\" in the namespace \"default\""
wait_log "$CTL_LOG" "$want" 10
wait_log "$TMP/server.log" ": 403 $want" 5
expect_eq "$(jpath revoked '{.metadata.finalizers}{.status}')" "" "revoked: no finalizer, no status"
expect_eq "$(actual default/revoked)" "" "no network for a Network the controller may not write"
# the Lease is the Role's: leadership holds
expect_eq "$(kubectl get lease network-controller -n kube-system -o jsonpath='{.spec.holderIdentity}')" "$holder" "the Lease's holder without the ClusterRoleBinding"
kill -0 "$CTL_PID" || fail "the controller exited without its ClusterRoleBinding"

echo "--- 8. the binding applied again: it catches up"
kubectl apply -f "$MANIFESTS/rbac.yaml" >/dev/null
# (the retries back off exponentially while refused: allow for a slow
# sanitizer build)
wait_actual default/revoked 10.70.0.1/24 30
wait_ready revoked
# nothing refused once it caught up
before=$(refusals)
kubectl patch network revoked --type merge -p '{"spec":{"cidr":"10.71.0.0/24","gateway":"10.71.0.1"}}' >/dev/null
wait_actual default/revoked 10.71.0.1/24
wait_ready revoked
kubectl delete network revoked --timeout=15s >/dev/null
wait_actual default/revoked ""
expect_eq "$(refusals)" "$before" "403s for $SA_USER after the binding came back"
expect_eq "$(kubectl get lease network-controller -n kube-system -o jsonpath='{.spec.holderIdentity}')" "$holder" "the Lease's holder throughout"
expect_eq "$(grep -c "successfully acquired lease" "$CTL_LOG")" 1 "leases acquired"
grep -E "failed to renew|leader election lost|Failed to update lock|error retrieving resource lock" "$CTL_LOG" &&
    fail "leader election faltered"

echo "--- 9. SIGTERM: exit 0, the Lease released"
kill -TERM "$CTL_PID"
rc=0
wait "$CTL_PID" || rc=$?
CTL_PID=
[ $rc -eq 0 ] || fail "the controller exited with $rc"
expect_eq "$(kubectl get lease network-controller -n kube-system -o jsonpath='{.spec.holderIdentity}')" "" "the Lease's holder after a clean stop"
stop_server
echo "PASS (${SECONDS}s)"
