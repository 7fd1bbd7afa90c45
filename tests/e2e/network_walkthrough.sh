#!/usr/bin/env bash
# network_walkthrough.sh - issue #6's acceptance: the seed's walkthrough
# with ckube-network-controller, as the README tells a new user to run it.
# Sourced by test_network_controller_bridge.sh (BACKEND=linux-bridge, in a
# private mount namespace and a network namespace of its own) and
# test_network_controller_memory.sh (BACKEND=memory with a state file).
#
#  - started before the CRD exists: logs that networks cannot be listed,
#    keeps retrying with backoff, does not crash or spin;
#  - the CRD applied: caches sync, workers start;
#  - the seed's example Network: a bridge with 192.168.0.1/16, status
#    Ready with observedGeneration, a Created event; changed to
#    192.169.0.0/16 via 192.169.0.1: the bridge follows (Updated event);
#  - invalid specs: refused by the schema, or reported in status and a
#    Warning event (gateway outside the CIDR, host bits, overlapping
#    CIDRs), and the controller lives on;
#  - a bridge deleted by hand is back within a resync period;
#  - the Network deleted: the bridge is gone; the Network that lost the
#    CIDR conflict to it becomes Ready;
#  - finalizer: controller killed, Network deleted, controller started:
#    the bridge is removed, then the Network;
#  - a Deployment labelled samplecrd.k8s.io/network=web-net gets its
#    Network (owned by it); deleting the Deployment removes both;
#  - leader election: a second replica waits; it takes over within
#    seconds of the first stopping; metrics and health endpoints answer.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command -v jq >/dev/null || fail "jq is required"
NETCTL=${CKUBE_NETCTL:-$SRC/build/ckube-network-controller}
[ -x "$NETCTL" ] || fail "ckube-network-controller not built ($NETCTL)"
BACKEND=${BACKEND:?BACKEND must be linux-bridge or memory}
export HOME=$TMP/home
mkdir -p "$HOME"
NETNS=ckube-e2e-$$
STATE=$TMP/networks.json
RESYNC=3
# The CRD: ours (v1, schema, status subresource) unless the test asks for
# the seed's own v1beta1 file (no schema, no subresources).
SEED_CRD=
if [ "${CRD:-}" = seed ]; then
    SEED_CRD=1
    CRD=$SRC/examples/network/crd.yaml
else
    CRD=$SRC/examples/network-controller/manifests/crd.yaml
fi

CTL_PIDS=()
stop_ctls() {
    for p in "${CTL_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for p in "${CTL_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    if [ "$BACKEND" = linux-bridge ]; then
        ip netns del "$NETNS" 2>/dev/null || true
        rm -f "/run/netns/$NETNS"
    fi
}
trap 'rc=$?; set +e; stop_ctls; if [ $rc -ne 0 ]; then for f in "$TMP"/ctl*.log; do echo "---- $f (tail)"; tail -n 40 "$f"; done >&2; fi; (exit $rc); cleanup' EXIT

free_port() { python3 "$SRC/tests/e2e/free_port.py"; }

# start_ctl N: replica N of the controller, on its own ports and log.
declare -A HPORT MPORT CPID
start_ctl() {
    local n=$1 backend_flags
    HPORT[$n]=$(free_port)
    MPORT[$n]=$(free_port)
    if [ "$BACKEND" = linux-bridge ]; then
        backend_flags=(--backend linux-bridge --netns "$NETNS")
    else
        backend_flags=(--backend memory --memory-state-file "$STATE")
    fi
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$NETCTL" --kubeconfig "$KUBECONFIG" \
        "${backend_flags[@]}" --resync-period ${RESYNC}s \
        --leader-elect-lease-duration 4s --leader-elect-renew-deadline 3s \
        --leader-elect-retry-period 500ms \
        --metrics-bind-address 127.0.0.1:${MPORT[$n]} \
        --health-probe-bind-address 127.0.0.1:${HPORT[$n]} -v 2 >>"$TMP/ctl$n.log" 2>&1 &
    CPID[$n]=$!
    CTL_PIDS+=($!)
}
# stop_ctl N: SIGTERM; it must exit 0 (sanitizers included).
stop_ctl() {
    local rc=0
    kill -TERM "${CPID[$1]}"
    wait "${CPID[$1]}" || rc=$?
    [ $rc -eq 0 ] || fail "controller $1 exited with $rc"
}

# actual KEY: the addresses the real network of KEY carries ("" if none).
actual() {
    local key=$1
    if [ "$BACKEND" = linux-bridge ]; then
        local dev
        # `ip -o` keeps each link on one line, its alias last.
        dev=$(ip -n "$NETNS" -o link show | awk -v a="ckube-network:$key" '$NF == a {print $2}' |
            sed 's/:$//; s/@.*//')
        [ -n "$dev" ] || return 0
        # The controller may delete the link between the two commands: a
        # link gone by now carries no addresses (not an error under -e).
        local addrs
        addrs=$(ip -n "$NETNS" -o addr show dev "$dev" scope global 2>/dev/null) || return 0
        printf '%s\n' "$addrs" | awk '{print $4}' | tr '\n' ' ' | sed 's/ $//'
    else
        [ -f "$STATE" ] || return 0
        jq -r --arg k "$key" '.networks[$k].addresses // [] | join(" ")' "$STATE"
    fi
}
# wait_actual KEY WANT [SECONDS]: until actual KEY is exactly WANT.
wait_actual() {
    local got="" i
    for i in $(seq 1 $((${3:-15} * 10))); do
        got=$(actual "$1")
        [ "$got" = "$2" ] && return 0
        sleep 0.1
    done
    fail "network $1: expected [$2], got [$got]"
}
jpath() { kubectl get network "$1" -o jsonpath="$2" 2>/dev/null; }
wait_phase() { # NAME PHASE [REASON]
    local i
    for i in $(seq 1 150); do
        if [ "$(jpath "$1" '{.status.phase}')" = "$2" ] &&
            { [ -z "${3:-}" ] || [ "$(jpath "$1" '{.status.conditions[0].reason}')" = "$3" ]; }; then
            return 0
        fi
        sleep 0.1
    done
    fail "network $1: phase [$(jpath "$1" '{.status.phase}')] reason [$(jpath "$1" '{.status.conditions[0].reason}')], wanted $2 ${3:-}"
}
events_of() { # NAME REASON -> messages
    kubectl get events --field-selector "involvedObject.name=$1,reason=$2" \
        -o jsonpath='{range .items[*]}{.type} {.message}{"\n"}{end}' 2>/dev/null
}
wait_event() { # NAME REASON TEXT
    local i
    for i in $(seq 1 100); do
        [[ $(events_of "$1" "$2") == *"$3"* ]] && return 0
        sleep 0.1
    done
    fail "no $2 event with [$3] on $1; events: $(kubectl get events 2>&1 | tail -n 20)"
}
net() { # NAME CIDR GATEWAY
    printf 'apiVersion: samplecrd.k8s.io/v1\nkind: Network\nmetadata:\n  name: %s\nspec:\n  cidr: "%s"\n  gateway: "%s"\n' "$1" "$2" "$3"
}

start_server

echo "--- 1. the controller starts before the CRD exists"
start_ctl 1
sleep 4
kill -0 "${CPID[1]}" || fail "the controller exited without the CRD"
grep -q "failed to list networks.samplecrd.k8s.io" "$TMP/ctl1.log" ||
    fail "no log line saying networks cannot be listed"
n=$(grep -c "failed to list networks.samplecrd.k8s.io" "$TMP/ctl1.log")
[ "$n" -le 6 ] || fail "list retried $n times in 4 s: no backoff"
curl -sf "http://127.0.0.1:${HPORT[1]}/healthz" >/dev/null || fail "healthz does not answer"

echo "--- 2. the CRD: caches sync, workers start"
kubectl apply -f "$CRD" >/dev/null
for _ in $(seq 1 150); do grep -q 'Starting workers controller="network"' "$TMP/ctl1.log" && break; sleep 0.1; done
grep -q 'Starting workers controller="network"' "$TMP/ctl1.log" || fail "workers did not start within 15 s of the CRD"

echo "--- 3. the seed's example Network"
kubectl apply -f "$SRC/examples/network/example-network.yaml" >/dev/null
wait_actual default/example-network 192.168.0.1/16
wait_phase example-network Ready NetworkReady
if [ -z "$SEED_CRD" ]; then # without a status subresource it cannot keep up
    expect_eq "$(jpath example-network '{.status.observedGeneration}')" "$(jpath example-network '{.metadata.generation}')" "observedGeneration"
fi
expect_eq "$(jpath example-network '{.status.conditions[0].type}={.status.conditions[0].status}')" "Ready=True" "Ready condition"
expect_contains "$(jpath example-network '{.metadata.finalizers}')" "samplecrd.k8s.io/network-cleanup" "finalizer"
wait_event example-network Created "with 192.168.0.1/16"
if [ "$BACKEND" = linux-bridge ]; then
    # (captured first: `ip | grep -q` under pipefail fails when grep exits
    # early and ip gets SIGPIPE)
    addrs=$(ip -n "$NETNS" addr)
    expect_contains "$addrs" "inet 192.168.0.1/16" "ip -n $NETNS addr"
fi

echo "--- 4. changed to 192.169.0.0/16 via 192.169.0.1: the bridge follows"
kubectl patch network example-network --type merge \
    -p '{"spec":{"cidr":"192.169.0.0/16","gateway":"192.169.0.1"}}' >/dev/null
wait_actual default/example-network 192.169.0.1/16
wait_event example-network Updated "to 192.169.0.1/16"
if [ -z "$SEED_CRD" ]; then
    for _ in $(seq 1 50); do [ "$(jpath example-network '{.status.observedGeneration}')" = 2 ] && break; sleep 0.1; done
    expect_eq "$(jpath example-network '{.status.observedGeneration}')" 2 "observedGeneration after the change"
fi

echo "--- 5. invalid specs"
if [ -z "$SEED_CRD" ]; then # the schema refuses malformed values
    out=$(net bad-ip 10.0.0.0/8 300.1.1.1 | kubectl apply -f - 2>&1) && fail "a malformed gateway was accepted: $out"
    expect_contains "$out" "spec.gateway" "schema error names the field"
    out=$(net bad-cidr 10.0.0.0/33 10.0.0.1 | kubectl apply -f - 2>&1) && fail "a /33 was accepted: $out"
    expect_contains "$out" "spec.cidr" "schema error names the field"
else # no schema: the controller reports them
    net bad-ip 10.0.0.0/8 300.1.1.1 | kubectl apply -f - >/dev/null
    wait_phase bad-ip Failed InvalidSpec
    expect_contains "$(jpath bad-ip '{.status.conditions[0].message}')" "300.1.1.1 is not a valid IPv4 address" "status message"
    net bad-cidr 10.0.0.0/33 10.0.0.1 | kubectl apply -f - >/dev/null
    wait_phase bad-cidr Failed InvalidSpec
    kubectl delete network bad-ip bad-cidr --timeout=20s >/dev/null
fi
net outside 10.9.0.0/16 10.10.0.1 | kubectl apply -f - >/dev/null
wait_phase outside Failed InvalidSpec
expect_contains "$(jpath outside '{.status.conditions[0].message}')" "outside spec.cidr" "status message"
wait_event outside Failed "is outside spec.cidr 10.9.0.0/16"
net hostbits 10.9.0.1/16 10.9.0.2 | kubectl apply -f - >/dev/null
wait_phase hostbits Failed InvalidSpec
expect_contains "$(jpath hostbits '{.status.conditions[0].message}')" "did you mean 10.9.0.0/16" "host bits"
net overlap 192.169.128.0/17 192.169.128.1 | kubectl apply -f - >/dev/null
wait_phase overlap Failed CIDRConflict
expect_contains "$(jpath overlap '{.status.conditions[0].message}')" "Network default/example-network" "conflict names the other"
wait_event overlap Failed "overlaps 192.169.0.0/16"
expect_eq "$(actual default/overlap)" "" "no network for the loser of a conflict"
expect_eq "$(actual default/outside)" "" "no network for an invalid spec"
kill -0 "${CPID[1]}" || fail "the controller died on invalid specs"

echo "--- 6. the real network changed by hand is repaired within a resync"
if [ "$BACKEND" = linux-bridge ]; then
    dev=$(jpath example-network '{.status.bridge}')
    ip -n "$NETNS" link del "$dev"
    expect_eq "$(actual default/example-network)" "" "bridge deleted by hand"
else
    jq 'del(.networks["default/example-network"])' "$STATE" >"$STATE.edit" && mv "$STATE.edit" "$STATE"
fi
wait_actual default/example-network 192.169.0.1/16 $((RESYNC + 8))

echo "--- 7. the Network deleted: the network goes; the conflict clears"
kubectl delete network example-network --timeout=20s >/dev/null
wait_actual default/example-network ""
wait_event example-network Deleted "Deleted bridge"
wait_actual default/overlap 192.169.128.1/17
wait_phase overlap Ready
kubectl delete network overlap outside hostbits --timeout=20s >/dev/null
wait_actual default/overlap ""

echo "--- 8. finalizer: deleted while the controller is down"
net fin 10.50.0.0/24 10.50.0.1 | kubectl apply -f - >/dev/null
wait_actual default/fin 10.50.0.1/24
kill -KILL "${CPID[1]}"
wait "${CPID[1]}" 2>/dev/null || true
kubectl delete network fin --wait=false >/dev/null
sleep 1
[ -n "$(jpath fin '{.metadata.deletionTimestamp}')" ] || fail "fin is gone without its finalizer having run"
expect_eq "$(actual default/fin)" 10.50.0.1/24 "the network outlives a Network deleted while the controller is down"
start_ctl 1
wait_actual default/fin "" 30
for _ in $(seq 1 100); do kubectl get network fin >/dev/null 2>&1 || break; sleep 0.1; done
kubectl get network fin >/dev/null 2>&1 && fail "fin still exists after its clean-up"

echo "--- 9. a Deployment labelled with a network name gets its Network"
kubectl apply -f "$SRC/examples/network-controller/manifests/deployment.yaml" >/dev/null
for _ in $(seq 1 150); do kubectl get network web-net >/dev/null 2>&1 && break; sleep 0.1; done
kubectl get network web-net >/dev/null 2>&1 || fail "no Network web-net for Deployment web"
expect_eq "$(jpath web-net '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')" "Deployment/web" "owner"
expect_eq "$(jpath web-net '{.metadata.ownerReferences[0].uid}')" "$(kubectl get deploy web -o jsonpath='{.metadata.uid}')" "owner uid"
wait_actual default/web-net 10.200.0.1/24
wait_phase web-net Ready
kubectl delete deployment web >/dev/null
for _ in $(seq 1 400); do kubectl get network web-net >/dev/null 2>&1 || break; sleep 0.1; done
kubectl get network web-net >/dev/null 2>&1 && fail "Network web-net outlived its Deployment by 40 s"
wait_actual default/web-net ""

echo "--- 10. leader election, metrics, health"
start_ctl 2
for _ in $(seq 1 100); do grep -q "attempting to acquire leader lease" "$TMP/ctl2.log" && break; sleep 0.1; done
sleep 2
grep -q "successfully acquired lease" "$TMP/ctl2.log" && fail "two replicas lead at once"
net second 10.60.0.0/24 10.60.0.1 | kubectl apply -f - >/dev/null
wait_actual default/second 10.60.0.1/24
grep -q "Created network default/second" "$TMP/ctl1.log" || fail "the leader did not create it"
grep -q "Created network default/second" "$TMP/ctl2.log" && fail "the standby acted"
metrics=$(curl -sf "http://127.0.0.1:${MPORT[1]}/metrics") || fail "metrics do not answer"
expect_contains "$metrics" 'controller_runtime_reconcile_total{controller="network",result="success"}' "reconcile metrics"
expect_contains "$metrics" 'workqueue_adds_total{name="network"}' "workqueue metrics"
curl -sf "http://127.0.0.1:${HPORT[1]}/readyz" >/dev/null || fail "readyz of the leader"
curl -sf "http://127.0.0.1:${HPORT[2]}/healthz" >/dev/null || fail "healthz of the standby"
stop_ctl 1
for _ in $(seq 1 100); do grep -q "successfully acquired lease" "$TMP/ctl2.log" && break; sleep 0.1; done
grep -q "successfully acquired lease" "$TMP/ctl2.log" || fail "the standby did not take over within 10 s"
kubectl patch network second --type merge -p '{"spec":{"cidr":"10.61.0.0/24","gateway":"10.61.0.1"}}' >/dev/null
wait_actual default/second 10.61.0.1/24
grep -q "Updated network default/second" "$TMP/ctl2.log" || fail "the new leader did not act"
kubectl delete network second --timeout=20s >/dev/null
wait_actual default/second ""
stop_ctl 2
echo "PASS ($BACKEND)"
