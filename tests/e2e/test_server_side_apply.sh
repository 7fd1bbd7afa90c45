#!/usr/bin/env bash
# test_server_side_apply.sh - server-side apply and managedFields with
# unmodified kubectl (1.27 and 1.33, each against a fresh server):
#
#  - `kubectl apply --server-side` creating a ConfigMap, a Deployment and a
#    custom resource (a CRD with an associative list, a set and an atomic
#    list), with managedFields as a real cluster records them;
#  - re-applying an unchanged file writes nothing (same resourceVersion);
#  - a field changed by another manager (`kubectl patch`) is a conflict
#    (409 listing it, nothing changed) until --force-conflicts moves it;
#  - removing a field from the applied file removes it from the object,
#    unless another manager owns it; list items merge by key;
#  - --dry-run=server stores nothing;
#  - client-side `kubectl apply` then --server-side takes over without
#    conflicts (kubectl's last-applied migration);
#  - Update managers (kubectl create/label/patch, /status), resetting
#    managedFields, --show-managed-fields;
#  - bad input: no fieldManager, wrong kind, invalid YAML, managedFields
#    in the body, a name mismatch, unknown fields with Strict validation,
#    a stale resourceVersion, list items without their key, force on a
#    non-apply patch, over-long manager names: clear Status errors and
#    nothing stored.
#
# Override the kubectl list with KUBECTL_VERSIONS.
source "$(dirname "$0")/lib.sh"

export HOME=$TMP/home # kubectl's discovery cache goes here
mkdir -p "$HOME"
SDK=/usr/lib/google-cloud-sdk/bin
KUBECTL_VERSIONS=${KUBECTL_VERSIONS:-"$SDK/kubectl.1.27 $SDK/kubectl.1.33"}
M=$TMP/manifests
mkdir -p "$M"
CMS=/api/v1/namespaces/default/configmaps
APPLY=application/apply-patch+yaml

# ko: stdout only (a warning on stderr cannot spoil an exact match)
ko() {
    local out
    out=$("$K" "$@" 2>"$TMP/ko.err") || fail "[$(basename "$K") $*] failed: $out $(cat "$TMP/ko.err")"
    printf '%s\n' "$out"
}

# curl_json METHOD PATH [BODY [CONTENT-TYPE]]: prints the status code; the
# response body is in $TMP/http.body
curl_json() {
    local method=$1 path=$2 body=${3:-} ct=${4:-application/json}
    if [ -n "$body" ]; then
        curl -s -o "$TMP/http.body" -w '%{http_code}' -X "$method" -H "Content-Type: $ct" \
            --data-binary "$body" "$SERVER_URL$path"
    else
        curl -s -o "$TMP/http.body" -w '%{http_code}' -X "$method" "$SERVER_URL$path"
    fi
}
body() { jq -cr "$1" "$TMP/http.body"; }

# mf KIND NAME JQ: runs JQ over the object's managedFields (as kubectl
# shows them with --show-managed-fields)
mf() {
    ko get "$1" "$2" -o json --show-managed-fields | jq -c "$3"
}
# fields KIND NAME MANAGER OPERATION: the fieldsV1 of one entry (sorted keys)
fields() {
    mf "$1" "$2" "[.metadata.managedFields[] | select(.manager==\"$3\" and .operation==\"$4\")][0].fieldsV1" |
        jq -cS .
}
rv() { ko get "$1" "$2" -o jsonpath='{.metadata.resourceVersion}'; }

cm_yaml() { # FILE KEY-VALUE-LINES...
    local f=$1
    shift
    {
        printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa-cm\n  labels:\n    app: ssa\ndata:\n'
        for l in "$@"; do printf '  %s\n' "$l"; done
    } >"$f"
}

s_configmap() {
    local out
    cm_yaml "$M/cm.yaml" 'key: one' 'other: two'
    out=$(ko apply --server-side -f "$M/cm.yaml")
    expect_eq "$out" "configmap/ssa-cm serverside-applied" "apply --server-side creates"
    expect_eq "$(ko get cm ssa-cm -o jsonpath='{.data.key}/{.data.other}/{.metadata.labels.app}')" \
        "one/two/ssa" "created object"
    expect_eq "$(mf cm ssa-cm '[.metadata.managedFields[] | [.manager, .operation, .apiVersion, .fieldsType]]')" \
        '[["kubectl","Apply","v1","FieldsV1"]]' "one Apply entry"
    expect_eq "$(fields cm ssa-cm kubectl Apply)" \
        '{"f:data":{"f:key":{},"f:other":{}},"f:metadata":{"f:labels":{"f:app":{}}}}' "applied fields"
    out=$(mf cm ssa-cm '.metadata.managedFields[0].time')
    [[ $out =~ ^\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\"$ ]] || fail "entry time: $out"
    # hidden unless asked for, and never in tables
    out=$(ko get cm ssa-cm -o yaml)
    case $out in *managedFields*) fail "managedFields shown without --show-managed-fields" ;; esac
    out=$(ko get cm ssa-cm -o yaml --show-managed-fields)
    expect_contains "$out" "managedFields:" "--show-managed-fields"
    expect_contains "$out" "manager: kubectl" "--show-managed-fields manager"
    expect_contains "$out" "operation: Apply" "--show-managed-fields operation"
    expect_contains "$out" "f:key: {}" "--show-managed-fields fieldsV1"
    # the server answered 201 for the create (apply on a missing object)
    expect_eq "$(curl_json PATCH "$CMS/ssa-raw?fieldManager=raw" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa-raw"},"data":{"a":"1"}}' $APPLY)" \
        201 "apply create is 201"
    expect_eq "$(curl_json PATCH "$CMS/ssa-raw?fieldManager=raw" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa-raw"},"data":{"a":"1"}}' $APPLY)" \
        200 "apply update is 200"
    # application/apply-patch+json is accepted too
    expect_eq "$(curl_json PATCH "$CMS/ssa-raw?fieldManager=raw" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa-raw"},"data":{"a":"2"}}' \
        application/apply-patch+json)" 200 "apply-patch+json"
    expect_eq "$(body .data.a)" 2 "apply-patch+json applied"
}

s_idempotent() {
    local before after out
    before=$(rv cm ssa-cm)
    out=$(ko apply --server-side -f "$M/cm.yaml")
    expect_eq "$out" "configmap/ssa-cm serverside-applied" "re-apply"
    after=$(rv cm ssa-cm)
    expect_eq "$after" "$before" "re-applying an unchanged file keeps the resourceVersion"
}

s_conflict() {
    local out before
    ko patch cm ssa-cm -p '{"data":{"key":"patched"}}' >/dev/null
    expect_eq "$(fields cm ssa-cm kubectl-patch Update)" '{"f:data":{"f:key":{}}}' \
        "kubectl patch took the field"
    expect_eq "$(fields cm ssa-cm kubectl Apply)" \
        '{"f:data":{"f:other":{}},"f:metadata":{"f:labels":{"f:app":{}}}}' "the applier lost it"
    before=$(rv cm ssa-cm)
    out=$(kfail apply --server-side -f "$M/cm.yaml")
    expect_contains "$out" 'Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: .data.key' \
        "conflict listed"
    expect_contains "$out" "Please review the fields above" "kubectl's conflict help"
    expect_eq "$(ko get cm ssa-cm -o jsonpath='{.data.key}')" patched "conflict changed nothing"
    expect_eq "$(rv cm ssa-cm)" "$before" "conflict stored nothing"
    # the Status as upstream words it
    out=$(curl_json PATCH "$CMS/ssa-cm?fieldManager=kubectl&force=false" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa-cm"},"data":{"key":"one"}}' $APPLY)
    expect_eq "$out" 409 "conflict code"
    expect_eq "$(body '.reason')" Conflict "conflict reason"
    expect_eq "$(body '.message')" 'Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: .data.key' \
        "conflict message"
    expect_eq "$(body '.details.causes')" \
        "$(jq -cn '[{reason:"FieldManagerConflict",message:"conflict with \"kubectl-patch\" using v1",field:".data.key"}]')" \
        "conflict causes"
    # the same value is no conflict: both own it
    expect_eq "$(curl_json PATCH "$CMS/ssa-cm?fieldManager=sharer" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa-cm"},"data":{"key":"patched"}}' $APPLY)" \
        200 "same value applies"
    expect_eq "$(fields cm ssa-cm kubectl-patch Update)" '{"f:data":{"f:key":{}}}' "shared: updater keeps it"
    expect_eq "$(fields cm ssa-cm sharer Apply)" '{"f:data":{"f:key":{}}}' "shared: applier owns it too"
    # the sharer lets go again (an empty apply removes nothing another manager owns)
    expect_eq "$(curl_json PATCH "$CMS/ssa-cm?fieldManager=sharer" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa-cm"}}' $APPLY)" 200 "sharer lets go"
    expect_eq "$(ko get cm ssa-cm -o jsonpath='{.data.key}')" patched "still owned by kubectl-patch"
}

s_force() {
    local out
    out=$(ko apply --server-side --force-conflicts -f "$M/cm.yaml")
    expect_eq "$out" "configmap/ssa-cm serverside-applied" "--force-conflicts"
    expect_eq "$(ko get cm ssa-cm -o jsonpath='{.data.key}')" one "forced value"
    expect_eq "$(fields cm ssa-cm kubectl Apply)" \
        '{"f:data":{"f:key":{},"f:other":{}},"f:metadata":{"f:labels":{"f:app":{}}}}' "ownership moved"
    expect_eq "$(mf cm ssa-cm '[.metadata.managedFields[] | select(.manager=="kubectl-patch")] | length')" 0 \
        "the emptied entry is gone"
}

s_replace_conflict() {
    local out
    # a whole-object update (PUT, as kubectl replace and edit-style clients do)
    ko get cm ssa-cm -o json | jq '.data.other = "replaced"' >"$M/cm-replace.json"
    out=$(ko replace -f "$M/cm-replace.json")
    expect_eq "$out" "configmap/ssa-cm replaced" "kubectl replace"
    expect_eq "$(fields cm ssa-cm kubectl-replace Update)" '{"f:data":{"f:other":{}}}' \
        "replace owns only what it changed"
    out=$(kfail apply --server-side -f "$M/cm.yaml")
    expect_contains "$out" 'conflict with "kubectl-replace" using v1: .data.other' "conflict with the replacer"
    ko apply --server-side --force-conflicts -f "$M/cm.yaml" >/dev/null
    expect_eq "$(ko get cm ssa-cm -o jsonpath='{.data.other}')" two "forced back"
}

s_remove_field() {
    local out
    # another manager applies a key of its own
    expect_eq "$(curl_json PATCH "$CMS/ssa-cm?fieldManager=other" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa-cm"},"data":{"theirs":"x"}}' $APPLY)" \
        200 "second applier"
    cm_yaml "$M/cm-less.yaml" 'key: one'
    sed -i '/labels:/d; /app: ssa/d' "$M/cm-less.yaml"
    ko apply --server-side -f "$M/cm-less.yaml" >/dev/null
    out=$(ko get cm ssa-cm -o json | jq -cS '{data, labels: .metadata.labels}')
    expect_eq "$out" '{"data":{"key":"one","theirs":"x"},"labels":null}' \
        "dropped fields removed, the other applier's kept"
    expect_eq "$(fields cm ssa-cm kubectl Apply)" '{"f:data":{"f:key":{}}}' "applier's new set"
}

s_dry_run() {
    local before out
    before=$(rv cm ssa-cm)
    cm_yaml "$M/cm-dry.yaml" 'key: dry'
    out=$(ko apply --server-side --dry-run=server -f "$M/cm-dry.yaml")
    expect_eq "$out" "configmap/ssa-cm serverside-applied (server dry run)" "dry run output"
    expect_eq "$(ko get cm ssa-cm -o jsonpath='{.data.key}')" one "dry run changed nothing"
    expect_eq "$(rv cm ssa-cm)" "$before" "dry run kept the resourceVersion"
    sed -i 's/name: ssa-cm/name: ssa-dry-new/' "$M/cm-dry.yaml"
    out=$(ko apply --server-side --dry-run=server -f "$M/cm-dry.yaml")
    expect_eq "$out" "configmap/ssa-dry-new serverside-applied (server dry run)" "dry run create"
    expect_contains "$(kfail get cm ssa-dry-new)" "NotFound" "dry run created nothing"
}

s_deployment() {
    local out gen
    cat >"$M/deploy.yaml" <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports:
        - containerPort: 80
      - name: sidecar
        image: busybox
        args: ["sleep", "1000"]
EOF
    out=$(ko apply --server-side -f "$M/deploy.yaml")
    expect_eq "$out" "deployment.apps/web serverside-applied" "deployment apply"
    expect_eq "$(fields deploy web kubectl Apply)" \
        "$(jq -cS . <<<'{"f:spec":{"f:replicas":{},"f:selector":{},"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}},"k:{\"name\":\"sidecar\"}":{".":{},"f:args":{},"f:image":{},"f:name":{}}}}}}}')" \
        "deployment fields: containers by name, ports by port+protocol, atomic selector"
    expect_eq "$(mf deploy web '[.metadata.managedFields[].apiVersion] | unique')" '["apps/v1"]' "apiVersion"
    gen=$(ko get deploy web -o jsonpath='{.metadata.generation}')
    expect_eq "$gen" 1 "generation"
    local before
    before=$(rv deploy web)
    ko apply --server-side -f "$M/deploy.yaml" >/dev/null
    expect_eq "$(rv deploy web)" "$before" "deployment re-apply is a no-op (defaults do not count)"
    # kubectl set image takes the image; re-applying the old one conflicts
    ko set image deploy/web nginx=nginx:1.26 >/dev/null
    out=$(kfail apply --server-side -f "$M/deploy.yaml")
    expect_contains "$out" 'conflict with "kubectl-set" using apps/v1: .spec.template.spec.containers[name="nginx"].image' \
        "container image conflict path"
    # a container dropped from the file goes away; the image the other
    # manager set stays theirs
    sed -i '/- name: sidecar/,$d' "$M/deploy.yaml"
    sed -i 's/nginx:1.25/nginx:1.26/' "$M/deploy.yaml"
    ko apply --server-side -f "$M/deploy.yaml" >/dev/null
    expect_eq "$(ko get deploy web -o jsonpath='{.spec.template.spec.containers[*].name}')" nginx \
        "removed container"
    expect_eq "$(ko get deploy web -o jsonpath='{.metadata.generation}')" 3 "generation moved with the spec"
    expect_eq "$(ko get deploy web -o jsonpath='{.spec.template.spec.restartPolicy}')" Always \
        "defaults still applied"
}

s_custom_resource() {
    local out
    cat >"$M/crd.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.ssa.ckube.io
spec:
  group: ssa.ckube.io
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              args:
                type: array
                items: {type: string}
          status:
            type: object
            properties:
              phase: {type: string}
EOF
    ko apply --server-side -f "$M/crd.yaml" >/dev/null
    "$K" wait --for=condition=Established crd/gadgets.ssa.ckube.io --timeout=10s >/dev/null ||
        fail "CRD not established"
    cat >"$M/gadget.yaml" <<'EOF'
apiVersion: ssa.ckube.io/v1
kind: Gadget
metadata:
  name: g1
spec:
  size: 1
  ports:
  - name: http
    port: 80
  - name: https
    port: 443
  tags: [a]
  args: [x1, x2]
EOF
    for _ in $(seq 1 30); do "$K" get gadgets >/dev/null 2>&1 && break; sleep 0.1; done
    out=$(ko apply --server-side -f "$M/gadget.yaml")
    expect_eq "$out" "gadget.ssa.ckube.io/g1 serverside-applied" "CR apply"
    expect_eq "$(fields gadget g1 kubectl Apply)" \
        "$(jq -cS . <<<'{"f:spec":{"f:args":{},"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}},"k:{\"name\":\"https\"}":{".":{},"f:name":{},"f:port":{}}},"f:size":{},"f:tags":{"v:\"a\"":{}}}}')" \
        "CR fields: list-map by key, set by value, atomic list whole"
    local G=/apis/ssa.ckube.io/v1/namespaces/default/gadgets
    # a second manager adds a port and a tag: merged, not replaced
    expect_eq "$(curl_json PATCH "$G/g1?fieldManager=ops" \
        '{"apiVersion":"ssa.ckube.io/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"ports":[{"name":"metrics","port":9090}],"tags":["b"]}}' $APPLY)" \
        200 "second applier on the CR"
    expect_eq "$(ko get gadget g1 -o jsonpath='{.spec.ports[*].name}/{.spec.tags}')" \
        'http https metrics/["a","b"]' "list items merged"
    # ...and conflicts on a port the first manager owns
    expect_eq "$(curl_json PATCH "$G/g1?fieldManager=ops" \
        '{"apiVersion":"ssa.ckube.io/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"ports":[{"name":"http","port":8080},{"name":"metrics","port":9090}],"tags":["b"]}}' $APPLY)" \
        409 "CR conflict"
    expect_eq "$(body '.details.causes[0].field')" '.spec.ports[name="http"].port' "CR conflict path"
    # the first manager drops https and an arg: removed; metrics stays
    sed -i '/- name: https/,+1d; s/args: \[x1, x2\]/args: [x1]/' "$M/gadget.yaml"
    ko apply --server-side -f "$M/gadget.yaml" >/dev/null
    expect_eq "$(ko get gadget g1 -o jsonpath='{.spec.ports[*].name}/{.spec.args}/{.spec.tags}')" \
        'http metrics/["x1"]/["a","b"]' "items dropped from the file removed"
    # re-apply: nothing written
    local before
    before=$(rv gadget g1)
    ko apply --server-side -f "$M/gadget.yaml" >/dev/null
    expect_eq "$(rv gadget g1)" "$before" "CR re-apply is a no-op"
    # apply on /status records subresource status and owns only status
    expect_eq "$(curl_json PATCH "$G/g1/status?fieldManager=ctrl" \
        '{"apiVersion":"ssa.ckube.io/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"size":99},"status":{"phase":"Ready"}}' $APPLY)" \
        200 "apply /status"
    expect_eq "$(ko get gadget g1 -o jsonpath='{.status.phase}/{.spec.size}')" "Ready/1" "status applied, spec not"
    expect_eq "$(mf gadget g1 '[.metadata.managedFields[] | select(.manager=="ctrl")][0] | [.operation, .subresource, .fieldsV1]')" \
        '["Apply","status",{"f:status":{"f:phase":{}}}]' "status entry"
    # the main resource does not own status
    expect_eq "$(curl_json PATCH "$G/g1?fieldManager=ops2" \
        '{"apiVersion":"ssa.ckube.io/v1","kind":"Gadget","metadata":{"name":"g1"},"status":{"phase":"X"}}' $APPLY)" \
        200 "status through the main resource"
    expect_eq "$(ko get gadget g1 -o jsonpath='{.status.phase}')" Ready "main resource ignores status"
    # a list item without its key, unknown fields (Strict) and kubectl's
    # default strict validation
    expect_eq "$(curl_json PATCH "$G/g1?fieldManager=ops" \
        '{"apiVersion":"ssa.ckube.io/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"ports":[{"port":1}]}}' $APPLY)" \
        400 "list-map item without its key"
    expect_contains "$(body .message)" 'associative list with keys has an element that omits key field "name"' \
        "missing key message"
    printf 'apiVersion: ssa.ckube.io/v1\nkind: Gadget\nmetadata:\n  name: g2\nspec:\n  bogus: 1\n' >"$M/g2.yaml"
    out=$(kfail apply --server-side -f "$M/g2.yaml")
    expect_contains "$out" 'unknown field "spec.bogus"' "strict validation names the field"
    expect_contains "$(kfail get gadget g2)" NotFound "nothing stored"
    out=$(ko apply --server-side --validate=false -f "$M/g2.yaml")
    expect_eq "$out" "gadget.ssa.ckube.io/g2 serverside-applied" "--validate=false prunes"
    expect_eq "$(ko get gadget g2 -o json | jq -c .spec)" '{}' "unknown field pruned"
}

s_client_side_then_server_side() {
    local out
    printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mixed\ndata:\n  a: "1"\n  b: "2"\n' >"$M/mixed.yaml"
    out=$(ko apply -f "$M/mixed.yaml")
    expect_eq "$out" "configmap/mixed created" "client-side apply"
    expect_eq "$(mf cm mixed '[.metadata.managedFields[] | [.manager, .operation]]')" \
        '[["kubectl-client-side-apply","Update"]]' "client-side apply is an Update"
    sed -i 's/a: "1"/a: "10"/' "$M/mixed.yaml"
    out=$(ko apply --server-side -f "$M/mixed.yaml")
    expect_eq "$out" "configmap/mixed serverside-applied" "server-side apply takes over without conflicts"
    expect_eq "$(ko get cm mixed -o jsonpath='{.data.a}/{.data.b}')" "10/2" "new value"
    out=$(ko get cm mixed -o jsonpath='{.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}')
    expect_eq "$(jq -c .data <<<"$out")" '{"a":"10","b":"2"}' "last-applied annotation kept current"
    expect_eq "$(mf cm mixed '[.metadata.managedFields[] | select(.manager=="kubectl-client-side-apply")] | length')" 0 \
        "kubectl migrated the client-side-apply entry"
    expect_eq "$(mf cm mixed '[.metadata.managedFields[] | select(.manager=="kubectl" and .operation=="Apply")][0].fieldsV1["f:data"] | keys')" \
        '["f:a","f:b"]' "kubectl owns the data now"
    # and can remove a field it migrated
    sed -i '/b: "2"/d' "$M/mixed.yaml"
    ko apply --server-side -f "$M/mixed.yaml" >/dev/null
    expect_eq "$(ko get cm mixed -o json | jq -c .data)" '{"a":"10"}' "migrated field removed"
}

s_update_managers() {
    local out
    ko create configmap upd --from-literal=k=v >/dev/null
    expect_eq "$(mf cm upd '[.metadata.managedFields[] | [.manager, .operation, .apiVersion]]')" \
        '[["kubectl-create","Update","v1"]]' "create records an Update"
    expect_eq "$(fields cm upd kubectl-create Update)" '{"f:data":{".":{},"f:k":{}}}' "create fields"
    ko label cm upd tier=web >/dev/null
    expect_eq "$(fields cm upd kubectl-label Update)" \
        '{"f:metadata":{"f:labels":{".":{},"f:tier":{}}}}' "label records its own entry"
    # a manager from the User-Agent when no fieldManager is given
    expect_eq "$(curl -s -o "$TMP/http.body" -w '%{http_code}' -X PATCH -A 'my-tool/1.0 (linux)' \
        -H 'Content-Type: application/merge-patch+json' --data-binary '{"data":{"x":"1"}}' \
        "$SERVER_URL$CMS/upd")" 200 "merge patch"
    expect_eq "$(fields cm upd my-tool Update)" '{"f:data":{"f:x":{}}}' "manager from the User-Agent"
    # resetting managedFields with [{}] clears them and they stay cleared
    expect_eq "$(curl_json PATCH "$CMS/upd" '{"metadata":{"managedFields":[{}]}}' application/merge-patch+json)" \
        200 "reset managedFields"
    expect_eq "$(body '.metadata.managedFields')" null "managedFields cleared"
    ko label cm upd more=1 >/dev/null
    expect_eq "$(mf cm upd '.metadata.managedFields')" null "not tracked again until an apply"
    # invalid managedFields sent by a client are replaced by the live ones
    ko patch cm upd -p '{"metadata":{"labels":{"tracked":"no"}}}' >/dev/null
    expect_eq "$(curl_json PATCH "$CMS/upd?fieldManager=ssa" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"upd"},"data":{"new":"1"}}' $APPLY)" \
        200 "apply starts tracking again"
    expect_eq "$(mf cm upd '[.metadata.managedFields[].manager] | sort')" \
        '["before-first-apply","ssa"]' "fields set before the first apply"
    expect_eq "$(curl_json PUT "$CMS/upd" "$(ko get cm upd -o json --show-managed-fields |
        jq -c '.metadata.managedFields = [{"manager":"x","operation":"Bogus","apiVersion":"v1","fieldsType":"FieldsV1"}] | .data.k = "v2"')")" \
        200 "update with invalid managedFields"
    expect_eq "$(body '[.metadata.managedFields[].manager] | sort')" '["before-first-apply","curl","ssa"]' \
        "invalid managedFields reset to the live ones (curl's update recorded)"
    # an empty list resets them too (upstream: a non-nil empty list does)
    expect_eq "$(curl_json PATCH "$CMS/upd" '{"metadata":{"managedFields":[]}}' application/merge-patch+json)" \
        200 "reset managedFields with []"
    expect_eq "$(body '.metadata.managedFields')" null "managedFields cleared by []"
}

s_bad_input() {
    local out
    # no fieldManager
    expect_eq "$(curl_json PATCH "$CMS/bad1" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad1"}}' $APPLY)" 422 "apply without fieldManager"
    expect_eq "$(body .message)" \
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch' \
        "fieldManager required message"
    expect_eq "$(body '.details.causes[0].reason')" FieldValueRequired "fieldManager cause"
    # wrong kind / apiVersion
    expect_eq "$(curl_json PATCH "$CMS/bad1?fieldManager=m" \
        '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"bad1"}}' $APPLY)" 400 "wrong kind"
    expect_eq "$(body .message)" "invalid object type: /v1, Kind=Secret" "wrong kind message"
    expect_eq "$(curl_json PATCH "$CMS/bad1?fieldManager=m" \
        '{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"bad1"}}' $APPLY)" 400 "wrong apiVersion"
    expect_eq "$(body .message)" "invalid object type: apps/v1, Kind=ConfigMap" "wrong apiVersion message"
    # invalid YAML, not a mapping
    expect_eq "$(curl_json PATCH "$CMS/bad1?fieldManager=m" $'kind: ConfigMap\n  bad: [' $APPLY)" 400 "invalid YAML"
    expect_contains "$(body .message)" "error decoding YAML: " "invalid YAML message"
    expect_eq "$(body .reason)" BadRequest "invalid YAML reason"
    expect_eq "$(curl_json PATCH "$CMS/bad1?fieldManager=m" '[1,2]' $APPLY)" 400 "a list body"
    # managedFields in the body, a name mismatch
    expect_eq "$(curl_json PATCH "$CMS/bad1?fieldManager=m" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad1","managedFields":[]}}' $APPLY)" \
        400 "managedFields in an apply"
    expect_eq "$(body .message)" "metadata.managedFields must be nil" "managedFields message"
    expect_eq "$(curl_json PATCH "$CMS/bad1?fieldManager=m" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"}}' $APPLY)" 400 "name mismatch"
    expect_eq "$(body .message)" "the name of the object (other) does not match the name on the URL (bad1)" \
        "name mismatch message"
    # unknown fields with fieldValidation=Strict, for a built-in
    expect_eq "$(curl_json PATCH "$CMS/bad1?fieldManager=m&fieldValidation=Strict" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad1"},"bogus":1}' $APPLY)" 400 "strict unknown field"
    expect_contains "$(body .message)" 'unknown field "bogus"' "strict names the field"
    # a Deployment container without its name
    expect_eq "$(curl_json PATCH "/apis/apps/v1/namespaces/default/deployments/bad1?fieldManager=m" \
        '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"bad1"},"spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}}' $APPLY)" \
        400 "container without a name"
    # over-long and non-printable managers, force on a non-apply patch
    local long
    long=$(printf 'm%.0s' $(seq 1 129))
    expect_eq "$(curl_json PATCH "$CMS/bad1?fieldManager=$long" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad1"}}' $APPLY)" 422 "long manager"
    expect_contains "$(body .message)" "fieldManager: Too long: may not be more than 128 bytes" "long manager message"
    expect_eq "$(curl_json POST "$CMS?fieldManager=$long" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad1"}}')" 422 "long manager on create"
    expect_contains "$(body .message)" 'CreateOptions.meta.k8s.io "" is invalid' "CreateOptions"
    expect_eq "$(curl_json PATCH "$CMS/bad1?fieldManager=a%01b" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad1"}}' $APPLY)" 422 "non-printable manager"
    expect_contains "$(body .message)" "invalid character U+0001 (at position 1)" "non-printable message"
    expect_eq "$(curl_json PATCH "$CMS/ssa-cm?force=true" '{"data":{"z":"1"}}' application/merge-patch+json)" \
        422 "force on a merge patch"
    expect_eq "$(body .message)" \
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch' \
        "force message"
    # nothing of the above was stored
    expect_eq "$(curl_json GET "$CMS/bad1")" 404 "no configmap stored"
    expect_eq "$(curl_json GET /apis/apps/v1/namespaces/default/deployments/bad1)" 404 "no deployment stored"
    # a stale resourceVersion in the applied configuration
    expect_eq "$(curl_json PATCH "$CMS/ssa-cm?fieldManager=kubectl" \
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa-cm","resourceVersion":"1"},"data":{"key":"one"}}' $APPLY)" \
        409 "stale resourceVersion"
    expect_contains "$(body .message)" "the object has been modified" "stale resourceVersion message"
}

flow() {
    K=$1
    echo "=== $(basename "$K")"
    start_server
    section configmap s_configmap
    section idempotent s_idempotent
    section conflict s_conflict
    section force s_force
    section replace_conflict s_replace_conflict
    section remove_field s_remove_field
    section dry_run s_dry_run
    section deployment s_deployment
    section custom_resource s_custom_resource
    section client_side_then_server_side s_client_side_then_server_side
    section update_managers s_update_managers
    section bad_input s_bad_input
    stop_server
}

for kc in $KUBECTL_VERSIONS; do
    [ -x "$(command -v "$kc")" ] || fail "kubectl binary $kc not found"
    DATA_DIR=$TMP/data-$(basename "$kc")
    export DATA_DIR
    PORT=  # a fresh port for a fresh server
    flow "$kc"
done
finish_sections
echo "test_server_side_apply: all passed"
