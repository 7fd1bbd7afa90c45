#!/usr/bin/env bash
# test_clusterrole_aggregation.sh - kube-controller-manager's ClusterRole
# aggregation as `ckube server` runs it (its controller-manager child),
# driven with kubectl:
#  - a ClusterRole "monitoring" whose aggregationRule selects
#    rbac.example.com/aggregate-to-monitoring=true gets, within seconds,
#    the rules of the two ClusterRoles carrying that label (in order of
#    their names), written by a server-side apply of the field manager
#    clusterrole-aggregation-controller, and is not written again while
#    nothing changes;
#  - relabelling one takes its rules away, deleting the other too;
#  - a chain shaped like upstream's admin/edit/view (view's rules are in
#    edit, edit's in admin, each gathered by its own label) passes a rule
#    added at the bottom up to the top. The test makes its own roles: it
#    does not depend on the server's bootstrap policy.
source "$(dirname "$0")/lib.sh"
export HOME=$TMP/home
mkdir -p "$HOME"

start_server

# rules_of NAME: the role's rules as compact JSON, [] when it has none.
rules_of() {
    kubectl get clusterrole "$1" -o json 2>/dev/null |
        python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin).get("rules") or [], sort_keys=True, separators=(",",":")))'
}
# wait_rules NAME JSON MESSAGE: up to 20 s for exactly those rules.
wait_rules() {
    local want
    want=$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1]), sort_keys=True, separators=(",",":")))' "$2")
    for _ in $(seq 1 200); do
        [ "$(rules_of "$1")" = "$want" ] && return 0
        sleep 0.1
    done
    fail "$3: clusterrole $1 has rules $(rules_of "$1"), expected $want"
}

kubectl apply -f - >/dev/null <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      rbac.example.com/aggregate-to-monitoring: "true"
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring-metrics
  labels:
    rbac.example.com/aggregate-to-monitoring: "true"
rules:
- nonResourceURLs: ["/metrics"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring-endpoints
  labels:
    rbac.example.com/aggregate-to-monitoring: "true"
rules:
- apiGroups: [""]
  resources: ["services", "endpoints", "pods"]
  verbs: ["get", "list", "watch"]
EOF

ENDPOINTS='{"apiGroups":[""],"resources":["services","endpoints","pods"],"verbs":["get","list","watch"]}'
METRICS='{"nonResourceURLs":["/metrics"],"verbs":["get"]}'
wait_rules monitoring "[$ENDPOINTS,$METRICS]" "both sources aggregated"
YAML=$(kubectl get clusterrole monitoring -o yaml)
expect_contains "$YAML" "- /metrics" "kubectl get -o yaml"
expect_contains "$YAML" "- endpoints" "kubectl get -o yaml"

# upstream's field manager, by a forced apply that owns the rules
MF=$(kubectl get clusterrole monitoring -o json --show-managed-fields |
    python3 -c 'import json,sys
for e in json.load(sys.stdin)["metadata"].get("managedFields", []):
    print(e["manager"], e["operation"], json.dumps(e.get("fieldsV1"), sort_keys=True))')
expect_contains "$MF" 'clusterrole-aggregation-controller Apply {"f:rules": {}}' "managedFields"

# nothing changes: nothing is written
RV=$(kubectl get clusterrole monitoring -o jsonpath='{.metadata.resourceVersion}')
kubectl create clusterrole unrelated --verb=get --resource=configmaps >/dev/null
kubectl label clusterrole unrelated team=a >/dev/null
sleep 2
expect_eq "$(kubectl get clusterrole monitoring -o jsonpath='{.metadata.resourceVersion}')" "$RV" \
    "monitoring not written while its rules are right"

# relabelled: its rules go
kubectl label clusterrole monitoring-endpoints rbac.example.com/aggregate-to-monitoring=false \
    --overwrite >/dev/null
wait_rules monitoring "[$METRICS]" "after relabelling monitoring-endpoints"
# deleted: its rules go as well
kubectl delete clusterrole monitoring-metrics >/dev/null
wait_rules monitoring "[]" "after deleting monitoring-metrics"
# and a label put back brings them back
kubectl label clusterrole monitoring-endpoints rbac.example.com/aggregate-to-monitoring=true \
    --overwrite >/dev/null
wait_rules monitoring "[$ENDPOINTS]" "after labelling monitoring-endpoints again"

# admin/edit/view's shape: e2e-view's rules are e2e-edit's, which are
# e2e-admin's; a CRD's role labelled for view reaches all three
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: e2e-admin
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      rbac.example.com/aggregate-to-e2e-admin: "true"
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: e2e-edit
  labels:
    rbac.example.com/aggregate-to-e2e-admin: "true"
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      rbac.example.com/aggregate-to-e2e-edit: "true"
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: e2e-view
  labels:
    rbac.example.com/aggregate-to-e2e-edit: "true"
aggregationRule:
  clusterRoleSelectors:
  - matchExpressions:
    - key: rbac.example.com/aggregate-to-e2e-view
      operator: In
      values: ["true"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widgets-view
  labels:
    rbac.example.com/aggregate-to-e2e-view: "true"
rules:
- apiGroups: ["example.com"]
  resources: ["widgets"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widgets-edit
  labels:
    rbac.example.com/aggregate-to-e2e-edit: "true"
rules:
- apiGroups: ["example.com"]
  resources: ["widgets"]
  verbs: ["create", "delete", "patch", "update"]
EOF
VIEW='{"apiGroups":["example.com"],"resources":["widgets"],"verbs":["get","list","watch"]}'
EDIT='{"apiGroups":["example.com"],"resources":["widgets"],"verbs":["create","delete","patch","update"]}'
wait_rules e2e-view "[$VIEW]" "view"
# e2e-edit: its selector's roles by name: e2e-view, widgets-edit
wait_rules e2e-edit "[$VIEW,$EDIT]" "edit"
wait_rules e2e-admin "[$VIEW,$EDIT]" "admin"
kubectl delete clusterrole widgets-view >/dev/null
wait_rules e2e-admin "[$EDIT]" "admin after the view role went"
wait_rules e2e-view "[]" "view after its only source went"

stop_server
echo PASS
