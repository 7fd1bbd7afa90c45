#!/usr/bin/env bash
# The Network controller walkthrough on the linux-bridge backend: real
# bridges over netlink, in a network namespace of the test's own, inside a
# private mount namespace so nothing outlives the test on the host.
if [ -z "${CKUBE_E2E_UNSHARED:-}" ]; then
    CKUBE_E2E_UNSHARED=1 exec unshare --mount --propagation private "$BASH" "$0" "$@"
fi
BACKEND=linux-bridge
source "$(dirname "$0")/network_walkthrough.sh"
