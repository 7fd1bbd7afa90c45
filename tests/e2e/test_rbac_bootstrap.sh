#!/usr/bin/env bash
# test_rbac_bootstrap.sh - kube-apiserver's RBAC bootstrap policy as
# `ckube server` keeps it (registry/rbac/bootstrap_policy.yaml, reconciled
# by server/bootstrap.c on every start): a fresh server has the default
# ClusterRoles, ClusterRoleBindings, Roles and RoleBindings with their
# label and annotation; after a restart on the same data dir a removed
# rule, subject or object is back, a role annotated autoupdate=false
# keeps its edit, what a user added stays, and a binding whose roleRef
# was changed (delete and create: a roleRef is immutable) is made again.
source "$(dirname "$0")/lib.sh"
export HOME=$TMP/home
mkdir -p "$HOME"

LABEL=kubernetes.io/bootstrapping
ANNOTATION=rbac.authorization.kubernetes.io/autoupdate
G=rbac.authorization.k8s.io

# -v=2: the per-object lines, which upstream logs at that level too.
start_server -v=2

# ---- a fresh server -----------------------------------------------------
roles=$(k get clusterroles -o name)
for r in cluster-admin admin edit view system:basic-user system:discovery \
    system:public-info-viewer system:monitoring system:service-account-issuer-discovery \
    system:auth-delegator system:node system:node-proxier system:kube-controller-manager \
    system:kube-scheduler system:aggregate-to-admin system:aggregate-to-edit \
    system:aggregate-to-view system:controller:namespace-controller \
    system:controller:clusterrole-aggregation-controller system:controller:pod-counter; do
    expect_contains "$roles"$'\n' "clusterrole.$G/$r"$'\n' "kubectl get clusterroles"
done
# upstream's 64 and 45, and ckube's own (ckube_policy.yaml: the pod
# counter's role and binding)
expect_eq "$(k get clusterroles -l $LABEL=rbac-defaults -o name | wc -l)" 65 \
    "ClusterRoles labelled rbac-defaults"
expect_eq "$(k get clusterrolebindings -l $LABEL=rbac-defaults -o name | wc -l)" 46 \
    "ClusterRoleBindings labelled rbac-defaults"
expect_eq "$(k get roles -A -l $LABEL=rbac-defaults -o name | wc -l)" 7 "Roles"
expect_eq "$(k get rolebindings -A -l $LABEL=rbac-defaults -o name | wc -l)" 7 "RoleBindings"
# kubectl's table of bindings shows the roles and subjects
table=$(k get clusterrolebindings -o wide)
line() { printf '%s\n' "$table" | grep "^$1 "; }
expect_contains "$(line cluster-admin)" "ClusterRole/cluster-admin" "cluster-admin's role"
expect_contains "$(line cluster-admin)" "system:masters" "cluster-admin's group"
expect_contains "$(line system:basic-user)" "system:authenticated" "system:basic-user's group"
expect_contains "$(line system:discovery)" "system:authenticated" "system:discovery's group"
expect_contains "$(line system:public-info-viewer)" "system:authenticated, system:unauthenticated" \
    "system:public-info-viewer's groups"
expect_contains "$(line system:kube-controller-manager)" "system:kube-controller-manager" \
    "system:kube-controller-manager's user"
expect_contains "$(line system:controller:job-controller)" "kube-system/job-controller" \
    "a controller's ServiceAccount"
expect_eq "$(k get clusterrolebinding system:service-account-issuer-discovery \
    -o jsonpath='{.subjects[*].kind}/{.subjects[*].name}')" "Group/system:serviceaccounts" \
    "system:service-account-issuer-discovery's subjects"
expect_contains "$(k get rolebindings -n kube-system -o name)" \
    "rolebinding.$G/system::leader-locking-kube-controller-manager" "kube-system's bindings"
expect_contains "$(k get roles -n kube-public -o name)" "role.$G/system:controller:bootstrap-signer" \
    "kube-public's role"

# the label and the annotation, as upstream writes them
ca=$(k get clusterrole cluster-admin -o yaml)
expect_contains "$ca" "    $LABEL: rbac-defaults" "cluster-admin's label"
expect_contains "$ca" "    $ANNOTATION: \"true\"" "cluster-admin's annotation"
expect_eq "$(k get clusterrole cluster-admin -o jsonpath='{.rules[0].verbs}{.rules[1].nonResourceURLs}')" \
    '["*"]["*"]' "cluster-admin's rules"
expect_eq "$(k get clusterrole admin -o jsonpath='{.aggregationRule.clusterRoleSelectors[0].matchLabels}')" \
    '{"rbac.authorization.k8s.io/aggregate-to-admin":"true"}' "admin's aggregation rule"
grep -q "bootstrap.c:[0-9]*\] created clusterrole.$G/cluster-admin$" "$TMP/server.log" ||
    fail "no 'created clusterrole.$G/cluster-admin' line"
grep -q "RBAC bootstrap policy: 125 objects, 125 created" "$TMP/server.log" ||
    fail "no summary line"

# ---- changes a restart must repair, or keep -----------------------------
# a rule of system:discovery narrowed: /version and /version/ removed
k patch clusterrole system:discovery --type json -p '[{"op":"replace","path":"/rules/0/nonResourceURLs","value":["/api","/api/*","/apis","/apis/*","/healthz","/livez","/openapi","/openapi/*","/readyz"]}]' >/dev/null
# system:public-info-viewer protected, then narrowed
k annotate clusterrole system:public-info-viewer $ANNOTATION=false --overwrite >/dev/null
k patch clusterrole system:public-info-viewer --type json -p '[{"op":"replace","path":"/rules","value":[{"nonResourceURLs":["/healthz"],"verbs":["get"]}]}]' >/dev/null
# a user's rule and label on system:basic-user
k patch clusterrole system:basic-user --type json -p '[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["configmaps"],"verbs":["get"]}},{"op":"add","path":"/metadata/labels/team","value":"a"}]' >/dev/null
# a bootstrap role deleted, and the label of another removed
k delete clusterrole system:heapster >/dev/null
k label clusterrole system:kube-dns $LABEL- >/dev/null
# a subject of a binding replaced by the user's own
k patch clusterrolebinding system:basic-user --type json -p '[{"op":"replace","path":"/subjects","value":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"bob"}]}]' >/dev/null
# a binding made again by a user with another roleRef
k delete clusterrolebinding system:kube-dns >/dev/null
k create clusterrolebinding system:kube-dns --clusterrole=view --user=carol >/dev/null
OLD_UID=$(k get clusterrolebinding system:kube-dns -o jsonpath='{.metadata.uid}')
# a namespaced role deleted
k delete role -n kube-system system:controller:token-cleaner >/dev/null

stop_server
start_server -v=2

# ---- after the restart ------------------------------------------------------
expect_eq "$(k get clusterrole system:discovery -o jsonpath='{.rules[*].nonResourceURLs}')" \
    '["/api","/api/*","/apis","/apis/*","/healthz","/livez","/openapi","/openapi/*","/readyz"] ["/version"] ["/version/"]' \
    "system:discovery's removed URLs added back"
grep -q "updated clusterrole.$G/system:discovery with additional permissions: \[{\[get\] \[\] \[\] \[\] \[/version\]} {\[get\] \[\] \[\] \[\] \[/version/\]}\]" \
    "$TMP/server.log" || fail "no 'updated clusterrole.$G/system:discovery' line"
expect_eq "$(k get clusterrole system:public-info-viewer -o jsonpath='{.rules}')" \
    '[{"nonResourceURLs":["/healthz"],"verbs":["get"]}]' "autoupdate=false role kept as edited"
expect_eq "$(k get clusterrole system:public-info-viewer -o jsonpath="{.metadata.annotations.rbac\.authorization\.kubernetes\.io/autoupdate}")" \
    false "its annotation"
grep -q "skipped reconcile-protected clusterrole.$G/system:public-info-viewer with missing permissions" \
    "$TMP/server.log" || fail "no 'skipped reconcile-protected' warning"
expect_eq "$(k get clusterrole system:basic-user -o jsonpath='{.rules[2].resources}{.metadata.labels.team}')" \
    '["configmaps"]a' "the user's rule and label kept"
expect_eq "$(k get clusterrole system:basic-user -o jsonpath='{.rules}' | grep -o apiGroups | wc -l)" 3 \
    "nothing added to system:basic-user"
expect_eq "$(k get clusterrole system:heapster -o jsonpath='{.metadata.labels.kubernetes\.io/bootstrapping}')" \
    rbac-defaults "the deleted role is back"
expect_eq "$(k get clusterrole system:kube-dns -o jsonpath='{.metadata.labels.kubernetes\.io/bootstrapping}')" \
    rbac-defaults "the removed label is back"
expect_eq "$(k get clusterrolebinding system:basic-user -o jsonpath='{.subjects[*].name}')" \
    "bob system:authenticated" "the user's subject kept, the removed one back"
expect_eq "$(k get clusterrolebinding system:kube-dns -o jsonpath='{.roleRef.name} {.subjects[*].name}')" \
    "system:kube-dns kube-dns" "the binding with another roleRef made again"
[ "$(k get clusterrolebinding system:kube-dns -o jsonpath='{.metadata.uid}')" != "$OLD_UID" ] ||
    fail "system:kube-dns's binding was not made again"
grep -q "recreated clusterrolebinding.$G/system:kube-dns$" "$TMP/server.log" ||
    fail "no 'recreated clusterrolebinding' line"
k get role -n kube-system system:controller:token-cleaner >/dev/null
grep -q "created role.$G/system:controller:token-cleaner in kube-system$" "$TMP/server.log" ||
    fail "no 'created role ... in kube-system' line"

# a third start with nothing to repair writes nothing (admin, edit and
# view aside: the ClusterRole aggregation controller writes their rules)
rvs() {
    k get clusterroles,clusterrolebindings,roles,rolebindings -A -l $LABEL=rbac-defaults \
        -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}={.metadata.resourceVersion}{"\n"}{end}' |
        grep -Ev '^ClusterRole/(admin|edit|view)='
}
BEFORE=$(rvs)
stop_server
: >"$TMP/server.log"
start_server
expect_eq "$(rvs)" "$BEFORE" "a start with nothing to do writes nothing"
grep -q "RBAC bootstrap policy" "$TMP/server.log" && fail "a summary with nothing done"
stop_server
echo "PASS"
