#!/bin/sh
# check-exports.sh LIB INCLUDE_DIR: the dynamic symbols LIB defines are
# public API: each starts "ckube_" (not "ckube__") and is declared in a
# header of INCLUDE_DIR. Prints what is wrong and exits 1.
set -eu
lib=$1 inc=$2
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtDdBbRrVvWwi]$/ {print $3}' | sed 's/@.*//' | sort -u)
[ -n "$exported" ] || { echo "check-exports: $lib exports nothing"; exit 1; }
bad=0
for sym in $exported; do
    case $sym in
    ckube__*) echo "check-exports: internal symbol exported: $sym"; bad=1; continue ;;
    ckube_*) ;;
    *) echo "check-exports: unprefixed symbol exported: $sym"; bad=1; continue ;;
    esac
    if ! grep -qE "\\b$sym\\b" "$inc"/*.h; then
        echo "check-exports: $sym is exported but not declared in $inc"
        bad=1
    fi
done
n=$(printf '%s\n' "$exported" | wc -l)
[ $bad -eq 0 ] && echo "check-exports: $n symbols, all public API"
exit $bad
