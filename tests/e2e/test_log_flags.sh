#!/usr/bin/env bash
# test_log_flags.sh - klog's flags on ckube's binaries, with klog's
# meanings and pflag's error words: -v=N, --v=N and -v N alike; --vmodule
# raising single files; --log-file taking effect with --logtostderr=false
# (the controller-manager child logging there too) and --alsologtostderr;
# bad values a clear error and exit status 2, never a silent 0.
source "$(dirname "$0")/lib.sh"
CM_BIN=$(dirname "$CKUBE_BIN")/ckube-controller-manager

# with_server FLAGS...: a server with those flags; one GET /api; stopped.
# Leaves its output in $TMP/server.log (fresh each time).
with_server() {
    : >"$TMP/server.log"
    start_server "$@"
    curl -sf "$SERVER_URL/api" >/dev/null
    stop_server
}

# The V(5) line apiserver.c writes for each request, and V(1) of sqlite.c.
REQ_LINE='apiserver.c:[0-9]*\] GET /api$'
OPEN_LINE='sqlite.c:[0-9]*\] storage: opened'

s_verbosity_forms() {
    for form in "-v=5" "--v=5" "-v 5"; do
        # shellcheck disable=SC2086 # "-v 5" is two arguments
        with_server --controller-manager=false $form
        grep -q "$REQ_LINE" "$TMP/server.log" || fail "$form: no V(5) request line"
        grep -q "$OPEN_LINE" "$TMP/server.log" || fail "$form: no V(1) line"
    done
    with_server --controller-manager=false -v 0
    if grep -q "$REQ_LINE\|$OPEN_LINE" "$TMP/server.log"; then fail "-v 0 logged V lines"; fi
}

s_vmodule() {
    # Raises apiserver.c alone; sqlite.c stays at -v 0.
    with_server --controller-manager=false --vmodule=api*er=5,nothing=3
    grep -q "$REQ_LINE" "$TMP/server.log" || fail "--vmodule apiserver: no V(5) line"
    if grep -q "$OPEN_LINE" "$TMP/server.log"; then fail "--vmodule raised sqlite.c too"; fi
    # vmodule only raises, as klog's: -v 5 with apiserver=1 still logs it.
    with_server --controller-manager=false -v 5 --vmodule=apiserver=1
    grep -q "$REQ_LINE" "$TMP/server.log" || fail "--vmodule lowered a file"
}

s_log_file() {
    local f=$TMP/ckube.log
    # klog: no effect while logtostderr is true (its default).
    with_server --controller-manager=false --log-file="$f"
    [ ! -s "$f" ] || fail "--log-file took effect with logtostderr=true"
    grep -q "ckube server ready" "$TMP/server.log" || fail "stderr lost its lines"
    # With --logtostderr=false the lines go to the file, the child's too
    # (it starts after the server is ready: wait for its first lines).
    : >"$TMP/server.log"
    start_server --log-file="$f" --logtostderr=false -v 2
    for _ in $(seq 1 300); do # 30 s: a sanitizer build starts slowly
        grep -q "controller_manager.c\|leaderelection.c\|manager.c" "$f" && break
        sleep 0.1
    done
    stop_server
    grep -q "controller_manager.c\|leaderelection.c\|manager.c" "$f" ||
        fail "the controller-manager child did not log to the file"
    grep -q "ckube server ready" "$f" || fail "the server's lines are not in the log file"
    if grep -q "ckube server ready" "$TMP/server.log"; then fail "logged to stderr as well"; fi
    # --alsologtostderr: both.
    rm -f "$f"
    with_server --controller-manager=false --log-file="$f" --logtostderr=false --alsologtostderr
    grep -q "ckube server ready" "$f" || fail "alsologtostderr: not in the file"
    grep -q "ckube server ready" "$TMP/server.log" || fail "alsologtostderr: not on stderr"
}

# bad BINARY ARGS... -- EXPECTED: exit status 2 and the message.
bad() {
    local out rc=0 want=${*: -1}
    set -- "${@:1:$#-1}"
    out=$("$@" 2>&1) || rc=$?
    expect_eq "$rc" 2 "$* exit status ($out)"
    expect_contains "$out" "$want" "$* message"
}

s_bad_values() {
    local d=$TMP/bad
    bad "$CKUBE_BIN" server --data-dir "$d" -v=abc \
        'invalid argument "abc" for "-v, --v" flag: strconv.ParseInt: parsing "abc": invalid syntax'
    bad "$CKUBE_BIN" server --data-dir "$d" --v 99999999999 \
        'strconv.ParseInt: parsing "99999999999": value out of range'
    bad "$CKUBE_BIN" server --data-dir "$d" --vmodule=http \
        'invalid argument "http" for "--vmodule" flag: syntax error: expect comma-separated list of filename=N'
    bad "$CKUBE_BIN" server --data-dir "$d" --vmodule=http=-1 'negative value for vmodule level'
    bad "$CKUBE_BIN" server --data-dir "$d" --logtostderr=maybe \
        'invalid argument "maybe" for "--logtostderr" flag: strconv.ParseBool: parsing "maybe": invalid syntax'
    bad "$CM_BIN" -v=x 'ckube controller-manager: invalid argument "x" for "-v, --v" flag'
    bad "$CM_BIN" --vmodule=a=b 'syntax error: expect comma-separated list of filename=N'
}

section "-v=N, --v=N, -v N" s_verbosity_forms
section "--vmodule" s_vmodule
section "--log-file, --logtostderr, --alsologtostderr" s_log_file
section "bad values" s_bad_values
finish_sections
echo "PASS"
