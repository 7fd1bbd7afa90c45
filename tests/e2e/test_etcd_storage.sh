#!/usr/bin/env bash
# test_etcd_storage.sh - issue #23's first steps, as a user runs them:
# `ckube server --storage etcd --etcd-servers URL` on a real etcd member
# (loopback, data under the test's directory), then a second server on
# the same etcd:
#  - kubectl create/get/list/label/delete through the first server;
#  - the resourceVersion is the etcd revision (etcd's JSON gateway says so);
#  - the second server serves what the first wrote within a second, and
#    its watch sees the first server's writes, and the other way round;
#  - reads and writes through one server see every write acknowledged by
#    the other at once (consistent reads from the cache, as 1.31's);
#  - the first server restarted serves everything again from etcd;
#  - with --etcd-compaction-interval 1s the servers compact etcd as
#    kube-apiserver does: compact_rev_key appears and counts the rounds,
#    and etcd's history before it is gone (a range at an old revision is
#    refused); with 0 nothing is compacted;
#  - bad flags: --storage etcd without --etcd-servers, --etcd-servers
#    without it, a malformed list, an etcd that does not answer: a clear
#    message and no server.
source "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "jq is required"
ETCD=${CKUBE_ETCD_BIN:-/usr/bin/etcd}
[ -x "$ETCD" ] || fail "$ETCD not found (install-deps installs etcd-server)"
export HOME=$TMP/home
mkdir -p "$HOME"
free_port() { python3 "$SRC/tests/e2e/free_port.py"; }

ETCD_PID= B_PID=
stop_all() {
    [ -z "$B_PID" ] || { kill -KILL "$B_PID" 2>/dev/null; wait "$B_PID" 2>/dev/null; }
    [ -z "$ETCD_PID" ] || { kill -TERM "$ETCD_PID" 2>/dev/null; wait "$ETCD_PID" 2>/dev/null; }
}
trap 'rc=$?; set +e; stop_all; if [ $rc -ne 0 ]; then echo "---- etcd log"; tail -n 20 "$TMP/etcd.log"; echo "---- server B log"; tail -n 40 "$TMP/b.log"; fi >&2; (exit $rc); cleanup' EXIT

CP=$(free_port)
PP=$(free_port)
ETCD_URL=http://127.0.0.1:$CP
start_etcd() {
    "$ETCD" --name e2e --data-dir "$TMP/etcd" --listen-client-urls "$ETCD_URL" \
        --advertise-client-urls "$ETCD_URL" --listen-peer-urls "http://127.0.0.1:$PP" \
        --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
        --initial-cluster "e2e=http://127.0.0.1:$PP" --max-request-bytes 262144 \
        --log-level warn >>"$TMP/etcd.log" 2>&1 &
    ETCD_PID=$!
}
start_etcd
wait_for curl -sf "$ETCD_URL/health"

# ---- bad flags: a message, exit 2 (1 when etcd does not answer) --------
expect_exit() { # CODE MESSAGE ARGS...
    local want=$1 msg=$2 rc=0 out
    shift 2
    out=$("$CKUBE_BIN" server --data-dir "$TMP/bad" --listen 127.0.0.1:$(free_port) "$@" 2>&1) || rc=$?
    expect_eq "$rc" "$want" "exit code of ckube server $*"
    expect_contains "$out" "$msg" "message of ckube server $*"
}
expect_exit 2 "ckube server: --storage etcd needs --etcd-servers" --storage etcd
expect_exit 2 "ckube server: --etcd-servers goes with --storage etcd" --etcd-servers "$ETCD_URL"
expect_exit 2 "ckube server: --storage must be sqlite, memory or etcd" --storage etcdx
expect_exit 2 'ckube server: --etcd-compaction-interval wants 0 (off) or a duration from 1s to 1h ("5m"), got "soon"' \
    --etcd-compaction-interval soon
expect_exit 1 'invalid --etcd-servers entry "127.0.0.1"' --storage etcd --etcd-servers 127.0.0.1
DOWN=$(free_port)
expect_exit 1 "etcd at http://127.0.0.1:$DOWN does not answer" --storage etcd \
    --etcd-servers "http://127.0.0.1:$DOWN"

# ---- server A -------------------------------------------------------------
start_server --storage etcd --etcd-servers "$ETCD_URL" --controller-manager=false
grep -q "etcd storage in" "$TMP/server.log" || fail "the server does not say it runs on etcd"
KA=$KUBECONFIG
k create configmap one --from-literal=a=1 >/dev/null
k label configmap one tier=x >/dev/null
rv=$(k get configmap one -o jsonpath='{.metadata.resourceVersion}')
key=$(printf '/registry/configmaps/default/one' | base64 -w0)
modrev=$(curl -sf "$ETCD_URL/v3/kv/range" -d "{\"key\":\"$key\"}" | jq -r '.kvs[0].mod_revision')
expect_eq "$rv" "$modrev" "resourceVersion is the etcd revision"
# upstream's layout: the namespace at /registry/namespaces/NAME, a
# ClusterRole at /registry/clusterroles/NAME, nothing at ckube's old keys
gw_count() { curl -sf "$ETCD_URL/v3/kv/range" -d "{\"key\":\"$(printf '%s' "$1" | base64 -w0)\"}" |
    jq -r '.count // "0"'; }
expect_eq "$(gw_count /registry/namespaces/default)" 1 "the default namespace's key"
expect_eq "$(gw_count /registry/clusterroles/admin)" 1 "the admin ClusterRole's key"
expect_eq "$(gw_count /registry/core/configmaps/default/one)" 0 "nothing at ckube's internal key"
expect_eq "$(k get configmaps -l tier=x -o name)" "configmap/one" "a labelled list"
# a write over etcd's request limit (--max-request-bytes, 256 KiB here;
# the API's own is 3 MiB): a 413 in etcd's words, nothing written, and
# the server goes on
head -c 400000 /dev/zero | tr '\0' x >"$TMP/big.txt"
out=$(kfail create configmap big --from-file=big.txt="$TMP/big.txt")
expect_contains "$out" "etcdserver: request is too large" "a write over etcd's limit"
code=$(kubectl create configmap big --from-file=big.txt="$TMP/big.txt" -v=6 2>&1 | grep -o 'POST https[^ ]* [0-9]*' | awk '{print $3}' || true)
expect_eq "$code" 413 "the status of a write over etcd's limit"
expect_contains "$(kfail get configmap big)" 'configmaps "big" not found' "nothing written"
k create configmap after-big >/dev/null && k delete configmap after-big >/dev/null

# ---- server B on the same etcd ---------------------------------------------
# The cluster identity: A sealed its CA and ServiceAccount key into etcd
# with the token it made; B needs that token, and a wrong one or another
# cluster's CA is refused.
grep -q "stored the cluster identity" "$TMP/server.log" || fail "A did not store the cluster identity"
[ "$(stat -c %a "$TMP/data/token")" = 600 ] || fail "DATA_DIR/token is not 0600"
expect_exit 1 "the datastore already holds a cluster's identity" --storage etcd \
    --etcd-servers "$ETCD_URL"
expect_exit 1 "the token does not open the cluster identity" --storage etcd \
    --etcd-servers "$ETCD_URL" --token not-the-token
# a data dir whose key is not the cluster's: refused, nothing replaced
mkdir -p "$TMP/foreign/pki" && cp "$TMP/data/pki/"* "$TMP/foreign/pki/"
echo "# not the cluster's" >>"$TMP/foreign/pki/sa.pub"
rc=0
out=$("$CKUBE_BIN" server --data-dir "$TMP/foreign" --listen "127.0.0.1:$(free_port)" --storage etcd \
    --etcd-servers "$ETCD_URL" --token-file "$TMP/data/token" 2>&1) || rc=$?
expect_eq "$rc" 1 "exit code with another cluster's key"
expect_contains "$out" "$TMP/foreign/pki/sa.pub is not the cluster's" "message with another cluster's key"
grep -q "not the cluster's" "$TMP/foreign/pki/sa.pub" || fail "the refused join replaced sa.pub"
expect_exit 2 "ckube server: --token and --token-file go with --storage etcd" --token x
PB=$(free_port)
"$CKUBE_BIN" server --data-dir "$TMP/b" --listen "127.0.0.1:$PB" --storage etcd \
    --etcd-servers "$ETCD_URL" --token-file "$TMP/data/token" --controller-manager=false >"$TMP/b.log" 2>&1 &
B_PID=$!
for _ in $(seq 1 200); do [ -s "$TMP/b/kubeconfig" ] && break; sleep 0.05; done
KB=$TMP/b/kubeconfig
wait_for env KUBECONFIG="$KB" kubectl get --raw /readyz
expect_eq "$(KUBECONFIG=$KB kubectl get configmap one -o jsonpath='{.data.a} {.metadata.resourceVersion}')" \
    "1 $rv" "B serves what A wrote"
cmp -s "$TMP/data/pki/ca.crt" "$TMP/b/pki/ca.crt" || fail "B's CA is not A's"
cmp -s "$TMP/data/pki/sa.key" "$TMP/b/pki/sa.key" || fail "B's ServiceAccount key is not A's"
# one front proxy CA: extension API servers trust requests either server proxies
cmp -s "$TMP/data/pki/front-proxy-ca.crt" "$TMP/b/pki/front-proxy-ca.crt" ||
    fail "B's front proxy CA is not A's"
openssl verify -CAfile "$TMP/data/pki/front-proxy-ca.crt" "$TMP/b/pki/front-proxy-client.crt" \
    >/dev/null 2>&1 || fail "B's front-proxy client certificate is not of the shared CA"
expect_eq "$(KUBECONFIG=$KB kubectl get configmap -n kube-system extension-apiserver-authentication \
    -o jsonpath='{.data.requestheader-client-ca-file}')" "$(cat "$TMP/data/pki/front-proxy-ca.crt")" \
    "the requestheader CA B publishes"
cmp -s "$TMP/data/token" "$TMP/b/token" || fail "B did not keep the token for its restarts"
# A's kubeconfig works against B, B's against A; a token A issued works on B
expect_eq "$(KUBECONFIG=$KA kubectl --server "https://127.0.0.1:$PB" get configmap one -o name)" \
    "configmap/one" "A's kubeconfig against B"
expect_eq "$(KUBECONFIG=$KB kubectl --server "$SERVER_URL" get configmap one -o name)" \
    "configmap/one" "B's kubeconfig against A"
k create serviceaccount bot >/dev/null
tok=$(k create token bot)
who=$(curl -q -s --cacert "$TMP/b/pki/ca.crt" -H "Authorization: Bearer $tok" \
    -H 'Content-Type: application/json' -X POST \
    -d '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}' \
    "https://127.0.0.1:$PB/apis/authentication.k8s.io/v1/selfsubjectreviews" | jq -r .status.userInfo.username)
expect_eq "$who" "system:serviceaccount:default:bot" "A's ServiceAccount token on B"
# B's watch sees A's writes; A's sees B's
KUBECONFIG=$KB timeout 6 kubectl get configmaps -w -o name >"$TMP/b.watch" 2>&1 &
BW=$!
KUBECONFIG=$KA timeout 6 kubectl get configmaps -w -o name >"$TMP/a.watch" 2>&1 &
AW=$!
sleep 1
k create configmap from-a >/dev/null
KUBECONFIG=$KB kubectl create configmap from-b >/dev/null
seen() { grep -qx "configmap/$2" "$TMP/$1.watch"; }
wait_for seen b from-a
wait_for seen a from-b
wait_for env KUBECONFIG="$KB" kubectl get configmap from-a
# Consistent reads across servers (kube-apiserver 1.31's consistent reads
# from cache): a write acknowledged by A is seen by B's very next GET,
# LIST, LIST at the write's resourceVersion, and by B's writes (a
# namespace made through A holds a configmap made through B at once).
# Without the wait, B answers from a cache a watch event behind.
cat >"$TMP/consistent.py" <<'PY'
import sys
from kubernetes import client, config
def api(path):
    return client.CoreV1Api(config.new_client_from_config(config_file=path))
a, b = api(sys.argv[1]), api(sys.argv[2])
for i in range(60):
    name = "rw-%d" % i
    made = a.create_namespaced_config_map("default", {"metadata": {"name": name}, "data": {"i": str(i)}})
    rv = made.metadata.resource_version
    got = b.read_namespaced_config_map(name, "default")
    assert got.metadata.resource_version == rv, (name, got.metadata.resource_version, rv)
    names = [c.metadata.name for c in b.list_namespaced_config_map("default").items]
    assert name in names, (name, "not in B's list")
    at = b.list_namespaced_config_map("default", resource_version=rv, resource_version_match="NotOlderThan")
    assert int(at.metadata.resource_version) >= int(rv), (at.metadata.resource_version, rv)
    ns = "ns-%d" % i
    a.create_namespace({"metadata": {"name": ns}})
    b.create_namespaced_config_map(ns, {"metadata": {"name": "in-" + ns}})
    b.delete_namespaced_config_map(name, "default")
    gone = [c.metadata.name for c in a.list_namespaced_config_map("default").items]
    assert name not in gone, (name, "still in A's list after B's delete")
print("consistent: 60 rounds")
PY
out=$(/usr/bin/python3 "$TMP/consistent.py" "$KA" "$KB" 2>&1) || fail "consistent reads across servers: $out"
expect_contains "$out" "consistent: 60 rounds" "consistent reads across servers"
# A resourceVersion far ahead of etcd: upstream's 504 after its 3 s wait
far=$((rv + 1000000))
out=$(KUBECONFIG=$KB kubectl get --raw "/api/v1/namespaces/default/configmaps?resourceVersion=$far&resourceVersionMatch=NotOlderThan" 2>&1 || true)
expect_contains "$out" "Too large resource version: $far" "B's answer for a future resourceVersion"

KUBECONFIG=$KB kubectl delete configmap one >/dev/null
for _ in $(seq 1 40); do kubectl get configmap one >/dev/null 2>&1 || break; sleep 0.05; done
expect_contains "$(kfail get configmap one)" 'configmaps "one" not found' "A after B's delete"
kill "$AW" "$BW" 2>/dev/null || true
wait "$AW" "$BW" 2>/dev/null || true

# ---- A restarted: everything from etcd; compaction every second ----------------
gw_key() { printf '%s' "$1" | base64 -w0; }
compact_version() {
    curl -sf "$ETCD_URL/v3/kv/range" -d "{\"key\":\"$(gw_key compact_rev_key)\"}" |
        jq -r '.kvs[0].version // "0"'
}
expect_eq "$(compact_version)" 0 "no compaction at the default 5m interval yet"
# Keys under the prefix that are not ckube's objects: kube-apiserver's own
# (ranges), a type ckube does not serve, and one of ours that is no JSON.
# Watching and loading skip them, naming the key; the rest is served.
gw_put() { curl -sf "$ETCD_URL/v3/kv/put" -d "{\"key\":\"$(printf '%s' "$1" | base64 -w0)\",\"value\":\"$(printf '%s' "$2" | base64 -w0)\"}" >/dev/null; }
gw_put /registry/ranges/serviceips "$(printf 'k8s\0binary')"
gw_put /registry/statefulsets/default/web '{"kind":"StatefulSet"}'
gw_put /registry/configmaps/default/corrupt 'not json at all'
wait_for grep -q "skipping key /registry/ranges/serviceips" "$TMP/b.log"
wait_for grep -q "undecodable value at /registry/core/configmaps/default/corrupt" "$TMP/b.log"
expect_eq "$(KUBECONFIG=$KB kubectl get configmap from-a -o name)" "configmap/from-a" "B serves the rest"
stop_server || fail "server A did not stop cleanly"
start_server --storage etcd --etcd-servers "$ETCD_URL" --controller-manager=false \
    --etcd-compaction-interval 1s
got=$(k get configmaps -n default -o name | sort | tr '\n' ' ')
expect_eq "$got" "configmap/from-a configmap/from-b " "default's configmaps after a restart"
grep -q "skipping key /registry/statefulsets/default/web" "$TMP/server.log" ||
    fail "loading did not name the foreign key"
grep -q "undecodable value at /registry/core/configmaps/default/corrupt" "$TMP/server.log" ||
    fail "loading did not name the corrupt key"
old_rev=$rv
k create configmap after-restart >/dev/null
compacted() { [ "$(compact_version)" -ge 1 ] &&
    curl -s "$ETCD_URL/v3/kv/range" -d "{\"key\":\"$(gw_key /registry/x)\",\"revision\":$old_rev}" |
        grep -q "required revision has been compacted"; }
for _ in $(seq 1 100); do compacted && break; sleep 0.1; done
compacted || fail "etcd was not compacted past revision $old_rev within 10 s (compact_rev_key version $(compact_version))"
# the server still serves everything, and writes
expect_eq "$(k get configmap from-a -o name)" "configmap/from-a" "a read after compaction"
k create configmap after-compaction >/dev/null

# ---- etcd wholly down, then back: no restart of the server -----------------------
# /readyz fails on upstream's etcd check, requests get a 5xx Status in
# upstream's words, an open watch stays open; when etcd is back, the
# server recovers by itself and the watch goes on with nothing lost or
# repeated.
expect_contains "$(k get --raw '/readyz?verbose')" "[+]etcd ok" "readyz on etcd"
expect_contains "$(k get --raw '/readyz?verbose')" "[+]etcd-readiness ok" "readyz on etcd"
kubectl get configmaps -w -o name >"$TMP/outage.watch" 2>&1 &
OW=$!
sleep 1
kill -TERM "$ETCD_PID"
wait "$ETCD_PID" 2>/dev/null || true
ETCD_PID=
down() { ! kubectl get --raw /readyz >/dev/null 2>&1; }
wait_for down
expect_contains "$(k get --raw '/readyz?verbose' 2>&1)" "[-]etcd failed: reason withheld" "readyz with etcd down"
expect_contains "$(kfail create configmap while-down)" "failed to create configmap: context deadline exceeded" \
    "a write with etcd down"
expect_contains "$(kfail get configmaps)" "context deadline exceeded" "a consistent read with etcd down"
kill -0 "$OW" 2>/dev/null || fail "the watch ended while etcd was down"
start_etcd
wait_for curl -sf "$ETCD_URL/health"
wait_for kubectl get --raw /readyz
k create configmap after-outage >/dev/null
k delete configmap after-compaction >/dev/null
# (-o name prints a name per event: the initial list, then each change)
seen_n() { [ "$(grep -cx "configmap/$1" "$TMP/outage.watch")" -ge "$2" ]; }
wait_for seen_n after-outage 1
wait_for seen_n after-compaction 2
kill "$OW" 2>/dev/null || true
wait "$OW" 2>/dev/null || true
expect_eq "$(grep -cx 'configmap/after-outage' "$TMP/outage.watch")" 1 "the watch saw the create once"
expect_eq "$(grep -cx 'configmap/after-compaction' "$TMP/outage.watch")" 2 "listed, then deleted, once"
expect_eq "$(grep -c 'while-down' "$TMP/outage.watch")" 0 "the refused write made no event"
stop_server || fail "server A did not stop cleanly"

# ---- --etcd-prefix: another cluster on the same etcd --------------------------------
DATA_DIR=$TMP/c start_server --storage etcd --etcd-servers "$ETCD_URL" --controller-manager=false \
    --etcd-prefix /other-cluster
expect_eq "$(k get configmaps -n default -o name)" "" "another prefix sees none of /registry's objects"
k create configmap in-other >/dev/null
expect_eq "$(gw_count /other-cluster/configmaps/default/in-other)" 1 "the object under --etcd-prefix"
expect_contains "$(KUBECONFIG=$KB kubectl get configmap in-other -o name 2>&1)" \
    'configmaps "in-other" not found' "the /registry server does not see it"
stop_server || fail "server C did not stop cleanly"
kill -TERM "$B_PID"
wait "$B_PID" || fail "server B did not stop cleanly"
B_PID=
echo "PASS"
