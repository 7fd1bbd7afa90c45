#!/bin/sh
# Installs the Debian packages ckube needs to build and test, and nothing
# else. Idempotent and silent when everything is already there, so the
# Makefile can call it before every build.
set -eu

PKGS="build-essential cmake pkg-config clang libclang-rt-14-dev
libevent-dev libhttp-parser-dev libjansson-dev libyaml-dev libsqlite3-dev libmd-dev openssl
libmimalloc-dev
zlib1g-dev
libcurl4-openssl-dev libssl-dev libcmocka-dev libbsd-dev libmnl-dev
protobuf-c-compiler libprotobuf-c-dev libgrpc-dev etcd-server
python3 python3-kubernetes curl procps jq iproute2"

# `install-deps.sh bench`: also what `make bench` runs its peers and load
# with (etcd for the write peer, wrk for load, Node.js for client-node,
# valgrind for the instructions a create costs).
if [ "${1:-}" = bench ]; then
    PKGS="$PKGS etcd-server wrk valgrind"
    command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
fi

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

echo "install-deps: installing:$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
