#!/usr/bin/env bash
# The Network controller walkthrough on the memory backend (state in a
# JSON file), as run by users without CAP_NET_ADMIN, with the seed's own
# v1beta1 CRD file verbatim (no schema, no status subresource).
BACKEND=memory
CRD=seed
source "$(dirname "$0")/network_walkthrough.sh"
