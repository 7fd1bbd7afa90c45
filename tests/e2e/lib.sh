# lib.sh - shared harness for shell end-to-end tests. Source it, then call
# start_server; the server is always stopped (and its data removed) when
# the test exits, pass or fail. The server listens on 127.0.0.1 only, on a
# free port, over HTTPS (its default). kubectl uses the written kubeconfig
# (KUBECONFIG); curl reads $TMP/.curlrc (CURL_HOME), which trusts the
# cluster CA and presents the kubeconfig's admin certificate, so a test's
# `curl "$SERVER_URL/..."` is the admin's request. `curl -q` skips it.
set -euo pipefail

SRC=${CKUBE_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
CKUBE_BIN=${CKUBE_BIN:-$SRC/build/ckube}
KUBECTL=${KUBECTL:-kubectl}
mkdir -p "${CKUBE_TEST_TMP:-/tmp}"
TMP=$(mktemp -d "${CKUBE_TEST_TMP:-/tmp}/e2e.XXXXXX")
SERVER_PID=
FAILED=0

# CKUBE_E2E_STORAGE=etcd: start_server runs the server on an etcd member
# of the test's own (loopback, data under $TMP, started at the first
# start_server and kept across restarts), unless the test picks a storage
# itself: the same test, another backend (CMakeLists.txt registers some
# tests twice, as e2e-etcd/NAME).
E2E_ETCD_PID= E2E_ETCD_URL=
e2e_etcd_start() {
    local cp pp
    cp=$(python3 "$SRC/tests/e2e/free_port.py")
    pp=$(python3 "$SRC/tests/e2e/free_port.py")
    E2E_ETCD_URL=http://127.0.0.1:$cp
    "${CKUBE_ETCD_BIN:-/usr/bin/etcd}" --name e2e --data-dir "$TMP/e2e-etcd" \
        --listen-client-urls "$E2E_ETCD_URL" --advertise-client-urls "$E2E_ETCD_URL" \
        --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
        --initial-cluster "e2e=http://127.0.0.1:$pp" --log-level warn >"$TMP/e2e-etcd.log" 2>&1 &
    E2E_ETCD_PID=$!
    for _ in $(seq 1 100); do
        curl -sf "$E2E_ETCD_URL/health" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "etcd did not start" >&2
    return 1
}

cleanup() {
    local rc=$?
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -KILL "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    if [ -n "$E2E_ETCD_PID" ]; then
        kill -TERM "$E2E_ETCD_PID" 2>/dev/null || true
        wait "$E2E_ETCD_PID" 2>/dev/null || true
    fi
    if [ $rc -ne 0 ] || [ $FAILED -ne 0 ]; then
        echo "---- server log (tail) ----" >&2
        tail -n 60 "$TMP/server.log" 2>/dev/null >&2 || true
    fi
    [ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"
}
trap cleanup EXIT

# start_server [extra server flags...]: starts on a fresh data dir (or
# $DATA_DIR if set) and waits until /readyz answers.
start_server() {
    local data=${DATA_DIR:-$TMP/data}
    # Fixed for the test's life (restarts reuse it) and outside the
    # ephemeral range: see free_port.py.
    [ -n "${PORT:-}" ] || PORT=$(python3 "$SRC/tests/e2e/free_port.py")
    rm -f "$data/kubeconfig"
    local storage=()
    case " $* " in *" --storage"*) ;; *)
        if [ "${CKUBE_E2E_STORAGE:-}" = etcd ]; then
            [ -n "$E2E_ETCD_PID" ] || e2e_etcd_start
            # a data dir is a cluster: its own prefix (a test that starts
            # afresh on a new data dir gets an empty store, as on SQLite)
            storage=(--storage etcd --etcd-servers "$E2E_ETCD_URL"
                --etcd-prefix "/e2e-$(printf '%s' "$data" | md5sum | cut -c1-12)")
        fi ;;
    esac
    "$CKUBE_BIN" server --data-dir "$data" --listen "127.0.0.1:$PORT" "${storage[@]}" "$@" \
        >>"$TMP/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 200); do
        if [ -s "$data/kubeconfig" ]; then
            SERVER_URL=$(sed -n 's/^ *server: //p' "$data/kubeconfig")
            if [ "${SERVER_URL#https:}" != "$SERVER_URL" ]; then
                printf 'cacert = "%s"\ncert = "%s"\nkey = "%s"\n' "$data/pki/ca.crt" \
                    "$data/pki/admin.crt" "$data/pki/admin.key" >"$TMP/.curlrc"
                export CURL_HOME=$TMP
            fi
            if curl -sf "$SERVER_URL/readyz" >/dev/null 2>&1; then
                export KUBECONFIG="$data/kubeconfig" SERVER_URL
                PORT=${SERVER_URL##*:}
                return 0
            fi
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "server exited early" >&2; return 1; }
        sleep 0.05
    done
    echo "server did not become ready" >&2
    return 1
}

# stop_server: SIGTERM, and the server must exit 0 (sanitizers included,
# its controller-manager child's too). A child that ended during the run
# (and was restarted) fails it as well, unless ALLOW_CM_RESTARTS is set.
stop_server() {
    kill -TERM "$SERVER_PID"
    local rc=0
    wait "$SERVER_PID" || rc=$?
    SERVER_PID=
    if [ $rc -ne 0 ]; then
        echo "server exited with $rc" >&2
        return 1
    fi
    if [ -z "${ALLOW_CM_RESTARTS:-}" ] &&
        grep -q "controller-manager (process [0-9]*) ended with" "$TMP/server.log"; then
        echo "the controller-manager child ended during the run" >&2
        return 1
    fi
}

# kill9_server: crash it.
kill9_server() {
    kill -KILL "$SERVER_PID"
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}

fail() {
    FAILED=1
    echo "FAIL: $*" >&2
    exit 1
}

# expect_eq ACTUAL EXPECTED MESSAGE
expect_eq() {
    [ "$1" = "$2" ] || fail "$3: expected [$2], got [$1]"
}

# expect_contains HAYSTACK NEEDLE MESSAGE
expect_contains() {
    case "$1" in *"$2"*) ;; *) fail "$3: [$2] not in [$1]" ;; esac
}

# first_line_matches TEXT ERE: whether TEXT's first line matches. (Not
# `echo | head -1 | grep -q`: with pipefail, a writer killed by SIGPIPE
# when its reader exits early fails the check although it matched.)
first_line_matches() {
    [[ ${1%%$'\n'*} =~ $2 ]]
}

# wait_for CMD...: retries a command for up to 10 s.
wait_for() {
    for _ in $(seq 1 100); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    fail "timed out waiting for: $*"
}

# ---- helpers shared by the sectioned tests ----

# section NAME FUNC...: runs FUNC in a subshell with errexit. A failure is
# recorded and the next section still runs, so one server bug does not
# hide the next; finish_sections fails the test at the end. A check that
# wants to fail its section without stopping it appends a line to
# $TMP/section.fails.
SECTION_FAILS=()
section() {
    local name=$1 before after r
    shift
    touch "$TMP/section.fails"
    before=$(wc -l <"$TMP/section.fails")
    set +e
    (
        set -e
        "$@"
    )
    r=$?
    set -e
    after=$(wc -l <"$TMP/section.fails")
    [ "$after" -eq "$before" ] || r=1
    if [ $r -ne 0 ]; then
        SECTION_FAILS+=("${K:+$(basename "$K"):}$name")
        echo "--- $name: FAILED" >&2
    else
        echo "--- $name: ok (${SECONDS}s)"
    fi
}

# finish_sections: fails the test if any section failed.
finish_sections() {
    if [ ${#SECTION_FAILS[@]} -ne 0 ]; then
        fail "failed sections: ${SECTION_FAILS[*]}"
    fi
}

# k ARGS...: runs kubectl ($K, default kubectl) and fails on an error.
k() {
    local out kc=${K:-kubectl}
    out=$("$kc" "$@" 2>&1) || fail "[$(basename "$kc") $*] failed: $out"
    printf '%s\n' "$out"
}

# kfail ARGS...: runs kubectl and fails if it succeeds; prints its output.
kfail() {
    local out kc=${K:-kubectl}
    if out=$("$kc" "$@" 2>&1); then fail "[$(basename "$kc") $*] should have failed: $out"; fi
    printf '%s\n' "$out"
}

# Background helpers (watchers): add their PIDs to BG_PIDS; kill_bg stops
# the ones still running and reaps them all.
BG_PIDS=()
kill_bg() {
    local running
    running=" $(jobs -pr | tr '\n' ' ') "
    for p in "${BG_PIDS[@]}"; do
        case $running in *" $p "*) kill "$p" 2>/dev/null || true ;; esac
    done
    for p in "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    BG_PIDS=()
}
