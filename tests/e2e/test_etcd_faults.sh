#!/usr/bin/env bash
# test_etcd_faults.sh - issue #23's faults and acceptance, as a user runs
# them: a three-member etcd cluster on loopback (short heartbeat and
# election timeout, so that elections take a fraction of a second) and two
# `ckube server --storage etcd`s on it (A, then B with A's token), each
# given all three members:
#  - an object created through A is read and watched through B;
#  - under write load through A and through B (a Python writer per server
#    recording every create that was acknowledged, and going on past the
#    errors of single requests), etcd's leader is killed with SIGKILL -
#    the member B's watch stream is on, the worst case, leadership moved
#    there first - writes go on, it is restarted, writes go on; then
#    server B is killed with SIGKILL and writes go on through A: creates
#    are acknowledged after each fault;
#  - a watch through B, open across the leader's death and restart,
#    delivers a known sequence of creates made through A after the death,
#    each once, in order;
#  - reads are consistent throughout: a list through A or B started after
#    a create was acknowledged (through either) holds it;
#  - B's writer, its server gone, goes on through A with the same
#    kubeconfig (as behind a load balancer); B's kubeconfig pointed at A
#    lists everything B had acknowledged;
#  - at the end every acknowledged create is there, through A and through
#    B restarted, and both servers stop cleanly.
# About 15 s. Every process is stopped on exit, pass or fail; on failure
# the last lines of every log are printed. A failed check of the watch or
# of the reads is reported and the test goes on, so that one bug does not
# hide the next; the test fails at the end.
source "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "jq is required"
ETCD=${CKUBE_ETCD_BIN:-/usr/bin/etcd}
[ -x "$ETCD" ] || fail "$ETCD not found (install-deps installs etcd-server)"
PY=/usr/bin/python3
"$PY" -c 'import kubernetes' 2>/dev/null || fail "python3-kubernetes is required"
export HOME=$TMP/home
mkdir -p "$HOME"
free_port() { python3 "$SRC/tests/e2e/free_port.py"; }

# ---- processes, and stopping them all on exit --------------------------------
declare -a CP PP EPID MID
B_PID=
WORKERS=() # the Python writers and readers
stop_all() {
    local p i
    touch "$TMP/stop"
    for p in "${WORKERS[@]}" "${BG_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for p in "${WORKERS[@]}" "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    WORKERS=() BG_PIDS=()
    [ -z "$B_PID" ] || { kill -KILL "$B_PID" 2>/dev/null; wait "$B_PID" 2>/dev/null; }
    B_PID=
    for i in 1 2 3; do
        [ -z "${EPID[$i]:-}" ] || { kill -KILL "${EPID[$i]}" 2>/dev/null; wait "${EPID[$i]}" 2>/dev/null; }
        EPID[$i]=
    done
}
on_exit() {
    local rc=$? f
    set +e
    stop_all
    if [ $rc -ne 0 ] || [ $FAILED -ne 0 ]; then
        for f in m1.log m2.log m3.log b.log writer-a.err writer-b.err seq.log watch.out watch.err \
            reads.check; do
            [ -e "$TMP/$f" ] || continue
            echo "---- $f (tail)"
            tail -n 25 "$TMP/$f"
        done >&2
    fi
    (exit $rc)
    cleanup # A's log, and the test's directory
}
trap on_exit EXIT

# check failures that do not stop the test (see above)
SOFT_FAILS=()
soft_fail() {
    echo "FAIL: $*" >&2
    SOFT_FAILS+=("$1")
}

# ---- a three-member etcd cluster -------------------------------------------------
IC=
for i in 1 2 3; do
    CP[$i]=$(free_port)
    PP[$i]=$(free_port)
    IC+="${IC:+,}m$i=http://127.0.0.1:${PP[$i]}"
done
ENDPOINTS="http://127.0.0.1:${CP[1]},http://127.0.0.1:${CP[2]},http://127.0.0.1:${CP[3]}"
start_member() { # I: starts member mI (a restart: on its data dir, the flags ignored)
    local i=$1
    "$ETCD" --name "m$i" --data-dir "$TMP/m$i" \
        --listen-client-urls "http://127.0.0.1:${CP[$i]}" \
        --advertise-client-urls "http://127.0.0.1:${CP[$i]}" \
        --listen-peer-urls "http://127.0.0.1:${PP[$i]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${PP[$i]}" \
        --initial-cluster "$IC" --initial-cluster-state new \
        --heartbeat-interval 50 --election-timeout 500 >>"$TMP/m$i.log" 2>&1 &
    EPID[$i]=$!
}
status() { curl -sf -m 2 -X POST -d '{}' "http://127.0.0.1:${CP[$1]}/v3/maintenance/status"; }
healthy() { curl -sf -m 2 "http://127.0.0.1:${CP[$1]}/health" | grep -q '"health":"true"'; }
for i in 1 2 3; do start_member "$i"; done
for i in 1 2 3; do wait_for healthy "$i"; done
for i in 1 2 3; do MID[$i]=$(status "$i" | jq -r .header.member_id); done
# leader [I...]: the index of the member that the first member of I (default
# all) that answers names leader
leader() {
    local i l j
    for i in ${1:-1 2 3}; do
        l=$(status "$i" | jq -r '.leader // "0"') || continue
        for j in 1 2 3; do [ "$l" != "${MID[$j]}" ] || { echo "$j"; return 0; }; done
    done
    return 1
}
# streams I: how many watch streams member mI serves
streams() { curl -sf -m 2 "http://127.0.0.1:${CP[$1]}/metrics" |
    awk '$1 == "etcd_debugging_mvcc_watch_stream_total" {print $2}'; }

# ---- server A, server B with A's token -------------------------------------------
start_server --storage etcd --etcd-servers "$ENDPOINTS" --controller-manager=false
KA=$KUBECONFIG
URL_A=$SERVER_URL
PB=$(free_port)
KB=$TMP/b/kubeconfig
start_b() {
    "$CKUBE_BIN" server --data-dir "$TMP/b" --listen "127.0.0.1:$PB" --storage etcd \
        --etcd-servers "$ENDPOINTS" --controller-manager=false "$@" >>"$TMP/b.log" 2>&1 &
    B_PID=$!
    for _ in $(seq 1 200); do [ -s "$KB" ] && break; sleep 0.05; done
    wait_for env KUBECONFIG="$KB" kubectl get --raw /readyz
}
# B's etcd watch stream (a server has one) is on the member whose count of
# streams B's start raised
declare -a S0
for i in 1 2 3; do S0[$i]=$(streams "$i"); done
start_b --token-file "$TMP/data/token"
BW=
for _ in $(seq 1 50); do
    for i in 1 2 3; do [ "$(streams "$i")" -le "${S0[$i]}" ] || BW=$i; done
    [ -z "$BW" ] || break
    sleep 0.1
done
[ -n "$BW" ] || fail "cannot tell which etcd member B watches through"
kb() { KUBECONFIG=$KB kubectl --request-timeout=10s "$@"; }

# ---- created on A, read and watched on B ---------------------------------------------
KUBECONFIG=$KB timeout 30 kubectl get configmaps -w -o name >"$TMP/b1.watch" 2>&1 &
BG_PIDS+=($!)
k create configmap first --from-literal=k=v >/dev/null
expect_eq "$(kb get configmap first -o jsonpath='{.data.k}')" v "B reads what A created"
wait_for grep -qx configmap/first "$TMP/b1.watch"
k create configmap second >/dev/null
wait_for grep -qx configmap/second "$TMP/b1.watch"
kill_bg
echo "--- created on A, read and watched on B: ok (${SECONDS}s)"

# ---- the writers and readers -------------------------------------------------------------
cat >"$TMP/load.py" <<'PY'
"""Load for test_etcd_faults.sh. Each acknowledged create appends
"NAME SERVER T" to an ack file (T: time.monotonic() when the answer came).

writer KUBECONFIG PREFIX MAX ACKS ERRS [FAILOVER_URL]
    creates PREFIX-0000, PREFIX-0001, ... one at a time until STOP (a file
    beside ACKS) exists or MAX were tried; a failed create is logged to
    ERRS and the writer goes on with the next name. With FAILOVER_URL, a
    server that refuses connections is left for FAILOVER_URL with the same
    credentials, as a load balancer would.
seq KUBECONFIG PREFIX FROM TO ACKS
    creates PREFIX-FROM..PREFIX-(TO-1), labelled seq=1, in order; one that
    fails is retried for up to 20 s (AlreadyExists: it had been made).
reader KUBECONFIG OUT
    lists the configmaps (a consistent list) until STOP, each list a line
    "T0 NAME,NAME,..." in OUT, T0 taken before the request was sent.
check OUT ACKS...
    every list in OUT holds every name acknowledged before it started."""
import json, os, sys, time
import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException


def api(path, host=None):
    cfg = client.Configuration()
    config.load_kube_config(config_file=path, client_configuration=cfg)
    cfg.retries = False  # one attempt per request: nothing is sent twice
    if host:
        cfg.host = host
    return client.CoreV1Api(client.ApiClient(cfg)), cfg.host


def stopped(near):
    return os.path.exists(os.path.join(os.path.dirname(near), "stop"))


def create(core, name, labels=None):
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": name, "labels": labels or {}}, "data": {"n": name}},
        _request_timeout=(3, 15))


def first_line(e):
    return (str(e).splitlines() or [""])[0][:200]


def writer(path, prefix, most, acks, errs, failover=None):
    core, host = api(path)
    with open(acks, "a") as ack, open(errs, "a") as err:
        for i in range(int(most)):
            if stopped(acks):
                break
            name = "%s-%04d" % (prefix, i)
            try:
                create(core, name)
                ack.write("%s %s %.6f\n" % (name, host, time.monotonic()))
                ack.flush()
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as e:
                err.write("%.3f %s %s: %s\n" % (time.monotonic(), name, host, first_line(e)))
                err.flush()
                # a server that is gone refuses connections
                gone = isinstance(e, urllib3.exceptions.NewConnectionError)
                if gone and failover and host != failover:
                    core, host = api(path, failover)
                    err.write("switched to %s\n" % host)
                    err.flush()
            time.sleep(0.05)


def seq(path, prefix, start, end, acks):
    core, host = api(path)
    with open(acks, "a") as ack:
        for i in range(int(start), int(end)):
            name = "%s-%03d" % (prefix, i)
            deadline = time.monotonic() + 20
            while True:
                try:
                    create(core, name, {"seq": "1"})
                    break
                except ApiException as e:
                    if e.status == 409:
                        break
                    last = e
                except (urllib3.exceptions.HTTPError, OSError) as e:
                    last = e
                print("retrying %s: %s" % (name, first_line(last)), flush=True)
                if time.monotonic() > deadline:
                    sys.exit("could not create %s" % name)
                time.sleep(0.2)
            ack.write("%s %s %.6f\n" % (name, host, time.monotonic()))
            ack.flush()
    print("created %s-%03d..%s-%03d" % (prefix, int(start), prefix, int(end) - 1), flush=True)


def reader(path, out):
    core, _ = api(path)
    with open(out, "a") as f:
        while not stopped(out):
            t0 = time.monotonic()
            try:
                r = core.list_namespaced_config_map("default", _preload_content=False,
                                                    _request_timeout=(3, 15))
                names = [o["metadata"]["name"] for o in json.loads(r.data)["items"]]
                f.write("%.6f %s\n" % (t0, ",".join(names)))
                f.flush()
            except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError):
                pass  # an error is no stale read
            time.sleep(0.1)


def check(out, *ack_files):
    acked = []
    for a in ack_files:
        if os.path.exists(a):
            with open(a) as f:
                acked += [(float(t), n) for n, _, t in (l.split() for l in f if l.strip())]
    acked.sort()
    reads = stale = 0
    with open(out) as f:
        for line in f:
            t0, _, names = line.rstrip("\n").partition(" ")
            have = set(names.split(","))
            missing = [n for t, n in acked if t < float(t0) and n not in have]
            reads += 1
            if missing:
                stale += 1
                if stale <= 5:
                    print("a list started %.3f s after %s was acknowledged lacks it (%d missing)"
                          % (float(t0) - max(t for t, n in acked if n == missing[0]), missing[0],
                             len(missing)))
    print("%d lists, %d stale" % (reads, stale))
    sys.exit(1 if stale or not reads else 0)


{"writer": writer, "seq": seq, "reader": reader, "check": check}[sys.argv[1]](*sys.argv[2:])
PY
acks() { [ -e "$TMP/$1.acks" ] && wc -l <"$TMP/$1.acks" || echo 0; }
# more_acks WRITER N WHAT: waits up to 15 s for WRITER's acknowledged
# creates to pass N
more_acks() {
    for _ in $(seq 1 150); do
        [ "$(acks "$1")" -le "$2" ] || return 0
        sleep 0.1
    done
    fail "no create acknowledged through writer $1 $3 (still $2 after 15 s)"
}
"$PY" "$TMP/load.py" writer "$KA" wa 400 "$TMP/a.acks" "$TMP/writer-a.err" &
WORKERS+=($!)
"$PY" "$TMP/load.py" writer "$KB" wb 400 "$TMP/b.acks" "$TMP/writer-b.err" "$URL_A" &
WORKERS+=($!)
"$PY" "$TMP/load.py" reader "$KA" "$TMP/a.reads" &
WORKERS+=($!)
"$PY" "$TMP/load.py" reader "$KB" "$TMP/b.reads" &
WORKERS+=($!)
# the sequence's watch through B, open across the faults
KUBECONFIG=$KB timeout 80 kubectl get configmaps -l seq -w --output-watch-events \
    -o jsonpath='{.type} {.object.metadata.name} {.object.metadata.resourceVersion}{"\n"}' \
    >"$TMP/watch.out" 2>"$TMP/watch.err" &
BG_PIDS+=($!)
more_acks a 10 "before the faults"
more_acks b 10 "before the faults"

# ---- etcd's leader killed, writes go on; restarted, writes go on --------------------------
# The worst case: the leader is the member B's watch stream is on, so that
# B resumes its watch on another member while the others elect a leader.
L=$(leader) || fail "no etcd leader"
if [ "$L" != "$BW" ]; then
    curl -sf -m 5 -X POST "http://127.0.0.1:${CP[$L]}/v3/maintenance/transfer-leadership" \
        -d "{\"targetID\":\"${MID[$BW]}\"}" >/dev/null || fail "cannot move etcd's leadership to m$BW"
    for _ in $(seq 1 50); do L=$(leader) && [ "$L" = "$BW" ] && break; sleep 0.1; done
    [ "$L" = "$BW" ] || fail "etcd's leadership did not move to m$BW"
fi
echo "killing etcd member m$L (the leader, B's watch stream on it) after $(acks a)+$(acks b) creates"
n_a=$(acks a) n_b=$(acks b)
kill -KILL "${EPID[$L]}"
wait "${EPID[$L]}" 2>/dev/null || true
EPID[$L]=
T_KILL=$SECONDS
# the first half of the sequence, through A, from the moment the leader died
"$PY" "$TMP/load.py" seq "$KA" seq 0 25 "$TMP/seq.acks" >>"$TMP/seq.log" 2>&1 ||
    fail "the sequence after the leader's death"
SURV=$(for i in 1 2 3; do [ "$i" = "$L" ] || echo "$i"; done | tr '\n' ' ')
NL=
for _ in $(seq 1 100); do NL=$(leader "$SURV") && [ "$NL" != "$L" ] && break; sleep 0.1; done
[ -n "$NL" ] && [ "$NL" != "$L" ] || fail "no new etcd leader among the other members"
echo "new leader m$NL"
more_acks a "$n_a" "after the leader's death"
more_acks b "$n_b" "after the leader's death"
sleep 2
n_a=$(acks a) n_b=$(acks b)
start_member "$L"
wait_for healthy "$L"
echo "m$L back after $((SECONDS - T_KILL))s"
"$PY" "$TMP/load.py" seq "$KA" seq 25 50 "$TMP/seq.acks" >>"$TMP/seq.log" 2>&1 ||
    fail "the sequence after the member's restart"
more_acks a "$n_a" "after the member's restart"
more_acks b "$n_b" "after the member's restart"
echo "--- etcd's leader killed and restarted under writes: ok (${SECONDS}s)"

# ---- the watch through B: the sequence, each once, in order -------------------------------
for _ in $(seq 1 50); do [ "$(wc -l <"$TMP/watch.out")" -ge 50 ] && break; sleep 0.1; done
want=$(for i in $(seq 0 49); do printf 'ADDED seq-%03d\n' "$i"; done)
got=$(cut -d' ' -f1,2 "$TMP/watch.out")
if [ "$got" = "$want" ]; then
    echo "--- a watch through B across the leader's death: ok (${SECONDS}s)"
else
    missing=$(comm -23 <(echo "$want" | sort) <(echo "$got" | sort) | cut -d' ' -f2 | tr '\n' ' ')
    twice=$(echo "$got" | sort | uniq -d | cut -d' ' -f2 | tr '\n' ' ')
    soft_fail "the watch through B across the leader's death" \
        "(not the 50 creates once each, in order: $(echo "$got" | grep -c .) events;" \
        "missing: ${missing:-none}; twice: ${twice:-none})"
fi
kill_bg

# ---- server B killed: writes through A go on, B's writer moves to A ------------------------
n_a=$(acks a) n_b=$(acks b)
kill -KILL "$B_PID"
wait "$B_PID" 2>/dev/null || true
B_PID=
more_acks a "$n_a" "after server B's death"
more_acks b "$n_b" "after server B's death (its writer moved to A)"
grep -q "switched to $URL_A" "$TMP/writer-b.err" || fail "B's writer did not move to A"
sleep 1
touch "$TMP/stop"
for p in "${WORKERS[@]}"; do wait "$p" || fail "a writer or reader failed"; done
WORKERS=()
echo "acknowledged: $(acks a) through A, $(acks b) by B's writer" \
    "($(grep -c " $URL_A " "$TMP/b.acks" || true) of them through A after B died), $(acks seq) in sequence;" \
    "failed: $(grep -vc '^switched' "$TMP/writer-a.err" 2>/dev/null || true) and" \
    "$(grep -vc '^switched' "$TMP/writer-b.err" 2>/dev/null || true)"
echo "--- server B killed under writes: ok (${SECONDS}s)"

# ---- the reads were consistent ------------------------------------------------------------
for s in a b; do
    rc=0
    out=$("$PY" "$TMP/load.py" check "$TMP/$s.reads" "$TMP/a.acks" "$TMP/b.acks" "$TMP/seq.acks" 2>&1) ||
        rc=$?
    echo "reads through ${s^^}: ${out##*$'\n'}" | tee -a "$TMP/reads.check"
    [ $rc -eq 0 ] || soft_fail "stale reads through ${s^^}: $out"
done

# ---- nothing acknowledged is lost --------------------------------------------------------
cat "$TMP/a.acks" "$TMP/b.acks" "$TMP/seq.acks" | cut -d' ' -f1 | sort >"$TMP/acked"
# lost NAME KUBECONFIG [kubectl flags]: lists the configmaps through a
# server into $TMP/listed.NAME; fails on any acknowledged name missing
lost() {
    local out
    out=$(KUBECONFIG=$2 kubectl --request-timeout=10s "${@:3}" get configmaps -o name) ||
        fail "listing through $1: $out"
    printf '%s\n' "$out" | sed 's#^configmap/##' | sort >"$TMP/listed.$1"
    out=$(comm -23 "$TMP/acked" "$TMP/listed.$1")
    [ -z "$out" ] || fail "$(echo "$out" | wc -l) acknowledged creates missing through $1: $(echo $out)"
}
# B's client, B gone, with the same kubeconfig on A: everything B acknowledged
lost b-kubeconfig-on-a "$KB" --server "$URL_A"
KUBECONFIG=$KB kubectl --server "$URL_A" create configmap from-b-client >/dev/null ||
    fail "B's client cannot write through A"
lost a "$KA"
start_b
lost b "$KB"
cmp -s "$TMP/listed.a" "$TMP/listed.b" || {
    diff "$TMP/listed.a" "$TMP/listed.b" >&2 || true
    fail "A and B restarted list different configmaps"
}
echo "--- all $(grep -c . "$TMP/acked") acknowledged creates there, through A and B restarted: ok (${SECONDS}s)"

# ---- both servers stop cleanly --------------------------------------------------------------
kill -TERM "$B_PID"
wait "$B_PID" || fail "server B did not stop cleanly"
B_PID=
stop_server || fail "server A did not stop cleanly"
[ ${#SOFT_FAILS[@]} -eq 0 ] || fail "failed: $(printf '%s; ' "${SOFT_FAILS[@]}")"
echo "PASS (${SECONDS}s)"
