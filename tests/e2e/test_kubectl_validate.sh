#!/usr/bin/env bash
# test_kubectl_validate.sh - kubectl's field validation against the server:
# default (--validate=strict: OpenAPI lookup, then fieldValidation=Strict),
# --validate=false (Ignore: unknown fields dropped), --validate=warn (a
# Warning header kubectl prints), on create, apply and replace, nested
# unknown fields, server-side dry run, and namespace rules (a missing
# namespace is NotFound). Runs with the default kubectl, 1.33 and 1.27
# (override with KUBECTL_VERSIONS).
source "$(dirname "$0")/lib.sh"
export HOME=$TMP/home
mkdir -p "$HOME"
SDK=/usr/lib/google-cloud-sdk/bin
KUBECTL_VERSIONS=${KUBECTL_VERSIONS:-"kubectl $SDK/kubectl.1.33 $SDK/kubectl.1.27"}
M=$TMP/manifests
mkdir -p "$M"

# Manifests (written here so each run has its own names).
cat >"$M/cm-unknown.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: vunk
foo: bar
data:
  a: b
EOF
cat >"$M/cm-spec.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: vspec
spec: {}
data:
  a: b
EOF
cat >"$M/deploy-nested.yaml" <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vdep
spec:
  selector:
    matchLabels: {app: vdep}
  template:
    metadata:
      labels: {app: vdep}
    spec:
      containers:
      - name: c
        image: nginx
        imagePullPolicyy: Always
EOF
cat >"$M/cm-ok.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: vok
data:
  a: b
EOF
cat >"$M/cm-ns.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: vns
  namespace: nope
data:
  a: b
EOF

# upstream wording of a strict decoding error for a built-in type
strict_msg() { # FILE KIND FIELD
    local v=v1
    printf 'Error from server (BadRequest): error when creating "%s": %s in version "%s" cannot be handled as a %s: strict decoding error: unknown field "%s"' \
        "$1" "$2" "$v" "$2" "$3"
}

s_strict_default() {
    local out
    out=$(kfail create -f "$M/cm-unknown.yaml")
    expect_contains "$out" 'strict decoding error: unknown field "foo"' "create, default validation"
    out=$(kfail get cm vunk)
    expect_contains "$out" 'NotFound' "nothing created by the strict failure"
    out=$(kfail apply -f "$M/cm-spec.yaml")
    expect_contains "$out" 'unknown field "spec"' "apply, default validation"
    out=$(kfail create -f "$M/deploy-nested.yaml")
    expect_contains "$out" 'unknown field "spec.template.spec.containers[0].imagePullPolicyy"' \
        "nested unknown field path"
    out=$(kfail create -f "$M/cm-unknown.yaml" --validate=true)
    expect_contains "$out" 'unknown field "foo"' "--validate=true is strict"
    out=$(kfail create -f "$M/cm-unknown.yaml" --validate=strict)
    expect_eq "$out" "$(strict_msg "$M/cm-unknown.yaml" ConfigMap foo)" "upstream wording (strict)"
}

s_ignore() {
    local out
    out=$(k create -f "$M/cm-unknown.yaml" --validate=false)
    expect_eq "$out" "configmap/vunk created" "--validate=false"
    out=$(k get cm vunk -o json)
    case "$out" in *'"foo"'*) fail "unknown field stored: $out" ;; esac
    expect_eq "$(k get cm vunk -o jsonpath='{.data.a}')" "b" "data kept"
    out=$(k apply -f "$M/deploy-nested.yaml" --validate=false)
    expect_eq "$out" "deployment.apps/vdep created" "apply --validate=false"
    # (the last-applied annotation keeps the manifest as written; the
    # object itself must not have the field)
    out=$(k get deploy vdep -o jsonpath='{.spec.template.spec.containers[0]}')
    case "$out" in *imagePullPolicyy*) fail "nested unknown field stored: $out" ;; esac
    k delete cm vunk >/dev/null
    k delete deploy vdep >/dev/null
}

s_warn() {
    local out err
    out=$("$K" create -f "$M/cm-spec.yaml" --validate=warn 2>"$TMP/warn.err") ||
        fail "--validate=warn failed: $out $(cat "$TMP/warn.err")"
    expect_eq "$out" "configmap/vspec created" "--validate=warn"
    out=$(k get cm vspec -o json)
    case "$out" in *'"spec"'*) fail "unknown field stored with warn: $out" ;; esac
    k delete cm vspec >/dev/null
    err=$(cat "$TMP/warn.err")
    expect_eq "$err" 'Warning: unknown field "spec"' "the warning kubectl prints"
}

s_apply_replace_existing() {
    local out
    k apply -f "$M/cm-ok.yaml" >/dev/null
    sed 's/^data:/foo: bar\ndata:/' "$M/cm-ok.yaml" >"$TMP/cm-ok-unknown.yaml"
    out=$(kfail apply -f "$TMP/cm-ok-unknown.yaml")
    expect_contains "$out" 'unknown field "foo"' "apply (patch) of an existing object, strict"
    out=$(kfail replace -f "$TMP/cm-ok-unknown.yaml")
    expect_contains "$out" 'unknown field "foo"' "replace, strict"
    out=$(k replace -f "$TMP/cm-ok-unknown.yaml" --validate=false)
    expect_eq "$out" "configmap/vok replaced" "replace --validate=false"
    k delete -f "$M/cm-ok.yaml" >/dev/null
}

s_dry_run() {
    local out
    out=$(k create -f "$M/cm-ok.yaml" --dry-run=server)
    expect_eq "$out" "configmap/vok created (server dry run)" "server dry run"
    out=$(kfail get cm vok)
    expect_contains "$out" 'NotFound' "dry run stored nothing"
    out=$(kfail create -f "$M/cm-unknown.yaml" --dry-run=server)
    expect_contains "$out" 'unknown field "foo"' "strict validation in a dry run"
}

s_namespaces() {
    local out
    out=$(kfail create -f "$M/cm-ns.yaml")
    expect_eq "$out" "Error from server (NotFound): error when creating \"$M/cm-ns.yaml\": namespaces \"nope\" not found" \
        "create in a missing namespace"
    out=$(kfail create -f "$M/cm-ok.yaml" -n nope)
    expect_contains "$out" 'namespaces "nope" not found' "create -n missing namespace"
    out=$(kfail apply -f "$M/cm-ok.yaml" -n nope)
    expect_contains "$out" 'namespaces "nope" not found' "apply -n missing namespace"
    out=$(kfail create -f "$M/cm-ns.yaml" -n default)
    expect_contains "$out" 'the namespace from the provided object "nope" does not match the namespace "default". You must pass '"'"'--namespace=nope'"'"' to perform this operation.' \
        "kubectl's own namespace mismatch check"
}

flow() {
    K=$1
    echo "=== $(basename "$K")"
    start_server
    section strict_default s_strict_default
    section ignore s_ignore
    section warn s_warn
    section apply_replace_existing s_apply_replace_existing
    section dry_run s_dry_run
    section namespaces s_namespaces
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
echo "test_kubectl_validate: all passed"
