#!/usr/bin/env bash
# test_finalizers.sh - deletion with finalizers and namespace termination,
# with kubectl and curl: DELETE of an object with metadata.finalizers sets
# deletionTimestamp and returns the object; no new finalizers once deleting;
# removing the last finalizer deletes it; a namespace delete makes it
# Terminating (no new content: 403) until PUT .../finalize empties
# spec.finalizers.
source "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "jq is required"
export HOME=$TMP/home
mkdir -p "$HOME"

# (set +e: under errexit `(exit $rc)` would end the trap before cleanup)
trap 'rc=$?; set +e; kill_bg; (exit $rc); cleanup' EXIT

req() {
    local m=$1 p=$2
    shift 2
    CODE=$(curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$@" "$SERVER_URL$p") || CODE=000
    BODY=$(cat "$TMP/body")
}
jb() { jq -r "$1" <<<"$BODY"; }
CM=/api/v1/namespaces/default/configmaps
JSON=(-H 'Content-Type: application/json')

mkcm() { # mkcm NAME FINALIZERS-JSON-ARRAY
    req POST $CM "${JSON[@]}" -d "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"$1\",\"finalizers\":$2},\"data\":{\"a\":\"1\"}}"
    expect_eq "$CODE" 201 "create $1 ($BODY)"
}

# The server alone: this test checks what the API does with finalizers, so
# no controller may act on them.
start_server --controller-manager=false

s_delete_sets_timestamp() {
    mkcm f1 '["example.com/keep"]'
    local rv0
    rv0=$(jb .metadata.resourceVersion)
    curl -s -N --max-time 8 "$SERVER_URL$CM?watch=true&fieldSelector=metadata.name%3Df1&resourceVersion=$rv0&timeoutSeconds=6" >"$TMP/f1.watch" &
    local wp=$!
    sleep 0.3
    req DELETE $CM/f1
    expect_eq "$CODE" 200 "DELETE of an object with finalizers ($BODY)"
    expect_eq "$(jb .kind)" "ConfigMap" "DELETE returns the object, not a Status"
    [[ $(jb .metadata.deletionTimestamp) =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$ ]] ||
        fail "deletionTimestamp: $BODY"
    expect_eq "$(jb .metadata.deletionGracePeriodSeconds)" "0" "deletionGracePeriodSeconds"
    expect_eq "$(jb '.metadata.finalizers | join(",")')" "example.com/keep" "finalizers kept"
    local rv1 ts
    rv1=$(jb .metadata.resourceVersion)
    ts=$(jb .metadata.deletionTimestamp)
    [ "$rv1" -gt "$rv0" ] || fail "DELETE did not write a new revision ($rv0 -> $rv1)"
    req GET $CM/f1
    expect_eq "$CODE" 200 "GET after DELETE"
    expect_eq "$(jb .metadata.deletionTimestamp)" "$ts" "GET shows deletionTimestamp"
    # deleting again changes nothing
    req DELETE $CM/f1
    expect_eq "$CODE" 200 "second DELETE"
    expect_eq "$(jb .metadata.resourceVersion)/$(jb .metadata.deletionTimestamp)" "$rv1/$ts" \
        "second DELETE is a no-op"
    # kubectl sees it as terminating
    out=$(k delete cm f1 --wait=false)
    expect_contains "$out" 'configmap "f1" deleted' "kubectl delete --wait=false"
    # updates other than new finalizers are still allowed
    req PATCH $CM/f1 -H 'Content-Type: application/merge-patch+json' -d '{"data":{"a":"2"}}'
    expect_eq "$CODE" 200 "patch of a deleting object"
    expect_eq "$(jb .metadata.deletionTimestamp)" "$ts" "patch keeps deletionTimestamp"
    req PATCH $CM/f1 -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"deletionTimestamp":null}}'
    expect_eq "$(jb .metadata.deletionTimestamp)" "$ts" "deletionTimestamp cannot be cleared"
    # no new finalizers
    req PATCH $CM/f1 -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"finalizers":["example.com/keep","example.com/new"]}}'
    expect_eq "$CODE" 422 "adding a finalizer while deleting ($BODY)"
    expect_eq "$(jb .reason)" "Invalid" "reason"
    local msg
    msg=$(jb .message) # checked last, so a wording difference does not hide the rest
    expect_eq "$(jb '.details.causes[0].field')/$(jb '.details.causes[0].reason')" \
        "metadata.finalizers/FieldValueForbidden" "no-new-finalizers cause"
    # removing the last finalizer (json patch, as kubectl) deletes it
    out=$(k patch cm f1 --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]')
    expect_contains "$out" "configmap/f1 patched" "remove last finalizer"
    req GET $CM/f1
    expect_eq "$CODE" 404 "object gone after its last finalizer"
    wait $wp || true
    local evs
    evs=$(jq -r '.type + " " + (.object.metadata.deletionTimestamp != null | tostring)' "$TMP/f1.watch" | tr '\n' ',')
    expect_eq "$evs" "MODIFIED true,MODIFIED true,DELETED true," "watch of f1 (delete mark, patch, removal)"
    expect_eq "$msg" 'ConfigMap "f1" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/new"}' "no-new-finalizers message"
}

s_remove_one_of_two() {
    mkcm f2 '["a.example.com/x","b.example.com/y"]'
    k delete cm f2 --wait=false >/dev/null
    k patch cm f2 --type=merge -p '{"metadata":{"finalizers":["b.example.com/y"]}}' >/dev/null
    req GET $CM/f2
    expect_eq "$CODE" 200 "still there with one finalizer"
    expect_eq "$(jb '.metadata.finalizers | join(",")')" "b.example.com/y" "one finalizer left"
    k patch cm f2 --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null
    req GET $CM/f2
    expect_eq "$CODE" 404 "gone after merge patch finalizers:null"
}

s_kubectl_delete_waits() {
    # kubectl delete (waiting) returns once another client drops the finalizer
    mkcm f3 '["example.com/slow"]'
    timeout 30 kubectl delete cm f3 --timeout=20s >"$TMP/f3.out" 2>&1 &
    local p=$!
    BG_PIDS+=($p)
    sleep 1.5
    kill -0 $p 2>/dev/null || fail "kubectl delete did not wait for the finalizer: $(cat "$TMP/f3.out")"
    req PUT $CM/f3 "${JSON[@]}" -d "$(curl -s "$SERVER_URL$CM/f3" | jq -c '.metadata.finalizers = []')"
    expect_eq "$CODE" 200 "PUT without finalizers ($BODY)"
    local rc=0
    wait $p || rc=$?
    expect_eq "$rc" 0 "kubectl delete exit ($(cat "$TMP/f3.out"))"
    expect_contains "$(cat "$TMP/f3.out")" 'configmap "f3" deleted' "kubectl delete output"
    req GET $CM/f3
    expect_eq "$CODE" 404 "f3 gone"
}

s_deletecollection() {
    mkcm dc1 '["example.com/k"]'
    mkcm dc2 '[]'
    req PATCH $CM/dc1 -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"labels":{"dc":"y"}}}'
    req PATCH $CM/dc2 -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"labels":{"dc":"y"}}}'
    req DELETE "$CM?labelSelector=dc%3Dy"
    expect_eq "$CODE" 200 "deletecollection ($BODY)"
    # Like upstream, the answer lists every object deleted or marked:
    # dc2 (gone at once) as much as dc1 (kept by its finalizer).
    expect_eq "$(jb .kind)" "ConfigMapList" "deletecollection answers a list"
    expect_eq "$(jb '[.items[].metadata.name] | sort | join(",")')" "dc1,dc2" "deleted items listed"
    req GET $CM/dc2
    expect_eq "$CODE" 404 "dc2 deleted"
    req GET $CM/dc1
    expect_eq "$CODE" 200 "dc1 kept by its finalizer"
    [ "$(jb .metadata.deletionTimestamp)" != null ] || fail "dc1 not marked: $BODY"
    req PATCH $CM/dc1 -H 'Content-Type: application/json-patch+json' -d '[{"op":"replace","path":"/metadata/finalizers","value":[]}]'
    req GET $CM/dc1
    expect_eq "$CODE" 404 "dc1 gone"
}

s_namespace_termination() {
    k create namespace term >/dev/null
    k create configmap inside -n term --from-literal=a=b >/dev/null
    out=$(k delete namespace term --wait=false)
    expect_contains "$out" 'namespace "term" deleted' "kubectl delete ns"
    req GET /api/v1/namespaces/term
    expect_eq "$CODE" 200 "namespace still there"
    expect_eq "$(jb .status.phase)" "Terminating" "phase"
    expect_eq "$(jq -c .spec.finalizers <<<"$BODY")" '["kubernetes"]' "spec.finalizers"
    [ "$(jb .metadata.deletionTimestamp)" != null ] || fail "no deletionTimestamp: $BODY"
    out=$(k get ns term)
    grep -Eq '^term +Terminating ' <<<"$out" || fail "kubectl get ns: $out"
    # no new content ...
    printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: newcm\n  namespace: term\n' >"$TMP/newcm.yaml"
    out=$(kfail create -f "$TMP/newcm.yaml")
    expect_eq "$out" 'Error from server (Forbidden): error when creating "'"$TMP/newcm.yaml"'": configmaps "newcm" is forbidden: unable to create new content in namespace term because it is being terminated' "create in a terminating namespace (kubectl)"
    req POST /api/v1/namespaces/term/configmaps "${JSON[@]}" -d '{"metadata":{"name":"newcm"}}'
    expect_eq "$CODE" 403 "create in a terminating namespace"
    expect_eq "$(jb .reason)" "Forbidden" "reason"
    expect_eq "$(jb .message)" 'configmaps "newcm" is forbidden: unable to create new content in namespace term because it is being terminated' "403 message"
    expect_eq "$(jb .details.name)/$(jb .details.kind)" "newcm/configmaps" "403 details"
    # upstream's cause, which clients (client-go's event sink) test for
    expect_eq "$(jb '.details.causes | length')" 1 "one cause"
    expect_eq "$(jb '.details.causes[0].reason')|$(jb '.details.causes[0].field')|$(jb '.details.causes[0].message')" \
        "NamespaceTerminating|metadata.namespace|namespace term is being terminated" "403 cause"
    req POST /api/v1/namespaces/term/configmaps "${JSON[@]}" -d '{"metadata":{"generateName":"gen-"}}'
    expect_eq "$CODE" 403 "generateName create in a terminating namespace"
    # ... but existing content can still change and be deleted
    k label cm inside -n term x=y >/dev/null
    # deleting the namespace again is fine and changes nothing
    local rv
    rv=$(curl -s "$SERVER_URL/api/v1/namespaces/term" | jq -r .metadata.resourceVersion)
    req DELETE /api/v1/namespaces/term
    expect_eq "$CODE" 200 "second namespace DELETE"
    expect_eq "$(jb .metadata.resourceVersion)" "$rv" "second DELETE is a no-op"
    # finalize with an empty list deletes it
    k delete cm inside -n term >/dev/null
    req PUT /api/v1/namespaces/term/finalize "${JSON[@]}" -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"term"},"spec":{"finalizers":[]}}'
    expect_eq "$CODE" 200 "PUT finalize ($BODY)"
    req GET /api/v1/namespaces/term
    expect_eq "$CODE" 404 "namespace gone after finalize"
    out=$(kfail get ns term)
    expect_eq "$out" 'Error from server (NotFound): namespaces "term" not found' "kubectl get ns after finalize"
    # and the name can be used again
    k create namespace term >/dev/null
    req GET /api/v1/namespaces/term
    expect_eq "$(jb .status.phase)" "Active" "recreated namespace"
}

s_finalize_rules() {
    k create namespace fin2 >/dev/null
    # finalize on a namespace that is not being deleted keeps it (and may
    # change spec.finalizers only)
    req PUT /api/v1/namespaces/fin2/finalize "${JSON[@]}" -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"fin2","labels":{"sneaky":"yes"}},"spec":{"finalizers":[]}}'
    expect_eq "$CODE" 200 "finalize of an active namespace ($BODY)"
    req GET /api/v1/namespaces/fin2
    expect_eq "$CODE/$(jb .status.phase)" "200/Active" "active namespace stays"
    expect_eq "$(jb '.metadata.labels.sneaky')" "null" "finalize changes only spec.finalizers"
    # a namespace with no spec finalizers is deleted at once
    req DELETE /api/v1/namespaces/fin2
    expect_eq "$CODE" 200 "delete of a namespace without finalizers"
    req GET /api/v1/namespaces/fin2
    expect_eq "$CODE" 404 "namespace without finalizers deleted at once"
    # finalize of a missing namespace
    req PUT /api/v1/namespaces/nope/finalize "${JSON[@]}" -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"nope"},"spec":{"finalizers":[]}}'
    expect_eq "$CODE" 404 "finalize of a missing namespace"
}

# Propagation policies put the garbage collector's finalizers on the
# object, as kube-apiserver does; the GC (controller-manager) acts on them.
s_propagation_finalizers() {
    fins() { kubectl get cm "$1" -o jsonpath='{.metadata.finalizers}'; }
    mkcm po1 '[]'
    k delete cm po1 --cascade=orphan --wait=false >/dev/null
    expect_eq "$(fins po1)" '["orphan"]' "orphan delete adds the orphan finalizer"
    [ -n "$(kubectl get cm po1 -o jsonpath='{.metadata.deletionTimestamp}')" ] ||
        fail "orphan delete sets deletionTimestamp"
    # a second delete with another policy swaps the finalizer
    k delete cm po1 --cascade=foreground --wait=false >/dev/null
    expect_eq "$(fins po1)" '["foregroundDeletion"]' "foreground replaces orphan"
    # background removes both; nothing is left holding it: gone
    k delete cm po1 --cascade=background --wait=false >/dev/null
    req GET $CM/po1
    expect_eq "$CODE" 404 "background delete removes the GC finalizers and deletes"
    # other finalizers are kept alongside
    mkcm po2 '["example.com/keep"]'
    req DELETE $CM/po2 "${JSON[@]}" -d '{"propagationPolicy":"Foreground"}'
    expect_eq "$CODE" 200 "foreground delete ($BODY)"
    expect_eq "$(fins po2)" '["example.com/keep","foregroundDeletion"]' "foreground keeps others"
    # the deprecated orphanDependents
    mkcm po3 '[]'
    req DELETE "$CM/po3?orphanDependents=true"
    expect_eq "$(jb '.metadata.finalizers[0]')" orphan "orphanDependents=true means Orphan"
    # both given: 422 as upstream; nothing changes
    mkcm po4 '[]'
    req DELETE $CM/po4 "${JSON[@]}" -d '{"propagationPolicy":"Foreground","orphanDependents":true}'
    expect_eq "$CODE/$(jb .reason)" 422/Invalid "policy and orphanDependents both set"
    req GET $CM/po4
    expect_eq "$CODE/$(jb .metadata.deletionTimestamp)" 200/null "po4 untouched"
    req DELETE $CM/po4 "${JSON[@]}" -d '{"propagationPolicy":"Sideways"}'
    expect_eq "$CODE" 400 "unknown propagation policy"
    # clean up what is left (finalizers off)
    for n in po2 po3; do
        req PATCH $CM/$n -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"finalizers":null}}'
    done
    k delete cm po4 >/dev/null
}

section delete_sets_timestamp s_delete_sets_timestamp
section remove_one_of_two s_remove_one_of_two
section kubectl_delete_waits s_kubectl_delete_waits
section deletecollection s_deletecollection
section namespace_termination s_namespace_termination
section finalize_rules s_finalize_rules
section propagation_finalizers s_propagation_finalizers
kill_bg
stop_server
finish_sections
echo "test_finalizers: all sections passed"
