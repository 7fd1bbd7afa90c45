#!/usr/bin/env bash
# The Network controller walkthrough on the memory backend (state in a
# JSON file), as run by users without CAP_NET_ADMIN.
BACKEND=memory
source "$(dirname "$0")/network_walkthrough.sh"
