#!/usr/bin/env bash
# test_kubectl_basic.sh - the newcomer flow with unmodified kubectl binaries
# against a real `ckube server`: namespaces, configmap CRUD, labels and
# selectors, the three patch types, client-side apply, watch (-w), errors,
# discovery, version, deployments and scale, secrets, delete -f, wait,
# paging (--chunk-size), -A and field selectors.
#
# The flow runs once with the default `kubectl` and then with kubectl 1.27
# and 1.33 (each against a fresh server). Set KUBECTL_VERSIONS to override
# the list (e.g. KUBECTL_VERSIONS="kubectl" for a quick run).
source "$(dirname "$0")/lib.sh"

MANIFESTS=$SRC/tests/e2e/manifests
export HOME=$TMP/home # kubectl's discovery cache goes here, not in the user's home
mkdir -p "$HOME"
SDK=/usr/lib/google-cloud-sdk/bin
KUBECTL_VERSIONS=${KUBECTL_VERSIONS:-"kubectl $SDK/kubectl.1.27 $SDK/kubectl.1.33"}

# (set +e: under errexit the `(exit $rc)` that hands rc to cleanup would
# end the trap before cleanup runs.)
trap 'rc=$?; set +e; kill_bg; (exit $rc); cleanup' EXIT

jp() { k get "$@"; } # readability: jp cm c1 -o jsonpath=...

# Waits (bounded) until FILE contains a line matching REGEX.
wait_line() {
    local file=$1 re=$2 what=$3
    for _ in $(seq 1 100); do
        grep -Eq "$re" "$file" 2>/dev/null && return 0
        sleep 0.1
    done
    fail "$what: no line matching [$re] in $(cat "$file")"
}

minor_of() { sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p'; }

# namespaces
s_namespaces() {
    local out rv rv2 uid
    out=$(k get ns -o name)
    for ns in default kube-system kube-public kube-node-lease; do
        expect_contains "$out" "namespace/$ns" "get ns"
    done
    out=$(k get ns)
    expect_contains "$out" "STATUS" "get ns table"
    expect_contains "$out" "Active" "get ns table"
}

# create / get -o yaml
s_create() {
    local out rv rv2 uid
    out=$(k create configmap c1 --from-literal=a=b)
    expect_eq "$out" "configmap/c1 created" "create configmap"
    wait_line "$TMP/watch.out" '^ADDED +c1 ' "watch saw the create live"
    out=$(k get cm c1 -o yaml)
    expect_contains "$out" "  a: b" "get -o yaml data"
    expect_contains "$out" "kind: ConfigMap" "get -o yaml kind"
    [[ $out =~ resourceVersion:\ \"[0-9]+\" ]] || fail "no resourceVersion in $out"
    [[ $out =~ uid:\ [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12} ]] ||
        fail "no uid in $out"
    [[ $out =~ creationTimestamp:\ \"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\" ]] ||
        fail "no RFC 3339 creationTimestamp in $out"
    uid=$(jp cm c1 -o jsonpath='{.metadata.uid}')
}

# duplicate create
s_duplicate() {
    local out rv rv2 uid
    out=$(kfail create configmap c1 --from-literal=a=b)
    expect_eq "$out" 'error: failed to create configmap: configmaps "c1" already exists' \
        "duplicate create configmap"
    printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\n' >"$TMP/c1.yaml"
    out=$(kfail create -f "$TMP/c1.yaml")
    expect_eq "$out" 'Error from server (AlreadyExists): error when creating "'"$TMP/c1.yaml"'": configmaps "c1" already exists' \
        "duplicate create -f"
}

# labels and selectors
s_labels() {
    local out rv rv2 uid
    out=$(k label cm c1 x=y)
    expect_eq "$out" "configmap/c1 labeled" "label"
    wait_line "$TMP/watch.out" '^MODIFIED +c1 ' "watch saw the label live"
    out=$(k get cm -l x=y -o name)
    expect_eq "$out" "configmap/c1" "get -l x=y"
    out=$(k get cm -l x=z)
    expect_eq "$out" "No resources found in default namespace." "get -l x=z"
    out=$(k get cm -l 'x in (y,q)' -o name)
    expect_eq "$out" "configmap/c1" "get -l set-based"
    out=$(k get cm -l 'x!=y')
    expect_eq "$out" "No resources found in default namespace." "get -l x!=y"
}

# patches: strategic (default), merge, json
s_patches() {
    local out rv rv2 uid
    uid=$(jp cm c1 -o jsonpath='{.metadata.uid}')
    rv=$(jp cm c1 -o jsonpath='{.metadata.resourceVersion}')
    out=$(k patch cm c1 -p '{"data":{"a":"c"}}')
    expect_eq "$out" "configmap/c1 patched" "strategic patch"
    expect_eq "$(jp cm c1 -o jsonpath='{.data.a}')" "c" "strategic patch result"
    rv2=$(jp cm c1 -o jsonpath='{.metadata.resourceVersion}')
    [ "$rv2" -gt "$rv" ] || fail "patch did not bump resourceVersion ($rv -> $rv2)"
    out=$(k patch cm c1 -p '{"data":{"a":"c"}}')
    expect_eq "$out" "configmap/c1 patched (no change)" "no-op patch"
    expect_eq "$(jp cm c1 -o jsonpath='{.metadata.resourceVersion}')" "$rv2" \
        "no-op patch keeps resourceVersion"
    out=$(k patch cm c1 --type=merge -p '{"data":{"m":"1"},"metadata":{"labels":{"x":"y","mm":"2"}}}')
    expect_eq "$out" "configmap/c1 patched" "merge patch"
    expect_eq "$(jp cm c1 -o jsonpath='{.data.m}/{.metadata.labels.mm}')" "1/2" "merge patch result"
    out=$(k patch cm c1 --type=json -p '[{"op":"add","path":"/data/j","value":"2"},{"op":"remove","path":"/data/m"}]')
    expect_eq "$out" "configmap/c1 patched" "json patch"
    expect_eq "$(jp cm c1 -o jsonpath='{.data}')" '{"a":"c","j":"2"}' "json patch result"
    out=$(kfail patch cm c1 --type=json -p '[{"op":"test","path":"/data/a","value":"zzz"}]')
    # upstream: 422 Invalid without details, which kubectl prints this way
    expect_contains "$out" "The request is invalid: " "failed json patch test op"
    expect_eq "$(jp cm c1 -o jsonpath='{.metadata.uid}')" "$uid" "uid kept across patches"
}

# client-side apply: create, configure, unchanged
s_apply() {
    local out rv rv2 uid
    out=$(k apply -f "$MANIFESTS/cm-apply.yaml")
    expect_eq "$out" "configmap/capply created" "apply #1"
    out=$(jp cm capply -o jsonpath='{.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}')
    expect_contains "$out" '"k":"v1"' "last-applied after apply #1"
    sed 's/k: v1/k: v2/' "$MANIFESTS/cm-apply.yaml" >"$TMP/cm-apply-2.yaml"
    out=$(k apply -f "$TMP/cm-apply-2.yaml")
    expect_eq "$out" "configmap/capply configured" "apply #2"
    expect_eq "$(jp cm capply -o jsonpath='{.data.k}/{.data.keep}/{.metadata.labels.app}')" \
        "v2/yes/e2e" "apply #2 data"
    out=$(jp cm capply -o jsonpath='{.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}')
    expect_contains "$out" '"k":"v2"' "last-applied after apply #2"
    rv=$(jp cm capply -o jsonpath='{.metadata.resourceVersion}')
    out=$(k apply -f "$TMP/cm-apply-2.yaml")
    expect_eq "$out" "configmap/capply unchanged" "apply #3"
    expect_eq "$(jp cm capply -o jsonpath='{.metadata.resourceVersion}')" "$rv" \
        "apply #3 keeps resourceVersion"
    # apply removes a key that was dropped from the manifest (3-way merge)
    grep -v 'keep:' "$TMP/cm-apply-2.yaml" >"$TMP/cm-apply-3.yaml"
    out=$(k apply -f "$TMP/cm-apply-3.yaml")
    expect_eq "$out" "configmap/capply configured" "apply #4"
    expect_eq "$(jp cm capply -o jsonpath='{.data}')" '{"k":"v2"}' "apply #4 pruned key"
}

# kubectl diff (a dry-run patch): no change shows nothing and exits 0; a
# change shows just that. Its patch carries `annotations: {}` for an
# object without annotations, which the server must not keep.
s_diff() {
    local out rc
    k create configmap cdiff --from-literal=x=1 >/dev/null
    k get cm cdiff -o yaml >"$TMP/cdiff.yaml"
    rc=0
    out=$("$K" diff -f "$TMP/cdiff.yaml" 2>&1) || rc=$?
    expect_eq "$rc/$out" "0/" "diff of the live object"
    sed 's/x: "1"/x: "2"/' "$TMP/cdiff.yaml" >"$TMP/cdiff-2.yaml"
    rc=0
    out=$("$K" diff -f "$TMP/cdiff-2.yaml" 2>&1) || rc=$?
    expect_eq "$rc" 1 "diff of a change exits 1 ($out)"
    expect_eq "$(grep -E '^[-+] ' <<<"$out" | tr '\n' '|')" '-  x: "1"|+  x: "2"|' \
        "diff shows only the changed line"
    expect_eq "$(jp cm cdiff -o jsonpath='{.data.x}')" "1" "diff changed nothing"
}

# delete and NotFound
s_delete() {
    local out rv rv2 uid
    out=$(k delete cm c1)
    expect_contains "$out" 'configmap "c1" deleted' "delete"
    wait_line "$TMP/watch.out" '^DELETED +c1 ' "watch saw the delete live"
    out=$(kfail get cm c1)
    expect_eq "$out" 'Error from server (NotFound): configmaps "c1" not found' "get after delete"
    out=$(kfail delete cm c1)
    expect_eq "$out" 'Error from server (NotFound): configmaps "c1" not found' "delete twice"
}

# discovery and version
s_discovery() {
    local out rv rv2 uid
    out=$(k api-resources)
    grep -Eq '^configmaps +cm +v1 +true +ConfigMap' <<<"$out" ||
        fail "api-resources lacks configmaps/cm: $out"
    grep -Eq '^deployments +deploy +apps/v1 +true +Deployment' <<<"$out" ||
        fail "api-resources lacks deployments: $out"
    out=$(k api-versions)
    expect_contains "$out" "apps/v1" "api-versions"
    out=$("$K" version 2>&1) || fail "kubectl version: $out"
    # (kubectl <= 1.27 prints the old version.Info{...} form by default)
    [[ $out =~ Server\ Version:\ (v1\.|version\.Info\{Major:\"1\") ]] || fail "version: $out"
    local sv
    sv=$(curl -sf "$SERVER_URL/version" | minor_of)
    if [ -n "$kv" ] && [ $((kv - sv)) -le 1 ] && [ $((sv - kv)) -le 1 ]; then
        case "$out" in *WARNING*) fail "version skew warning with client 1.$kv server 1.$sv: $out" ;; esac
    else
        echo "note: client 1.$kv vs server 1.$sv is outside +/-1, kubectl's skew warning is expected"
    fi
}

# workloads and other kinds
s_workloads() {
    local out rv rv2 uid
    out=$(k get pods,svc)
    expect_eq "$out" "No resources found in default namespace." "get pods,svc"
    out=$(k create deployment d --image=nginx)
    expect_eq "$out" "deployment.apps/d created" "create deployment"
    expect_eq "$(jp deploy d -o jsonpath='{.spec.replicas}')" "1" "deployment default replicas"
    expect_eq "$(jp deploy d -o jsonpath='{.metadata.generation}')" "1" "deployment generation"
    # the pod template's defaults, as kube-apiserver shows them
    expect_eq "$(jp deploy d -o jsonpath='{.spec.template.spec}')" \
        '{"containers":[{"image":"nginx","imagePullPolicy":"Always","name":"nginx","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}' \
        "deployment pod template defaults"
    out=$(k run p --image=registry.local:5000/app:1.0 --port=8080)
    expect_eq "$out" "pod/p created" "run a pod"
    expect_eq "$(jp pod p -o jsonpath='{.spec.enableServiceLinks} {.spec.containers[0].imagePullPolicy} {.spec.containers[0].ports[0].protocol} {.spec.securityContext}')" \
        'true IfNotPresent TCP {}' "pod defaults"
    k delete pod p >/dev/null
    out=$(k scale deploy d --replicas=3)
    expect_eq "$out" "deployment.apps/d scaled" "scale"
    expect_eq "$(jp deploy d -o jsonpath='{.spec.replicas}')" "3" "replicas after scale"
    expect_eq "$(jp deploy d -o jsonpath='{.metadata.generation}')" "2" "generation after scale"
    out=$(k get deploy)
    first_line_matches "$out" '^NAME +READY +UP-TO-DATE +AVAILABLE +AGE$' ||
        fail "deploy table header: $out"
    grep -Eq '^d +0/3 ' <<<"$out" || fail "deploy table row: $out"
    out=$(k get deploy -o wide)
    first_line_matches "$out" 'CONTAINERS +IMAGES +SELECTOR' || fail "deploy -o wide: $out"
    grep -q 'nginx' <<<"$out" || fail "deploy -o wide row: $out"
    out=$(k get all)
    expect_contains "$out" "deployment.apps/d" "get all"
    out=$(k get cm -o wide)
    first_line_matches "$out" '^NAME +DATA +AGE' || fail "cm -o wide: $out"
    out=$(k create secret generic s --from-literal=k=v)
    expect_eq "$out" "secret/s created" "create secret"
    expect_eq "$(jp secret s -o jsonpath='{.data.k}')" "dg==" "secret data (base64 of v)"
    expect_eq "$(jp secret s -o jsonpath='{.type}')" "Opaque" "secret type"
    out=$(k get secret s)
    grep -Eq '^s +Opaque +1 ' <<<"$out" || fail "secret table: $out"
}

# create / delete -f
s_createdelete_f() {
    local out rv rv2 uid
    out=$(k create -f "$MANIFESTS/cm-delete.yaml")
    expect_contains "$out" "configmap/cdelf1 created" "create -f"
    expect_contains "$out" "configmap/cdelf2 created" "create -f"
    out=$(k delete -f "$MANIFESTS/cm-delete.yaml")
    expect_contains "$out" 'configmap "cdelf1" deleted' "delete -f"
    expect_contains "$out" 'configmap "cdelf2" deleted' "delete -f"
    out=$(kfail get cm cdelf1 cdelf2)
    expect_contains "$out" 'configmaps "cdelf2" not found' "get after delete -f"
}

# wait --for=delete while another client deletes
s_wait() {
    local out rv rv2 uid
    k create configmap cw >/dev/null
    timeout 30 "$K" wait --for=delete cm/cw --timeout=20s >"$TMP/wait.out" 2>&1 &
    local wpid=$!
    BG_PIDS+=($wpid)
    sleep 1
    k delete cm cw >/dev/null
    local wrc=0
    wait "$wpid" || wrc=$?
    expect_eq "$wrc" "0" "kubectl wait --for=delete exit ($(cat "$TMP/wait.out"))"
    expect_contains "$(cat "$TMP/wait.out")" "configmap/cw condition met" "wait output"
}

# paging, -A, field selectors
s_paging() {
    local out rv rv2 uid
    k create namespace paging >/dev/null
    for i in 1 2 3 4 5; do k create configmap "p$i" -n paging --from-literal=i=$i >/dev/null; done
    out=$("$K" get cm -n paging --chunk-size=2 -o name -v=6 2>"$TMP/paging.log") ||
        fail "get --chunk-size: $(cat "$TMP/paging.log")"
    expect_eq "$(echo "$out" | tr '\n' ' ')" \
        "configmap/p1 configmap/p2 configmap/p3 configmap/p4 configmap/p5 " "paged list"
    local pages
    pages=$(grep -c 'namespaces/paging/configmaps?.*limit=2' "$TMP/paging.log" || true)
    [ "$pages" -ge 3 ] || fail "expected >= 3 page requests, got $pages: $(cat "$TMP/paging.log")"
    grep -q 'continue=' "$TMP/paging.log" || fail "no continue token used: $(cat "$TMP/paging.log")"
    out=$(k get cm -n paging --chunk-size=2)
    expect_eq "$(echo "$out" | grep -c '^p[1-5] ')" "5" "paged table list"
    out=$(k get cm -A)
    first_line_matches "$out" '^NAMESPACE +NAME +DATA +AGE' || fail "get -A header: $out"
    grep -Eq '^paging +p3 +1 ' <<<"$out" || fail "get -A row: $out"
    grep -Eq '^default +capply +1 ' <<<"$out" || fail "get -A row: $out"
    out=$(k get cm -A -o name --field-selector metadata.name=p2)
    expect_eq "$out" "configmap/p2" "field selector"
    out=$(k get cm -n paging -o name --field-selector 'metadata.name!=p2')
    expect_eq "$(echo "$out" | tr '\n' ' ')" \
        "configmap/p1 configmap/p3 configmap/p4 configmap/p5 " "field selector !="
    out=$(k get cm -A -o name --field-selector metadata.namespace=paging,metadata.name=p4)
    expect_eq "$out" "configmap/p4" "field selector on namespace and name"
    out=$(kfail get cm --field-selector data.i=1)
    expect_contains "$out" 'field label not supported: data.i' "unknown field selector"
    out=$(k delete cm -n paging -l '!nope')
    expect_contains "$out" 'configmap "p1" deleted' "delete -l !key"
    expect_contains "$out" 'configmap "p5" deleted' "delete -l !key"
    out=$(k get cm -n paging)
    expect_eq "$out" "No resources found in paging namespace." "all deleted by selector"
}

# the watchers saw every change, in order, live
s_watch_results() {
    local out rv rv2 uid
    local w
    w=$(grep -E ' c1 ' "$TMP/watch.out" | awk '{print $1}' | tr '\n' ' ')
    [[ $w =~ ^ADDED\ (MODIFIED\ )+DELETED\ $ ]] || fail "watch events for c1: [$w] in $(cat "$TMP/watch.out")"
    grep -Eq '^ADDED +capply ' "$TMP/watch.out" || fail "watch missed capply: $(cat "$TMP/watch.out")"
    grep -q 'configmap/c1' "$TMP/watch-plain.out" || fail "plain -w: $(cat "$TMP/watch-plain.out")"
    grep -q 'configmap/cw' "$TMP/watch-plain.out" || fail "plain -w: $(cat "$TMP/watch-plain.out")"
    if grep -Ei 'error|unable' "$TMP/watch.out" "$TMP/watch-plain.out"; then
        fail "watch printed errors"
    fi
}

flow() {
    K=$1
    local kv
    kv=$("$K" version --client -o json 2>/dev/null | minor_of)
    echo "=== $(basename "$K") (client minor $kv)"
    # API behaviour only: no controllers (kube-root-ca.crt in every
    # namespace would show in the ConfigMap lists and watches below)
    start_server --controller-manager=false

    # watch everything in default from the start (checked live, and at the end)
    timeout 50 "$K" get cm -w --output-watch-events >"$TMP/watch.out" 2>&1 &
    BG_PIDS+=($!)
    timeout 50 "$K" get cm -w -o name >"$TMP/watch-plain.out" 2>&1 &
    BG_PIDS+=($!)
    sleep 1

    section namespaces s_namespaces
    section create s_create
    section duplicate s_duplicate
    section labels s_labels
    section patches s_patches
    section apply s_apply
    section diff s_diff
    section delete s_delete
    section discovery s_discovery
    section workloads s_workloads
    section createdelete_f s_createdelete_f
    section wait s_wait
    section paging s_paging
    section watch_results s_watch_results
    kill_bg
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
echo "test_kubectl_basic: all flows passed"
