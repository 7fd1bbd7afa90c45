#!/usr/bin/env bash
# test_controller_manager_secure_port.sh - issue #21 item 7: `ckube
# controller-manager` serves /healthz, /readyz and /metrics over HTTPS on
# --secure-port (upstream's 10257), with authentication and authorization
# delegated to the API server through TokenReview and SubjectAccessReview,
# as kube-controller-manager does:
#  - it runs as system:kube-controller-manager (the server's
#    controller-manager.kubeconfig), not as an admin, and that identity
#    suffices (the bootstrap policy's reviews and the
#    extension-apiserver-authentication reader);
#  - the server publishes configmap/extension-apiserver-authentication
#    with its client CA;
#  - /healthz and /readyz answer anyone (always-allowed paths); /metrics
#    is 403 for anonymous users and for a ServiceAccount without rights,
#    with upstream's Status, and 200 for one bound to system:monitoring
#    (kubectl get --raw with its token) and for the admin's client
#    certificate (system:masters, verified against the published CA);
#  - garbage tokens and certificates of another CA are 401, even on
#    /healthz;
#  - --tls-cert-file/--tls-private-key-file serve the given certificate
#    (verified by curl against the cluster CA); the self-signed default
#    names localhost@<time>; a certificate without its key is refused at
#    start; --authorization-always-allow-paths widens the open paths;
#  - the given certificate's files replaced (a rotation) reach the next
#    connection without a restart, as upstream's dynamic serving content;
#  - TLS garbage and plain HTTP to the port do not stop it.
source "$(dirname "$0")/lib.sh"
export HOME=$TMP/home
mkdir -p "$HOME"
command -v openssl >/dev/null || fail "openssl is required"
CM_PIDS=()
stop_cms() {
    for p in "${CM_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for p in "${CM_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap 'rc=$?; set +e; stop_cms; if [ $rc -ne 0 ]; then for f in "$TMP"/cm*.log; do echo "---- $f (tail)"; tail -n 60 "$f"; done >&2; fi; (exit $rc); cleanup' EXIT
free_port() { python3 "$SRC/tests/e2e/free_port.py"; }

start_server --controller-manager=false
DATA=$TMP/data
CMKC=$DATA/controller-manager.kubeconfig

# ---- the published client CA --------------------------------------------
published=$(kubectl get configmap -n kube-system extension-apiserver-authentication \
    -o jsonpath='{.data.client-ca-file}')
expect_eq "$published" "$(cat "$DATA/pki/ca.crt")" "the published client CA"

# start_cm N FLAGS...: a controller-manager on its own secure port SP[N]
declare -A SP PID
start_cm() {
    local n=$1
    shift
    SP[$n]=$(free_port)
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$CKUBE_BIN" controller-manager \
        --kubeconfig "$CMKC" --leader-elect=false --controllers=serviceaccount \
        --bind-address 127.0.0.1 --secure-port "${SP[$n]}" -v 4 "$@" >"$TMP/cm$n.log" 2>&1 &
    PID[$n]=$!
    CM_PIDS+=($!)
    wait_for curl -sk "https://127.0.0.1:${SP[$n]}/healthz"
}
stop_cm() {
    local rc=0
    kill -TERM "${PID[$1]}"
    wait "${PID[$1]}" || rc=$?
    [ $rc -eq 0 ] || fail "controller-manager $1 exited with $rc"
}
# get N PATH [curl args...]: "CODE BODY" of an HTTPS GET, without the
# admin's .curlrc (-q)
get() {
    local n=$1 path=$2
    shift 2
    curl -q -sk -w ' %{http_code}' "$@" "https://127.0.0.1:${SP[$n]}$path"
}

start_cm 1
grep -q "Generated self-signed cert (localhost@" "$TMP/cm1.log" || fail "no self-signed certificate"
subject=$(openssl s_client -connect "127.0.0.1:${SP[1]}" </dev/null 2>/dev/null |
    openssl x509 -noout -subject -nameopt RFC2253)
expect_contains "$subject" "CN=localhost@" "the self-signed certificate's subject"

# ---- anonymous ---------------------------------------------------------------
expect_eq "$(get 1 /healthz)" "ok 200" "anonymous /healthz"
expect_eq "$(get 1 /readyz)" "ok 200" "anonymous /readyz"
expect_eq "$(get 1 /metrics)" '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: User \"system:anonymous\" cannot get path \"/metrics\"","reason":"Forbidden","code":403} 403' "anonymous /metrics"

# ---- tokens --------------------------------------------------------------------
kubectl create serviceaccount nobody >/dev/null
kubectl create serviceaccount prometheus >/dev/null
kubectl create clusterrolebinding prometheus --clusterrole=system:monitoring \
    --serviceaccount=default:prometheus >/dev/null
NOBODY=$(kubectl create token nobody)
PROM=$(kubectl create token prometheus)
CMURL="https://127.0.0.1:${SP[1]}"
out=$(kubectl --kubeconfig /dev/null --server "$CMURL" --insecure-skip-tls-verify \
    --token "$NOBODY" get --raw /metrics 2>&1) && fail "a token without rights read /metrics: $out"
expect_eq "$out" 'Error from server (Forbidden): forbidden: User "system:serviceaccount:default:nobody" cannot get path "/metrics"' "kubectl's 403"
expect_eq "$(get 1 /healthz -H "Authorization: Bearer $NOBODY")" "ok 200" "/healthz with a token"
out=$(kubectl --kubeconfig /dev/null --server "$CMURL" --insecure-skip-tls-verify \
    --token "$PROM" get --raw /metrics) || fail "system:monitoring cannot read /metrics: $out"
expect_contains "$out" "# TYPE workqueue_adds_total counter" "/metrics for system:monitoring"
expect_contains "$out" 'controller_runtime_reconcile_total{controller="serviceaccount"' "/metrics for system:monitoring"
UNAUTH='{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401} 401'
expect_eq "$(get 1 /healthz -H 'Authorization: Bearer garbage')" "$UNAUTH" "a garbage token"
expect_eq "$(get 1 /metrics -H "Authorization: Bearer ${PROM}x")" "$UNAUTH" "a tampered token"
# its own identity could read the client CA (else client certificates
# would not be asked for, below)
if grep -q "Unable to get configmap/extension-apiserver-authentication" "$TMP/cm1.log"; then
    fail "system:kube-controller-manager could not read the client CA"
fi

# ---- client certificates -------------------------------------------------------------
out=$(get 1 /metrics --cert "$DATA/pki/admin.crt" --key "$DATA/pki/admin.key")
expect_eq "${out##* }" 200 "the admin's certificate"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMP/evil.key" \
    -out "$TMP/evil.crt" -subj "/O=system:masters/CN=mallory" -days 1 2>/dev/null
expect_eq "$(get 1 /healthz --cert "$TMP/evil.crt" --key "$TMP/evil.key")" "$UNAUTH" "another CA's certificate"

# ---- bad input on the port ---------------------------------------------------------------
head -c 4096 /dev/urandom | timeout 5 bash -c "cat >/dev/tcp/127.0.0.1/${SP[1]}" 2>/dev/null || true
plain=$(curl -q -s --max-time 5 "http://127.0.0.1:${SP[1]}/healthz" || true)
[ "$plain" != "ok" ] || fail "plain HTTP answered on the secure port"
expect_eq "$(get 1 /healthz)" "ok 200" "/healthz after garbage"
stop_cm 1

# ---- the user's certificate, allowed paths ---------------------------------------------------
# (copies: the rotation below replaces them)
mkdir -p "$TMP/cmcert"
cp "$DATA/pki/serving.crt" "$TMP/cmcert/tls.crt"
cp "$DATA/pki/serving.key" "$TMP/cmcert/tls.key"
start_cm 2 --tls-cert-file "$TMP/cmcert/tls.crt" --tls-private-key-file "$TMP/cmcert/tls.key" \
    --authorization-always-allow-paths /healthz,/metrics
out=$(curl -q -s --cacert "$DATA/pki/ca.crt" -w ' %{http_code}' "https://127.0.0.1:${SP[2]}/healthz") ||
    fail "the given serving certificate does not verify"
expect_eq "$out" "ok 200" "/healthz with the given certificate"
out=$(get 2 /metrics)
expect_eq "${out##* }" 200 "/metrics made an always-allowed path"
# /readyz is no longer always allowed: it takes a review, which the
# bootstrap policy's system:public-info-viewer passes for anyone
expect_eq "$(get 2 /readyz)" "ok 200" "/readyz through a review"
grep -q 'Forbidden: "/readyz"' "$TMP/cm2.log" && fail "/readyz was refused"
# a rotation: each file replaced whole by a rename; the next connection
# (after the once-a-second look) gets the new certificate
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMP/rotated.key" \
    -out "$TMP/rotated.crt" -days 1 -subj /CN=rotated -addext subjectAltName=IP:127.0.0.1 \
    >/dev/null 2>&1 || fail "openssl could not make a certificate"
for f in crt key; do
    cp "$TMP/rotated.$f" "$TMP/cmcert/tls.$f.new"
    mv "$TMP/cmcert/tls.$f.new" "$TMP/cmcert/tls.$f"
done
wait_for curl -q -s --cacert "$TMP/rotated.crt" "https://127.0.0.1:${SP[2]}/healthz"
grep -q "secure serving: loaded a new serving certificate" "$TMP/cm2.log" ||
    fail "no log of the new certificate"
curl -q -s --cacert "$DATA/pki/ca.crt" "https://127.0.0.1:${SP[2]}/healthz" >/dev/null 2>&1 &&
    fail "the old certificate is still served"
stop_cm 2

# ---- flags refused -----------------------------------------------------------------------------
rc=0
out=$("$CKUBE_BIN" controller-manager --kubeconfig "$CMKC" --tls-cert-file "$DATA/pki/serving.crt" 2>&1) || rc=$?
expect_eq "$rc" 2 "a certificate without its key"
expect_eq "$out" "ckube controller-manager: --tls-cert-file and --tls-private-key-file go together" "its message"
echo "PASS"
