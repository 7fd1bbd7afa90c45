#!/usr/bin/env bash
# test_etcd_tls.sh - `ckube server --storage etcd` on an etcd that serves
# TLS and asks for client certificates, as kube-apiserver runs against a
# kubeadm etcd (--etcd-cafile, --etcd-certfile, --etcd-keyfile):
#  - with the right CA and a client certificate the server serves;
#  - another CA, no client certificate, a client certificate of another
#    CA, or a plain http:// URL for the TLS member: the server does not
#    start and says why (exit 1), it never serves half-connected.
source "$(dirname "$0")/lib.sh"
ETCD=${CKUBE_ETCD_BIN:-/usr/bin/etcd}
[ -x "$ETCD" ] || fail "$ETCD not found (install-deps installs etcd-server)"
command -v openssl >/dev/null || fail "openssl is required"
export HOME=$TMP/home
mkdir -p "$HOME"
free_port() { python3 "$SRC/tests/e2e/free_port.py"; }

ETCD_PID=
trap 'rc=$?; set +e; [ -z "$ETCD_PID" ] || { kill -TERM "$ETCD_PID"; wait "$ETCD_PID"; }; if [ $rc -ne 0 ]; then echo "---- etcd log"; tail -n 20 "$TMP/etcd.log"; fi >&2; (exit $rc); cleanup' EXIT

# ---- a CA, etcd's serving certificate, a client certificate; another CA ----
P=$TMP/pki
mkdir -p "$P"
ca() { # NAME
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=$1" -keyout "$P/$1.key" -out "$P/$1.crt" 2>/dev/null
}
leaf() { # NAME CA EXT
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
        -keyout "$P/$1.key" -out "$P/$1.csr" 2>/dev/null
    openssl x509 -req -in "$P/$1.csr" -CA "$P/$2.crt" -CAkey "$P/$2.key" -CAcreateserial \
        -days 2 -extfile <(printf '%s\n' "$3") -out "$P/$1.crt" 2>/dev/null
}
ca etcd-ca
ca other-ca
leaf etcd-server etcd-ca "subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth"
leaf apiserver-etcd-client etcd-ca "extendedKeyUsage=clientAuth"
leaf stranger other-ca "extendedKeyUsage=clientAuth"

CP=$(free_port)
PP=$(free_port)
URL=https://127.0.0.1:$CP
"$ETCD" --name tls --data-dir "$TMP/etcd" --listen-client-urls "$URL" --advertise-client-urls "$URL" \
    --cert-file "$P/etcd-server.crt" --key-file "$P/etcd-server.key" \
    --trusted-ca-file "$P/etcd-ca.crt" --client-cert-auth \
    --listen-peer-urls "http://127.0.0.1:$PP" --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
    --initial-cluster "tls=http://127.0.0.1:$PP" --log-level warn >"$TMP/etcd.log" 2>&1 &
ETCD_PID=$!
healthy() { curl -sf --cacert "$P/etcd-ca.crt" --cert "$P/apiserver-etcd-client.crt" \
    --key "$P/apiserver-etcd-client.key" "$URL/health"; }
wait_for healthy

# ---- refusals: exit 1 and a reason; nothing listens ------------------------------
# Each refusal waits out the server's 10 s for etcd to answer: they run
# side by side, each with a data dir of its own, and are checked after.
NREF=0 REF_PIDS=()
refused() { # MESSAGE ARGS...
    NREF=$((NREF + 1))
    local n=$NREF
    printf '%s\n' "$1" >"$TMP/ref$n.want"
    shift
    printf '%s\n' "$*" >"$TMP/ref$n.args"
    (
        rc=0
        timeout 60 "$CKUBE_BIN" server --data-dir "$TMP/bad$n" --listen "127.0.0.1:$(free_port)" \
            --controller-manager=false --storage etcd "$@" >"$TMP/ref$n.out" 2>&1 || rc=$?
        echo "$rc" >"$TMP/ref$n.rc"
    ) &
    REF_PIDS+=($!)
}
refused "certificate verify failed (the member's certificate is not signed by --etcd-cafile's CA)" \
    --etcd-servers "$URL" \
    --etcd-cafile "$P/other-ca.crt" --etcd-certfile "$P/apiserver-etcd-client.crt" \
    --etcd-keyfile "$P/apiserver-etcd-client.key"
refused "does the member require a client certificate? --etcd-certfile and --etcd-keyfile" \
    --etcd-servers "$URL" --etcd-cafile "$P/etcd-ca.crt"
refused "did the member refuse the client certificate of --etcd-certfile?" \
    --etcd-servers "$URL" --etcd-cafile "$P/etcd-ca.crt" \
    --etcd-certfile "$P/stranger.crt" --etcd-keyfile "$P/stranger.key"
refused "etcd at http://127.0.0.1:$CP does not answer: connections to all backends failing" \
    --etcd-servers "http://127.0.0.1:$CP"
refused "cannot read $P/missing.crt" --etcd-servers "$URL" --etcd-cafile "$P/missing.crt"
wait "${REF_PIDS[@]}" # (not etcd, also a child of this shell)
for n in $(seq 1 "$NREF"); do
    args=$(cat "$TMP/ref$n.args")
    expect_eq "$(cat "$TMP/ref$n.rc")" 1 "exit code of ckube server $args"
    expect_contains "$(cat "$TMP/ref$n.out")" "$(cat "$TMP/ref$n.want")" "message of ckube server $args"
    [ ! -e "$TMP/bad$n/kubeconfig" ] || fail "a refused server wrote a kubeconfig ($args)"
done

# ---- the right files: it serves ------------------------------------------------------
start_server --controller-manager=false --storage etcd --etcd-servers "$URL" \
    --etcd-cafile "$P/etcd-ca.crt" --etcd-certfile "$P/apiserver-etcd-client.crt" \
    --etcd-keyfile "$P/apiserver-etcd-client.key"
k create configmap over-tls --from-literal=a=1 >/dev/null
expect_eq "$(k get configmap over-tls -o jsonpath='{.data.a}')" 1 "a read through the TLS etcd"
expect_contains "$(k get --raw '/readyz?verbose')" "[+]etcd ok" "readyz over TLS"
stop_server || fail "the server did not stop cleanly"
echo "PASS"
