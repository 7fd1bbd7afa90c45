#!/usr/bin/env bash
# test_bad_input.sh - malformed and hostile requests with curl: each gets
# the right Status (code, reason, message shape) and none of them hurts the
# server, nor do clients that leave mid-request over TLS or abuse the TLS
# layer itself: afterwards it is ready, earlier objects are intact, and it
# exits 0 on SIGTERM (ASan/UBSan and leak checks included).
source "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "jq is required"

# req METHOD PATH [curl args...]: sets CODE and BODY (file $TMP/body).
req() {
    local m=$1 p=$2
    shift 2
    CODE=$(curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$@" "$SERVER_URL$p") || CODE=000
    BODY=$(cat "$TMP/body")
}
jb() { jq -r "$1" <<<"$BODY"; }

# expect_status CODE REASON WHAT: the reply is a Status with that code/reason.
expect_status() {
    expect_eq "$CODE" "$1" "$3: HTTP code (body $BODY)"
    expect_eq "$(jb '[.kind, .apiVersion, .status, .code, .reason] | map(tostring) | join(" ")')" \
        "Status v1 Failure $1 $2" "$3: Status kind, apiVersion, status, code, reason ($BODY)"
}

CM=/api/v1/namespaces/default/configmaps
JSON=(-H 'Content-Type: application/json')

start_server

s_setup() {
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keep","labels":{"k":"v"}},"data":{"a":"1"}}'
    expect_eq "$CODE" 201 "create keep ($BODY)"
    jb .metadata.uid >"$TMP/keep.uid"
    jb .metadata.resourceVersion >"$TMP/keep.rv"
}

s_malformed() {
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"'
    expect_status 400 BadRequest "truncated JSON"
    req POST $CM "${JSON[@]}" -d 'not json at all'
    expect_status 400 BadRequest "garbage JSON"
    req POST $CM "${JSON[@]}" -d '[1,2,3]'
    expect_status 400 BadRequest "JSON array as object"
    req POST $CM "${JSON[@]}"
    expect_status 400 BadRequest "empty body"
    req POST $CM -H 'Content-Type: application/yaml' --data-binary $'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y\n  data: [\n'
    expect_status 400 BadRequest "malformed YAML"
    req POST $CM -H 'Content-Type: application/yaml' --data-binary $'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yamlok\ndata:\n  a: "1"\n'
    expect_eq "$CODE" 201 "valid YAML body ($BODY)"
    expect_eq "$(jb .data.a)" "1" "YAML body data"
    req POST $CM -H 'Content-Type: text/plain' -d '{}'
    expect_status 415 UnsupportedMediaType "text/plain body"
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":"oops"}'
    expect_status 400 BadRequest "metadata not an object"
}

s_wrong_type() {
    # wrong value types: upstream decodes built-ins into Go structs and
    # answers 400 "... cannot be handled as a ConfigMap: json: cannot unmarshal ..."
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"typ"},"data":{"a":1}}'
    expect_status 400 BadRequest "data value of the wrong type"
    expect_contains "$(jb .message)" 'cannot be handled as a ConfigMap' "wrong type message"
}

# metadata of the wrong shape: upstream decodes every kind's metadata into
# ObjectMeta, so these are 400s; stored, they would break every client
# that lists configmaps (client-go fails the whole list on one object).
s_meta_types() {
    local m
    for m in '"labels":""' '"labels":{"a":1}' '"annotations":[]' '"annotations":{"a":true}' \
        '"finalizers":"x"' '"finalizers":[1]' '"ownerReferences":{}' \
        '"ownerReferences":[{"apiVersion":"v1","kind":"A","name":"o","uid":"u","controller":"yes"}]'; do
        req POST $CM "${JSON[@]}" -d "{\"metadata\":{\"name\":\"mt\",$m}}"
        expect_status 400 BadRequest "metadata {$m}"
        expect_contains "$(jb .message)" 'ConfigMap in version "v1" cannot be handled as a ConfigMap: metadata.' \
            "metadata {$m} message"
    done
    expect_eq "$(jb .message)" 'ConfigMap in version "v1" cannot be handled as a ConfigMap: metadata.ownerReferences[0].controller: Invalid value: "string": metadata.ownerReferences[0].controller in body must be of type boolean: "string"' \
        "wrong owner reference field message"
    # a merge patch cannot put them there either, and the object is untouched
    req PATCH $CM/keep -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"labels":{"k":5}}}'
    expect_status 400 BadRequest "merge patch with a number label value"
    req GET $CM/keep
    expect_eq "$(jb .metadata.labels.k)/$(jb .metadata.resourceVersion)" "v/$(cat "$TMP/keep.rv")" \
        "keep unchanged by the refused patch"
    req GET $CM/mt
    expect_eq "$CODE" 404 "nothing stored by the refused creates"
}

# Parser bombs: deep nesting and alias expansion must fail cleanly.
s_bombs() {
    /usr/bin/python3 -c "print('{\"a\":' + '['*200000 + ']'*200000 + '}')" >"$TMP/deep.json"
    req POST $CM "${JSON[@]}" --data-binary @"$TMP/deep.json"
    expect_status 400 BadRequest "200000-deep JSON"
    /usr/bin/python3 -c "print('a: ' + '['*200000 + ']'*200000)" >"$TMP/deep.yaml"
    req POST $CM -H 'Content-Type: application/yaml' --data-binary @"$TMP/deep.yaml"
    expect_status 400 BadRequest "200000-deep YAML"
    {
        printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\na: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
        local prev=a l
        for l in b c d e f g h i; do
            printf '%s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n' $l $l $prev $prev $prev $prev $prev $prev $prev $prev $prev $prev
            prev=$l
        done
    } >"$TMP/bomb.yaml"
    req POST $CM -H 'Content-Type: application/yaml' --data-binary @"$TMP/bomb.yaml"
    expect_status 400 BadRequest "YAML alias bomb"
    req PATCH $CM/keep -H 'Content-Type: application/merge-patch+json' --data-binary @"$TMP/deep.json"
    expect_status 400 BadRequest "deep merge patch"
    req GET /readyz
    expect_eq "$CODE" 200 "ready after bombs"
}

s_too_large() {
    head -c $((3 * 1024 * 1024 + 4096)) /dev/zero | tr '\0' 'a' >"$TMP/big"
    { printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"a":"'; cat "$TMP/big"; printf '"}}'; } >"$TMP/big.json"
    req POST $CM "${JSON[@]}" --data-binary @"$TMP/big.json"
    expect_status 413 RequestEntityTooLarge "3 MiB + 4 KiB body"
    head -c $((6 * 1024 * 1024)) /dev/zero >"$TMP/huge"
    req POST $CM "${JSON[@]}" --data-binary @"$TMP/huge"
    expect_eq "$CODE" 413 "6 MiB body"
    # an object over etcd's 1.5 MiB limit in a body under 3 MiB
    head -c $((2 * 1024 * 1024)) /dev/zero | tr '\0' 'b' >"$TMP/mid"
    { printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"mid"},"data":{"a":"'; cat "$TMP/mid"; printf '"}}'; } >"$TMP/mid.json"
    req POST $CM "${JSON[@]}" --data-binary @"$TMP/mid.json"
    expect_eq "$CODE" 413 "2 MiB object"
    req GET $CM/mid
    expect_eq "$CODE" 404 "the 2 MiB object was not stored"
    # a 1 MiB object is fine
    head -c $((1024 * 1024)) /dev/zero | tr '\0' 'c' >"$TMP/ok"
    { printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"onemib"},"data":{"a":"'; cat "$TMP/ok"; printf '"}}'; } >"$TMP/ok.json"
    req POST $CM "${JSON[@]}" --data-binary @"$TMP/ok.json"
    expect_eq "$CODE" 201 "1 MiB object"
    req GET $CM/onemib
    expect_eq "$(jb '.data.a | length')" $((1024 * 1024)) "1 MiB object read back"
}

s_unknown_paths() {
    req GET /apis/nope.io/v1/foos
    expect_status 404 NotFound "unknown group"
    expect_eq "$(jb .message)" "the server could not find the requested resource" "unknown group message"
    req GET /apis/nope.io/v1
    expect_status 404 NotFound "unknown group-version discovery"
    req GET /api/v1/foos
    expect_status 404 NotFound "unknown resource"
    req GET /api/v1/namespaces/default/foos/x
    expect_status 404 NotFound "unknown namespaced resource"
    req GET /api/v2/configmaps
    expect_status 404 NotFound "unknown version"
    req GET /api/v1/namespaces/default/configmaps/keep/bogus
    expect_status 404 NotFound "unknown subresource"
    req GET /api/v1/namespaces/default/configmaps/a/b/c/d/e
    expect_eq "$CODE" 404 "too many path segments"
    req GET '/api/v1/namespaces/default/configmaps/..%2f..%2fsecrets'
    expect_eq "$CODE" 404 "encoded traversal"
    req GET /api/v1/nodes/x/../../namespaces
    [ "$CODE" = 404 ] || [ "$CODE" = 200 ] || fail "dot segments: $CODE"
    # cluster-scoped resource under a namespace
    req GET /api/v1/namespaces/default/nodes
    expect_status 404 NotFound "namespaced path of a cluster-scoped resource"
    req POST $CM/keep "${JSON[@]}" -d '{}'
    expect_status 405 MethodNotAllowed "POST to a named object"
    req GET /nonsense
    expect_eq "$CODE" 404 "non-API path"
}

s_mismatch() {
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"mm1"}}'
    expect_status 400 BadRequest "kind mismatch"
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"mm2"}}'
    expect_status 400 BadRequest "apiVersion mismatch"
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"mm3","namespace":"kube-system"}}'
    expect_status 400 BadRequest "namespace mismatch"
    expect_eq "$(jb .message)" \
        "the namespace of the provided object does not match the namespace sent on the request" \
        "namespace mismatch message"
    req PUT $CM/keep "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"}}'
    expect_status 400 BadRequest "name mismatch on PUT"
    expect_eq "$(jb .message)" "the name of the object (other) does not match the name on the URL (keep)" \
        "name mismatch message"
    # As upstream's checkName: before the object is read, so a 400 comes
    # ahead of the 409 of a stale resourceVersion and the 404 of a missing
    # object; a body without a name is refused, not completed from the URL.
    req PUT $CM/keep "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other","resourceVersion":"1"}}'
    expect_status 400 BadRequest "name mismatch with a stale resourceVersion"
    req PUT $CM/nosuch "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"}}'
    expect_status 400 BadRequest "name mismatch on a missing object"
    req PUT $CM/keep "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}'
    expect_status 400 BadRequest "PUT without a name"
    expect_eq "$(jb .message)" \
        "the name of the object (keep based on URL) was undeterminable: name must be provided" \
        "PUT without a name message"
    req PUT $CM/keep "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keep","namespace":"kube-system"}}'
    expect_status 400 BadRequest "namespace mismatch on PUT"
    expect_eq "$(jb .message)" \
        "the namespace of the object (kube-system) does not match the namespace on the request (default)" \
        "namespace mismatch on PUT message"
    req PATCH $CM/keep -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"name":"moved","resourceVersion":"1"}}'
    expect_status 400 BadRequest "a patch renaming the object, stale resourceVersion"
    expect_eq "$(jb .message)" "the name of the object (moved) does not match the name on the URL (keep)" \
        "patch rename message"
    req GET $CM/keep
    expect_eq "$(jb .metadata.name)" "keep" "keep is unchanged"
    req GET $CM/mm1
    expect_eq "$CODE" 404 "mismatched objects were not created"
}

s_invalid() {
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}'
    expect_status 422 Invalid "invalid name"
    expect_eq "$(jb '.details.causes[0].field')" "metadata.name" "causes[0].field"
    expect_eq "$(jb '.details.causes[0].reason')" "FieldValueInvalid" "causes[0].reason"
    expect_eq "$(jb '.details.kind')/$(jb '.details.name')" "ConfigMap/Bad_Name" "details"
    expect_contains "$(jb .message)" 'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain' "invalid message"
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}'
    expect_status 422 Invalid "missing name"
    expect_eq "$(jb '.details.causes[0].field')" "metadata.name" "missing name field"
    expect_contains "$(jb .message)" 'metadata.name: Required value: name or generateName is required' "missing name message"
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"lab","labels":{"bad key!":"v"}}}'
    expect_status 422 Invalid "invalid label key"
    expect_eq "$(jb '.details.causes[0].field')" "metadata.labels" "label cause field"
    req POST /api/v1/namespaces "${JSON[@]}" -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a.b"}}'
    expect_status 422 Invalid "namespace name with a dot (DNS-1123 label)"
    req POST $CM "${JSON[@]}" -d "{\"metadata\":{\"name\":\"$(printf 'x%.0s' $(seq 1 254))\"}}"
    expect_status 422 Invalid "name longer than 253"
    # owner references and finalizers, as upstream's ValidateObjectMeta
    req POST $CM "${JSON[@]}" -d '{"metadata":{"name":"own","ownerReferences":[{"name":"o"}]}}'
    expect_status 422 Invalid "owner reference without apiVersion, kind, uid"
    expect_eq "$(jb '[.details.causes[].field] | join(",")')" \
        "metadata.ownerReferences.apiVersion,metadata.ownerReferences.kind,metadata.ownerReferences.uid" \
        "owner reference cause fields"
    expect_eq "$(jb '.details.causes[0].message')" 'Invalid value: "": version must not be empty' \
        "owner reference cause message"
    req POST $CM "${JSON[@]}" -d '{"metadata":{"name":"own","ownerReferences":[{"apiVersion":"v1","kind":"A","name":"x","uid":"1","controller":true},{"apiVersion":"v1","kind":"A","name":"y","uid":"2","controller":true}]}}'
    expect_status 422 Invalid "two controller references"
    expect_contains "$(jb .message)" 'Only one reference can have Controller set to true. Found "true" in references for x and y' \
        "two controllers message"
    req POST $CM "${JSON[@]}" -d '{"metadata":{"name":"own","ownerReferences":[{"apiVersion":"v1","kind":"Event","name":"e","uid":"1"}]}}'
    expect_status 422 Invalid "an Event as owner"
    expect_contains "$(jb .message)" '/v1, Kind=Event is disallowed from being an owner' "Event owner message"
    req POST $CM "${JSON[@]}" -d '{"metadata":{"name":"own","finalizers":["not a name"]}}'
    expect_status 422 Invalid "finalizer that is not a qualified name"
    expect_eq "$(jb '.details.causes[0].field')" "metadata.finalizers" "finalizer cause field"
    req POST $CM "${JSON[@]}" -d '{"metadata":{"name":"own","finalizers":["orphan","foregroundDeletion"]}}'
    expect_status 422 Invalid "orphan and foregroundDeletion together"
    expect_contains "$(jb .message)" 'finalizer orphan and foregroundDeletion cannot be both set' \
        "both finalizers message"
    req GET $CM/own
    expect_eq "$CODE" 404 "no invalid object stored"
}

s_conflict() {
    local rv uid
    rv=$(cat "$TMP/keep.rv")
    uid=$(cat "$TMP/keep.uid")
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"conf"},"data":{"v":"0"}}'
    expect_eq "$CODE" 201 "create conf"
    local crv
    crv=$(jb .metadata.resourceVersion)
    req PUT $CM/conf "${JSON[@]}" -d "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"conf\",\"resourceVersion\":\"$crv\"},\"data\":{\"v\":\"1\"}}"
    expect_eq "$CODE" 200 "PUT with current rv ($BODY)"
    req PUT $CM/conf "${JSON[@]}" -d "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"conf\",\"resourceVersion\":\"$crv\"},\"data\":{\"v\":\"2\"}}"
    expect_status 409 Conflict "PUT with stale rv"
    expect_eq "$(jb .message)" 'Operation cannot be fulfilled on configmaps "conf": the object has been modified; please apply your changes to the latest version and try again' "conflict message"
    expect_eq "$(jb .details.name)/$(jb .details.kind)" "conf/configmaps" "conflict details"
    req GET $CM/conf
    expect_eq "$(jb .data.v)" "1" "stale PUT did not write"
    req PUT $CM/nothere "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"nothere"}}'
    expect_status 404 NotFound "PUT of a missing configmap"
    req PUT $CM/conf "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"conf","resourceVersion":"abc"}}'
    expect_eq "$CODE" 400 "PUT with a non-numeric resourceVersion ($BODY)"
    req PUT $CM/conf "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"conf","uid":"00000000-0000-0000-0000-000000000000"}}'
    expect_status 422 Invalid "PUT changing the uid"
    # DELETE with preconditions
    req DELETE $CM/conf "${JSON[@]}" -d '{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"nope"}}'
    expect_status 409 Conflict "delete with a wrong uid precondition"
    expect_contains "$(jb .message)" "Precondition failed: UID in precondition: nope, UID in object meta: " "precondition message"
    req DELETE $CM/conf "${JSON[@]}" -d '{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"1"}}'
    expect_status 409 Conflict "delete with a wrong rv precondition"
    # a dryRun in the body that is not "All" is refused, not ignored
    # (upstream's ValidateDryRun): the object must survive it
    req DELETE $CM/conf "${JSON[@]}" -d '{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["Al"]}'
    expect_status 422 Invalid "delete with a misspelt dryRun"
    expect_eq "$(jb .message)" 'DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Al"}: supported values: "All"' "misspelt dryRun message"
    req DELETE $CM/conf "${JSON[@]}" -d '{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}'
    expect_eq "$CODE" 200 "delete with dryRun All"
    req GET $CM/conf
    expect_eq "$CODE" 200 "failed and dry-run deletes did not delete"
}

s_patch() {
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"pt"},"data":{"a":"1"}}'
    expect_eq "$CODE" 201 "create pt"
    req PATCH $CM/pt -H 'Content-Type: application/json-patch+json' -d '[{"op":"frob","path":"/data/a","value":"x"}]'
    expect_status 422 Invalid "json patch with an unknown op"
    req PATCH $CM/pt -H 'Content-Type: application/json-patch+json' -d '[{"op":"remove","path":"/data/missing"}]'
    expect_status 422 Invalid "json patch removing a missing path"
    req PATCH $CM/pt -H 'Content-Type: application/json-patch+json' -d '[{"op":"test","path":"/data/a","value":"2"}]'
    expect_status 422 Invalid "json patch failing test"
    req PATCH $CM/pt -H 'Content-Type: application/json-patch+json' -d '{"op":"add"}'
    expect_status 400 BadRequest "json patch that is not an array"
    req PATCH $CM/pt -H 'Content-Type: application/json-patch+json' -d '[{"op":"add","path":"/data/b"'
    expect_status 400 BadRequest "json patch that is not JSON"
    req PATCH $CM/pt -H 'Content-Type: application/merge-patch+json' -d '{"data":'
    expect_status 400 BadRequest "merge patch that is not JSON"
    req PATCH $CM/pt -H 'Content-Type: application/strategic-merge-patch+json' -d '{"data":{"b":"2"}}'
    expect_eq "$CODE" 200 "strategic merge patch on a built-in ($BODY)"
    expect_eq "$(jb .data.b)" "2" "strategic merge patch result"
    req PATCH $CM/pt -H 'Content-Type: application/strategic-merge-patch+json' -d '{"data":{"$patch":"frob"}}'
    [ "$CODE" = 400 ] || [ "$CODE" = 422 ] || fail "strategic patch with a bad directive: $CODE $BODY"
    req PATCH $CM/pt -H 'Content-Type: text/plain' -d '{}'
    expect_status 415 UnsupportedMediaType "patch with text/plain"
    req PATCH $CM/pt -H 'Content-Type: application/json-patch+json' -d '[{"op":"replace","path":"/metadata/name","value":"other"}]'
    expect_status 400 BadRequest "json patch renaming the object"
    req PATCH $CM/pt -H 'Content-Type: application/json-patch+json' -d '[{"op":"replace","path":"/kind","value":"Secret"}]'
    expect_status 400 BadRequest "json patch changing the kind"
    req PATCH $CM/pt -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"name":"Bad_Name"}}'
    expect_eq "$CODE" 400 "merge patch to an invalid name"
    req GET $CM/pt
    expect_eq "$(jb .data)" "$(jq . <<<'{"a":"1","b":"2"}')" "pt after the failed patches"
}

s_query() {
    req GET "$CM?labelSelector=a%20in%20(b"
    expect_status 400 BadRequest "unparsable label selector"
    req GET "$CM?fieldSelector=metadata.name%3D%3D%3Dx"
    expect_eq "$CODE" 400 "unparsable field selector"
    req GET "$CM?fieldSelector=spec.foo%3Dx"
    expect_status 400 BadRequest "unsupported field selector"
    req GET "$CM?limit=abc"
    expect_eq "$CODE" 400 "non-numeric limit"
    req GET "$CM?continue=garbage"
    expect_status 400 BadRequest "garbage continue token"
    req GET "$CM?resourceVersion=abc"
    expect_eq "$CODE" 400 "non-numeric resourceVersion"
    req GET "$CM?watch=true&resourceVersion=abc"
    expect_eq "$CODE" 400 "watch from a non-numeric resourceVersion"
    req POST "$CM?fieldValidation=Bogus" "${JSON[@]}" -d '{"metadata":{"name":"fv"}}'
    expect_status 400 BadRequest "bad fieldValidation"
    req POST "$CM?dryRun=Bogus" "${JSON[@]}" -d '{"metadata":{"name":"dr"}}'
    expect_status 400 BadRequest "bad dryRun"
    req GET "$CM" -H 'Accept: application/vnd.kubernetes.protobuf'
    expect_status 406 NotAcceptable "protobuf-only Accept"
    req GET "$CM" -H 'Accept: application/vnd.kubernetes.protobuf, application/json'
    expect_eq "$CODE" 200 "protobuf then JSON Accept"
    expect_eq "$(jb .kind)" "ConfigMapList" "negotiated JSON"
}

s_query_bools() {
    # upstream parses query booleans leniently: only "", absent, "0" and
    # "false" (any case) are false; a bare key is true.
    # (a watch from "" starts with a synthetic ADDED per object; a list
    # starts with {"kind":"ConfigMapList")
    req GET "$CM?watch=True&timeoutSeconds=1"
    expect_eq "$CODE/$(head -c 15 "$TMP/body")" '200/{"type":"ADDED"' "watch=True is a watch"
    req GET "$CM?watch=&timeoutSeconds=1"
    expect_eq "$CODE/$(head -c 15 "$TMP/body")" '200/{"type":"ADDED"' "empty watch= is a watch"
    req GET "$CM?watch=0"
    expect_eq "$(jb .kind)" "ConfigMapList" "watch=0 is a list"
    req GET "$CM?watch=FALSE"
    expect_eq "$(jb .kind)" "ConfigMapList" "watch=FALSE is a list"
    req GET "$CM?watch=false"
    expect_eq "$(jb .kind)" "ConfigMapList" "watch=false is a list"
    # keys without "=" (Go's url.ParseQuery accepts them)
    req GET "$CM?watch&timeoutSeconds=1"
    expect_eq "$CODE/$(head -c 15 "$TMP/body")" '200/{"type":"ADDED"' "bare ?watch is a watch"
    req GET "$CM?pretty"
    expect_eq "$CODE" 200 "bare ?pretty"
}

s_watch_field_selector() {
    req GET "$CM?watch=true&timeoutSeconds=1&fieldSelector=spec.foo%3Dx"
    expect_status 400 BadRequest "watch with an unsupported field selector"
}

# Clients that vanish: mid-watch, mid-request-body, before reading a reply.
s_disconnects() {
    local i pids=()
    for i in $(seq 1 8); do
        curl -s -N --max-time 1 "$SERVER_URL$CM?watch=true" >/dev/null 2>&1 &
        pids+=($!)
        curl -s -N --max-time 1 "$SERVER_URL/api/v1/configmaps?watch=true&allowWatchBookmarks=true" >/dev/null 2>&1 &
        pids+=($!)
    done
    # a write while those watches are open, so they have something to send
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"during-watch"}}'
    expect_eq "$CODE" 201 "create during watches"
    for p in "${pids[@]}"; do wait "$p" || true; done
    # By hand over TLS, as the admin (the cluster CA, the admin certificate),
    # so that the abuse reaches HTTP; then abuse of the TLS layer itself.
    /usr/bin/python3 - "$PORT" "${DATA_DIR:-$TMP/data}/pki" <<'EOF'
import socket, ssl, sys, time
port, pki = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
def tcp():
    return socket.create_connection(("127.0.0.1", port), timeout=5)
def conn():
    return ctx.wrap_socket(tcp(), server_hostname="127.0.0.1")
# 1. headers promise a body that never comes, then the client leaves
for _ in range(5):
    s = conn()
    s.sendall(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"metadata\":")
    s.close()
# 2. half a request line
s = conn(); s.sendall(b"GET /api/v1/namesp"); s.close()
# 3. a watch whose reader never reads and then resets
s = conn()
s.sendall(b"GET /api/v1/configmaps?watch=true HTTP/1.1\r\nHost: x\r\n\r\n")
time.sleep(0.2)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
s.close()
# 4. garbage instead of HTTP (inside TLS), and instead of TLS
s = conn(); s.sendall(b"\x00\x01\x02 hello\r\n\r\n"); time.sleep(0.1); s.close()
s = tcp(); s.sendall(b"\x00\x01\x02 hello\r\n\r\n"); time.sleep(0.1); s.close()
# 4b. plain HTTP to the TLS port; a handshake left half done (a TLS
# record header promising a ClientHello that never comes); a bare connect
s = tcp(); s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"); time.sleep(0.1); s.close()
s = tcp(); s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"); time.sleep(0.1); s.close()
s = tcp(); s.close()
# 5. a list request whose reply is never read
for _ in range(5):
    s = conn()
    s.sendall(b"GET /api/v1/configmaps HTTP/1.1\r\nHost: x\r\n\r\n")
    s.close()
# 6. pipelined requests on one connection
s = conn()
s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
time.sleep(0.3)
data = s.recv(65536)
s.close()
assert data.count(b"200 OK") >= 1, data
# 7. a huge header
s = conn()
try:
    s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (2 << 20) + b"\r\n\r\n")
except OSError:
    pass
s.close()
EOF
    req GET /readyz
    expect_eq "$CODE/$BODY" "200/ok" "readyz after disconnects"
}

# A handshake flood: 300 connections that send half a ClientHello and
# hold it, and 200 full handshakes closed at once (with a client
# certificate, the costly kind), all while the admin's requests must still
# be served. Bounded: a few seconds of traffic, every socket closed.
s_handshake_flood() {
    /usr/bin/python3 - "$PORT" "${DATA_DIR:-$TMP/data}/pki" <<'EOF'
import socket, ssl, sys, threading, time
port, pki = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
def tcp():
    return socket.create_connection(("127.0.0.1", port), timeout=10)
held = []
for _ in range(300):
    s = tcp()
    s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 32)
    held.append(s)
errors = []
def handshakes(n):
    for _ in range(n):
        try:
            s = ctx.wrap_socket(tcp(), server_hostname="127.0.0.1")
            s.close()
        except OSError as e:
            errors.append(repr(e))
threads = [threading.Thread(target=handshakes, args=(50,)) for _ in range(4)]
for t in threads: t.start()
# meanwhile a real request, answered within the flood
s = ctx.wrap_socket(tcp(), server_hostname="127.0.0.1")
t0 = time.monotonic()
s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
data = s.recv(4096)
took = time.monotonic() - t0
s.close()
for t in threads: t.join()
for h in held: h.close()
assert b"200 OK" in data, data
assert took < 5, "readyz took %.1f s during the flood" % took
assert not errors, errors[:3]
EOF
    req GET /readyz
    expect_eq "$CODE/$BODY" "200/ok" "readyz after the handshake flood"
}

s_survived() {
    req GET /readyz
    expect_eq "$CODE/$BODY" "200/ok" "readyz at the end"
    req GET $CM/keep
    expect_eq "$CODE" 200 "keep still there"
    expect_eq "$(jb .metadata.uid)" "$(cat "$TMP/keep.uid")" "keep uid"
    expect_eq "$(jb .metadata.resourceVersion)" "$(cat "$TMP/keep.rv")" "keep untouched"
    expect_eq "$(jb .data.a)" "1" "keep data"
    req GET "$CM?labelSelector=k%3Dv"
    expect_eq "$(jb '.items | length')" 1 "label list"
    # a watch still works end to end
    curl -s -N --max-time 3 "$SERVER_URL$CM?watch=true&fieldSelector=metadata.name%3Dlate&timeoutSeconds=2" >"$TMP/late.watch" &
    local wp=$!
    sleep 0.5
    req POST $CM "${JSON[@]}" -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"late"}}'
    expect_eq "$CODE" 201 "create late"
    wait $wp || true
    expect_eq "$(jq -r .type "$TMP/late.watch" | tr '\n' ' ')" "ADDED " "watch after abuse"
}

# bad command-line flags: a clear message, exit 2, no server
s_flags() {
    local out rc
    for args in "--watch-cache-size 3" "--watch-cache-size x" "--plain-http --listen 0.0.0.0:1" \
        "--shutdown-delay-duration soon" "--shutdown-delay-duration 2h" \
        "--storage etcd" "--controller-manager=maybe" "--no-such-flag"; do
        rc=0
        # shellcheck disable=SC2086
        out=$("$CKUBE_BIN" server --data-dir "$TMP/flags" $args 2>&1) || rc=$?
        expect_eq "$rc" 2 "exit status of: ckube server $args"
        [ -n "$out" ] || fail "no message for: ckube server $args"
    done
    out=$("$CKUBE_BIN" server --watch-cache-size 3 2>&1) || true
    expect_eq "$out" 'ckube server: --watch-cache-size wants a number from 16 to 16777216, got "3"' \
        "--watch-cache-size message"
}

section flags s_flags
section setup s_setup
section malformed s_malformed
section wrong_type s_wrong_type
section meta_types s_meta_types
section bombs s_bombs
section too_large s_too_large
section unknown_paths s_unknown_paths
section mismatch s_mismatch
section invalid s_invalid
section conflict s_conflict
section patch s_patch
section query s_query
section query_bools s_query_bools
section watch_field_selector s_watch_field_selector
section disconnects s_disconnects
section handshake_flood s_handshake_flood
section survived s_survived
stop_server || fail "server did not exit 0 after the abuse (see the log above)"
finish_sections
echo "test_bad_input: all sections passed"
