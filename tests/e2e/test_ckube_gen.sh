#!/usr/bin/env bash
# test_ckube_gen.sh - ckube-gen as a user meets it, from the INSTALLED
# tree only: install into a scratch prefix; generate C from the Network CRD
# and build a program on it twice, with the Makefile recipe (ckube-gen,
# pkg-config ckube) and with CMake (ckube_generate from the installed
# CkubeGen.cmake); run both against a real server: a Network built as a
# struct is created and read back typed, a status set by kubectl is read
# typed, the server's 422 reaches the program as its Status. Bad input to
# the generator gets its exit code and a message naming what is wrong,
# and writes nothing. Built-in kinds are generated from the server's own
# OpenAPI documents (--openapi, over TLS with the test's identity) and
# compile.
source "$(dirname "$0")/lib.sh"
command -v pkg-config >/dev/null || fail "pkg-config is required"
export HOME=$TMP/home
mkdir -p "$HOME"

BUILD=$(cd "$(dirname "$CKUBE_BIN")" && pwd)
PREFIX=$TMP/prefix
cmake --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log" 2>&1 ||
    fail "cmake --install failed: $(tail -5 "$TMP/install.log")"
[ -x "$PREFIX/bin/ckube-gen" ] || fail "ckube-gen is not installed"
MODDIR=$(dirname "$(find "$PREFIX" -name CkubeGen.cmake | head -1)")
[ -f "$MODDIR/CkubeGen.cmake" ] || fail "CkubeGen.cmake is not installed"
PC=$(dirname "$(find "$PREFIX" -name ckube.pc | head -1)")
export PKG_CONFIG_PATH=$PC
export PATH=$PREFIX/bin:$PATH
CRD=$SRC/examples/network-controller/manifests/crd.yaml

echo "--- bad input to the generator"
OUT=$TMP/out
mkdir -p "$OUT"
rc=0
ckube-gen --out "$OUT" "$CRD" 2>"$TMP/err" || rc=$?
expect_eq "$rc" 2 "exit status without --package"
expect_contains "$(cat "$TMP/err")" "ckube-gen: --package is required" "no --package"
rc=0
ckube-gen --package samplecrd --out "$TMP/missing" "$CRD" 2>"$TMP/err" || rc=$?
expect_eq "$rc" 1 "exit status for a missing --out"
expect_contains "$(cat "$TMP/err")" "--out $TMP/missing: no such directory" "missing --out"
rc=0
ckube-gen --package Sample-CRD --out "$OUT" "$CRD" 2>"$TMP/err" || rc=$?
expect_eq "$rc" 1 "exit status for a bad package name"
expect_contains "$(cat "$TMP/err")" "perhaps sample_crd" "bad package name"
cat >"$TMP/bad.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              podCIDR: {type: string}
              pod_cidr: {type: string}
EOF
rc=0
ckube-gen --package widgets --out "$OUT" "$CRD" "$TMP/bad.yaml" 2>"$TMP/err" || rc=$?
expect_eq "$rc" 1 "exit status for clashing names"
expect_contains "$(cat "$TMP/err")" \
    "bad.yaml: CRD widgets.example.com, version v1: .spec.podCIDR and .spec.pod_cidr are both \"pod_cidr\" in C" \
    "clashing names"
expect_eq "$(ls "$OUT")" "" "files written after an error"
rc=0
ckube-gen --package samplecrd --out "$OUT" "$TMP/nonexistent.yaml" 2>"$TMP/err" || rc=$?
expect_eq "$rc" 1 "exit status for a missing input"
expect_contains "$(cat "$TMP/err")" "nonexistent.yaml: cannot open" "missing input"

echo "--- build with the Makefile recipe and with CMake"
# A sanitized build tree installs a sanitized library: build with the same
# runtime.
CC_SAN=cc
SANFLAGS=
case "$(nm -D "$(pkg-config --variable=libdir ckube)/libckube.so" 2>/dev/null)" in
*__asan_init*) SANFLAGS="-fsanitize=address,undefined" ;;
*__tsan_init*) SANFLAGS="-fsanitize=thread" ;;
esac
[ -n "$SANFLAGS" ] && CC_SAN="cc $SANFLAGS"
cp -r "$SRC/tests/e2e/manifests/gen-user" "$TMP/mk"
cp "$CRD" "$TMP/mk/crd.yaml"
make -C "$TMP/mk" CC="$CC_SAN" CFLAGS="-O1 -g -Wall -Wextra -Werror" >"$TMP/make.log" 2>&1 ||
    fail "make failed: $(cat "$TMP/make.log")"
cp "$SRC/examples/network/crd.yaml" "$TMP/mk/seed-crd.yaml"
make -C "$TMP/mk" CC="$CC_SAN" CFLAGS="-O1 -g -Wall -Wextra -Werror" seed-controller \
    >>"$TMP/make.log" 2>&1 || fail "make seed-controller failed: $(cat "$TMP/make.log")"
grep -q "ckube-gen --package samplecrd --out gen crd.yaml" "$TMP/make.log" ||
    fail "make did not run ckube-gen: $(cat "$TMP/make.log")"
if grep -qE -- "-I$SRC/(include|src)( |/|$)" "$TMP/make.log"; then
    fail "the Makefile build used the source tree"
fi
cp -r "$SRC/tests/e2e/manifests/gen-user" "$TMP/cm"
cmake -S "$TMP/cm" -B "$TMP/cm/build" -DCMAKE_MODULE_PATH="$MODDIR" -DCRD="$CRD" \
    -DCMAKE_C_FLAGS="$SANFLAGS" >"$TMP/cmake.log" 2>&1 ||
    fail "cmake configure failed: $(cat "$TMP/cmake.log")"
cmake --build "$TMP/cm/build" >>"$TMP/cmake.log" 2>&1 ||
    fail "cmake build failed: $(cat "$TMP/cmake.log")"
grep -q "ckube-gen: samplecrd" "$TMP/cmake.log" || fail "CMake did not run ckube-gen"
cmp -s "$TMP/mk/gen/samplecrd.h" "$TMP/cm/build/ckube_gen/networks/samplecrd/samplecrd.h" ||
    fail "the two builds generated different headers"

echo "--- typed objects against the server"
start_server
kubectl apply -f "$CRD" >/dev/null
kubectl wait --for=condition=Established crd/networks.samplecrd.k8s.io >/dev/null
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
OUTP=$("$TMP/mk/networks" "$KUBECONFIG" create net1 10.1.0.0/24 10.1.0.1) ||
    fail "create failed: $OUTP"
expect_eq "$OUTP" "created net1 uid=set generation=1 cidr=10.1.0.0/24" "typed create"
expect_eq "$(kubectl get network net1 -o jsonpath='{.spec.gateway}')" 10.1.0.1 "stored gateway"
kubectl patch network net1 --subresource=status --type=merge \
    -p '{"status":{"phase":"Ready","observedGeneration":1}}' >/dev/null
expect_eq "$("$TMP/cm/build/networks" "$KUBECONFIG" list)" "net1 10.1.0.0/24 10.1.0.1 Ready" \
    "typed list (CMake build)"
rc=0
"$TMP/cm/build/networks" "$KUBECONFIG" create bad 10.2.0.0/24 nothing 2>"$TMP/err" >/dev/null || rc=$?
expect_eq "$rc" 1 "exit status for a refused create"
expect_contains "$(cat "$TMP/err")" \
    "create: Network.samplecrd.k8s.io \"bad\" is invalid: spec.gateway" "the server's Status"

echo "--- the seed's controller shape on the seed's CRD"
# A second server, on a data dir of its own, with the seed's v1beta1 CRD
# (no schema): the generated views type the metadata and keep the spec
# as JSON.
stop_server
DATA_DIR=$TMP/data-seed start_server
kubectl apply -f "$SRC/examples/network/crd.yaml" >/dev/null
kubectl wait --for=condition=Established crd/networks.samplecrd.k8s.io >/dev/null
"$TMP/mk/seed-controller" "$KUBECONFIG" 60 >"$TMP/seed.log" 2>&1 &
SEED_PID=$!
trap 'rc=$?; set +e; kill -KILL "$SEED_PID" 2>/dev/null; (exit $rc); cleanup' EXIT
wait_for grep -q "Starting workers" "$TMP/seed.log"
kubectl apply -f "$SRC/examples/network/example-network.yaml" >/dev/null
wait_for grep -q "Try to process network: default/example-network .* cidr 192.168.0.0/16" \
    "$TMP/seed.log"
kubectl patch network example-network --type=merge -p '{"spec":{"cidr":"192.168.1.0/24"}}' \
    >/dev/null
wait_for grep -q "Try to process network: default/example-network .* cidr 192.168.1.0/24" \
    "$TMP/seed.log"
kubectl delete network example-network >/dev/null
wait_for grep -q "Deleting network: default/example-network" "$TMP/seed.log"
kill -TERM "$SEED_PID"
rc=0
wait "$SEED_PID" || rc=$?
expect_eq "$rc" 0 "seed controller exit status ($(tail -3 "$TMP/seed.log"))"

echo "--- built-in kinds from the server's OpenAPI documents"
mkdir -p "$TMP/k8s"
ckube-gen --package k8s --out "$TMP/k8s" --kinds ConfigMap,Deployment --kubeconfig "$KUBECONFIG" \
    --openapi /openapi/v3/api/v1 --openapi /openapi/v3/apis/apps/v1 ||
    fail "ckube-gen --openapi failed"
grep -q "int k8s_v1_deployments_get_scale(" "$TMP/k8s/k8s.h" || fail "no Deployment client"
grep -q "^struct k8s_v1_config_map {" "$TMP/k8s/k8s.h" || fail "no ConfigMap struct"
$CC_SAN -std=c17 -Wall -Wextra -Werror $(pkg-config --cflags ckube) -c "$TMP/k8s/k8s.c" \
    -o "$TMP/k8s/k8s.o" || fail "the generated built-in package does not compile"
rc=0
ckube-gen --package k8s --out "$TMP/k8s" --kubeconfig "$KUBECONFIG" --openapi /openapi/v3/nope \
    2>"$TMP/err" || rc=$?
expect_eq "$rc" 1 "exit status for a missing document"
expect_contains "$(cat "$TMP/err")" \
    "ckube-gen: --openapi /openapi/v3/nope: the server could not find the requested resource" \
    "a missing document"
stop_server
echo PASS
