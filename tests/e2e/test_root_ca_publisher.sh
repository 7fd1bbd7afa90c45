#!/usr/bin/env bash
# test_root_ca_publisher.sh - kube-controller-manager's root CA publisher
# as `ckube server` runs it (its controller-manager child, given
# --root-ca-file DATA_DIR/pki/ca.crt): every namespace has a ConfigMap
# kube-root-ca.crt whose ca.crt is the cluster CA, with upstream's
# description annotation; it appears in a new namespace, comes back when
# deleted and is put back when edited, other ConfigMaps are left alone;
# and `ckube controller-manager --root-ca-file` refuses a bad file.
source "$(dirname "$0")/lib.sh"
export HOME=$TMP/home
mkdir -p "$HOME"

start_server
CA_FILE=${DATA_DIR:-$TMP/data}/pki/ca.crt
[ -s "$CA_FILE" ] || fail "no $CA_FILE"
CA=$(cat "$CA_FILE")
DESC="Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."

ca_of() { kubectl get cm kube-root-ca.crt -n "$1" -o jsonpath='{.data.ca\.crt}' 2>/dev/null; }
uid_of() { kubectl get cm kube-root-ca.crt -n "$1" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
desc_of() { kubectl get cm kube-root-ca.crt -n "$1" -o jsonpath='{.metadata.annotations.kubernetes\.io/description}' 2>/dev/null; }
keys_of() { kubectl get cm kube-root-ca.crt -n "$1" -o go-template='{{range $k, $v := .data}}{{$k}} {{end}}' 2>/dev/null; }
# published NS [OLD_UID]: the CA and the description are there (in a
# ConfigMap other than OLD_UID's when given)
published() {
    [ "$(ca_of "$1")" = "$CA" ] && [ "$(desc_of "$1")" = "$DESC" ] &&
        { [ -z "${2:-}" ] || { [ -n "$(uid_of "$1")" ] && [ "$(uid_of "$1")" != "$2" ]; }; }
}
# wait_published NS [OLD_UID] MESSAGE: up to 20 s
wait_published() {
    local ns=$1 old=${2:-} msg=$3
    for _ in $(seq 1 200); do published "$ns" "$old" && return 0; sleep 0.1; done
    fail "$msg: kube-root-ca.crt in $ns is not the cluster CA ($(kubectl get cm kube-root-ca.crt -n "$ns" -o json 2>&1 | head -c 600))"
}

# the child is given the cluster CA (the kubeconfig names the same file,
# so the published bytes alone would not tell)
for _ in $(seq 1 100); do
    CHILD=$(pgrep -P "$SERVER_PID" -f ckube-controller-manager || true)
    [ -n "$CHILD" ] && break
    sleep 0.1
done
[ -n "$CHILD" ] || fail "no controller-manager child"
expect_contains "$(tr '\0' ' ' <"/proc/$CHILD/cmdline")" "--root-ca-file $CA_FILE" "child's arguments"

# the namespaces the server makes
for ns in default kube-system kube-public kube-node-lease; do
    wait_published "$ns" "" "at start"
done
expect_eq "$(keys_of default)" "ca.crt " "data keys"

# a new namespace
kubectl create namespace team-a >/dev/null
wait_published team-a "" "new namespace"
U1=$(uid_of team-a)

# deleted: made again
kubectl delete cm kube-root-ca.crt -n team-a >/dev/null
wait_published team-a "$U1" "after delete"
U2=$(uid_of team-a)

# edited data (a key changed, one added) and a label: put back on the
# same object, the label kept
kubectl patch cm kube-root-ca.crt -n team-a --type merge \
    -p '{"metadata":{"labels":{"team":"a"}},"data":{"ca.crt":"tampered","extra":"x"}}' >/dev/null
for _ in $(seq 1 200); do published team-a && [ "$(keys_of team-a)" = "ca.crt " ] && break; sleep 0.1; done
published team-a || fail "edited data not put back: $(ca_of team-a | head -c 100)"
expect_eq "$(keys_of team-a)" "ca.crt " "extra key removed"
expect_eq "$(uid_of team-a)" "$U2" "repaired in place"
expect_eq "$(kubectl get cm kube-root-ca.crt -n team-a -o jsonpath='{.metadata.labels.team}')" a "label kept"

# the description annotation removed: set again
kubectl annotate cm kube-root-ca.crt -n team-a kubernetes.io/description- >/dev/null
wait_published team-a "" "annotation removed"
expect_eq "$(uid_of team-a)" "$U2" "repaired in place"

# other ConfigMaps, even with a ca.crt, are left alone
kubectl create configmap other -n team-a --from-literal=ca.crt=mine >/dev/null
RV=$(kubectl get cm other -n team-a -o jsonpath='{.metadata.resourceVersion}')
kubectl label cm other -n team-a touched=yes >/dev/null
RV2=$(kubectl get cm other -n team-a -o jsonpath='{.metadata.resourceVersion}')
sleep 1
expect_eq "$(kubectl get cm other -n team-a -o jsonpath='{.data.ca\.crt}')" mine "other ConfigMap's data"
expect_eq "$(kubectl get cm other -n team-a -o jsonpath='{.metadata.resourceVersion}')" "$RV2" \
    "other ConfigMap not written (created at $RV)"
expect_eq "$(kubectl get cm other -n team-a -o jsonpath='{.metadata.annotations}')" "" \
    "other ConfigMap not annotated"

# a deleted namespace takes it along
kubectl delete namespace team-a --wait=false >/dev/null
for _ in $(seq 1 200); do ! kubectl get namespace team-a >/dev/null 2>&1 && break; sleep 0.1; done
kubectl get namespace team-a >/dev/null 2>&1 && fail "namespace team-a still there after 20 s"

# the flag: in the help, and a bad file is refused with exit 2
expect_contains "$("$CKUBE_BIN" controller-manager --help)" "--root-ca-file" "help"
rc=0
out=$("$CKUBE_BIN" controller-manager --kubeconfig "$KUBECONFIG" --root-ca-file "$TMP/nope.crt" 2>&1) || rc=$?
expect_eq "$rc" 2 "missing --root-ca-file: exit status"
expect_contains "$out" "--root-ca-file $TMP/nope.crt: No such file or directory" "missing --root-ca-file"
echo "not a certificate" >"$TMP/bad.crt"
rc=0
out=$("$CKUBE_BIN" controller-manager --kubeconfig "$KUBECONFIG" --root-ca-file "$TMP/bad.crt" 2>&1) || rc=$?
expect_eq "$rc" 2 "non-PEM --root-ca-file: exit status"
expect_contains "$out" "no PEM certificate in it" "non-PEM --root-ca-file"
printf -- '-----BEGIN CERTIFICATE-----\nbm90IERFUg==\n-----END CERTIFICATE-----\n' >"$TMP/bad2.crt"
rc=0
out=$("$CKUBE_BIN" controller-manager --kubeconfig "$KUBECONFIG" --root-ca-file "$TMP/bad2.crt" 2>&1) || rc=$?
expect_eq "$rc" 2 "unparsable --root-ca-file: exit status"
expect_contains "$out" "does not parse" "unparsable --root-ca-file"

stop_server
echo PASS
