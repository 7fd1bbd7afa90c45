#!/usr/bin/env bash
# test_controller_manager_identity.sh - the controller-manager child of
# `ckube server` has its own identity and least privilege, as
# kube-controller-manager has under kubeadm (a kubeconfig for
# system:kube-controller-manager, --use-service-account-credentials):
#  - DATA_DIR/controller-manager.kubeconfig is 0600 and names
#    CN=system:kube-controller-manager with no organization (so not
#    system:masters), signed by the cluster CA; the child is started with
#    it and with --use-service-account-credentials=true, never with the
#    admin's kubeconfig;
#  - the server authorizes the child's requests as
#    system:kube-controller-manager (Lease kube-controller-manager, shared
#    informers, ServiceAccounts and TokenRequests) and as each
#    controller's ServiceAccount, which exists in kube-system: every
#    controller works under its role (namespace deletion, garbage
#    collection, default ServiceAccounts, kube-root-ca.crt, ClusterRole
#    aggregation, the pod counter) and nothing is forbidden;
#  - a controller's token is refreshed (its lifetime shortened to 12 s by
#    CKUBE_SA_TOKEN_LIFETIME) and the new one works; a ServiceAccount
#    deleted (its tokens refused: 401) is made again with a new token;
#  - after a restart on the same data the controllers still work (the
#    RBAC index is rebuilt from the stored policy);
#  - with --plain-http nothing changes: the admin kubeconfig, no
#    ServiceAccount credentials.
source "$(dirname "$0")/lib.sh"
export HOME=$TMP/home
mkdir -p "$HOME"
command -v openssl >/dev/null || fail "openssl is required"

DATA=$TMP/data
CMKC=$DATA/controller-manager.kubeconfig
CONTROLLERS="namespace-controller generic-garbage-collector service-account-controller
    root-ca-cert-publisher clusterrole-aggregation-controller pod-counter"
# The child inherits the server's environment (and its -v/--vmodule):
# the server's authorization decisions at 5, the tokens' lines at 2.
export CKUBE_SA_TOKEN_LIFETIME=12s
start_server --vmodule=apiserver=5,clientbuilder=2

child() { pgrep -P "$SERVER_PID" -f ckube-controller-manager || true; }
wait_for bash -c "pgrep -P $SERVER_PID -f ckube-controller-manager"
CHILD=$(child)

# ---- the kubeconfig and the certificate --------------------------------
[ -s "$CMKC" ] || fail "no $CMKC"
expect_eq "$(stat -c %a "$CMKC")" 600 "controller-manager.kubeconfig's mode"
expect_eq "$(stat -c %a "$DATA/pki/controller-manager.key")" 600 "the key's mode"
kc_field() { sed -n "s/^ *$1: //p" "$CMKC" | head -1; }
expect_eq "$(kc_field server)" "$SERVER_URL" "the kubeconfig's server"
expect_contains "$(cat "$CMKC")" "- name: system:kube-controller-manager" "the kubeconfig's user"
kc_field client-certificate-data | base64 -d >"$TMP/cm.crt"
subject=$(openssl x509 -in "$TMP/cm.crt" -noout -subject -nameopt RFC2253)
expect_eq "$subject" "subject=CN=system:kube-controller-manager" "the certificate's subject"
case $subject in *O=*) fail "the controller-manager's certificate names an organization: $subject" ;; esac
openssl verify -CAfile "$DATA/pki/ca.crt" -purpose sslclient "$TMP/cm.crt" >/dev/null ||
    fail "the certificate is not a client certificate of the cluster CA"
cmp -s "$TMP/cm.crt" "$DATA/pki/controller-manager.crt" || fail "not pki/controller-manager.crt"

# the child runs with it and with ServiceAccount credentials
args=$(tr '\0' ' ' <"/proc/$CHILD/cmdline")
expect_contains "$args" "--kubeconfig $CMKC " "the child's kubeconfig"
expect_contains "$args" "--use-service-account-credentials=true" "the child's flags"
case $args in *"$DATA/kubeconfig "*) fail "the child has the admin kubeconfig: $args" ;; esac

# who that is: system:kube-controller-manager, not in system:masters
CMK=(kubectl --kubeconfig "$CMKC")
who=$("${CMK[@]}" auth whoami -o jsonpath='{.status.userInfo.username} {.status.userInfo.groups}')
expect_eq "$who" 'system:kube-controller-manager ["system:authenticated"]' "whoami"
expect_eq "$("${CMK[@]}" auth can-i list pods -A)" yes "it may list pods"
expect_eq "$("${CMK[@]}" auth can-i get leases/kube-controller-manager -n kube-system)" yes \
    "it may get its Lease"
# (what it may not: its role's list and watch are no get, its Lease
# rights stop at kube-system, and it deletes nothing but Secrets)
for verb_res in "delete namespaces" "create clusterrolebindings" "get pods -n default" \
    "update leases/other -n default" "delete configmaps -n default"; do
    # shellcheck disable=SC2086
    r=$("${CMK[@]}" auth can-i $verb_res 2>/dev/null || true)
    [ "$r" != yes ] || fail "system:kube-controller-manager may $verb_res"
done

# ---- the Lease, the ServiceAccounts ------------------------------------
holder() { kubectl get lease -n kube-system kube-controller-manager -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
has_holder() { [ -n "$(holder)" ]; }
wait_for has_holder
sas_all() {
    local sa
    for sa in $CONTROLLERS; do kubectl get sa -n kube-system "$sa" >/dev/null 2>&1 || return 1; done
}
wait_for sas_all

# ---- every controller at work under its role ---------------------------
# namespace deletion (namespace-controller)
k create namespace id-a >/dev/null
k create configmap -n id-a one --from-literal=a=b >/dev/null
k create secret generic -n id-a two --from-literal=a=b >/dev/null
# default ServiceAccount (service-account-controller) and kube-root-ca.crt
# (root-ca-cert-publisher) in it
wait_for kubectl get sa -n id-a default
wait_for kubectl get configmap -n id-a kube-root-ca.crt
k delete namespace id-a --wait=false >/dev/null
for _ in $(seq 1 200); do kubectl get namespace id-a >/dev/null 2>&1 || break; sleep 0.1; done
kubectl get namespace id-a >/dev/null 2>&1 && fail "namespace id-a not deleted"

# garbage collection (generic-garbage-collector): a Secret owned by a
# ConfigMap goes with it
k create configmap owner --from-literal=a=b >/dev/null
OUID=$(kubectl get configmap owner -o jsonpath='{.metadata.uid}')
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: owned
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: owner, uid: "$OUID"}
stringData: {a: b}
EOF
k delete configmap owner --cascade=foreground >/dev/null
for _ in $(seq 1 200); do kubectl get secret owned >/dev/null 2>&1 || break; sleep 0.1; done
kubectl get secret owned >/dev/null 2>&1 && fail "the owned Secret was not collected"

# ClusterRole aggregation (clusterrole-aggregation-controller)
k apply -f - >/dev/null <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: id-agg}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {id.example.com/agg: "true"}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: id-part
  labels: {id.example.com/agg: "true"}
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get"]
EOF
aggregated() { [ "$(kubectl get clusterrole id-agg -o jsonpath='{.rules[0].resources[0]}')" = pods ]; }
wait_for aggregated

# the pod counter (pod-counter, ckube's role: patch nodes)
wait_for kubectl get sa -n default default
k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: id-cp
  labels: {node-role.kubernetes.io/control-plane: ""}
---
apiVersion: v1
kind: Pod
metadata: {name: id-pod, namespace: default}
spec:
  containers: [{name: c, image: busybox}]
EOF
counted() { [ -n "$(kubectl get node id-cp -o jsonpath='{.metadata.labels.ckube\.io/pod-count}')" ]; }
for _ in $(seq 1 250); do counted && break; sleep 0.1; done
counted || fail "the pod counter did not label the control-plane node"

# The server authorized them as their ServiceAccounts, and the rest of
# the child's requests as system:kube-controller-manager.
authorized() { grep -c "\"Authorized\" user=\"$1\"" "$TMP/server.log" || true; }
[ "$(authorized system:kube-controller-manager)" -gt 0 ] ||
    fail "no request authorized as system:kube-controller-manager"
for sa in $CONTROLLERS; do
    [ "$(authorized "system:serviceaccount:kube-system:$sa")" -gt 0 ] ||
        fail "no request authorized as ServiceAccount $sa"
done
for verb in list watch; do
    grep -q "\"Authorized\" user=\"system:kube-controller-manager\" verb=\"$verb\"" "$TMP/server.log" ||
        fail "the shared informers do not $verb as system:kube-controller-manager"
done

# ---- token refresh -----------------------------------------------------
# Each token is used for 10 s (80% of 12 s); the first request after that
# fetches the next. A namespace made now makes service-account-controller
# and root-ca-cert-publisher write again.
refreshed() { grep -q "ServiceAccount kube-system/$1: new token (refreshed)" "$TMP/server.log"; }
sleep 11
k create namespace id-b >/dev/null
wait_for kubectl get sa -n id-b default
wait_for kubectl get configmap -n id-b kube-root-ca.crt
wait_for refreshed service-account-controller
wait_for refreshed root-ca-cert-publisher
# A ServiceAccount deleted takes its tokens along (401): the next request
# drops its token (the one just refreshed, well before it is due), the
# ServiceAccount is made again and a new token fetched.
OLD=$(kubectl get sa -n kube-system service-account-controller -o jsonpath='{.metadata.uid}')
k delete sa -n kube-system service-account-controller >/dev/null
k delete sa -n id-b default >/dev/null
sa_back() { [ -n "$(kubectl get sa -n id-b default -o name 2>/dev/null)" ]; }
wait_for sa_back
NEW=$(kubectl get sa -n kube-system service-account-controller -o jsonpath='{.metadata.uid}')
[ -n "$NEW" ] && [ "$NEW" != "$OLD" ] ||
    fail "ServiceAccount service-account-controller not made again ($OLD -> $NEW)"
grep -q "ServiceAccount kube-system/service-account-controller: token refused (401)" \
    "$TMP/server.log" || fail "no 401 seen for the deleted ServiceAccount's token"
k delete namespace id-b --wait=false >/dev/null
for _ in $(seq 1 200); do kubectl get namespace id-b >/dev/null 2>&1 || break; sleep 0.1; done
kubectl get namespace id-b >/dev/null 2>&1 && fail "namespace id-b not deleted"

# nothing the controllers did was refused
if grep -i "forbidden" "$TMP/server.log"; then fail "forbidden requests in the server log"; fi
stop_server

# ---- a restart on the same data ----------------------------------------
mv "$TMP/server.log" "$TMP/server-first.log"
start_server --vmodule=apiserver=5,clientbuilder=2
k create namespace id-c >/dev/null
k create configmap -n id-c one --from-literal=a=b >/dev/null
k delete namespace id-c --wait=false >/dev/null
# the new child first waits for the Lease the old one released
for _ in $(seq 1 300); do kubectl get namespace id-c >/dev/null 2>&1 || break; sleep 0.1; done
kubectl get namespace id-c >/dev/null 2>&1 && fail "namespace id-c not deleted after a restart"
if grep -i "forbidden" "$TMP/server.log"; then fail "forbidden requests after the restart"; fi
stop_server

# ---- --plain-http: as before -------------------------------------------
DATA_DIR=$TMP/plain start_server --plain-http
wait_for bash -c "pgrep -P $SERVER_PID -f ckube-controller-manager"
args=$(tr '\0' ' ' <"/proc/$(child)/cmdline")
expect_contains "$args" "--kubeconfig $TMP/plain/kubeconfig " "the plain-http child's kubeconfig"
case $args in *use-service-account-credentials*) fail "plain-http child with SA credentials" ;; esac
[ -e "$TMP/plain/controller-manager.kubeconfig" ] && fail "a controller-manager kubeconfig with --plain-http"
k create namespace id-d >/dev/null
k delete namespace id-d --wait=false >/dev/null
for _ in $(seq 1 200); do kubectl get namespace id-d >/dev/null 2>&1 || break; sleep 0.1; done
kubectl get namespace id-d >/dev/null 2>&1 && fail "namespace id-d not deleted with --plain-http"
stop_server
echo "PASS"
