#!/usr/bin/env bash
# test_crd_v1_features.sh - apiextensions.k8s.io/v1 CRDs with unmodified
# kubectl: a structural schema (types, required, enum, pattern,
# minimum/maximum, lengths, defaults, a preserve-unknown-fields subtree),
# validation errors (422 with field causes, kubectl's "The Foo "x" is
# invalid" output), pruning, strict/warn field validation, printer columns
# (a priority-1 column only with -o wide), short names, categories, the
# status and scale subresources, merge and JSON patches (strategic -> 415),
# generation rules, kubectl explain, PUT without a resourceVersion (422)
# or with a stale one (409), a cluster-scoped CRD, CRD validation
# itself, int-or-string, kubectl wait, finalizers, several served
# versions, a CRD changed at run time, kubectl edit / dry run /
# generateName, and a CRD delete that waits for its objects' finalizers.
#
# CRDs: tests/e2e/manifests/crd/foo-crd.yaml (namespaced), bar-crd.yaml
# (cluster-scoped) and widget-crd.yaml (several versions). Runs with the
# default kubectl, 1.33 and 1.27, each against a fresh server (override
# with KUBECTL_VERSIONS). Exact upstream wording is checked with
# expect_wording, which lets the rest of its section run.
source "$(dirname "$0")/lib.sh"

CRD_DIR=$SRC/tests/e2e/manifests/crd
export HOME=$TMP/home
mkdir -p "$HOME"
SDK=/usr/lib/google-cloud-sdk/bin
KUBECTL_VERSIONS=${KUBECTL_VERSIONS:-"kubectl $SDK/kubectl.1.33 $SDK/kubectl.1.27"}
M=$TMP/manifests
mkdir -p "$M"
FOOS=/apis/e2e.ckube.io/v1/namespaces/default/foos

# ko: stdout only (so a warning on stderr cannot spoil an exact match)
ko() {
    local out
    out=$("$K" "$@" 2>"$TMP/ko.err") || fail "[$(basename "$K") $*] failed: $out $(cat "$TMP/ko.err")"
    printf '%s\n' "$out"
}
jp() { ko get "$@"; }
# curl_json METHOD PATH [BODY [CONTENT-TYPE]]: the status code; body in $TMP/http.body
curl_json() {
    local method=$1 path=$2 body=${3:-} ct=${4:-application/json}
    if [ -n "$body" ]; then
        curl -s -o "$TMP/http.body" -w '%{http_code}' -X "$method" -H "Content-Type: $ct" \
            --data-binary "$body" "$SERVER_URL$path"
    else
        curl -s -o "$TMP/http.body" -w '%{http_code}' -X "$method" "$SERVER_URL$path"
    fi
}

# expect_wording ACTUAL EXPECTED MESSAGE: an exact-wording check (upstream
# messages) that does not stop its section, so the behaviour checks after
# it still run; the section fails at its end.
expect_wording() {
    if [ "$1" != "$2" ]; then
        echo "FAIL: $3: expected [$2], got [$1]" >&2
        echo "$3" >>"$TMP/section.fails"
    fi
}

# get_eventually PATH CODE: GET PATH until it answers CODE (at most 3 s;
# prints the last code). An endpoint may lag its CRD by a moment (upstream
# learns of CRD changes through an informer too).
get_eventually() {
    local c
    for _ in $(seq 1 60); do
        c=$(curl_json GET "$1")
        [ "$c" = "$2" ] && break
        sleep 0.05
    done
    printf '%s\n' "$c"
}

# foo_yaml NAME SPEC-LINES...: a Foo manifest in $M/NAME.yaml (prints the path)
foo_yaml() {
    local name=$1
    shift
    {
        printf 'apiVersion: e2e.ckube.io/v1\nkind: Foo\nmetadata:\n  name: %s\nspec:\n' "$name"
        for l in "$@"; do printf '  %s\n' "$l"; done
    } >"$M/$name.yaml"
    printf '%s\n' "$M/$name.yaml"
}

s_crds() {
    local out
    out=$(ko apply -f "$CRD_DIR/foo-crd.yaml")
    expect_eq "$out" "customresourcedefinition.apiextensions.k8s.io/foos.e2e.ckube.io created" "apply foo CRD"
    out=$(ko create -f "$CRD_DIR/bar-crd.yaml")
    expect_eq "$out" "customresourcedefinition.apiextensions.k8s.io/bars.e2e.ckube.io created" "create bar CRD"
    ko wait --for=condition=Established crd/foos.e2e.ckube.io crd/bars.e2e.ckube.io --timeout=20s >/dev/null
    out=$(ko api-resources --api-group=e2e.ckube.io)
    grep -Eq '^foos +fo,fu +e2e\.ckube\.io/v1 +true +Foo *$' <<<"$out" || fail "api-resources foos: $out"
    grep -Eq '^bars +e2e\.ckube\.io/v1 +false +Bar *$' <<<"$out" || fail "api-resources bars: $out"
    expect_eq "$(curl_json GET /apis/e2e.ckube.io/v1)" 200 "discovery of e2e.ckube.io/v1"
    out=$(jq -c '[.resources[] | select(.name=="foos") | .singularName, .namespaced, .kind, .shortNames, .categories, (.verbs|sort)]' "$TMP/http.body")
    expect_eq "$out" '["foo",true,"Foo",["fo","fu"],["ckubee2e"],["create","delete","deletecollection","get","list","patch","update","watch"]]' \
        "discovery entry of foos"
    out=$(jq -c '[.resources[] | select(.name=="foos/status") | .kind, .namespaced, (.verbs|sort)]' "$TMP/http.body")
    expect_eq "$out" '["Foo",true,["get","patch","update"]]' "discovery entry of foos/status"
    out=$(jq -c '[.resources[] | select(.name=="foos/scale") | .group, .version, .kind, .namespaced, (.verbs|sort)]' "$TMP/http.body")
    expect_eq "$out" '["autoscaling","v1","Scale",true,["get","patch","update"]]' "discovery entry of foos/scale"
    out=$(jq -c '[.resources[] | select(.name=="bars") | .namespaced, .kind, .categories]' "$TMP/http.body")
    expect_eq "$out" '[false,"Bar",["ckubee2e"]]' "discovery entry of bars"
}

# the CRD itself is validated
s_crd_validation() {
    local out
    sed 's/name: foos.e2e.ckube.io/name: wrong.e2e.ckube.io/' "$CRD_DIR/foo-crd.yaml" >"$M/crd-badname.yaml"
    out=$(kfail create -f "$M/crd-badname.yaml")
    expect_eq "$out" 'The CustomResourceDefinition "wrong.e2e.ckube.io" is invalid: metadata.name: Invalid value: "wrong.e2e.ckube.io": must be spec.names.plural+"."+spec.group' \
        "CRD name must be plural.group"
    cat >"$M/crd-nostorage.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: quuxes.e2e.ckube.io
spec:
  group: e2e.ckube.io
  scope: Namespaced
  names: {kind: Quux, plural: quuxes}
  versions:
  - name: v1
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object}
EOF
    out=$(kfail create -f "$M/crd-nostorage.yaml")
    expect_contains "$out" 'spec.versions: Invalid value:' "no storage version"
    expect_contains "$out" 'must have exactly one version marked as storage version' "no storage version: message"
}

# crd_rejected FILE NEEDLE WHAT: creating the CRD in FILE must fail with
# NEEDLE in kubectl's output. One that is accepted is recorded (the section
# fails) and deleted again, so the next check still runs.
crd_rejected() {
    local out
    if out=$("$K" create -f "$1" 2>&1); then
        echo "FAIL: $3 was accepted: $out" >&2
        echo "$3" >>"$TMP/section.fails"
        "$K" delete -f "$1" >/dev/null 2>&1 || true
        return 0
    fi
    expect_contains "$out" "$2" "$3"
}

# a v1 CRD needs a structural schema
s_crd_schema_validation() {
    local out
    cat >"$M/crd-noschema.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: quxes.e2e.ckube.io
spec:
  group: e2e.ckube.io
  scope: Namespaced
  names: {kind: Qux, plural: quxes}
  versions:
  - {name: v1, served: true, storage: true}
EOF
    crd_rejected "$M/crd-noschema.yaml" \
        'The CustomResourceDefinition "quxes.e2e.ckube.io" is invalid: spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required' \
        "a v1 CRD without a schema"
    cat >"$M/crd-nonstructural.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: corges.e2e.ckube.io
spec:
  group: e2e.ckube.io
  scope: Namespaced
  names: {kind: Corge, plural: corges}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            properties:
              a: {type: string}
EOF
    crd_rejected "$M/crd-nonstructural.yaml" \
        'spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields' \
        "a non-structural schema"
    # patterns must compile as Go regular expressions (RE2: no lookaround)
    sed -e 's/corges/graults/g; s/Corge/Grault/' -e 's/^            properties:$/            type: object\n            properties:/' \
        -e 's/a: {type: string}/a: {type: string, pattern: "^(?!x)[a-z]+$"}/' \
        "$M/crd-nonstructural.yaml" >"$M/crd-badpattern.yaml"
    crd_rejected "$M/crd-badpattern.yaml" \
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[a].pattern: Invalid value: \"^(?!x)[a-z]+\$\": must be a valid regular expression, but isn't: error parsing regexp: invalid or unsupported Perl syntax: \`(?!\`" \
        "a lookahead pattern"
    # inside anyOf and not too (value validations)
    cat >"$M/crd-junctor-pattern.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: garplies.e2e.ckube.io}
spec:
  group: e2e.ckube.io
  scope: Namespaced
  names: {kind: Garply, plural: garplies}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              a: {type: string}
            anyOf:
            - properties:
                a: {pattern: "a**"}
            not: {pattern: "(x"}
EOF
    crd_rejected "$M/crd-junctor-pattern.yaml" \
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].anyOf[0].properties[a].pattern: Invalid value: \"a**\": must be a valid regular expression, but isn't: error parsing regexp: invalid nested repetition operator: \`**\`" \
        "a nested repetition in anyOf"
    crd_rejected "$M/crd-junctor-pattern.yaml" \
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].not.pattern: Invalid value: \"(x\": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): \`(x\`" \
        "an unclosed group in not"
    out=$(k get crd -o name | sort | tr '\n' ' ')
    expect_eq "$out" "customresourcedefinition.apiextensions.k8s.io/bars.e2e.ckube.io customresourcedefinition.apiextensions.k8s.io/foos.e2e.ckube.io " \
        "no invalid CRD was stored"
}

s_create_defaults() {
    local out f
    f=$(foo_yaml good 'image: nginx')
    out=$(ko create -f "$f")
    expect_eq "$out" "foo.e2e.ckube.io/good created" "create a Foo"
    out=$(jp foo good -o jsonpath='{.spec.replicas}/{.spec.mode}/{.spec.limits}/{.metadata.generation}')
    expect_eq "$out" "1/slow//1" "defaults (no limits object: its default does not apply)"
    f=$(foo_yaml withlimits 'image: nginx' 'replicas: 0' 'limits: {}')
    ko create -f "$f" >/dev/null
    out=$(jp foo withlimits -o jsonpath='{.spec.replicas}/{.spec.mode}/{.spec.limits.cpu}')
    expect_eq "$out" "0/slow/1" "explicit 0 kept, nested default applied inside an existing object"
    # status is dropped on create (status subresource)
    cat >"$M/withstatus.yaml" <<'EOF'
apiVersion: e2e.ckube.io/v1
kind: Foo
metadata:
  name: withstatus
spec:
  image: nginx
status:
  phase: Preset
  replicas: 7
EOF
    ko create -f "$M/withstatus.yaml" >/dev/null
    out=$(jp foo withstatus -o jsonpath='{.status}')
    case "$out" in *Preset* | *7*) fail "create kept .status: $out" ;; esac
    # the short names and the group-qualified name
    expect_eq "$(jp fo good -o name)" "foo.e2e.ckube.io/good" "short name fo"
    expect_eq "$(jp fu -o name | sort | tr '\n' ' ')" \
        "foo.e2e.ckube.io/good foo.e2e.ckube.io/withlimits foo.e2e.ckube.io/withstatus " "short name fu"
    expect_eq "$(jp foos.e2e.ckube.io good -o name)" "foo.e2e.ckube.io/good" "plural.group"
    expect_eq "$(jp foos --field-selector metadata.name=good -o name)" "foo.e2e.ckube.io/good" \
        "field selector metadata.name on a CR"
    ko delete foo withlimits withstatus >/dev/null
}

# upstream's wording for a CR that fails its schema
invalid_msg() { # NAME FIELD-ERROR
    printf 'The Foo "%s" is invalid: %s' "$1" "$2"
}

s_validation() {
    local out f
    f=$(foo_yaml bad 'image: nginx' 'replicas: 11')
    out=$(kfail create -f "$f")
    expect_eq "$out" "$(invalid_msg bad 'spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10')" \
        "maximum"
    f=$(foo_yaml bad 'image: nginx' 'replicas: -1')
    out=$(kfail create -f "$f")
    expect_eq "$out" "$(invalid_msg bad 'spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0')" \
        "minimum"
    f=$(foo_yaml bad 'image: nginx' 'mode: medium')
    out=$(kfail create -f "$f")
    expect_eq "$out" "$(invalid_msg bad 'spec.mode: Unsupported value: "medium": supported values: "fast", "slow"')" \
        "enum"
    f=$(foo_yaml bad 'replicas: 2')
    out=$(kfail create -f "$f")
    expect_eq "$out" "$(invalid_msg bad 'spec.image: Required value')" "required"
    f=$(foo_yaml bad 'image: Bad_Image')
    out=$(kfail create -f "$f")
    expect_eq "$out" "$(invalid_msg bad "spec.image: Invalid value: \"Bad_Image\": spec.image in body should match '^[a-z]+(:[0-9]+)?\$'")" \
        "pattern"
    f=$(foo_yaml bad 'image: nginx' 'replicas: three')
    out=$(kfail create -f "$f")
    expect_eq "$out" "$(invalid_msg bad 'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"')" \
        "type"
    f=$(foo_yaml bad 'image: nginx' 'tags: [ab, cd, ef, gh]')
    out=$(kfail create -f "$f")
    expect_eq "$out" "$(invalid_msg bad 'spec.tags: Too many: 4: must have at most 3 items')" "maxItems"
    f=$(foo_yaml bad 'image: nginx' 'tags: [ab, c]')
    out=$(kfail create -f "$f")
    expect_eq "$out" "$(invalid_msg bad 'spec.tags[1]: Invalid value: "c": spec.tags[1] in body should be at least 2 chars long')" \
        "minLength in an array item"
    f=$(foo_yaml bad 'image: nginx' 'ratio: 0.25')
    out=$(kfail create -f "$f")
    expect_eq "$out" "$(invalid_msg bad 'spec.ratio: Invalid value: 0.25: spec.ratio in body should be greater than or equal to 0.5')" \
        "number minimum"
    # several errors at once: kubectl lists each cause on its own line
    f=$(foo_yaml bad 'replicas: 11' 'mode: medium')
    out=$(kfail create -f "$f")
    expect_contains "$out" 'The Foo "bad" is invalid: ' "several errors: header"
    expect_contains "$out" '* spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10' \
        "several errors: maximum"
    expect_contains "$out" '* spec.mode: Unsupported value: "medium": supported values: "fast", "slow"' \
        "several errors: enum"
    expect_contains "$out" '* spec.image: Required value' "several errors: required"
    out=$(kfail get foo bad)
    expect_contains "$out" 'NotFound' "nothing stored by an invalid create"
    # the Status object on the wire
    out=$(curl_json POST "$FOOS" '{"apiVersion":"e2e.ckube.io/v1","kind":"Foo","metadata":{"name":"bad"},"spec":{"image":"nginx","replicas":11}}')
    expect_eq "$out" 422 "raw invalid create"
    out=$(jq -c '[.kind, .status, .reason, .code, .details.name, .details.group, .details.kind]' "$TMP/http.body")
    expect_eq "$out" '["Status","Failure","Invalid",422,"bad","e2e.ckube.io","Foo"]' "422 Status"
    expect_wording "$(jq -r .message "$TMP/http.body")" \
        'Foo.e2e.ckube.io "bad" is invalid: spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10' \
        "422 message names the group-qualified kind"
    out=$(jq -c '.details.causes' "$TMP/http.body")
    expect_eq "$out" '[{"reason":"FieldValueInvalid","message":"Invalid value: 11: spec.replicas in body should be less than or equal to 10","field":"spec.replicas"}]' \
        "422 causes"
    out=$(curl_json POST "$FOOS" '{"apiVersion":"e2e.ckube.io/v1","kind":"Foo","metadata":{"name":"bad"},"spec":{"mode":"x"}}')
    expect_eq "$out" 422 "raw invalid create (2)"
    out=$(jq -c '[.details.causes[] | .reason + " " + .field] | sort' "$TMP/http.body")
    expect_eq "$out" '["FieldValueNotSupported spec.mode","FieldValueRequired spec.image"]' "cause reasons"
    # a wrong kind for the URL, and a body that is not an object
    out=$(curl_json POST "$FOOS" '{"apiVersion":"e2e.ckube.io/v1","kind":"Bar","metadata":{"name":"bad"},"spec":{"image":"nginx"}}')
    # (upstream: 422 with a cause on "kind"; a 400 rejects it as well)
    case $out in 400 | 422) ;; *) fail "a Bar posted to foos: $out $(cat "$TMP/http.body")" ;; esac
    out=$(curl_json POST "$FOOS" '[1,2]')
    expect_eq "$out" 400 "a JSON array as a Foo"
    out=$(curl_json POST "$FOOS" '{"apiVersion":"e2e.ckube.io/v1","kind":"Foo","metadata":{"name":"Bad_Name"},"spec":{"image":"nginx"}}')
    expect_eq "$out" 422 "invalid metadata.name"
    expect_eq "$(jq -r '.details.causes[0].field' "$TMP/http.body")" "metadata.name" "invalid metadata.name: field"
}

s_pruning_strict() {
    local out f
    cat >"$M/bogus.yaml" <<'EOF'
apiVersion: e2e.ckube.io/v1
kind: Foo
metadata:
  name: bogus
spec:
  image: nginx
  bogus: 1
  extra:
    anything:
      deep: [1, "two", {three: 3}]
EOF
    out=$(kfail create -f "$M/bogus.yaml")
    expect_contains "$out" 'strict decoding error: unknown field "spec.bogus"' "strict (default --validate)"
    expect_wording "$out" "Error from server (BadRequest): error when creating \"$M/bogus.yaml\": Foo in version \"v1\" cannot be handled as a Foo: strict decoding error: unknown field \"spec.bogus\"" \
        "strict (default --validate): upstream wording"
    out=$(kfail get foo bogus)
    expect_contains "$out" 'NotFound' "nothing stored by the strict failure"
    out=$("$K" create -f "$M/bogus.yaml" --validate=warn 2>"$TMP/warn.err") ||
        fail "--validate=warn: $out $(cat "$TMP/warn.err")"
    expect_eq "$out" "foo.e2e.ckube.io/bogus created" "--validate=warn"
    expect_eq "$(cat "$TMP/warn.err")" 'Warning: unknown field "spec.bogus"' "the warning"
    ko delete foo bogus >/dev/null
    out=$(ko create -f "$M/bogus.yaml" --validate=false)
    expect_eq "$out" "foo.e2e.ckube.io/bogus created" "--validate=false"
    out=$(jp foo bogus -o json)
    expect_eq "$(echo "$out" | jq -c '.spec')" '{"extra":{"anything":{"deep":[1,"two",{"three":3}]}},"image":"nginx","mode":"slow","replicas":1}' \
        "unknown field pruned, preserve-unknown subtree kept, defaults"
    # unknown top-level, metadata and status fields are pruned too
    out=$(curl_json POST "$FOOS?fieldValidation=Ignore" '{"apiVersion":"e2e.ckube.io/v1","kind":"Foo","metadata":{"name":"bogus2","bogusMeta":1},"spec":{"image":"nginx"},"bogusTop":{"a":1}}')
    expect_eq "$out" 201 "raw create with unknown fields (Ignore)"
    expect_eq "$(jq -c 'has("bogusTop")' "$TMP/http.body")" false "top-level unknown field pruned"
    expect_wording "$(jq -c '.metadata | has("bogusMeta")' "$TMP/http.body")" false "unknown metadata field pruned"
    out=$(curl_json POST "$FOOS?fieldValidation=Strict" '{"apiVersion":"e2e.ckube.io/v1","kind":"Foo","metadata":{"name":"bogus3"},"spec":{"image":"nginx"},"bogusTop":1}')
    expect_eq "$out" 400 "raw strict create"
    expect_wording "$(jq -r .message "$TMP/http.body")" 'Foo in version "v1" cannot be handled as a Foo: strict decoding error: unknown field "bogusTop"' \
        "raw strict message"
    # kubectl patch sends no fieldValidation: the server's default is Warn
    # (the field is pruned, the client gets a warning)
    out=$("$K" patch foo bogus --type=merge -p '{"spec":{"bogus":2}}' 2>"$TMP/warn.err") ||
        fail "merge patch with an unknown field: $out $(cat "$TMP/warn.err")"
    expect_wording "$out" "foo.e2e.ckube.io/bogus patched (no change)" \
        "a merge patch of only an unknown (pruned) field changes nothing"
    expect_eq "$(cat "$TMP/warn.err")" 'Warning: unknown field "spec.bogus"' "merge patch warning"
    out=$(curl_json PATCH "$FOOS/bogus?fieldValidation=Strict" '{"spec":{"bogus":2}}' application/merge-patch+json)
    expect_eq "$out" 400 "strict merge patch"
    expect_contains "$(jq -r .message "$TMP/http.body")" 'strict decoding error: unknown field "spec.bogus"' \
        "strict merge patch message"
    # a custom resource's metadata decodes into ObjectMeta too: a wrong
    # type is a 400, empty maps and lists are not kept, and the spec's own
    # empty values stay as sent (no Go types behind them)
    out=$(curl_json POST "$FOOS" '{"apiVersion":"e2e.ckube.io/v1","kind":"Foo","metadata":{"name":"badmeta","annotations":{"a":1}},"spec":{"image":"nginx"}}')
    expect_eq "$out" 400 "custom resource with a number annotation"
    expect_wording "$(jq -r .message "$TMP/http.body")" 'Foo in version "v1" cannot be handled as a Foo: metadata.annotations.a: Invalid value: "integer": metadata.annotations.a in body must be of type string: "integer"' \
        "custom resource metadata type message"
    out=$(curl_json POST "$FOOS" '{"apiVersion":"e2e.ckube.io/v1","kind":"Foo","metadata":{"name":"emptymeta","labels":{},"annotations":{},"finalizers":[]},"spec":{"image":"nginx","extra":{},"tags":[]}}')
    expect_eq "$out" 201 "custom resource with empty metadata maps"
    expect_eq "$(jq -c '[(.metadata | has("labels"), has("annotations"), has("finalizers")), .spec.extra, .spec.tags]' "$TMP/http.body")" \
        '[false,false,false,{},[]]' "empty metadata values dropped, spec kept"
    ko delete foo bogus bogus2 emptymeta >/dev/null
}

s_printer_columns() {
    local out
    out=$(ko get foos)
    first_line_matches "$out" '^NAME +REPLICAS +MODE +AGE *$' || fail "get foos header: $out"
    echo "$out" | sed -n 2p | grep -Eq '^good +1 +slow +[0-9]+s *$' || fail "get foos row: $out"
    out=$(ko get foos -o wide)
    first_line_matches "$out" '^NAME +REPLICAS +MODE +IMAGE +AGE *$' || fail "get foos -o wide header: $out"
    echo "$out" | sed -n 2p | grep -Eq '^good +1 +slow +nginx +[0-9]+s *$' || fail "get foos -o wide row: $out"
    # the Table on the wire
    out=$(curl -s -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io' "$SERVER_URL$FOOS")
    expect_eq "$(echo "$out" | jq -c '[.kind, .apiVersion, [.columnDefinitions[] | [.name, .priority]]]')" \
        '["Table","meta.k8s.io/v1",[["Name",0],["Replicas",0],["Mode",0],["Image",1],["Age",0]]]' \
        "Table columns"
    expect_wording "$(echo "$out" | jq -c '[.columnDefinitions[] | .type]')" '["string","integer","string","string","date"]' \
        "Table column types (a printer column keeps its declared type)"
    expect_eq "$(echo "$out" | jq -c '[.rows[0].cells[0:4], .rows[0].object.metadata.name]')" '[["good",1,"slow","nginx"],"good"]' \
        "Table row"
    # a CRD without printer columns: Name and Age
    out=$(ko get bars)
    first_line_matches "$out" '^NAME +AGE *$' || fail "get bars header: $out"
    echo "$out" | sed -n 2p | grep -Eq '^b1 +[0-9]+s *$' || fail "get bars row: $out"
}

s_categories() {
    local out
    out=$(ko get ckubee2e -o name | sort | tr '\n' ' ')
    expect_eq "$out" "bar.e2e.ckube.io/b1 foo.e2e.ckube.io/good " "kubectl get <category>"
    out=$(ko get ckubee2e)
    expect_contains "$out" "foo.e2e.ckube.io/good" "category table lists foos"
    expect_contains "$out" "bar.e2e.ckube.io/b1" "category table lists bars"
}

s_cluster_scoped() {
    local out
    printf 'apiVersion: e2e.ckube.io/v1\nkind: Bar\nmetadata:\n  name: b1\nspec: {}\n' >"$M/b1.yaml"
    out=$(ko apply -f "$M/b1.yaml")
    expect_eq "$out" "bar.e2e.ckube.io/b1 created" "apply a cluster-scoped Bar"
    out=$(jp bar b1 -o jsonpath='{.metadata.namespace}|{.spec.size}|{.metadata.generation}')
    expect_eq "$out" "|5|1" "cluster-scoped Bar: no namespace, default applied"
    expect_eq "$(curl_json GET /apis/e2e.ckube.io/v1/bars/b1)" 200 "GET a Bar by its cluster path"
    expect_eq "$(curl_json GET /apis/e2e.ckube.io/v1/namespaces/default/bars/b1)" 404 \
        "a Bar has no namespaced path"
    expect_eq "$(curl_json GET /apis/e2e.ckube.io/v1/namespaces/default/bars)" 404 \
        "bars cannot be listed in a namespace"
    expect_eq "$(curl_json GET /apis/e2e.ckube.io/v1/foos)" 200 "foos listed across namespaces"
    expect_eq "$(jq -r '[.items[].metadata.name] | join(",")' "$TMP/http.body")" "good" "all-namespace foos"
    # a namespace in the body of a cluster-scoped object is cleared
    out=$(curl_json POST /apis/e2e.ckube.io/v1/bars '{"apiVersion":"e2e.ckube.io/v1","kind":"Bar","metadata":{"name":"b2","namespace":"default"},"spec":{"size":1}}')
    expect_eq "$out" 201 "POST a Bar with a namespace in its body"
    expect_eq "$(jq -r '.metadata.namespace // "none"' "$TMP/http.body")" "none" "namespace cleared"
    out=$(ko delete bar b2)
    expect_eq "$out" 'bar.e2e.ckube.io "b2" deleted' "delete a Bar"
    out=$(kfail get bar b2)
    expect_eq "$out" 'Error from server (NotFound): bars.e2e.ckube.io "b2" not found' "NotFound wording"
}

s_status_subresource() {
    local out rv
    # a main-resource write ignores .status
    out=$(ko patch foo good --type=merge -p '{"status":{"phase":"Sneaky"}}')
    expect_eq "$out" "foo.e2e.ckube.io/good patched (no change)" "merge patch of .status on the main resource"
    expect_eq "$(jp foo good -o jsonpath='{.status.phase}')" "" "status unchanged by a main-resource write"
    # the status subresource changes only .status, and not generation
    out=$(ko patch foo good --subresource=status --type=merge -p '{"status":{"phase":"Running","replicas":1},"spec":{"replicas":9}}')
    expect_eq "$out" "foo.e2e.ckube.io/good patched" "patch --subresource=status"
    out=$(jp foo good -o jsonpath='{.status.phase}/{.status.replicas}/{.spec.replicas}/{.metadata.generation}')
    expect_eq "$out" "Running/1/1/1" "status written; spec and generation untouched"
    out=$(jp foo good --subresource=status -o jsonpath='{.kind}/{.status.phase}')
    expect_eq "$out" "Foo/Running" "get --subresource=status"
    # status is validated and pruned too
    out=$(kfail patch foo good --subresource=status --type=merge -p '{"status":{"replicas":"many"}}')
    expect_contains "$out" 'status.replicas: Invalid value: "string": status.replicas in body must be of type integer: "string"' \
        "status validation"
    out=$(curl_json PATCH "$FOOS/good/status" '{"status":{"bogusStatus":1}}' application/merge-patch+json)
    expect_eq "$out" 200 "status patch with an unknown field (no fieldValidation)"
    expect_eq "$(jq -c '.status | has("bogusStatus")' "$TMP/http.body")" false "unknown status field pruned"
    # a main-resource PUT keeps the old status even if the body changes it
    jp foo good -o json | jq '.status.phase = "Overwritten" | .spec.mode = "fast"' >"$M/good-put.json"
    out=$(ko replace -f "$M/good-put.json")
    expect_eq "$out" "foo.e2e.ckube.io/good replaced" "replace"
    out=$(jp foo good -o jsonpath='{.status.phase}/{.spec.mode}/{.metadata.generation}')
    expect_eq "$out" "Running/fast/2" "PUT: spec changed (generation 2), status kept"
    # a status PUT with a stale resourceVersion conflicts
    rv=$(jq -r .metadata.resourceVersion "$M/good-put.json")
    out=$(curl_json PUT "$FOOS/good/status" "$(jq -c '.status.phase="Stale"' "$M/good-put.json")")
    expect_eq "$out" 409 "status PUT with a stale resourceVersion ($rv)"
}

s_scale() {
    local out
    out=$(ko scale foo good --replicas=3)
    expect_eq "$out" "foo.e2e.ckube.io/good scaled" "kubectl scale"
    out=$(jp foo good -o jsonpath='{.spec.replicas}/{.metadata.generation}/{.status.replicas}')
    expect_eq "$out" "3/3/1" "scale wrote spec.replicas (generation bump), status untouched"
    expect_eq "$(curl_json GET "$FOOS/good/scale")" 200 "GET /scale"
    out=$(jq -c '[.kind, .apiVersion, .metadata.name, .metadata.namespace, .spec.replicas, .status.replicas]' "$TMP/http.body")
    expect_eq "$out" '["Scale","autoscaling/v1","good","default",3,1]' "the Scale object"
    [[ $(jq -r .metadata.resourceVersion "$TMP/http.body") =~ ^[0-9]+$ ]] || fail "Scale resourceVersion: $(cat "$TMP/http.body")"
    out=$(curl_json PATCH "$FOOS/good/scale" '{"spec":{"replicas":4}}' application/merge-patch+json)
    expect_eq "$out" 200 "merge patch /scale"
    expect_eq "$(jq -c '[.kind, .spec.replicas]' "$TMP/http.body")" '["Scale",4]' "patched Scale"
    expect_eq "$(jp foo good -o jsonpath='{.spec.replicas}')" 4 "spec.replicas after the scale patch"
    # the schema still holds through /scale
    out=$(kfail scale foo good --replicas=11)
    expect_contains "$out" 'spec.replicas' "scale beyond the schema's maximum"
    expect_contains "$out" 'should be less than or equal to 10' "scale beyond the schema's maximum: message"
    expect_eq "$(jp foo good -o jsonpath='{.spec.replicas}')" 4 "failed scale left spec.replicas"
    out=$(kfail scale foo good --current-replicas=2 --replicas=5)
    expect_contains "$out" 'Expected replicas to be 2, was 4' "kubectl scale precondition"
    out=$(curl_json PUT "$FOOS/good/scale" '{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"good","namespace":"default","resourceVersion":"1"},"spec":{"replicas":2}}')
    expect_eq "$out" 409 "Scale PUT with a stale resourceVersion"
    expect_eq "$(curl_json GET /apis/e2e.ckube.io/v1/bars/b1/scale)" 404 "no scale subresource on bars"
    expect_eq "$(curl_json GET /apis/e2e.ckube.io/v1/bars/b1/status)" 404 "no status subresource on bars"
}

s_patches() {
    local out
    # kubectl patch defaults to strategic merge: not for custom resources
    # (kubectl wraps the server's 415 message in its own words)
    out=$(kfail patch foo good -p '{"spec":{"replicas":2}}')
    expect_contains "$out" 'error: application/strategic-merge-patch+json is not supported by e2e.ckube.io/v1, Kind=Foo: the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json' \
        "strategic merge patch on a CR"
    out=$(curl_json PATCH "$FOOS/good" '{"spec":{"replicas":2}}' application/strategic-merge-patch+json)
    expect_eq "$out" 415 "raw strategic merge patch"
    expect_eq "$(jq -r '.reason + " " + (.code|tostring)' "$TMP/http.body")" "UnsupportedMediaType 415" "415 Status"
    # upstream's message lists the accepted types and nothing else
    out=$(jq -r .message "$TMP/http.body")
    grep -Eqx 'the body of the request was in an unknown format - accepted media types include: application/json-patch\+json, application/merge-patch\+json(, application/apply-patch\+yaml)?' <<<"$out" ||
        expect_wording "$out" "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml" \
            "415 message"
    out=$(ko patch foo good --type=merge -p '{"spec":{"replicas":2,"tags":["ab","cd"]},"metadata":{"labels":{"t":"1"}}}')
    expect_eq "$out" "foo.e2e.ckube.io/good patched" "merge patch"
    out=$(jp foo good -o jsonpath='{.spec.replicas}/{.spec.tags}/{.metadata.labels.t}')
    expect_eq "$out" '2/["ab","cd"]/1' "merge patch result"
    out=$(ko patch foo good --type=json -p '[{"op":"replace","path":"/spec/mode","value":"slow"},{"op":"add","path":"/spec/tags/-","value":"ef"}]')
    expect_eq "$out" "foo.e2e.ckube.io/good patched" "json patch"
    expect_eq "$(jp foo good -o jsonpath='{.spec.mode}/{.spec.tags}')" 'slow/["ab","cd","ef"]' "json patch result"
    # null removes a field; its default comes back
    out=$(ko patch foo good --type=merge -p '{"spec":{"replicas":null,"tags":null}}')
    expect_eq "$out" "foo.e2e.ckube.io/good patched" "merge patch with nulls"
    expect_eq "$(jp foo good -o jsonpath='{.spec.replicas}|{.spec.tags}')" "1|" "null removed tags; replicas defaulted again"
    out=$(kfail patch foo good --type=merge -p '{"spec":{"replicas":20}}')
    expect_eq "$out" "$(invalid_msg good 'spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10')" \
        "invalid merge patch"
    out=$(kfail patch foo good --type=json -p '[{"op":"remove","path":"/spec/image"}]')
    expect_eq "$out" "$(invalid_msg good 'spec.image: Required value')" "json patch removing a required field"
    out=$(ko patch foo good --type=merge -p '{"spec":{"replicas":1}}')
    expect_eq "$out" "foo.e2e.ckube.io/good patched (no change)" "no-op merge patch"
    # kubectl apply on a CR: a 3-way merge patch
    f=$(foo_yaml applied 'image: redis' 'tags: [aa, bb]')
    expect_eq "$(ko apply -f "$f")" "foo.e2e.ckube.io/applied created" "apply #1"
    f=$(foo_yaml applied 'image: redis' 'mode: fast')
    expect_eq "$(ko apply -f "$f")" "foo.e2e.ckube.io/applied configured" "apply #2"
    expect_eq "$(jp foo applied -o jsonpath='{.spec.mode}|{.spec.tags}|{.metadata.generation}')" "fast||2" \
        "apply removed the dropped field"
    expect_eq "$(ko apply -f "$f")" "foo.e2e.ckube.io/applied unchanged" "apply #3"
}

s_generation() {
    local g out
    g=$(jp foo good -o jsonpath='{.metadata.generation}')
    ko label foo good g=1 >/dev/null
    ko annotate foo good note=x >/dev/null
    expect_eq "$(jp foo good -o jsonpath='{.metadata.generation}')" "$g" "metadata changes keep generation"
    ko patch foo good --subresource=status --type=merge -p '{"status":{"phase":"Again"}}' >/dev/null
    expect_eq "$(jp foo good -o jsonpath='{.metadata.generation}')" "$g" "status changes keep generation"
    ko patch foo good --type=merge -p '{"spec":{"extra":{"k":"v"}}}' >/dev/null
    expect_eq "$(jp foo good -o jsonpath='{.metadata.generation}')" "$((g + 1))" "a spec change bumps generation"
    out=$(curl_json PATCH "$FOOS/good" '{"metadata":{"generation":99}}' application/merge-patch+json)
    expect_eq "$out" 200 "patch of metadata.generation"
    expect_eq "$(jq -r .metadata.generation "$TMP/http.body")" "$((g + 1))" "clients cannot set generation"
}

s_replace_rv() {
    local out rv
    ko patch foo good --type=merge -p '{"spec":{"replicas":1}}' >/dev/null
    # a PUT without resourceVersion: 422 for custom resources
    jp foo good -o json | jq -c 'del(.metadata.resourceVersion) | .spec.replicas = 5' >"$M/good-norv.json"
    out=$(curl_json PUT "$FOOS/good" "$(cat "$M/good-norv.json")")
    expect_eq "$out" 422 "PUT without resourceVersion"
    expect_eq "$(jq -c '[.reason, .details.name, .details.kind, .details.causes]' "$TMP/http.body")" \
        '["Invalid","good","Foo",[{"reason":"FieldValueInvalid","message":"Invalid value: 0x0: must be specified for an update","field":"metadata.resourceVersion"}]]' \
        "PUT without resourceVersion: Status"
    expect_contains "$(jq -r .message "$TMP/http.body")" \
        '"good" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update' \
        "PUT without resourceVersion: message"
    expect_eq "$(jp foo good -o jsonpath='{.spec.replicas}')" 1 "nothing written"
    # (kubectl replace fills a missing resourceVersion in from a GET)
    expect_eq "$(ko replace -f "$M/good-norv.json")" "foo.e2e.ckube.io/good replaced" \
        "kubectl replace of a file without resourceVersion"
    expect_eq "$(jp foo good -o jsonpath='{.spec.replicas}')" 5 "kubectl replace result"
    ko patch foo good --type=merge -p '{"spec":{"replicas":1}}' >/dev/null
    jp foo good -o json | jq '.metadata.resourceVersion = "1" | .spec.replicas = 5' >"$M/good-stale.json"
    out=$(kfail replace -f "$M/good-stale.json")
    expect_eq "$out" "Error from server (Conflict): error when replacing \"$M/good-stale.json\": Operation cannot be fulfilled on foos.e2e.ckube.io \"good\": the object has been modified; please apply your changes to the latest version and try again" \
        "replace with a stale resourceVersion"
    jp foo good -o json | jq '.spec.replicas = 5' >"$M/good-cur.json"
    expect_eq "$(ko replace -f "$M/good-cur.json")" "foo.e2e.ckube.io/good replaced" "replace with the current resourceVersion"
    expect_eq "$(jp foo good -o jsonpath='{.spec.replicas}')" 5 "replace result"
    # PUT of a name that does not exist
    out=$(curl_json PUT "$FOOS/nosuch" '{"apiVersion":"e2e.ckube.io/v1","kind":"Foo","metadata":{"name":"nosuch","resourceVersion":"5"},"spec":{"image":"nginx"}}')
    expect_eq "$out" 404 "PUT of a missing Foo"
    rv=$(jp foo good -o jsonpath='{.metadata.resourceVersion}')
    out=$(curl_json PUT "$FOOS/good" '{"apiVersion":"e2e.ckube.io/v1","kind":"Foo","metadata":{"name":"other","resourceVersion":"'"$rv"'"},"spec":{"image":"nginx"}}')
    expect_eq "$out" 400 "PUT whose body names another object"
    expect_eq "$(jq -r .message "$TMP/http.body")" "the name of the object (other) does not match the name on the URL (good)" \
        "PUT whose body names another object: message"
}

s_explain() {
    local out
    out=$(ko explain foo.spec)
    expect_contains "$out" "Foo" "explain: kind"
    expect_contains "$out" "e2e.ckube.io" "explain: group"
    expect_contains "$out" "The desired state of a Foo." "explain: description"
    grep -Eq '^ +image\s+<string> -required-' <<<"$out" || fail "explain: image -required-: $out"
    grep -Eq '^ +replicas\s+<integer>' <<<"$out" || fail "explain: replicas: $out"
    grep -Eq '^ +extra\s+<Object>' <<<"$out" || fail "explain: extra: $out"
    grep -Eq '^ +tags\s+<\[\]string>' <<<"$out" || fail "explain: tags: $out"
    out=$(ko explain foos.spec.replicas)
    expect_contains "$out" "Number of copies." "explain a leaf field"
    out=$(ko explain fo)
    expect_contains "$out" "Foo is an e2e test resource." "explain by short name"
}

s_delete_collection() {
    local out
    ko create -f "$(foo_yaml c1 'image: nginx')" >/dev/null
    ko create -f "$(foo_yaml c2 'image: nginx')" >/dev/null
    ko label foo c1 c2 coll=yes >/dev/null
    out=$(ko delete foos -l coll=yes)
    expect_eq "$out" 'foo.e2e.ckube.io "c1" deleted
foo.e2e.ckube.io "c2" deleted' "delete by selector"
    expect_eq "$(curl_json DELETE "$FOOS")" 200 "deletecollection"
    expect_eq "$(jq -r .kind "$TMP/http.body")" "FooList" "deletecollection returns a FooList"
    out=$(k get foos)
    expect_eq "$out" "No resources found in default namespace." "all foos deleted"
    out=$(ko delete bars --all)
    expect_eq "$out" 'bar.e2e.ckube.io "b1" deleted' "delete --all bars"
}

s_int_or_string() {
    local out f
    f=$(foo_yaml ios 'image: nginx' 'maxSurge: 2')
    expect_eq "$(ko create -f "$f")" "foo.e2e.ckube.io/ios created" "int-or-string: an integer"
    out=$(ko patch foo ios --type=merge -p '{"spec":{"maxSurge":"25%"}}')
    expect_eq "$out" "foo.e2e.ckube.io/ios patched" "int-or-string: a string"
    expect_eq "$(jp foo ios -o jsonpath='{.spec.maxSurge}')" "25%" "int-or-string stored"
    out=$(curl_json PATCH "$FOOS/ios" '{"spec":{"maxSurge":true}}' application/merge-patch+json)
    expect_eq "$out" 422 "int-or-string: a boolean"
    expect_eq "$(jq -r '.details.causes[0].field' "$TMP/http.body")" "spec.maxSurge" "int-or-string: cause field"
    ko delete foo ios >/dev/null
}

# kubectl wait on custom resources: a jsonpath condition met by a status
# write made while it waits, and --for=delete
s_wait() {
    local out pid
    ko create -f "$(foo_yaml waiter 'image: nginx')" >/dev/null
    (
        sleep 1
        "$K" patch foo waiter --subresource=status --type=merge -p '{"status":{"phase":"Running"}}' >/dev/null 2>&1
    ) &
    pid=$!
    out=$(ko wait --for=jsonpath='{.status.phase}'=Running foo/waiter --timeout=15s)
    wait $pid
    expect_eq "$out" "foo.e2e.ckube.io/waiter condition met" "kubectl wait --for=jsonpath"
    (
        sleep 1
        "$K" delete foo waiter --wait=false >/dev/null 2>&1
    ) &
    pid=$!
    out=$(ko wait --for=delete foo/waiter --timeout=15s)
    wait $pid
    expect_eq "$out" "foo.e2e.ckube.io/waiter condition met" "kubectl wait --for=delete"
}

s_finalizers() {
    local out
    ko apply -f - >/dev/null <<'EOF'
apiVersion: e2e.ckube.io/v1
kind: Foo
metadata:
  name: fin
  finalizers: [e2e.ckube.io/hold]
spec:
  image: nginx
EOF
    out=$(ko delete foo fin --wait=false)
    expect_eq "$out" 'foo.e2e.ckube.io "fin" deleted' "delete a Foo with a finalizer"
    out=$(jp foo fin -o jsonpath='{.metadata.deletionTimestamp}|{.metadata.finalizers}')
    [[ $out =~ ^[0-9]{4}-.*Z\|\[\"e2e.ckube.io/hold\"\]$ ]] || fail "deleting Foo: $out"
    out=$(kfail patch foo fin --type=merge -p '{"metadata":{"finalizers":["e2e.ckube.io/hold","e2e.ckube.io/more"]}}')
    expect_contains "$out" "Forbidden" "no new finalizers on a deleting object"
    out=$(ko patch foo fin --type=merge -p '{"metadata":{"finalizers":null}}')
    expect_eq "$out" "foo.e2e.ckube.io/fin patched" "remove the last finalizer"
    out=$(kfail get foo fin)
    expect_contains "$out" "NotFound" "the Foo is gone with its last finalizer"
}

# several versions, conversion None: apiVersion follows the request
s_versions() {
    local out
    expect_eq "$(ko apply -f "$CRD_DIR/widget-crd.yaml")" \
        "customresourcedefinition.apiextensions.k8s.io/widgets.e2e.ckube.io created" "apply a multi-version CRD"
    ko wait --for=condition=Established crd/widgets.e2e.ckube.io --timeout=20s >/dev/null
    printf 'apiVersion: e2e.ckube.io/v1beta1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n' >"$M/w1.yaml"
    expect_eq "$(ko create -f "$M/w1.yaml")" "widget.e2e.ckube.io/w1 created" "create through v1beta1"
    expect_eq "$(jp widget w1 -o jsonpath='{.apiVersion} {.spec.size}')" "e2e.ckube.io/v1 3" \
        "read through the preferred version"
    expect_eq "$(jp widgets.v1beta1.e2e.ckube.io w1 -o jsonpath='{.apiVersion}')" "e2e.ckube.io/v1beta1" \
        "read through v1beta1"
    # patches through v1beta1 apply to the object as v1beta1 serves it
    expect_eq "$(ko patch widgets.v1beta1.e2e.ckube.io w1 --type=merge -p '{"spec":{"size":4}}')" \
        "widget.e2e.ckube.io/w1 patched" "merge patch through v1beta1"
    expect_eq "$(ko patch widgets.v1beta1.e2e.ckube.io w1 --type=json \
        -p '[{"op":"test","path":"/apiVersion","value":"e2e.ckube.io/v1beta1"},{"op":"replace","path":"/spec/size","value":5}]')" \
        "widget.e2e.ckube.io/w1 patched" "JSON patch through v1beta1 sees apiVersion v1beta1"
    sed 's/size: 3/size: 6/' "$M/w1.yaml" >"$M/w1-6.yaml"
    out=$(kfail apply --server-side -f "$M/w1-6.yaml")
    expect_contains "$out" 'conflict with "kubectl-patch" using e2e.ckube.io/v1beta1: .spec.size' "the patches own spec.size"
    expect_eq "$(ko apply --server-side --force-conflicts -f "$M/w1-6.yaml")" "widget.e2e.ckube.io/w1 serverside-applied" \
        "server-side apply through v1beta1"
    expect_eq "$(jp widget w1 -o jsonpath='{.apiVersion} {.spec.size}')" "e2e.ckube.io/v1 6" \
        "patched through v1beta1, read through v1"
    expect_eq "$(curl_json GET /apis/e2e.ckube.io/v1beta1/namespaces/default/widgets)" 200 "list through v1beta1"
    expect_eq "$(jq -c '[.apiVersion, .kind, .items[0].apiVersion]' "$TMP/http.body")" \
        '["e2e.ckube.io/v1beta1","WidgetList","e2e.ckube.io/v1beta1"]' "v1beta1 list"
    expect_eq "$(curl_json GET /apis/e2e.ckube.io/v1alpha1/namespaces/default/widgets)" 404 \
        "an unserved version is not served"
    expect_eq "$(curl_json GET /apis/e2e.ckube.io)" 200 "group discovery"
    expect_eq "$(jq -c '[[.versions[].version], .preferredVersion.version]' "$TMP/http.body")" '[["v1","v1beta1"],"v1"]' \
        "group versions, by priority"
    expect_eq "$(curl_json GET /apis/e2e.ckube.io/v1beta1)" 200 "v1beta1 discovery"
    expect_eq "$(jq -c '[.resources[].name]' "$TMP/http.body")" '["widgets"]' "v1beta1 serves widgets only"
    expect_eq "$(jp crd widgets.e2e.ckube.io -o jsonpath='{.status.storedVersions}')" '["v1"]' "storedVersions"
    # a v1beta1 watch sees objects written through v1 as v1beta1
    expect_eq "$(curl_json GET '/apis/e2e.ckube.io/v1beta1/namespaces/default/widgets?watch=true&timeoutSeconds=1')" 200 \
        "v1beta1 watch"
    expect_eq "$(jq -sc '[.[] | .type + " " + .object.apiVersion]' "$TMP/http.body")" '["ADDED e2e.ckube.io/v1beta1"]' \
        "v1beta1 watch events"
    ko delete widget w1 >/dev/null
    out=$(ko delete crd widgets.e2e.ckube.io)
    expect_eq "$out" 'customresourcedefinition.apiextensions.k8s.io "widgets.e2e.ckube.io" deleted' "delete the widget CRD"
    expect_eq "$(get_eventually /apis/e2e.ckube.io/v1beta1 404)" 404 "v1beta1 gone with the only CRD serving it"
    expect_eq "$(curl_json GET /apis/e2e.ckube.io/v1/namespaces/default/foos)" 200 "foos still served"
}

# a CRD changed at run time: the schema, defaults (applied on read too),
# short names and printer columns follow at once
s_crd_update() {
    local out g
    g=$(jp crd foos.e2e.ckube.io -o jsonpath='{.metadata.generation}')
    sed -e 's/maximum: 10/maximum: 20/' -e 's/shortNames: \[fo, fu\]/shortNames: [fo, fu, fooz]/' \
        -e 's/^              ratio:$/              color:\n                type: string\n                default: blue\n              ratio:/' \
        -e 's/^    - name: Mode$/    - name: Color\n      type: string\n      jsonPath: .spec.color\n    - name: Mode/' \
        "$CRD_DIR/foo-crd.yaml" >"$M/foo-crd-2.yaml"
    out=$(ko apply -f "$M/foo-crd-2.yaml")
    expect_eq "$out" "customresourcedefinition.apiextensions.k8s.io/foos.e2e.ckube.io configured" "apply the changed CRD"
    expect_eq "$(jp crd foos.e2e.ckube.io -o jsonpath='{.metadata.generation}')" "$((g + 1))" "CRD generation"
    out=$(ko scale foo good --replicas=15)
    expect_eq "$out" "foo.e2e.ckube.io/good scaled" "the new maximum holds at once"
    expect_eq "$(jp foo good -o jsonpath='{.spec.color}')" "blue" "a new default applies to a stored object on read"
    expect_eq "$(jp fooz good -o name)" "foo.e2e.ckube.io/good" "a new short name"
    out=$(ko get foos)
    first_line_matches "$out" '^NAME +REPLICAS +COLOR +MODE +AGE *$' || fail "new printer column: $out"
    out=$(kfail scale foo good --replicas=21)
    expect_contains "$out" 'should be less than or equal to 20' "the new maximum"
}

s_kubectl_misc() {
    local out f
    f=$(foo_yaml dry 'image: nginx')
    expect_eq "$(ko create --dry-run=server -f "$f")" "foo.e2e.ckube.io/dry created (server dry run)" "server dry run"
    expect_contains "$(kfail get foo dry)" "NotFound" "a dry run stores nothing"
    out=$(EDITOR="sed -i s/image:\ nginx/image:\ redis/" ko edit foo good)
    expect_eq "$out" "foo.e2e.ckube.io/good edited" "kubectl edit (a merge patch for a CR)"
    expect_eq "$(jp foo good -o jsonpath='{.spec.image}')" "redis" "kubectl edit result"
    printf 'apiVersion: e2e.ckube.io/v1\nkind: Foo\nmetadata:\n  generateName: gen-\nspec:\n  image: nginx\n' >"$M/gen.yaml"
    out=$(ko create -f "$M/gen.yaml")
    [[ $out =~ ^foo\.e2e\.ckube\.io/gen-[bcdfghjklmnpqrstvwxz2456789]{5}\ created$ ]] || fail "generateName: $out"
    ko delete "${out% created}" >/dev/null
    # a CRD's scope cannot change
    sed 's/scope: Namespaced/scope: Cluster/' "$CRD_DIR/foo-crd.yaml" >"$M/foo-crd-cluster.yaml"
    out=$(kfail apply -f "$M/foo-crd-cluster.yaml")
    expect_eq "$out" 'The CustomResourceDefinition "foos.e2e.ckube.io" is invalid: spec.scope: Invalid value: "Cluster": field is immutable' \
        "scope is immutable"
}

# A CRD being deleted waits for its objects' finalizers; meanwhile it is
# Terminating and refuses new objects.
s_crd_delete_waits() {
    local out
    printf 'apiVersion: e2e.ckube.io/v1\nkind: Bar\nmetadata:\n  name: held\n  finalizers: [e2e.ckube.io/hold]\nspec: {}\n' >"$M/held.yaml"
    expect_eq "$(ko create -f "$M/held.yaml")" "bar.e2e.ckube.io/held created" "a Bar with a finalizer"
    out=$(ko delete crd bars.e2e.ckube.io --wait=false)
    expect_eq "$out" 'customresourcedefinition.apiextensions.k8s.io "bars.e2e.ckube.io" deleted' "delete the bar CRD"
    for _ in $(seq 1 50); do
        out=$(jp crd bars.e2e.ckube.io -o jsonpath='{.status.conditions[?(@.type=="Terminating")].status}')
        [ "$out" = True ] && break
        sleep 0.1
    done
    expect_wording "$out" True "the CRD's Terminating condition"
    out=$(jp crd bars.e2e.ckube.io -o jsonpath='{.metadata.deletionTimestamp}|{.metadata.finalizers}')
    [[ $out =~ ^[0-9]{4}-.*Z\|.*customresourcecleanup\.apiextensions\.k8s\.io ]] || fail "terminating CRD: $out"
    for _ in $(seq 1 50); do
        [ -n "$(jp bar held -o jsonpath='{.metadata.deletionTimestamp}')" ] && break
        sleep 0.1
    done
    [ -n "$(jp bar held -o jsonpath='{.metadata.deletionTimestamp}')" ] || fail "the Bar was not marked deleted"
    out=$(curl_json POST /apis/e2e.ckube.io/v1/bars '{"apiVersion":"e2e.ckube.io/v1","kind":"Bar","metadata":{"name":"late"}}')
    expect_eq "$out" 405 "create while the CRD terminates"
    expect_eq "$(jq -r .message "$TMP/http.body")" "create not allowed while custom resource definition is terminating" \
        "create while the CRD terminates: message"
    sleep 1
    expect_eq "$(jp crd bars.e2e.ckube.io -o name)" "customresourcedefinition.apiextensions.k8s.io/bars.e2e.ckube.io" \
        "the CRD waits for the finalizer"
    ko patch bar held --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null
    # (kubectl wait prints nothing if the CRD is already gone)
    out=$(ko wait --for=delete crd/bars.e2e.ckube.io --timeout=15s)
    case $out in "" | "customresourcedefinition.apiextensions.k8s.io/bars.e2e.ckube.io condition met") ;;
    *) fail "the CRD goes once its last object is gone: $out" ;; esac
    expect_contains "$(kfail get crd bars.e2e.ckube.io)" "NotFound" "the CRD is gone"
    expect_eq "$(get_eventually /apis/e2e.ckube.io/v1/bars 404)" 404 "bars no longer served"
}

# selectableFields: field selectors on a custom resource's own fields, in
# lists and in watches (objects moving in and out of the selection), per
# version; bad selectableFields refused with one cause each.
s_selectable_fields() {
    local out w
    expect_eq "$(ko apply -f "$CRD_DIR/shirt-crd.yaml")" \
        "customresourcedefinition.apiextensions.k8s.io/shirts.e2e.ckube.io created" "a CRD with selectableFields"
    ko wait --for=condition=Established crd/shirts.e2e.ckube.io --timeout=20s >/dev/null
    for s in "a blue M 1 true" "b red S 2 false" "c blue L 2 true" "d green M 0 false"; do
        set -- $s
        printf 'apiVersion: e2e.ckube.io/v1\nkind: Shirt\nmetadata: {name: %s}\nspec: {color: %s, size: %s, sleeves: %s, inStock: %s}\n' \
            "$1" "$2" "$3" "$4" "$5" >"$M/shirt-$1.yaml"
        ko apply -f "$M/shirt-$1.yaml" >/dev/null
    done
    printf 'apiVersion: e2e.ckube.io/v1\nkind: Shirt\nmetadata: {name: e}\nspec: {}\n' >"$M/shirt-e.yaml"
    ko apply -f "$M/shirt-e.yaml" >/dev/null
    # (kubectl uses the preferred version, v2: v1 is named explicitly)
    names() { ko get shirts.v1.e2e.ckube.io "$@" -o name | sed 's|.*/||' | tr '\n' ' ' | sed 's/ $//'; }
    expect_eq "$(names --field-selector spec.color=blue)" "a c" "a string field"
    expect_eq "$(names --field-selector spec.size=M)" "a d" "an enum field"
    expect_eq "$(names --field-selector spec.sleeves=2,spec.inStock=true)" "c" "integer and boolean fields"
    expect_eq "$(names --field-selector 'spec.color!=blue')" "b d e" "!= (an absent field is empty)"
    expect_eq "$(names --field-selector 'spec.color=')" "e" "an absent field selects as empty"
    expect_eq "$(names --field-selector spec.color=blue,metadata.name=c)" "c" "with metadata.name"
    expect_eq "$(names --field-selector spec.color=blue -l 'app notin (x)')" "a c" "with a label selector"
    out=$(kfail get shirts.v1.e2e.ckube.io --field-selector spec.weight=3)
    expect_contains "$out" "field label not supported: spec.weight" "a field not declared"
    # per version: v2 (preferred) selects on size only
    expect_eq "$(ko get shirts --field-selector spec.size=L -o name)" "shirt.e2e.ckube.io/c" "the preferred version, by size"
    expect_contains "$(kfail get shirts --field-selector spec.color=blue)" "field label not supported: spec.color" \
        "the preferred version does not select on color"
    expect_eq "$(curl_json GET '/apis/e2e.ckube.io/v2/namespaces/default/shirts?fieldSelector=spec.size%3DL')" 200 "v2 by size"
    expect_eq "$(jq -c '[.items[].metadata.name]' "$TMP/http.body")" '["c"]' "v2 by size: items"
    expect_eq "$(curl_json GET '/apis/e2e.ckube.io/v2/namespaces/default/shirts?fieldSelector=spec.color%3Dblue')" 400 \
        "v2 does not select on color"
    expect_eq "$(jq -r .message "$TMP/http.body")" "field label not supported: spec.color" "v2 by color: message"
    # a watch: b turns blue (ADDED), a turns red (DELETED), c changes and stays (MODIFIED)
    expect_eq "$(curl_json GET /apis/e2e.ckube.io/v1/namespaces/default/shirts)" 200 "list for a resourceVersion"
    w=$(jq -r .metadata.resourceVersion "$TMP/http.body")
    ko patch shirt b --type=merge -p '{"spec":{"color":"blue"}}' >/dev/null
    ko patch shirt a --type=merge -p '{"spec":{"color":"red"}}' >/dev/null
    ko patch shirt c --type=merge -p '{"spec":{"sleeves":3}}' >/dev/null
    ko patch shirt d --type=merge -p '{"spec":{"sleeves":4}}' >/dev/null
    expect_eq "$(curl_json GET "/apis/e2e.ckube.io/v1/namespaces/default/shirts?watch=1&timeoutSeconds=1&resourceVersion=$w&fieldSelector=spec.color%3Dblue")" 200 "watch"
    expect_eq "$(jq -sc '[.[] | .type + " " + .object.metadata.name]' "$TMP/http.body")" \
        '["ADDED b","DELETED a","MODIFIED c"]' "watch events as objects move in and out"
    # bad selectableFields, one cause each
    sed -e 's/shirts.e2e/vests.e2e/; s/plural: shirts/plural: vests/; s/singular: shirt/singular: vest/; s/kind: Shirt/kind: Vest/' \
        -e 's/^    - jsonPath: .spec.size$/    - jsonPath: .spec.color\n    - jsonPath: .metadata.name\n    - jsonPath: .spec.tags[0]\n    - jsonPath: .spec\n    - jsonPath: .spec.nope\n    - {}/' \
        "$CRD_DIR/shirt-crd.yaml" >"$M/vest-crd.yaml"
    out=$(kfail apply -f "$M/vest-crd.yaml")
    expect_contains "$out" 'spec.versions[0].selectableFields: Too many: 9: must have at most 8 items' "too many"
    expect_contains "$out" 'spec.versions[0].selectableFields[1].jsonPath: Duplicate value: ".spec.color"' "duplicate"
    expect_contains "$out" 'spec.versions[0].selectableFields[2].jsonPath: Invalid value: ".metadata.name": must not point to metadata fields' "metadata"
    expect_contains "$out" 'spec.versions[0].selectableFields[3].jsonPath: Invalid value: ".spec.tags[0]"' "array notation"
    expect_contains "$out" 'spec.versions[0].selectableFields[4].jsonPath: Invalid value: ".spec": must point to a field of type string, boolean or integer' "an object"
    expect_contains "$out" 'spec.versions[0].selectableFields[5].jsonPath: Invalid value: ".spec.nope": is not a field of the schema' "not in the schema"
    expect_contains "$out" 'spec.versions[0].selectableFields[6].jsonPath: Required value' "no jsonPath"
    expect_contains "$(kfail get crd vests.e2e.ckube.io)" "NotFound" "nothing stored"
    ko delete crd shirts.e2e.ckube.io >/dev/null
}

flow() {
    K=$1
    echo "=== $(basename "$K")"
    start_server
    section crds s_crds
    section crd_validation s_crd_validation
    section crd_schema_validation s_crd_schema_validation
    section create_defaults s_create_defaults
    section validation s_validation
    section pruning_strict s_pruning_strict
    section cluster_scoped s_cluster_scoped
    section printer_columns s_printer_columns
    section categories s_categories
    section status_subresource s_status_subresource
    section scale s_scale
    section patches s_patches
    section generation s_generation
    section replace_rv s_replace_rv
    section explain s_explain
    section int_or_string s_int_or_string
    section wait s_wait
    section finalizers s_finalizers
    section versions s_versions
    section crd_update s_crd_update
    section kubectl_misc s_kubectl_misc
    section delete_collection s_delete_collection
    section crd_delete_waits s_crd_delete_waits
    section selectable_fields s_selectable_fields
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
echo "test_crd_v1_features: all passed"
