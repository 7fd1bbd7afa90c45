#!/usr/bin/env bash
# test_backup_restore.sh - issue #23 item 6, as a user runs it:
#  - `ckube backup` of a running server's SQLite store while a client keeps
#    creating ConfigMaps: each copy holds every write acknowledged before
#    it began and, of the writer's sequence, a gap-free prefix (one
#    commit's state, nothing half);
#  - `ckube restore` of it into a fresh data dir (plus the old pki/), and
#    a server there serves every object acknowledged before the backup
#    with the same uid, resourceVersion and creationTimestamp; a
#    ServiceAccount token made before the backup still authenticates;
#  - refusals, each a one-line message and exit 1: restore while a server
#    runs on the dir, restore over an existing store without --force,
#    backup of a missing store, backup over an existing file without
#    --force, backup to an unwritable place, restore of a garbage file and
#    of a SQLite file that is no ckube store;
#  - `ckube migrate` of the restored store into a fresh etcd, then `ckube
#    server --storage etcd` serves the objects with their uids and
#    creationTimestamps, in the same resourceVersion order; migrating
#    again (a non-empty prefix) or while the server runs is refused;
#    the objects sit at upstream's keys under --etcd-prefix.
source "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "jq is required"
ETCD=${CKUBE_ETCD_BIN:-/usr/bin/etcd}
[ -x "$ETCD" ] || fail "$ETCD not found (install-deps installs etcd-server)"
K=${KUBECTL_BIN:-/usr/lib/google-cloud-sdk/bin/kubectl.1.31}
[ -x "$K" ] || K=kubectl
export HOME=$TMP/home
mkdir -p "$HOME"
free_port() { python3 "$SRC/tests/e2e/free_port.py"; }

ETCD_PID=
stop_etcd() {
    if [ -n "$ETCD_PID" ]; then
        kill -TERM "$ETCD_PID" 2>/dev/null || true
        wait "$ETCD_PID" 2>/dev/null || true
    fi
    ETCD_PID=
}
trap 'rc=$?; set +e; kill_bg; stop_etcd; if [ $rc -ne 0 ]; then echo "---- etcd log"; tail -n 20 "$TMP/etcd.log"; fi >&2; (exit $rc); cleanup' EXIT

# run_ckube CODE MESSAGE ARGS...: `ckube ARGS` exits CODE and says MESSAGE.
run_ckube() {
    local want=$1 msg=$2 rc=0 out
    shift 2
    out=$("$CKUBE_BIN" "$@" 2>&1) || rc=$?
    expect_eq "$rc" "$want" "exit code of ckube $* (output: $out)"
    expect_contains "$out" "$msg" "output of ckube $*"
    printf '%s\n' "$out"
}

# objects: one line per object of the listed types, "KIND/NS/NAME UID RV
# CREATED", sorted by name.
TYPES=namespaces,configmaps,secrets,serviceaccounts,clusterroles,clusterrolebindings,roles,rolebindings
objects() {
    "$K" get "$TYPES" -A -o json | jq -r '.items[] | "\(.kind)/\(.metadata.namespace // "")/\(.metadata.name) \(.metadata.uid) \(.metadata.resourceVersion) \(.metadata.creationTimestamp)"' | sort
}

# ---- server A with objects -------------------------------------------------
A=$TMP/a
DATA_DIR=$A start_server --controller-manager=false
k create namespace team >/dev/null
# 150 ConfigMaps of 2 KB, so the copy has some pages to read
python3 - >"$TMP/bulk.json" <<'EOF'
import json
items = [{"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "bulk-%d" % i, "namespace": "team"},
          "data": {"blob": ("%d-" % i) * 400}} for i in range(150)]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
EOF
k create -f "$TMP/bulk.json" >/dev/null
k create secret generic creds --from-literal=password=s3cret -n team >/dev/null
k create serviceaccount bot >/dev/null
TOKEN=$(k create token bot --duration=1h)

# A writer: ConfigMaps bg-1, bg-2, ... one after another; each name goes
# to $TMP/acked once the server acknowledged it.
writer() {
    local i=0
    while [ ! -e "$TMP/stop" ]; do
        i=$((i + 1))
        curl -sf -o /dev/null -H 'Content-Type: application/json' \
            "$SERVER_URL/api/v1/namespaces/default/configmaps" \
            -d "{\"metadata\":{\"name\":\"bg-$i\"},\"data\":{\"i\":\"$i\"}}" ||
            { echo "writer: creating bg-$i failed" >&2; return 1; }
        echo "bg-$i" >>"$TMP/acked"
    done
}
: >"$TMP/acked"
writer &
BG_PIDS+=($!)
acked() { wc -l <"$TMP/acked"; }
wait_for sh -c "[ \$(wc -l <'$TMP/acked') -ge 10 ]"
objects >"$TMP/before.txt"
[ "$(wc -l <"$TMP/before.txt")" -gt 200 ] || fail "too few objects listed: $(wc -l <"$TMP/before.txt")"

# bg_prefix FILE: the writer's ConfigMaps in the snapshot FILE, checked to
# be bg-1..bg-N without a gap; prints N.
bg_prefix() {
    python3 - "$1" <<'EOF'
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
rows = db.execute("SELECT key FROM kv AS a WHERE deleted = 0 AND key LIKE "
                  "'/registry/core/configmaps/default/bg-%' AND NOT EXISTS "
                  "(SELECT 1 FROM kv AS b WHERE b.key = a.key AND b.id > a.id)").fetchall()
got = sorted(int(k.rsplit("-", 1)[1]) for (k,) in rows)
if got != list(range(1, len(got) + 1)):
    sys.exit("not a prefix of the writer's sequence: %s" % got)
print(len(got))
EOF
}

# Backups while the writer writes: each holds what was acknowledged before
# it began, and a prefix of the sequence.
for n in 1 2 3 4 5; do
    lo=$(acked)
    out=$(run_ckube 0 "Snapshot saved at $TMP/snap$n.db" backup --data-dir "$A" "$TMP/snap$n.db")
    hi=$(acked)
    expect_contains "$out" "objects" "backup output"
    [ ! -e "$TMP/snap$n.db.tmp" ] || fail "backup left $TMP/snap$n.db.tmp"
    got=$(bg_prefix "$TMP/snap$n.db") || fail "snapshot $n: $got"
    # hi + 1: a create committed while its reply was on the way
    [ "$got" -ge "$lo" ] && [ "$got" -le $((hi + 1)) ] ||
        fail "snapshot $n holds bg-1..bg-$got; acknowledged: $lo before, $hi after"
    [ "$(stat -c %a "$TMP/snap$n.db")" = 600 ] || fail "snapshot $n is not mode 0600"
    sleep 0.1
done
SNAP=$TMP/snap3.db
BG_IN_SNAP=$(bg_prefix "$SNAP")
[ "$(acked)" -gt "$BG_IN_SNAP" ] || fail "the writer did not write past the backups"
touch "$TMP/stop"
wait "${BG_PIDS[0]}" || fail "the writer failed"
BG_PIDS=()

# ---- refusals --------------------------------------------------------------------
run_ckube 1 "ckube restore: a ckube server is running on $A" restore --data-dir "$A" "$SNAP" >/dev/null
run_ckube 1 "ckube restore: a ckube server is running on $A" restore --data-dir "$A" --force "$SNAP" >/dev/null
run_ckube 1 "ckube backup: no ckube store at $TMP/none/state.db" backup --data-dir "$TMP/none" "$TMP/x.db" >/dev/null
[ ! -e "$TMP/none" ] && [ ! -e "$TMP/x.db" ] || fail "backup of a missing store left files"
run_ckube 1 "ckube backup: $SNAP exists; pass --force to overwrite it" backup --data-dir "$A" "$SNAP" >/dev/null
expect_eq "$(bg_prefix "$SNAP")" "$BG_IN_SNAP" "the refused backup left the file alone"
run_ckube 1 "ckube backup: cannot create $SNAP/x.db.tmp" backup --data-dir "$A" "$SNAP/x.db" >/dev/null
run_ckube 0 "Snapshot saved at $TMP/snap1.db" backup --data-dir "$A" --force "$TMP/snap1.db" >/dev/null
run_ckube 2 "the backup FILE is missing" backup --data-dir "$A" >/dev/null
head -c 8192 /dev/urandom >"$TMP/garbage"
run_ckube 1 "ckube restore: $TMP/garbage is not a ckube store: file is not a database" \
    restore --data-dir "$TMP/g" "$TMP/garbage" >/dev/null
python3 -c "import sqlite3; c = sqlite3.connect('$TMP/other.db'); c.execute('CREATE TABLE t (x)'); c.commit()"
run_ckube 1 "ckube restore: $TMP/other.db is not a ckube store: it has no table kv" \
    restore --data-dir "$TMP/g" "$TMP/other.db" >/dev/null
[ ! -e "$TMP/g/state.db" ] || fail "a refused restore left a store"
stop_server || fail "server A did not stop cleanly"
run_ckube 1 "ckube restore: $A/state.db exists; pass --force to replace it" restore --data-dir "$A" "$SNAP" >/dev/null

# ---- restore into a fresh data dir ------------------------------------------------
R=$TMP/r
out=$(run_ckube 0 "Restored $SNAP to $R/state.db" restore --data-dir "$R" "$SNAP")
expect_contains "$out" "$R/pki does not exist" "restore's note about pki"
cp -a "$A/pki" "$R/pki"
DATA_DIR=$R start_server --controller-manager=false
objects >"$TMP/after.txt"
missing=$(comm -23 "$TMP/before.txt" "$TMP/after.txt")
[ -z "$missing" ] || fail "objects missing or changed after restore (KIND/NS/NAME UID RV CREATED):
$missing"
got=$("$K" get configmaps -o name | grep -c '^configmap/bg-')
expect_eq "$got" "$BG_IN_SNAP" "the writer's ConfigMaps served after restore"
expect_eq "$(k get secret creds -n team -o jsonpath='{.data.password}' | base64 -d)" s3cret "a Secret"
# the token made before the backup: same CA and key (pki/), same
# ServiceAccount uid, so it authenticates (403: bot may not list, not 401)
code=$(curl -q -s -o /dev/null -w '%{http_code}' --cacert "$R/pki/ca.crt" \
    -H "Authorization: Bearer $TOKEN" "$SERVER_URL/api/v1/namespaces/team/configmaps")
expect_eq "$code" 403 "the old ServiceAccount token against the restored server"
# the restored store can be replaced with --force once the server is down
stop_server || fail "server R did not stop cleanly"
run_ckube 0 "Restored $SNAP to $R/state.db" restore --data-dir "$R" --force "$SNAP" >/dev/null

# ---- migrate to etcd ------------------------------------------------------------------
CP=$(free_port)
PP=$(free_port)
ETCD_URL=http://127.0.0.1:$CP
"$ETCD" --name e2e --data-dir "$TMP/etcd" --listen-client-urls "$ETCD_URL" \
    --advertise-client-urls "$ETCD_URL" --listen-peer-urls "http://127.0.0.1:$PP" \
    --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
    --initial-cluster "e2e=http://127.0.0.1:$PP" --log-level warn >"$TMP/etcd.log" 2>&1 &
ETCD_PID=$!
wait_for curl -sf "$ETCD_URL/health"

DATA_DIR=$R start_server --controller-manager=false
run_ckube 1 "ckube migrate: a ckube server is running on $R" \
    migrate --data-dir "$R" --etcd-servers "$ETCD_URL" >/dev/null
objects >"$TMP/sqlite.txt"
stop_server || fail "server R did not stop cleanly"
run_ckube 1 "ckube migrate: no ckube store at $TMP/none/state.db" \
    migrate --data-dir "$TMP/none" --etcd-servers "$ETCD_URL" >/dev/null
out=$(run_ckube 0 "to etcd at $ETCD_URL under /registry" \
    migrate --data-dir "$R" --etcd-servers "$ETCD_URL" --etcd-prefix /registry)
echo "$out"
run_ckube 1 "ckube migrate: etcd at $ETCD_URL already holds objects under /registry" \
    migrate --data-dir "$R" --etcd-servers "$ETCD_URL" >/dev/null
# the objects sit where kube-apiserver keeps them; another prefix is empty
gw() { curl -sf "$ETCD_URL/v3/kv/range" -d "{\"key\":\"$(printf '%s' "$1" | base64 -w0)\"}"; }
gw /registry/secrets/team/creds | grep -q '"count":"1"' ||
    fail "the migrated Secret is not at /registry/secrets/team/creds"
run_ckube 0 "under /other" \
    migrate --data-dir "$R" --etcd-servers "$ETCD_URL" --etcd-prefix /other >/dev/null
gw /other/secrets/team/creds | grep -q '"count":"1"' ||
    fail "the Secret migrated under --etcd-prefix /other is not at /other/secrets/team/creds"

E=$TMP/e
mkdir -p "$E"
cp -a "$R/pki" "$E/pki"
DATA_DIR=$E start_server --storage etcd --etcd-servers "$ETCD_URL" --controller-manager=false
objects >"$TMP/etcd.txt"
# the same objects, uids and creation times (resourceVersions differ)
cut -d' ' -f1,2,4 "$TMP/sqlite.txt" >"$TMP/sqlite.ids"
cut -d' ' -f1,2,4 "$TMP/etcd.txt" >"$TMP/etcd.ids"
missing=$(comm -23 "$TMP/sqlite.ids" "$TMP/etcd.ids")
[ -z "$missing" ] || fail "objects missing or changed after migrate (KIND/NS/NAME UID CREATED):
$missing"
# the same order by resourceVersion
by_rv() { sort -k3,3n "$1" | cut -d' ' -f1; }
by_rv "$TMP/sqlite.txt" >"$TMP/sqlite.order"
by_rv "$TMP/etcd.txt" | grep -Fxf "$TMP/sqlite.order" >"$TMP/etcd.order"
cmp -s "$TMP/sqlite.order" "$TMP/etcd.order" ||
    fail "resourceVersion order differs after migrate: $(diff "$TMP/sqlite.order" "$TMP/etcd.order" | head -5)"
expect_eq "$(cut -d' ' -f3 "$TMP/etcd.txt" | sort | uniq -d)" "" "distinct resourceVersions on etcd"
code=$(curl -q -s -o /dev/null -w '%{http_code}' --cacert "$E/pki/ca.crt" \
    -H "Authorization: Bearer $TOKEN" "$SERVER_URL/api/v1/namespaces/team/configmaps")
expect_eq "$code" 403 "the old ServiceAccount token against the etcd-backed server"
k create configmap after-migrate >/dev/null
stop_server || fail "the etcd-backed server did not stop cleanly"
stop_etcd
echo "PASS (${SECONDS}s)"
