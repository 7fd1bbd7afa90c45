#!/bin/sh
# setup.sh - installs the node peer of the informer benchmark
# (@kubernetes/client-node, pinned in package.json / package-lock.json) into
# a build directory, and prints that directory (the one holding
# node_modules) on stdout. bench/node/informer.js finds it there by default.
#
#   bench/node/setup.sh [DIR]     DIR defaults to <repo>/build/bench/node
#
# Idempotent and quiet: when DIR already holds this exact lockfile and the
# installed package, it only prints DIR. Otherwise it runs `npm ci` (the
# npm registry must be reachable) and prints npm's log on stderr only when
# that fails. Exit status non-zero when node/npm are missing or npm fails.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
dir=${1:-$repo/build/bench/node}

for tool in node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "setup.sh: $tool not found (apt-get install nodejs npm)" >&2
        exit 1
    fi
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
installed=$dir/node_modules/@kubernetes/client-node/package.json
if [ -f "$installed" ] && cmp -s "$here/package-lock.json" "$dir/package-lock.json" &&
    cmp -s "$here/package.json" "$dir/package.json"; then
    echo "$dir"
    exit 0
fi

cp "$here/package.json" "$here/package-lock.json" "$dir/"
log=$dir/npm-ci.log
if ! npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
    echo "setup.sh: npm ci failed in $dir:" >&2
    cat "$log" >&2
    # Leave no half-installed state that the check above could accept.
    rm -f "$dir/package-lock.json"
    exit 1
fi
echo "$dir"
