"""End-to-end tests of rbac.authorization.k8s.io/v1 served as a built-in
group (Role, ClusterRole, RoleBinding, ClusterRoleBinding) against a real
`ckube server`: a realistic bundle's RBAC applied with kubectl (client-side
and --server-side; the current kubectl, 1.27 sending JSON and 1.33 sending
protobuf), kubectl get (also -o wide), describe, explain and the
`kubectl create role|clusterrole|rolebinding|clusterrolebinding`
commands, `kubectl auth reconcile`, invalid objects answered 422 with upstream's messages, and the
official Python client's RbacAuthorizationV1Api. Nothing here authorizes:
the objects are stored and served."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

from kubernetes import client  # noqa: E402

SERVER = Server("--controller-manager=false")
setUpModule, tearDownModule = SERVER.start, SERVER.stop
SDK = "/usr/lib/google-cloud-sdk/bin"
KUBECTLS = {"current": "kubectl", "1.27": os.path.join(SDK, "kubectl.1.27"),
            "1.33": os.path.join(SDK, "kubectl.1.33")}
GV = "/apis/rbac.authorization.k8s.io/v1"
RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"

# What a monitoring stack ships: its namespace and ServiceAccount, a
# ClusterRole with resource and non-resource rules bound cluster-wide to
# the ServiceAccount, a Role and a RoleBinding in its namespace, and an
# aggregated ClusterRole. {v} keeps each kubectl's copy apart.
BUNDLE = """\
apiVersion: v1
kind: Namespace
metadata:
  name: mon-{v}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: prometheus
  namespace: mon-{v}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: prometheus-{v}
  labels:
    app.kubernetes.io/name: prometheus
    rbac.example.com/aggregate-to-monitoring-{v}: "true"
rules:
- apiGroups: [""]
  resources: ["nodes", "nodes/metrics", "services", "endpoints", "pods"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "list", "watch"]
- nonResourceURLs: ["/metrics", "/metrics/cadvisor"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: prometheus-{v}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: prometheus-{v}
subjects:
- kind: ServiceAccount
  name: prometheus
  namespace: mon-{v}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: prometheus-config
  namespace: mon-{v}
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  resourceNames: ["prometheus-config"]
  verbs: ["get", "update", "patch"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: prometheus-config
  namespace: mon-{v}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: prometheus-config
subjects:
- kind: ServiceAccount
  name: prometheus
  namespace: mon-{v}
- kind: User
  name: jane
  apiGroup: rbac.authorization.k8s.io
- kind: Group
  name: sre
  apiGroup: rbac.authorization.k8s.io
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring-{v}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      rbac.example.com/aggregate-to-monitoring-{v}: "true"
  - matchExpressions:
    - key: app.kubernetes.io/component
      operator: In
      values: ["exporter"]
rules: []
"""


def call(method, path, body=None, ctype="application/json"):
    conn = SERVER.connection(timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": ctype})
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        conn.close()


def kubectl(version, *args, stdin=None):
    return SERVER.kubectl(*args, stdin=stdin, binary=KUBECTLS[version])


def name_of(v):
    return v.replace(".", "")


class KubectlTest(unittest.TestCase):
    def k(self, v, *args, stdin=None):
        rc, out, err = kubectl(v, *args, stdin=stdin)
        self.assertEqual(rc, 0, "kubectl %s %s: %s%s" % (v, " ".join(args), out, err))
        return out

    def kfail(self, v, *args, stdin=None):
        rc, out, err = kubectl(v, *args, stdin=stdin)
        self.assertNotEqual(rc, 0, "kubectl %s %s succeeded: %s" % (v, " ".join(args), out))
        return (out + err).strip()

    def test_bundle(self):
        for v in KUBECTLS:
            with self.subTest(kubectl=v):
                self.bundle_flow(v)

    def bundle_flow(self, v):
        n = name_of(v)
        ns = "mon-" + n
        bundle = BUNDLE.format(v=n)
        kinds = ["namespace/" + ns, "serviceaccount/prometheus",
                 "clusterrole.rbac.authorization.k8s.io/prometheus-" + n,
                 "clusterrolebinding.rbac.authorization.k8s.io/prometheus-" + n,
                 "role.rbac.authorization.k8s.io/prometheus-config",
                 "rolebinding.rbac.authorization.k8s.io/prometheus-config",
                 "clusterrole.rbac.authorization.k8s.io/monitoring-" + n]
        out = self.k(v, "apply", "-f", "-", stdin=bundle)
        self.assertEqual(out.splitlines(), [k + " created" for k in kinds])
        # again: nothing changes. (kubectl still patches, and says
        # "configured", where a manifest differs from the live object in
        # what the server fills in: the aggregated role's `rules: []` is
        # stored as no rules, as upstream stores null; a subject without
        # its apiGroup, defaulted, would do the same to a binding.)
        out = self.k(v, "apply", "-f", "-", stdin=bundle).splitlines()
        self.assertEqual(out[:6], [k + " unchanged" for k in kinds[:6]])
        out = self.k(v, "apply", "--server-side", "-f", "-", stdin=bundle)
        self.assertEqual(out.splitlines(), [k + " serverside-applied" for k in kinds])

        # the objects as stored: defaults filled in
        rb = json.loads(self.k(v, "get", "rolebinding", "prometheus-config", "-n", ns, "-o",
                               "json"))
        self.assertEqual(rb["roleRef"], {"apiGroup": "rbac.authorization.k8s.io",
                                         "kind": "Role", "name": "prometheus-config"})
        self.assertEqual(rb["subjects"], [
            {"kind": "ServiceAccount", "name": "prometheus", "namespace": ns},
            {"kind": "User", "name": "jane", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "Group", "name": "sre", "apiGroup": "rbac.authorization.k8s.io"}])
        cr = json.loads(self.k(v, "get", "clusterrole", "prometheus-" + n, "-o", "json"))
        self.assertEqual(len(cr["rules"]), 4)
        self.assertEqual(cr["rules"][3], {"nonResourceURLs": ["/metrics", "/metrics/cadvisor"],
                                          "verbs": ["get"]})
        agg = json.loads(self.k(v, "get", "clusterrole", "monitoring-" + n, "-o", "json"))
        self.assertEqual(agg["aggregationRule"]["clusterRoleSelectors"][1]["matchExpressions"],
                         [{"key": "app.kubernetes.io/component", "operator": "In",
                           "values": ["exporter"]}])

        # a changed rule list replaces the old one (lists are atomic), both ways
        changed = bundle.replace('verbs: ["get", "update", "patch"]', 'verbs: ["get", "watch"]')
        out = self.k(v, "apply", "-f", "-", stdin=changed)
        self.assertIn("role.rbac.authorization.k8s.io/prometheus-config configured", out)
        rules = json.loads(self.k(v, "get", "role", "prometheus-config", "-n", ns, "-o",
                                  "jsonpath={.rules}"))
        self.assertEqual(rules[0]["verbs"], ["get", "watch"])
        self.assertEqual(len(rules), 2)
        changed = changed.replace('verbs: ["get", "watch"]', 'verbs: ["list"]')
        self.k(v, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=changed)
        rules = json.loads(self.k(v, "get", "role", "prometheus-config", "-n", ns, "-o",
                                  "jsonpath={.rules}"))
        self.assertEqual(rules[0]["verbs"], ["list"])

        # kubectl get: upstream's columns
        out = self.k(v, "get", "roles", "-n", ns).splitlines()
        self.assertRegex(out[0], r"^NAME +CREATED AT$")
        self.assertRegex(out[1], r"^prometheus-config +%s$" % RFC3339)
        out = self.k(v, "get", "clusterrole", "prometheus-" + n, "monitoring-" + n).splitlines()
        self.assertRegex(out[0], r"^NAME +CREATED AT$")
        self.assertEqual(len(out), 3)
        out = self.k(v, "get", "rolebindings", "-n", ns).splitlines()
        self.assertRegex(out[0], r"^NAME +ROLE +AGE$")
        self.assertRegex(out[1], r"^prometheus-config +Role/prometheus-config +\d+s$")
        out = self.k(v, "get", "rolebindings", "-n", ns, "-o", "wide").splitlines()
        self.assertRegex(out[0], r"^NAME +ROLE +AGE +USERS +GROUPS +SERVICEACCOUNTS$")
        self.assertRegex(out[1], r"^prometheus-config +Role/prometheus-config +\d+s +jane +sre +"
                         r"%s/prometheus$" % ns)
        out = self.k(v, "get", "clusterrolebinding", "prometheus-" + n, "-o", "wide").splitlines()
        self.assertRegex(out[0], r"^NAME +ROLE +AGE +USERS +GROUPS +SERVICEACCOUNTS$")
        self.assertRegex(out[1], r"^prometheus-%s +ClusterRole/prometheus-%s +\d+s +%s/prometheus$"
                         % (n, n, ns))
        out = self.k(v, "get", "rolebinding,role", "-n", ns, "-o", "name").split()
        self.assertEqual(out, ["rolebinding.rbac.authorization.k8s.io/prometheus-config",
                               "role.rbac.authorization.k8s.io/prometheus-config"])

        # kubectl describe
        out = self.k(v, "describe", "role", "prometheus-config", "-n", ns)
        self.assertIn("PolicyRule:", out)
        self.assertRegex(out, r"Resources +Non-Resource URLs +Resource Names +Verbs")
        self.assertRegex(out, r"configmaps +\[\] +\[prometheus-config\] +\[list\]")
        self.assertRegex(out, r"leases\.coordination\.k8s\.io +\[\] +\[\] +\[get create update\]")
        out = self.k(v, "describe", "clusterrole", "prometheus-" + n)
        self.assertRegex(out, r"\n +\[/metrics\] +\[\] +\[get\]")
        self.assertRegex(out, r"endpointslices\.discovery\.k8s\.io +\[\] +\[\] +"
                         r"\[get list watch\]")
        out = self.k(v, "describe", "rolebinding", "prometheus-config", "-n", ns)
        self.assertRegex(out, r"Role:\n +Kind: +Role\n +Name: +prometheus-config")
        self.assertRegex(out, r"ServiceAccount +prometheus +%s" % ns)
        self.assertRegex(out, r"User +jane")

        # invalid objects: upstream's 422 messages as kubectl prints them
        bad_role = ("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n"
                    "  name: bad\n  namespace: %s\nrules:\n- nonResourceURLs: [\"/healthz\"]\n"
                    "  verbs: [\"get\"]\n- apiGroups: [\"\"]\n  resources: [\"pods\"]\n" % ns)
        out = self.kfail(v, "apply", "-f", "-", stdin=bad_role)
        # (kubectl lists several causes one a line)
        self.assertIn('The Role "bad" is invalid: \n* rules[0].nonResourceURLs: Invalid value: '
                      '[]string{"/healthz"}: namespaced rules cannot apply to non-resource URLs\n'
                      '* rules[1].verbs: Required value: verbs must contain at least one value',
                      out)
        out = self.kfail(v, "apply", "--server-side", "-f", "-", stdin=bad_role)
        self.assertIn('rules[1].verbs: Required value: verbs must contain at least one value',
                      out)
        bad_crb = ("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
                   "metadata:\n  name: bad-%s\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n"
                   "  kind: Role\n  name: prometheus-config\nsubjects:\n"
                   "- kind: ServiceAccount\n  name: prometheus\n" % n)
        out = self.kfail(v, "create", "-f", "-", stdin=bad_crb)
        self.assertIn('The ClusterRoleBinding "bad-%s" is invalid: \n* roleRef.kind: '
                      'Unsupported value: "Role": supported values: "ClusterRole"\n'
                      '* subjects[0].namespace: Required value' % n, out)
        moved = changed.replace("  kind: Role\n  name: prometheus-config",
                                "  kind: ClusterRole\n  name: view")
        out = self.kfail(v, "apply", "-f", "-", stdin=moved)
        self.assertIn('The RoleBinding "prometheus-config" is invalid: roleRef: Invalid value: '
                      'rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", '
                      'Name:"view"}: cannot change roleRef', out)

        # kubectl create role|clusterrole|rolebinding|clusterrolebinding
        out = self.k(v, "create", "role", "pod-reader", "-n", ns, "--verb=get,list,watch",
                     "--resource=pods,deployments.apps", "--resource-name=web")
        self.assertEqual(out.strip(), "role.rbac.authorization.k8s.io/pod-reader created")
        role = json.loads(self.k(v, "get", "role", "pod-reader", "-n", ns, "-o", "json"))
        self.assertEqual(role["rules"], [
            {"apiGroups": [""], "resources": ["pods"], "resourceNames": ["web"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"],
             "verbs": ["get", "list", "watch"]}])
        out = self.k(v, "create", "clusterrole", "logs-" + n, "--verb=get",
                     "--non-resource-url=/logs,/logs/*")
        self.assertEqual(out.strip(), "clusterrole.rbac.authorization.k8s.io/logs-%s created" % n)
        self.assertEqual(json.loads(self.k(v, "get", "clusterrole", "logs-" + n, "-o",
                                           "jsonpath={.rules}")),
                         [{"nonResourceURLs": ["/logs", "/logs/*"], "verbs": ["get"]}])
        out = self.k(v, "create", "clusterrole", "agg-" + n,
                     "--aggregation-rule=rbac.example.com/aggregate-to-agg=true")
        self.assertEqual(out.strip(), "clusterrole.rbac.authorization.k8s.io/agg-%s created" % n)
        self.assertEqual(json.loads(self.k(v, "get", "clusterrole", "agg-" + n, "-o",
                                           "jsonpath={.aggregationRule}")),
                         {"clusterRoleSelectors": [
                             {"matchLabels": {"rbac.example.com/aggregate-to-agg": "true"}}]})
        out = self.k(v, "create", "rolebinding", "readers", "-n", ns, "--role=pod-reader",
                     "--user=alice", "--group=devs", "--serviceaccount=%s:prometheus" % ns)
        self.assertEqual(out.strip(), "rolebinding.rbac.authorization.k8s.io/readers created")
        out = self.k(v, "get", "rolebinding", "readers", "-n", ns, "-o", "wide").splitlines()
        self.assertRegex(out[1], r"^readers +Role/pod-reader +\d+s +alice +devs +%s/prometheus$"
                         % ns)
        out = self.k(v, "create", "clusterrolebinding", "logs-" + n, "--clusterrole=logs-" + n,
                     "--group=system:authenticated")
        self.assertEqual(out.strip(),
                         "clusterrolebinding.rbac.authorization.k8s.io/logs-%s created" % n)
        crb = json.loads(self.k(v, "get", "clusterrolebinding", "logs-" + n, "-o", "json"))
        self.assertEqual(crb["subjects"], [{"kind": "Group", "name": "system:authenticated",
                                            "apiGroup": "rbac.authorization.k8s.io"}])
        out = self.kfail(v, "create", "clusterrolebinding", "logs-" + n,
                         "--clusterrole=logs-" + n)
        self.assertIn('clusterrolebindings.rbac.authorization.k8s.io "logs-%s" already exists'
                      % n, out)
        # kubectl edit-style patch of the subjects is fine; of roleRef not
        self.k(v, "patch", "rolebinding", "readers", "-n", ns, "--type=json",
               "-p", '[{"op":"remove","path":"/subjects/1"}]')
        out = self.kfail(v, "patch", "rolebinding", "readers", "-n", ns, "-p",
                         '{"roleRef":{"name":"other"}}')
        self.assertIn("cannot change roleRef", out)

        # kubectl auth reconcile: reads, compares and keeps them as they are
        out = self.k(v, "auth", "reconcile", "-f", "-", stdin=bundle)
        self.assertIn("clusterrole.rbac.authorization.k8s.io/prometheus-%s reconciled" % n, out)
        self.assertIn("rolebinding.rbac.authorization.k8s.io/prometheus-config reconciled", out)
        cr2 = json.loads(self.k(v, "get", "clusterrole", "prometheus-" + n, "-o", "json"))
        self.assertEqual(cr2["rules"], cr["rules"])

        # delete -f: everything goes (the namespace waits for a namespace
        # controller, which this server runs without: no waiting)
        out = self.k(v, "delete", "--wait=false", "-f", "-", stdin=bundle)
        self.assertEqual(len(out.splitlines()), 7)
        self.k(v, "delete", "clusterrole", "logs-" + n, "agg-" + n)
        self.k(v, "delete", "clusterrolebinding", "logs-" + n)
        rc, _, err = kubectl(v, "get", "clusterrole", "prometheus-" + n)
        self.assertNotEqual(rc, 0)
        self.assertIn("NotFound", err)

    def test_explain(self):
        for v in KUBECTLS:
            with self.subTest(kubectl=v):
                out = self.k(v, "explain", "role.rules")
                self.assertIn("GROUP:      rbac.authorization.k8s.io", out)
                self.assertIn("KIND:       Role", out)
                self.assertIn("FIELD: rules <[]PolicyRule>", out)
                for f in ("apiGroups", "nonResourceURLs", "resourceNames", "resources"):
                    self.assertRegex(out, r"\n  %s\t<\[\]string>\n" % f)
                self.assertRegex(out, r"\n  verbs\t<\[\]string> -required-\n")
                out = self.k(v, "explain", "rolebinding.roleRef")
                for f in ("apiGroup", "kind", "name"):
                    self.assertRegex(out, r"\n  %s\t<string> -required-\n" % f)
                out = self.k(v, "explain", "clusterrolebinding")
                self.assertRegex(out, r"\n  roleRef\t<RoleRef> -required-\n")
                self.assertRegex(out, r"\n  subjects\t<\[\]Subject>\n")
                out = self.k(v, "explain", "clusterrole.aggregationRule.clusterRoleSelectors")
                self.assertRegex(out, r"\n  matchExpressions\t<\[\]LabelSelectorRequirement>\n")
                out = self.k(v, "api-resources", "--api-group=rbac.authorization.k8s.io")
                rows = [line.split() for line in out.splitlines()[1:]]
                self.assertEqual(rows, [
                    ["clusterrolebindings", "rbac.authorization.k8s.io/v1", "false",
                     "ClusterRoleBinding"],
                    ["clusterroles", "rbac.authorization.k8s.io/v1", "false", "ClusterRole"],
                    ["rolebindings", "rbac.authorization.k8s.io/v1", "true", "RoleBinding"],
                    ["roles", "rbac.authorization.k8s.io/v1", "true", "Role"]])

    def test_http_422(self):
        st, b = call("POST", GV + "/clusterroles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "mixed"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "nonResourceURLs": ["/healthz"]}]})
        self.assertEqual(st, 422, b)
        self.assertEqual(b["reason"], "Invalid")
        self.assertEqual(b["details"], {
            "name": "mixed", "group": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "causes": [{"reason": "FieldValueInvalid", "field": "rules[0].nonResourceURLs",
                        "message": 'Invalid value: []string{"/healthz"}: rules cannot apply to '
                                   'both regular resources and non-resource URLs'}]})
        st, b = call("POST", GV + "/namespaces/default/rolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "rb"}, "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u", "apiGroup": ""},
                         {"kind": "ServiceAccount", "name": "sa",
                          "apiGroup": "rbac.authorization.k8s.io"}]})
        self.assertEqual(st, 422, b)
        self.assertEqual(b["message"],
                         'RoleBinding.rbac.authorization.k8s.io "rb" is invalid: '
                         'subjects[1].apiGroup: Unsupported value: "rbac.authorization.k8s.io": '
                         'supported values: ""')


    def test_put_creates(self):
        """Upstream's RBAC strategies allow create on update: a PUT of a
        missing role or binding creates it (201, then 200), kubectl replace
        included; a user without rights creates nothing; a ConfigMap's
        strategy does not (404), nor does a subresource."""
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "put-created"},
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}
        st, b = call("PUT", GV + "/clusterroles/put-created", role)
        self.assertEqual((st, b["metadata"]["name"], b["rules"]), (201, "put-created",
                                                                   role["rules"]), b)
        st, b = call("PUT", GV + "/clusterroles/put-created", role)
        self.assertEqual(st, 200, b)
        rb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
              "metadata": {"name": "put-created", "namespace": "default"},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                          "name": "put-created"},
              "subjects": [{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}]}
        st, b = call("PUT", GV + "/namespaces/default/rolebindings/put-created", rb)
        self.assertEqual(st, 201, b)
        # a PUT for a name other than the body's is still refused
        st, b = call("PUT", GV + "/clusterroles/other-name", role)
        self.assertEqual(st, 400, b)
        # kubectl replace of a role that does not exist
        yaml = ("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n"
                "  name: replaced\n  namespace: default\nrules: []\n")
        rc, out, err = kubectl("1.33", "replace", "-f", "-", stdin=yaml)
        self.assertEqual((rc, out), (0, "role.rbac.authorization.k8s.io/replaced replaced\n"),
                         err)
        # not for ConfigMaps
        st, b = call("PUT", "/api/v1/namespaces/default/configmaps/put-missing",
                     {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "put-missing"}})
        self.assertEqual((st, b["message"]), (404, 'configmaps "put-missing" not found'))
        # a user without rights to update ClusterRoles creates none through PUT
        conn_user = {"Impersonate-User": "mallory"}
        c = SERVER.connection(timeout=30)
        try:
            body = dict(role, metadata={"name": "escalating"})
            c.request("PUT", GV + "/clusterroles/escalating", body=json.dumps(body).encode(),
                      headers=dict(conn_user, **{"Content-Type": "application/json"}))
            r = c.getresponse()
            st, b = r.status, json.loads(r.read())
        finally:
            c.close()
        self.assertEqual(st, 403, b)
        st, b = call("GET", GV + "/clusterroles/escalating")
        self.assertEqual(st, 404, b)


class PythonClientTest(unittest.TestCase):
    def test_rbac_api(self):
        with SERVER.client() as ac:
            self.flow(client.RbacAuthorizationV1Api(ac), client.CoreV1Api(ac))

    def flow(self, api, core):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="py")))
        subject = getattr(client, "RbacV1Subject", None) or client.V1Subject
        meta = client.V1ObjectMeta
        role = api.create_namespaced_role("py", client.V1Role(
            metadata=meta(name="reader"),
            rules=[client.V1PolicyRule(api_groups=[""], resources=["pods", "pods/log"],
                                       verbs=["get", "list"])]))
        self.assertEqual(role.rules[0].resources, ["pods", "pods/log"])
        cr = api.create_cluster_role(client.V1ClusterRole(
            metadata=meta(name="py-metrics", labels={"agg": "py"}),
            rules=[client.V1PolicyRule(non_resource_ur_ls=["/metrics"], verbs=["get"])]))
        self.assertEqual(cr.rules[0].non_resource_ur_ls, ["/metrics"])
        agg = api.create_cluster_role(client.V1ClusterRole(
            metadata=meta(name="py-agg"),
            aggregation_rule=client.V1AggregationRule(cluster_role_selectors=[
                client.V1LabelSelector(match_labels={"agg": "py"})])))
        self.assertEqual(agg.aggregation_rule.cluster_role_selectors[0].match_labels,
                         {"agg": "py"})
        rb = api.create_namespaced_role_binding("py", client.V1RoleBinding(
            metadata=meta(name="readers"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role",
                                      name="reader"),
            subjects=[subject(kind="User", name="alice"),
                      subject(kind="ServiceAccount", name="default", namespace="py")]))
        self.assertEqual(rb.subjects[0].api_group, "rbac.authorization.k8s.io")
        self.assertIsNone(rb.subjects[1].api_group)
        crb = api.create_cluster_role_binding(client.V1ClusterRoleBinding(
            metadata=meta(name="py-metrics"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io",
                                      kind="ClusterRole", name="py-metrics"),
            subjects=[subject(kind="Group", name="system:authenticated",
                              api_group="rbac.authorization.k8s.io")]))
        self.assertEqual(crb.role_ref.name, "py-metrics")

        # read, list
        self.assertEqual(api.read_namespaced_role("reader", "py").rules[0].verbs,
                         ["get", "list"])
        self.assertEqual(api.read_cluster_role_binding("py-metrics").subjects[0].name,
                         "system:authenticated")
        names = [r.metadata.name for r in api.list_role_for_all_namespaces().items]
        self.assertIn("reader", names)
        names = [r.metadata.name for r in api.list_cluster_role(label_selector="agg=py").items]
        self.assertEqual(names, ["py-metrics"])
        self.assertEqual([b.metadata.name for b in
                          api.list_namespaced_role_binding("py").items], ["readers"])

        # patch the subjects; the roleRef cannot change
        rb = api.patch_namespaced_role_binding(
            "readers", "py", {"subjects": [{"kind": "Group", "name": "devs"}]})
        self.assertEqual([(s.kind, s.name, s.api_group) for s in rb.subjects],
                         [("Group", "devs", "rbac.authorization.k8s.io")])
        rb.role_ref = client.V1RoleRef(api_group="rbac.authorization.k8s.io",
                                       kind="ClusterRole", name="view")
        with self.assertRaises(client.ApiException) as e:
            api.replace_namespaced_role_binding("readers", "py", rb)
        self.assertEqual(e.exception.status, 422)
        self.assertIn("cannot change roleRef", json.loads(e.exception.body)["message"])
        with self.assertRaises(client.ApiException) as e:
            api.create_namespaced_role("py", client.V1Role(
                metadata=meta(name="urls"),
                rules=[client.V1PolicyRule(non_resource_ur_ls=["/healthz"], verbs=["get"])]))
        self.assertEqual(e.exception.status, 422)
        self.assertEqual(json.loads(e.exception.body)["details"]["causes"][0]["field"],
                         "rules[0].nonResourceURLs")

        # delete
        api.delete_namespaced_role_binding("readers", "py")
        api.delete_namespaced_role("reader", "py")
        api.delete_cluster_role_binding("py-metrics")
        for n in ("py-metrics", "py-agg"):
            api.delete_cluster_role(n)
        self.assertEqual(api.list_namespaced_role("py").items, [])


if __name__ == "__main__":
    run_unittests()
