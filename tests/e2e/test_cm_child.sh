#!/usr/bin/env bash
# test_cm_child.sh - `ckube server` runs the built-in controllers as a
# supervised child process (ckube-controller-manager beside the binary):
#  - the child runs with the server as its parent, takes the Lease and
#    does its work (a namespace with objects inside is finalized);
#  - the server maps no libcurl: the HTTP client is the child's alone. It
#    does map libssl and libcrypto, because it serves HTTPS itself and
#    makes the cluster's certificates (before TLS serving it mapped no
#    OpenSSL either, and this test said so);
#  - kill -9 of the child: the server logs it and restarts it, and the
#    controllers work again;
#  - SIGTERM on the server stops the child first, releasing its Lease,
#    and both exit cleanly;
#  - kill -9 of the server: the child does not outlive it;
#  - --controller-manager=false runs no child; `ckube controller-manager`
#    runs the same program (flags and errors included).
source "$(dirname "$0")/lib.sh"
ALLOW_CM_RESTARTS=1

# children_of PID: the ckube-controller-manager processes whose parent is PID.
children_of() { pgrep -P "$1" -f ckube-controller-manager || true; }
has_child() { [ -n "$(children_of "$SERVER_PID")" ]; }
has_holder() { [ -n "$(holder)" ]; }
holder() { kubectl get lease -n kube-system kube-controller-manager -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }

start_server
wait_for has_child
CHILD=$(children_of "$SERVER_PID")
expect_eq "$(echo "$CHILD" | wc -l)" 1 "one controller-manager child"
wait_for has_holder
grep -q "controller-manager started as process $CHILD" "$TMP/server.log" ||
    fail "server did not log the child's start"

# The split's point: the server process maps no network client (libcurl).
# OpenSSL it must map: it serves TLS.
maps=$(cat "/proc/$SERVER_PID/maps")
case $maps in *libcurl*) fail "the server maps libcurl (the HTTP client is only the child's)" ;; esac
case $maps in *libssl*) ;; *) fail "the server does not map libssl (it serves TLS)" ;; esac
case $maps in *libcrypto*) ;; *) fail "the server does not map libcrypto (it serves TLS)" ;; esac
grep -q libcurl "/proc/$CHILD/maps" || fail "the child does not map libcurl (is it the controller-manager?)"

# The controllers work: a namespace with a ConfigMap inside goes away.
k create namespace cmc-a >/dev/null
k create configmap -n cmc-a one --from-literal=a=b >/dev/null
k delete namespace cmc-a --wait=false >/dev/null
wait_for bash -c "! kubectl get namespace cmc-a"

# kill -9 of the child: logged, restarted (back-off starts at 1 s), working.
kill -KILL "$CHILD"
wait_for grep -q "controller-manager (process $CHILD) ended with signal Killed; restarting in 1s" \
    "$TMP/server.log"
wait_for has_child
CHILD2=$(children_of "$SERVER_PID")
[ "$CHILD2" != "$CHILD" ] || fail "the child was not restarted"
k create namespace cmc-b >/dev/null
k create configmap -n cmc-b two --from-literal=a=b >/dev/null
k delete namespace cmc-b --wait=false >/dev/null
# The new child must first win the Lease the killed one held (up to its
# 15 s duration) before its namespace controller runs.
for _ in $(seq 1 300); do kubectl get namespace cmc-b >/dev/null 2>&1 || break; sleep 0.1; done
kubectl get namespace cmc-b >/dev/null 2>&1 && fail "namespace cmc-b not finalized after the restart"

# SIGTERM: the child stops first and releases the Lease (an empty holder),
# then the server; both exit 0.
stop_server
kill -0 "$CHILD2" 2>/dev/null && fail "the child outlived its server's shutdown"
grep -q "received SIGTERM" "$TMP/server.log" || fail "no shutdown log"

# A restart on the same data: the released Lease is taken at once.
start_server
wait_for has_child
CHILD3=$(children_of "$SERVER_PID")
wait_for has_holder
# kill -9 of the server: the child is told to go (PR_SET_PDEATHSIG).
kill9_server
wait_for bash -c "! kill -0 $CHILD3"

# --controller-manager=false: no child at all.
start_server --controller-manager=false
sleep 1
[ -z "$(children_of "$SERVER_PID")" ] || fail "a child runs with --controller-manager=false"
stop_server

# `ckube controller-manager` is the same program, run in this process's
# place (exec): its help, and its errors with their exit status.
out=$("$CKUBE_BIN" controller-manager --help) || fail "controller-manager --help failed"
expect_contains "$out" "Usage: ckube controller-manager" "controller-manager help"
rc=0
out=$("$CKUBE_BIN" controller-manager --controllers=bogus --master http://127.0.0.1:1 2>&1) || rc=$?
expect_eq "$rc" 2 "exit status for an unknown controller"
expect_contains "$out" "bogus" "the error names the bad controller"
echo "PASS"
