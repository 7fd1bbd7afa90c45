#!/usr/bin/env bash
# test_crd_seed_walkthrough.sh - the seed's CRD walkthrough (article 000)
# with unmodified kubectl binaries and the seed's own files, saved as they
# are (examples/network/crd.yaml, the files the README uses: an apiextensions.k8s.io/v1beta1
# CRD; example-network.yaml a Network in samplecrd.k8s.io/v1):
#
#   before the CRD: the resource does not exist (404, kubectl's "doesn't
#   have a resource type"); kubectl apply the CRD; wait for Established;
#   discovery (api-resources, api-versions, get crd); apply the Network;
#   kubectl get networks; edit cidr/gateway and apply again (exactly one
#   MODIFIED event on a running `kubectl get networks -w`, generation 2);
#   kubectl delete -f; deleting the CRD deletes its objects in every
#   namespace and removes the endpoints; a re-created CRD starts empty;
#   CRDs and custom objects survive a server restart.
#
# The flow runs with the default kubectl, 1.27 and 1.33, each against a
# fresh server (override with KUBECTL_VERSIONS="kubectl" for a quick run).
source "$(dirname "$0")/lib.sh"

CRD_DIR=$SRC/examples/network
CRD_FILE=$CRD_DIR/crd.yaml
NET_FILE=$CRD_DIR/example-network.yaml
CRD_NAME=networks.samplecrd.k8s.io
CRD_REF=customresourcedefinition.apiextensions.k8s.io/$CRD_NAME
export HOME=$TMP/home # kubectl's discovery cache goes here
mkdir -p "$HOME"
SDK=/usr/lib/google-cloud-sdk/bin
KUBECTL_VERSIONS=${KUBECTL_VERSIONS:-"kubectl $SDK/kubectl.1.27 $SDK/kubectl.1.33"}

trap 'rc=$?; set +e; kill_bg; (exit $rc); cleanup' EXIT

# ko ARGS...: kubectl must succeed; prints stdout only (stderr, e.g. a
# deprecation warning, must not break an exact comparison of the result).
ko() {
    local out
    out=$("$K" "$@" 2>"$TMP/ko.err") || fail "[$(basename "$K") $*] failed: $out $(cat "$TMP/ko.err")"
    printf '%s\n' "$out"
}
# http_code PATH: the status code of a GET on the server.
http_code() { curl -s -o "$TMP/http.body" -w '%{http_code}' "$SERVER_URL$1"; }
# eventually_code PATH CODE: GET PATH until it answers CODE (at most 3 s;
# the last code is printed). Upstream, too, learns of a CRD change through
# an informer, so an endpoint may lag its CRD by a moment.
eventually_code() {
    local c
    for _ in $(seq 1 60); do
        c=$(http_code "$1")
        [ "$c" = "$2" ] && break
        sleep 0.05
    done
    printf '%s\n' "$c"
}

# Waits (bounded) until FILE contains a line matching REGEX.
wait_line() {
    local file=$1 re=$2 what=$3
    for _ in $(seq 1 100); do
        grep -Eq "$re" "$file" 2>/dev/null && return 0
        sleep 0.1
    done
    fail "$what: no line matching [$re] in $(cat "$file" 2>/dev/null)"
}

# events FILE: "TYPE name gen=G cidr=C" per watch event of a
# `kubectl get -w --output-watch-events -o json` output (a stream of
# pretty-printed JSON documents; a half-written last one is ignored).
events() {
    jq -rn 'try (inputs | "\(.type) \(.object.metadata.name) gen=\(.object.metadata.generation) cidr=\(.object.spec.cidr)") catch empty' \
        <"$1"
}

# Before the CRD exists the resource is unknown (the seed's controller
# logs "the server could not find the requested resource" and retries).
s_before_crd() {
    local out
    expect_eq "$(http_code /apis/samplecrd.k8s.io/v1/networks)" 404 "list before the CRD"
    expect_contains "$(cat "$TMP/http.body")" '"message":"the server could not find the requested resource"' \
        "404 body before the CRD"
    expect_eq "$(http_code /apis/samplecrd.k8s.io/v1/namespaces/default/networks)" 404 \
        "namespaced list before the CRD"
    out=$(kfail get networks)
    expect_contains "$out" 'the server doesn'"'"'t have a resource type "networks"' "kubectl get before the CRD"
    out=$(kfail apply -f "$NET_FILE")
    expect_contains "$out" 'no matches for kind "Network" in version "samplecrd.k8s.io/v1"' \
        "applying a Network before its CRD"
}

s_apply_crd() {
    local out
    out=$(ko apply -f "$CRD_FILE")
    expect_eq "$out" "$CRD_REF created" "apply the seed's CRD file"
    out=$(ko wait --for=condition=Established "crd/$CRD_NAME" --timeout=20s)
    expect_eq "$out" "$CRD_REF condition met" "wait Established"
    out=$(ko wait --for=condition=NamesAccepted "crd/$CRD_NAME" --timeout=20s)
    expect_eq "$out" "$CRD_REF condition met" "wait NamesAccepted"
    # v1beta1's spec.version became the one served storage version
    out=$(ko get crd "$CRD_NAME" -o jsonpath='{.apiVersion} {.spec.group} {.spec.scope} {.spec.versions[*].name} {.spec.versions[0].served} {.spec.versions[0].storage}')
    expect_eq "$out" "apiextensions.k8s.io/v1 samplecrd.k8s.io Namespaced v1 true true" \
        "the CRD read back as apiextensions.k8s.io/v1"
    out=$(ko get crd "$CRD_NAME" -o jsonpath='{.status.acceptedNames.kind}/{.status.acceptedNames.plural}/{.status.storedVersions}')
    expect_eq "$out" 'Network/networks/["v1"]' "status.acceptedNames and storedVersions"
    out=$(ko get crd "$CRD_NAME" -o jsonpath='{range .status.conditions[*]}{.type}={.status}:{.reason};{end}')
    expect_contains "$out" "Established=True:InitialNamesAccepted;" "Established condition"
    expect_contains "$out" "NamesAccepted=True:NoConflicts;" "NamesAccepted condition"
    out=$(ko get crd "$CRD_NAME" -o jsonpath='{.spec.names.singular}/{.spec.names.listKind}')
    expect_eq "$out" "network/NetworkList" "defaulted singular and listKind"
    # the file read back through the version it was written in
    out=$(ko get "customresourcedefinitions.v1beta1.apiextensions.k8s.io" "$CRD_NAME" \
        -o jsonpath='{.apiVersion} {.spec.version}')
    expect_eq "$out" "apiextensions.k8s.io/v1beta1 v1" "the CRD read as v1beta1"
    # applying the unchanged file again is a no-op
    out=$(ko apply -f "$CRD_FILE")
    expect_eq "$out" "$CRD_REF unchanged" "re-apply the CRD file"
}

s_discovery() {
    local out
    out=$(ko api-resources)
    grep -Eq '^networks +samplecrd\.k8s\.io/v1 +true +Network *$' <<<"$out" ||
        fail "api-resources lacks networks: $out"
    grep -Eq '^customresourcedefinitions +crd,crds +apiextensions\.k8s\.io/v1 +false +CustomResourceDefinition *$' <<<"$out" ||
        fail "api-resources lacks customresourcedefinitions: $out"
    out=$(ko api-resources --api-group=samplecrd.k8s.io -o name)
    expect_eq "$out" "networks.samplecrd.k8s.io" "api-resources --api-group"
    out=$(ko api-versions)
    grep -qx 'samplecrd.k8s.io/v1' <<<"$out" || fail "api-versions lacks samplecrd.k8s.io/v1: $out"
    grep -qx 'apiextensions.k8s.io/v1' <<<"$out" || fail "api-versions lacks apiextensions.k8s.io/v1: $out"
    out=$(ko get crd)
    first_line_matches "$out" '^NAME +CREATED AT *$' || fail "get crd header: $out"
    grep -Eq "^$CRD_NAME +[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z *\$" <<<"$out" ||
        fail "get crd row: $out"
    # raw discovery document of the new group-version
    expect_eq "$(http_code /apis/samplecrd.k8s.io/v1)" 200 "GET /apis/samplecrd.k8s.io/v1"
    out=$(jq -c '[.kind, .groupVersion, (.resources[] | select(.name=="networks") | .singularName, .namespaced, .kind, (.verbs | sort))]' "$TMP/http.body")
    expect_eq "$out" '["APIResourceList","samplecrd.k8s.io/v1","network",true,"Network",["create","delete","deletecollection","get","list","patch","update","watch"]]' \
        "APIResourceList of samplecrd.k8s.io/v1"
    expect_eq "$(http_code /apis/samplecrd.k8s.io)" 200 "GET /apis/samplecrd.k8s.io"
    out=$(jq -c '[.kind, .name, .preferredVersion.groupVersion]' "$TMP/http.body")
    expect_eq "$out" '["APIGroup","samplecrd.k8s.io","samplecrd.k8s.io/v1"]' "APIGroup document"
}

s_create() {
    local out
    out=$(ko get networks)
    expect_eq "$out" "" "no networks yet (stdout)"
    out=$(k get networks)
    expect_eq "$out" "No resources found in default namespace." "no networks yet"
    out=$(ko apply -f "$NET_FILE")
    expect_eq "$out" "network.samplecrd.k8s.io/example-network created" "apply the Network file"
    wait_line "$TMP/watch-table.out" '^ADDED +example-network ' "table watch saw the create"
    out=$(ko get networks)
    first_line_matches "$out" '^NAME +AGE *$' || fail "get networks header: $out"
    echo "$out" | sed -n 2p | grep -Eq '^example-network +[0-9]+s *$' || fail "get networks row: $out"
    expect_eq "$(echo "$out" | wc -l)" 2 "get networks: one row"
    out=$(ko get network example-network -o jsonpath='{.kind} {.apiVersion} {.metadata.namespace} {.spec.cidr} {.spec.gateway} {.metadata.generation}')
    expect_eq "$out" "Network samplecrd.k8s.io/v1 default 192.168.0.0/16 192.168.0.1 1" "the stored Network"
    out=$(ko get networks.samplecrd.k8s.io/example-network -o jsonpath='{.metadata.uid}')
    [[ $out =~ ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$ ]] || fail "uid: $out"
    out=$(ko get network example-network -o jsonpath='{.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}')
    expect_contains "$out" '"cidr":"192.168.0.0/16"' "last-applied annotation"
    # the list as a client-go informer sees it
    expect_eq "$(http_code /apis/samplecrd.k8s.io/v1/namespaces/default/networks)" 200 "raw list"
    out=$(jq -c '[.kind, .apiVersion, (.metadata.resourceVersion | test("^[0-9]+$")), [.items[] | .kind, .apiVersion, .metadata.name]]' "$TMP/http.body")
    expect_eq "$out" '["NetworkList","samplecrd.k8s.io/v1",true,["Network","samplecrd.k8s.io/v1","example-network"]]' \
        "raw NetworkList"
    expect_eq "$(http_code /apis/samplecrd.k8s.io/v1/networks)" 200 "all-namespaces list"
    expect_eq "$(jq -r '[.items[].metadata.name] | join(",")' "$TMP/http.body")" "example-network" \
        "all-namespaces list items"
}

s_update() {
    local out rv rv2
    rv=$(ko get network example-network -o jsonpath='{.metadata.resourceVersion}')
    # the seed's edit: the /16 moves elsewhere
    sed -e 's|192.168.0.0/16|192.169.0.0/16|' -e 's|192.168.0.1|192.169.0.1|' "$NET_FILE" \
        >"$TMP/example-network.yaml"
    out=$(ko apply -f "$TMP/example-network.yaml")
    expect_eq "$out" "network.samplecrd.k8s.io/example-network configured" "apply the edited file"
    wait_line "$TMP/watch-table.out" '^MODIFIED +example-network ' "table watch saw the update"
    out=$(ko get network example-network -o jsonpath='{.spec.cidr} {.spec.gateway} {.metadata.generation}')
    expect_eq "$out" "192.169.0.0/16 192.169.0.1 2" "after the edit: spec and generation"
    rv2=$(ko get network example-network -o jsonpath='{.metadata.resourceVersion}')
    [ "$rv2" -gt "$rv" ] || fail "resourceVersion did not grow ($rv -> $rv2)"
    out=$(ko get network example-network -o jsonpath='{.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}')
    expect_contains "$out" '"cidr":"192.169.0.0/16"' "last-applied annotation after the edit"
    # applying the same file again changes nothing (and emits no event)
    out=$(ko apply -f "$TMP/example-network.yaml")
    expect_eq "$out" "network.samplecrd.k8s.io/example-network unchanged" "re-apply"
    expect_eq "$(ko get network example-network -o jsonpath='{.metadata.resourceVersion}/{.metadata.generation}')" \
        "$rv2/2" "re-apply keeps resourceVersion and generation"
}

# exactly one MODIFIED for the edit (the re-apply was a no-op)
s_one_modified() {
    local ev
    sleep 1
    ev=$(events "$TMP/watch-json.out" | tr '\n' ';')
    expect_eq "$ev" "ADDED example-network gen=1 cidr=192.168.0.0/16;MODIFIED example-network gen=2 cidr=192.169.0.0/16;" \
        "watch events after the edit (-o json) $(cat "$TMP/watch-json.err")"
}

# a metadata-only change does not bump generation
s_labels() {
    local out
    out=$(ko label network example-network tier=e2e)
    expect_eq "$out" "network.samplecrd.k8s.io/example-network labeled" "label a Network"
    expect_eq "$(ko get networks -l tier=e2e -o name)" "network.samplecrd.k8s.io/example-network" \
        "label selector on a custom resource"
    expect_eq "$(ko get network example-network -o jsonpath='{.metadata.generation}')" 2 \
        "labels do not bump generation"
    out=$(ko label network example-network tier-)
    expect_eq "$out" "network.samplecrd.k8s.io/example-network unlabeled" "unlabel"
}

s_delete() {
    local out
    out=$(ko delete -f "$TMP/example-network.yaml")
    expect_eq "$out" 'network.samplecrd.k8s.io "example-network" deleted' "delete -f"
    wait_line "$TMP/watch-table.out" '^DELETED +example-network ' "table watch saw the delete"
    out=$(k get networks)
    expect_eq "$out" "No resources found in default namespace." "get networks after delete"
    out=$(kfail get network example-network)
    expect_eq "$out" 'Error from server (NotFound): networks.samplecrd.k8s.io "example-network" not found' \
        "get after delete"
}

# The JSON watcher saw every event with the right object; the table
# watcher printed the same events.
s_watch_results() {
    local ev
    sleep 0.5
    ev=$(events "$TMP/watch-json.out" | tr '\n' ';')
    # the edit, then label and unlabel (generation stays 2), then the delete
    expect_eq "$ev" "ADDED example-network gen=1 cidr=192.168.0.0/16;MODIFIED example-network gen=2 cidr=192.169.0.0/16;MODIFIED example-network gen=2 cidr=192.169.0.0/16;MODIFIED example-network gen=2 cidr=192.169.0.0/16;DELETED example-network gen=2 cidr=192.169.0.0/16;" \
        "all watch events (-o json) $(cat "$TMP/watch-json.err")"
    ev=$(grep -E 'example-network' "$TMP/watch-table.out" | awk '{print $1}' | tr '\n' ' ')
    # the label and unlabel are MODIFIED events too on this watcher
    [[ $ev =~ ^ADDED\ MODIFIED\ MODIFIED\ MODIFIED\ DELETED\ $ ]] ||
        fail "table watch events: [$ev] in $(cat "$TMP/watch-table.out")"
    if grep -Ei 'error|unable' "$TMP/watch-table.out" "$TMP/watch-json.err"; then
        fail "watchers printed errors"
    fi
}

# Deleting the CRD deletes its objects in every namespace (watchers see
# them go) and removes the endpoints and the discovery entries.
s_two_networks() {
    local out
    k create namespace other >/dev/null
    ko apply -f "$NET_FILE" >/dev/null
    ko apply -f "$NET_FILE" -n other >/dev/null
    out=$(ko get networks -A -o name | sort | tr '\n' ' ')
    expect_eq "$out" "network.samplecrd.k8s.io/example-network network.samplecrd.k8s.io/example-network " \
        "two networks before deleting the CRD"
    out=$(ko get networks -A)
    first_line_matches "$out" '^NAMESPACE +NAME +AGE *$' || fail "get networks -A header: $out"
}

s_delete_crd() {
    local out
    wait_line "$TMP/watch-crd.out" '"type": ?"ADDED"' "all-namespace watch started"
    out=$(ko delete -f "$CRD_FILE" --timeout=30s)
    expect_eq "$out" "customresourcedefinition.apiextensions.k8s.io \"$CRD_NAME\" deleted" "delete the CRD"
    out=$(kfail get crd "$CRD_NAME")
    expect_eq "$out" "Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io \"$CRD_NAME\" not found" \
        "the CRD is gone after kubectl delete returned"
    expect_eq "$(eventually_code /apis/samplecrd.k8s.io/v1/networks 404)" 404 "list after the CRD is gone"
    expect_eq "$(eventually_code /apis/samplecrd.k8s.io/v1/namespaces/default/networks/example-network 404)" 404 \
        "get after the CRD is gone"
    expect_eq "$(eventually_code /apis/samplecrd.k8s.io/v1 404)" 404 "group-version discovery after the CRD is gone"
    expect_eq "$(http_code /apis)" 200 "GET /apis"
    if jq -e '.groups[] | select(.name=="samplecrd.k8s.io")' "$TMP/http.body" >/dev/null; then
        fail "/apis still lists samplecrd.k8s.io: $(cat "$TMP/http.body")"
    fi
    # a fresh discovery cache: kubectl maps the name from the live server
    out=$(kfail get networks --cache-dir "$TMP/cache-$RANDOM")
    expect_eq "$out" 'error: the server doesn'"'"'t have a resource type "networks"' \
        "kubectl get networks after the CRD is gone"
    # with its usual (stale) cache it must fail too
    kfail get networks >/dev/null
    out=$(ko api-resources)
    if grep -q '^networks ' <<<"$out"; then fail "api-resources still lists networks: $out"; fi
    out=$(k get crd)
    expect_eq "$out" "No resources found" "get crd after the delete"
    # both objects were deleted, and the watcher saw it
    wait_line "$TMP/watch-crd.out" '"type": ?"DELETED"' "watch saw the cleanup"
    sleep 0.5
    out=$(events "$TMP/watch-crd.out" | awk '{print $1, $2}' | sort | tr '\n' ';')
    expect_eq "$out" "ADDED example-network;ADDED example-network;DELETED example-network;DELETED example-network;" \
        "the all-namespace watch during the CRD delete"
}

# A CRD created again under the same name starts empty: the old objects
# were really deleted, not hidden.
s_recreate_crd() {
    local out
    out=$(ko apply -f "$CRD_FILE")
    expect_eq "$out" "$CRD_REF created" "apply the CRD again"
    ko wait --for=condition=Established "crd/$CRD_NAME" --timeout=20s >/dev/null
    out=$(k get networks -A)
    expect_eq "$out" "No resources found" "the re-created CRD has no objects"
    out=$(ko apply -f "$NET_FILE")
    expect_eq "$out" "network.samplecrd.k8s.io/example-network created" "create after the re-create"
    expect_eq "$(ko get network example-network -o jsonpath='{.metadata.generation}')" 1 \
        "a new object starts at generation 1"
}

# The CRD and its objects survive a restart (endpoints come back at
# start). The restart itself runs in flow(), outside a subshell, so the
# server stays a child of this shell.
s_after_restart() {
    local out
    out=$(ko get crd "$CRD_NAME" -o jsonpath='{.status.acceptedNames.kind}')
    expect_eq "$out" "Network" "the CRD after a restart"
    out=$(ko get networks -o name)
    expect_eq "$out" "network.samplecrd.k8s.io/example-network" "the Network after a restart"
    out=$(ko get network example-network -o jsonpath='{.spec.cidr}')
    expect_eq "$out" "192.168.0.0/16" "the Network's spec after a restart"
    out=$(ko delete -f "$NET_FILE")
    expect_eq "$out" 'network.samplecrd.k8s.io "example-network" deleted' "delete after a restart"
}

flow() {
    K=$1
    echo "=== $(basename "$K") ($("$K" version --client -o json 2>/dev/null | jq -r .clientVersion.gitVersion))"
    start_server
    section before_crd s_before_crd
    section apply_crd s_apply_crd
    section discovery s_discovery

    # two watchers from before the Network exists: JSON watch events, and
    # the table kubectl prints by default
    timeout 60 "$K" get networks -w --output-watch-events -o json \
        >"$TMP/watch-json.out" 2>"$TMP/watch-json.err" &
    BG_PIDS+=($!)
    timeout 60 "$K" get networks -w --output-watch-events \
        >"$TMP/watch-table.out" 2>&1 &
    BG_PIDS+=($!)
    sleep 1

    section create s_create
    section update s_update
    section one_modified s_one_modified
    section labels s_labels
    section delete s_delete
    section watch_results s_watch_results
    kill_bg
    section two_networks s_two_networks
    timeout 40 "$K" get networks -A -w --output-watch-events -o json \
        >"$TMP/watch-crd.out" 2>"$TMP/watch-crd.err" &
    BG_PIDS+=($!)
    section delete_crd s_delete_crd
    kill_bg
    section recreate_crd s_recreate_crd
    stop_server || SECTION_FAILS+=("$(basename "$K"):clean-stop-before-restart")
    start_server
    section after_restart s_after_restart
    stop_server
    echo "=== $(basename "$K"): done"
}

for kc in $KUBECTL_VERSIONS; do
    [ -x "$(command -v "$kc")" ] || fail "kubectl binary $kc not found"
    DATA_DIR=$TMP/data-$(basename "$kc")
    export DATA_DIR
    PORT=  # a fresh port for a fresh server
    flow "$kc"
done
finish_sections
echo "test_crd_seed_walkthrough: all flows passed"
