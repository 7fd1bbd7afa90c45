#!/usr/bin/env bash
# test_hello_controller.sh - a user's controller built against the
# INSTALLED libckube only: install the build tree into a scratch prefix,
# build examples/hello-controller with its own Makefile (pkg-config
# ckube), run it against a real server and check that it reconciles:
# labelled ConfigMaps get the key-count annotation and follow changes,
# unlabelled ones are left alone, and SIGTERM stops it cleanly.
source "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "jq is required"
command -v pkg-config >/dev/null || fail "pkg-config is required"
export HOME=$TMP/home
mkdir -p "$HOME"
CTL_PID=
trap 'rc=$?; set +e; [ -n "$CTL_PID" ] && kill -KILL "$CTL_PID" 2>/dev/null; (exit $rc); cleanup' EXIT

BUILD=$(cd "$(dirname "$CKUBE_BIN")" && pwd)
PREFIX=$TMP/prefix
cmake --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log" 2>&1 ||
    fail "cmake --install failed: $(tail -5 "$TMP/install.log")"
PC=$(dirname "$(find "$PREFIX" -name ckube.pc | head -1)")
[ -n "$PC" ] || fail "no ckube.pc installed"
export PKG_CONFIG_PATH=$PC
export PATH=$PREFIX/bin:$PATH # the installed ckube-gen
expect_contains "$(pkg-config --libs ckube)" "-lckube" "pkg-config --libs"

# A sanitized build tree installs a sanitized library: link the example
# with the same runtime.
CC_SAN=cc
LIBSO=$(pkg-config --variable=libdir ckube)/libckube.so
case "$(nm -D "$LIBSO" 2>/dev/null)" in
*__asan_init*) CC_SAN="cc -fsanitize=address,undefined" ;;
*__tsan_init*) CC_SAN="cc -fsanitize=thread" ;;
esac
cp -r "$SRC/examples/hello-controller" "$TMP/hello"
make -C "$TMP/hello" CC="$CC_SAN" CFLAGS="-O1 -g -Wall -Wextra -Werror" >"$TMP/make.log" 2>&1 ||
    fail "building the example failed: $(cat "$TMP/make.log")"
# It must not have reached into the source tree for anything.
if grep -qE -- "-I$SRC/(include|src)( |/|$)" "$TMP/make.log"; then
    fail "example build used the source tree"
fi

start_server
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$TMP/hello/hello-controller" \
    --kubeconfig "$KUBECONFIG" -v 2 >"$TMP/ctl.log" 2>&1 &
CTL_PID=$!

annotation() {
    kubectl get configmap "$1" -o json | jq -r '.metadata.annotations["hello.ckube.io/keys"] // "none"'
}
has_annotation() { [ "$(annotation "$1")" = "$2" ]; }

kubectl create configmap counted --from-literal=a=1 --from-literal=b=2 --from-literal=c=3 >/dev/null
kubectl label configmap counted hello.ckube.io/enabled=true >/dev/null
kubectl create configmap ignored --from-literal=a=1 >/dev/null
wait_for has_annotation counted 3

kubectl patch configmap counted --type=merge -p '{"data":{"d":"4"}}' >/dev/null
wait_for has_annotation counted 4
kubectl patch configmap counted --type=json -p '[{"op":"remove","path":"/data/a"},{"op":"remove","path":"/data/b"}]' >/dev/null
wait_for has_annotation counted 2

# Someone "fixes" the annotation by hand: the controller puts it back.
kubectl annotate configmap counted --overwrite hello.ckube.io/keys=99 >/dev/null
wait_for has_annotation counted 2

sleep 0.5
expect_eq "$(annotation ignored)" none "unlabelled configmap untouched"
grep -q "Successfully synced 'default/counted'" "$TMP/ctl.log" ||
    fail "no sync log line: $(cat "$TMP/ctl.log")"
grep -q "Starting workers" "$TMP/ctl.log" || fail "no start log line"

kill -TERM "$CTL_PID"
rc=0
wait "$CTL_PID" || rc=$?
CTL_PID=
expect_eq "$rc" 0 "controller exit status after SIGTERM ($(tail -5 "$TMP/ctl.log"))"
grep -q "All workers finished" "$TMP/ctl.log" || fail "no clean shutdown line"
stop_server
echo PASS
