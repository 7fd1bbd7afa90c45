"""End-to-end tests of authorization against a real `ckube server`, as
kube-apiserver with --authorization-mode=RBAC decides: every request
(resource, discovery, health, non-resource paths) is authorized after
authentication; system:masters may do anything; RBAC's Roles and
bindings grant the rest, from the moment they are stored; denials get
upstream's exact 403 Status and store nothing; the access and rules
reviews (kubectl auth can-i, --list) answer from the same authorizer;
and RBAC's own objects cannot be used to grant rights one does not
hold (escalate and bind), in upstream's words.

Users come from a --token-auth-file; the admin is the written
kubeconfig's certificate (system:masters)."""
import http.client
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

KUBECTL = "/usr/lib/google-cloud-sdk/bin/kubectl.1.31"
TOKENS = ("tok-alice,alice,uid-alice,\"dev,ops\"\n"
          "tok-bob,bob,uid-bob\n"
          "tok-carol,carol,uid-carol\n")
ALICE_GROUPS = '["dev" "ops" "system:authenticated"]'

SERVER = Server("--controller-manager=false", "--token-auth-file",
                os.path.join(os.environ.get("CKUBE_TEST_TMP", "/tmp"), "rbac-e2e-tokens.csv"))


def setUpModule():
    with open(SERVER.flags[2], "w") as f:
        f.write(TOKENS)
    SERVER.start()


def tearDownModule():
    try:
        SERVER.stop()
    finally:
        os.unlink(SERVER.flags[2])


def call(method, path, body=None, token=None, cert=True, headers=None):
    """(status, parsed body or raw bytes) of one request: as the admin
    (cert), with a bearer token, or anonymous (token None, cert False)."""
    ctx = SERVER.ssl_context(cert=cert and token is None)
    conn = http.client.HTTPSConnection("127.0.0.1", SERVER.port, timeout=30, context=ctx)
    hdrs = {"Accept": "application/json"}
    if token:
        hdrs["Authorization"] = "Bearer " + token
    if body is not None:
        hdrs["Content-Type"] = "application/json"
    extra = []  # repeated headers come as a list of pairs
    if isinstance(headers, dict):
        hdrs.update(headers)
    else:
        extra = headers or []
    conn.putrequest(method, path, skip_accept_encoding=True)
    for k, v in list(hdrs.items()) + list(extra):
        conn.putheader(k, v)
    data = json.dumps(body).encode() if body is not None else b""
    if body is not None:
        conn.putheader("Content-Length", str(len(data)))
    conn.endheaders(data if body is not None else None)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    try:
        return r.status, json.loads(data)
    except ValueError:
        return r.status, data


def admin(method, path, body=None):
    st, b = call(method, path, body)
    if st >= 300:
        raise AssertionError("admin %s %s: %d %s" % (method, path, st, b))
    return b


def eventually(fn, what, timeout=5.0):
    """Retries fn until it returns true: RBAC objects reach the authorizer
    through the watch cache, as upstream's informers (a little after the
    write is acknowledged)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if fn():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def forbidden(message, group=None, kind=None, name=None):
    """Upstream's 403 Status (apierrors.NewForbidden; responsewriters
    for non-resource paths)."""
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
          "message": message, "reason": "Forbidden", "code": 403}
    if kind is not None:
        st["details"] = {"group": group, "kind": kind}
        if name:
            st["details"]["name"] = name
    return st


def kubectl(*args, token=None, check=False):
    kc = SERVER.kubeconfig
    cmd = [KUBECTL, "--kubeconfig", kc]
    if token:
        # a kubeconfig user with only the token (the admin's certificate
        # would authenticate first)
        cmd = [KUBECTL, "--kubeconfig", token_kubeconfig(token)]
    r = subprocess.run(cmd + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError("kubectl %s: %s" % (" ".join(args), r.stderr))
    return r.returncode, r.stdout, r.stderr


def token_kubeconfig(token):
    path = os.path.join(SERVER.tmp, "kc-" + token)
    if not os.path.exists(path):
        ca = os.path.join(SERVER.data, "pki", "ca.crt")
        with open(path, "w") as f:
            f.write("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                    "    server: %s\n    certificate-authority: %s\nusers:\n- name: u\n"
                    "  user:\n    token: %s\ncontexts:\n- name: x\n  context:\n"
                    "    cluster: c\n    user: u\ncurrent-context: x\n" % (SERVER.url, ca, token))
    return path


RBAC = "/apis/rbac.authorization.k8s.io/v1"


def role(name, ns, rules, **extra):
    obj = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
           "metadata": {"name": name, "namespace": ns}, "rules": rules}
    obj.update(extra)
    return obj


def binding(name, ns, role_kind, role_name, subjects):
    kind = "RoleBinding" if ns else "ClusterRoleBinding"
    meta = {"name": name}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                        "name": role_name},
            "subjects": subjects}


def user(name):
    return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def ensure_namespace(ns):
    st, _ = call("GET", "/api/v1/namespaces/" + ns)
    if st == 404:
        admin("POST", "/api/v1/namespaces",
              {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})


class AuthorizationTest(unittest.TestCase):
    def test_denials_in_upstreams_words(self):
        st, b = call("GET", "/api/v1/namespaces/default/configmaps", token="tok-bob")
        self.assertEqual((st, b), (403, forbidden(
            'configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group '
            '"" in the namespace "default"', "", "configmaps")))
        st, b = call("GET", "/api/v1/namespaces/default/configmaps/x", token="tok-bob")
        self.assertEqual((st, b), (403, forbidden(
            'configmaps "x" is forbidden: User "bob" cannot get resource "configmaps" in API '
            'group "" in the namespace "default"', "", "configmaps", "x")))
        st, b = call("GET", "/api/v1/namespaces", token="tok-bob")
        self.assertEqual(b["message"], 'namespaces is forbidden: User "bob" cannot list resource '
                         '"namespaces" in API group "" at the cluster scope')
        st, b = call("PUT", "/apis/apps/v1/namespaces/default/deployments/d/status", {},
                     token="tok-bob")
        self.assertEqual((st, b), (403, forbidden(
            'deployments.apps "d" is forbidden: User "bob" cannot update resource '
            '"deployments/status" in API group "apps" in the namespace "default"', "apps",
            "deployments", "d")))
        st, b = call("GET", "/api/v1/namespaces/default/configmaps?watch=1", token="tok-bob")
        self.assertIn('cannot watch resource "configmaps"', b["message"])
        st, b = call("DELETE", "/api/v1/namespaces/default/configmaps", token="tok-bob")
        self.assertIn('cannot deletecollection resource "configmaps"', b["message"])
        # other paths: the lowercased method
        st, b = call("GET", "/no/such/path", token="tok-bob")
        self.assertEqual((st, b), (403, forbidden(
            'forbidden: User "bob" cannot get path "/no/such/path"')))
        st, b = call("POST", "/metrics", {}, token="tok-bob")
        self.assertEqual(b["message"], 'forbidden: User "bob" cannot post path "/metrics"')
        # a denied write stores nothing
        st, b = call("POST", "/api/v1/namespaces/default/configmaps",
                     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "denied"}},
                     token="tok-bob")
        self.assertEqual(st, 403)
        self.assertEqual(call("GET", "/api/v1/namespaces/default/configmaps/denied")[0], 404)
        # the admin (system:masters) may do anything
        self.assertEqual(call("GET", "/api/v1/namespaces/default/configmaps")[0], 200)

    def test_anonymous_and_the_public_paths(self):
        # system:public-info-viewer: health and version to everyone
        for path in ("/version", "/healthz", "/livez", "/readyz"):
            st, _ = call("GET", path, cert=False)
            self.assertEqual(st, 200, path)
        st, b = call("GET", "/api", cert=False)
        self.assertEqual((st, b), (403, forbidden(
            'forbidden: User "system:anonymous" cannot get path "/api"')))
        st, b = call("GET", "/api/v1/namespaces/default/pods", cert=False)
        self.assertEqual(b["message"], 'pods is forbidden: User "system:anonymous" cannot list '
                         'resource "pods" in API group "" in the namespace "default"')
        # the issuer's documents are for ServiceAccounts, not anonymous
        self.assertEqual(call("GET", "/openid/v1/jwks", cert=False)[0], 403)
        # system:discovery and system:basic-user: every authenticated user
        self.assertEqual(call("GET", "/api", token="tok-bob")[0], 200)
        self.assertEqual(call("GET", "/apis/apps/v1", token="tok-bob")[0], 200)
        self.assertEqual(call("GET", "/openapi/v3", token="tok-bob")[0], 200)
        st, b = call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                     {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                     token="tok-bob")
        self.assertEqual((st, b["status"]["userInfo"]["username"]), (201, "bob"))

    def test_bindings_grant_and_revoke(self):
        ensure_namespace("team")
        admin("POST", RBAC + "/namespaces/team/roles",
              role("cm-reader", "team", [{"apiGroups": [""], "resources": ["configmaps"],
                                          "verbs": ["get", "list", "watch"]}]))
        cms = "/api/v1/namespaces/team/configmaps"
        self.assertEqual(call("GET", cms, token="tok-alice")[0], 403)
        # bound to one of alice's groups
        admin("POST", RBAC + "/namespaces/team/rolebindings",
              binding("devs-read", "team", "Role", "cm-reader",
                      [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                        "name": "dev"}]))
        eventually(lambda: call("GET", cms, token="tok-alice")[0] == 200, "alice may list")
        # not in another namespace, not writes, not bob
        self.assertEqual(call("GET", "/api/v1/namespaces/default/configmaps",
                              token="tok-alice")[0], 403)
        self.assertEqual(call("POST", cms, {"apiVersion": "v1", "kind": "ConfigMap",
                                            "metadata": {"name": "c"}}, token="tok-alice")[0],
                         403)
        self.assertEqual(call("GET", cms, token="tok-bob")[0], 403)
        # a RoleBinding to a ClusterRole grants it in its namespace only
        admin("POST", RBAC + "/clusterroles",
              {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "secret-reader"},
               "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]})
        admin("POST", RBAC + "/namespaces/team/rolebindings",
              binding("bob-secrets", "team", "ClusterRole", "secret-reader", [user("bob")]))
        eventually(lambda: call("GET", "/api/v1/namespaces/team/secrets", token="tok-bob")[0]
                   == 200, "bob may list secrets in team")
        self.assertEqual(call("GET", "/api/v1/secrets", token="tok-bob")[0], 403)
        # deleting the binding takes the right away
        admin("DELETE", RBAC + "/namespaces/team/rolebindings/devs-read")
        eventually(lambda: call("GET", cms, token="tok-alice")[0] == 403, "alice may not list")
        # a binding to a role that does not exist: the reason says so
        admin("POST", RBAC + "/namespaces/team/rolebindings",
              binding("dangling", "team", "Role", "nope", [user("carol")]))
        eventually(lambda: call("GET", cms, token="tok-carol")[1].get("message", "").endswith(
            ': RBAC: role.rbac.authorization.k8s.io "nope" not found'), "the dangling reason")

    def test_resource_names_and_watch_by_name(self):
        ensure_namespace("names")
        admin("POST", "/api/v1/namespaces/names/configmaps",
              {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one"}})
        admin("POST", RBAC + "/namespaces/names/roles",
              role("one-only", "names", [{"apiGroups": [""], "resources": ["configmaps"],
                                          "resourceNames": ["one"],
                                          "verbs": ["get", "list", "watch"]}]))
        admin("POST", RBAC + "/namespaces/names/rolebindings",
              binding("carol-one", "names", "Role", "one-only", [user("carol")]))
        base = "/api/v1/namespaces/names/configmaps"
        eventually(lambda: call("GET", base + "/one", token="tok-carol")[0] == 200, "get one")
        self.assertEqual(call("GET", base + "/two", token="tok-carol")[0], 403)
        self.assertEqual(call("GET", base, token="tok-carol")[0], 403)
        # a list narrowed to the name by a field selector is about that name
        st, b = call("GET", base + "?fieldSelector=metadata.name%3Done", token="tok-carol")
        self.assertEqual((st, [i["metadata"]["name"] for i in b["items"]]), (200, ["one"]))
        self.assertEqual(call("GET", base + "?fieldSelector=metadata.name%3D%3Dtwo",
                              token="tok-carol")[0], 403)
        rc, out, err = kubectl("get", "configmap", "one", "-n", "names", "-o", "name",
                               token="tok-carol")
        self.assertEqual((rc, out.strip()), (0, "configmap/one"), err)

    def test_kubectl_auth_can_i(self):
        ensure_namespace("cani")
        admin("POST", RBAC + "/namespaces/cani/roles",
              role("pod-reader", "cani", [{"apiGroups": [""], "resources": ["pods", "pods/log"],
                                           "verbs": ["get", "list"]}]))
        admin("POST", RBAC + "/namespaces/cani/rolebindings",
              binding("bob-pods", "cani", "Role", "pod-reader", [user("bob")]))
        eventually(lambda: kubectl("auth", "can-i", "list", "pods", "-n", "cani",
                                   token="tok-bob")[0] == 0, "bob can list pods")
        rc, out, _ = kubectl("auth", "can-i", "list", "pods", "-n", "cani", token="tok-bob")
        self.assertEqual((rc, out.strip()), (0, "yes"))
        rc, out, _ = kubectl("auth", "can-i", "delete", "pods", "-n", "cani", token="tok-bob")
        self.assertEqual((rc, out.strip()), (1, "no"))
        rc, out, _ = kubectl("auth", "can-i", "get", "pods", "--subresource=log", "-n", "cani",
                             token="tok-bob")
        self.assertEqual(out.strip(), "yes")
        rc, out, _ = kubectl("auth", "can-i", "list", "pods", "-n", "default", token="tok-bob")
        self.assertEqual(out.strip(), "no")
        rc, out, err = kubectl("auth", "can-i", "--list", "-n", "cani", token="tok-bob")
        self.assertEqual(rc, 0, err)
        lines = [" ".join(line.split()) for line in out.splitlines()]
        self.assertIn("pods/log [] [] [get list]", lines)
        self.assertIn("pods [] [] [get list]", lines)
        self.assertIn("selfsubjectaccessreviews.authorization.k8s.io [] [] [create]", lines)
        self.assertIn("[/version] [] [get]", lines)
        # the admin: cluster-admin through system:masters
        rc, out, _ = kubectl("auth", "can-i", "*", "*")
        self.assertEqual(out.strip(), "yes")
        rc, out, _ = kubectl("auth", "can-i", "--list")
        self.assertIn("*.* [] [] [*]", [" ".join(line.split()) for line in out.splitlines()])

    def test_access_reviews(self):
        ensure_namespace("sar")
        admin("POST", RBAC + "/namespaces/sar/roles",
              role("lease-editor", "sar", [{"apiGroups": ["coordination.k8s.io"],
                                            "resources": ["leases"], "verbs": ["update"]}]))
        admin("POST", RBAC + "/namespaces/sar/rolebindings",
              binding("carol-leases", "sar", "Role", "lease-editor", [user("carol")]))
        sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": "carol", "resourceAttributes": {
                   "namespace": "sar", "verb": "update", "group": "coordination.k8s.io",
                   "resource": "leases"}}}
        path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
        eventually(lambda: admin("POST", path, sar)["status"]["allowed"], "carol allowed")
        self.assertEqual(admin("POST", path, sar)["status"], {
            "allowed": True, "reason": 'RBAC: allowed by RoleBinding "carol-leases/sar" of Role '
                                       '"lease-editor" to User "carol"'})
        sar["spec"]["resourceAttributes"]["verb"] = "delete"
        self.assertEqual(admin("POST", path, sar)["status"], {"allowed": False})
        # the groups the spec names, no more: system:masters allows all
        sar["spec"] = {"user": "x", "groups": ["system:masters"],
                       "nonResourceAttributes": {"path": "/anything", "verb": "get"}}
        self.assertEqual(admin("POST", path, sar)["status"], {"allowed": True})
        # a local review is about its namespace
        lsar = {"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
                "spec": {"user": "carol", "resourceAttributes": {
                    "verb": "update", "group": "coordination.k8s.io", "resource": "leases"}}}
        b = admin("POST", "/apis/authorization.k8s.io/v1/namespaces/sar/"
                  "localsubjectaccessreviews", lsar)
        self.assertTrue(b["status"]["allowed"])
        # asking about others is itself authorized: carol may not
        st, b = call("POST", path, sar, token="tok-carol")
        self.assertEqual(b["message"], 'subjectaccessreviews.authorization.k8s.io is forbidden: '
                         'User "carol" cannot create resource "subjectaccessreviews" in API '
                         'group "authorization.k8s.io" at the cluster scope')
        # but may ask about herself (system:basic-user)
        ssar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"namespace": "sar", "verb": "update",
                                                "group": "coordination.k8s.io",
                                                "resource": "leases"}}}
        st, b = call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", ssar,
                     token="tok-carol")
        self.assertEqual((st, b["status"]["allowed"]), (201, True))
        # the rules review: her rules in the namespace, and a dangling
        # binding makes the answer carry the error
        admin("POST", RBAC + "/namespaces/sar/rolebindings",
              binding("carol-gone", "sar", "ClusterRole", "gone", [user("carol")]))
        ssrr = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                "spec": {"namespace": "sar"}}

        def rules():
            return call("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", ssrr,
                        token="tok-carol")[1]["status"]
        eventually(lambda: "evaluationError" in rules(), "the rules review's error")
        status = rules()
        self.assertIn({"verbs": ["update"], "apiGroups": ["coordination.k8s.io"],
                       "resources": ["leases"]}, status["resourceRules"])
        self.assertIn({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz",
                                                              "/version", "/version/"]},
                      status["nonResourceRules"])
        self.assertFalse(status["incomplete"])
        self.assertEqual(status["evaluationError"],
                         'clusterrole.rbac.authorization.k8s.io "gone" not found')

    def test_no_escalation_through_rbac_objects(self):
        ensure_namespace("esc")
        # alice may write Roles and RoleBindings in esc (not escalate or
        # bind), and read ConfigMaps there
        admin("POST", RBAC + "/namespaces/esc/roles",
              role("rbac-writer", "esc", [
                  {"apiGroups": ["rbac.authorization.k8s.io"],
                   "resources": ["roles", "rolebindings"],
                   "verbs": ["get", "list", "create", "update", "patch", "delete"]},
                  {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]))
        admin("POST", RBAC + "/namespaces/esc/rolebindings",
              binding("alice-writer", "esc", "Role", "rbac-writer", [user("alice")]))
        roles = RBAC + "/namespaces/esc/roles"
        ok_role = role("cm-get", "esc", [{"apiGroups": [""], "resources": ["configmaps"],
                                          "verbs": ["get"]}])
        eventually(lambda: call("POST", roles, ok_role, token="tok-alice")[0] == 201,
                   "alice may create a role with rights she holds")
        st, b = call("POST", roles, role("too-much", "esc", [
            {"apiGroups": [""], "resources": ["configmaps", "secrets"],
             "verbs": ["get", "delete"]}]), token="tok-alice")
        self.assertEqual((st, b), (403, forbidden(
            'roles.rbac.authorization.k8s.io "too-much" is forbidden: user "alice" (groups=%s) is '
            'attempting to grant RBAC permissions not currently held:\n'
            '{APIGroups:[""], Resources:["configmaps"], Verbs:["delete"]}\n'
            '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete"]}' % ALICE_GROUPS,
            "rbac.authorization.k8s.io", "roles", "too-much")))
        self.assertEqual(call("GET", roles + "/too-much")[0], 404)  # nothing stored
        # an update that adds a right she lacks: refused; one that only
        # touches what the garbage collector needs: allowed
        st, b = call("PATCH", roles + "/cm-get", {"rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "watch"]}]},
            token="tok-alice", headers={"Content-Type": "application/merge-patch+json"})
        self.assertEqual(st, 403)
        self.assertIn('{APIGroups:[""], Resources:["configmaps"], Verbs:["watch"]}',
                      b["message"])
        admin("POST", roles, role("secret-get", "esc", [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]))
        gc_only = {"metadata": {"finalizers": ["example.com/keep"]}}
        st, b = call("PATCH", roles + "/secret-get", gc_only, token="tok-alice",
                     headers={"Content-Type": "application/merge-patch+json"})
        self.assertEqual(st, 200, b)
        st, b = call("PATCH", roles + "/secret-get", {"metadata": {"labels": {"a": "b"}}},
                     token="tok-alice",
                     headers={"Content-Type": "application/merge-patch+json"})
        self.assertEqual(st, 403, b)
        st, b = call("PATCH", roles + "/secret-get", {"metadata": {"finalizers": None}},
                     token="tok-alice",
                     headers={"Content-Type": "application/merge-patch+json"})
        self.assertEqual(st, 200, b)
        # bindings: to a role whose rights she holds, yes; to one she
        # does not, no; to one that does not exist, no
        bindings = RBAC + "/namespaces/esc/rolebindings"
        st, b = call("POST", bindings, binding("bob-cm-get", "esc", "Role", "cm-get",
                                               [user("bob")]), token="tok-alice")
        self.assertEqual(st, 201, b)
        st, b = call("POST", bindings, binding("bob-secrets", "esc", "Role", "secret-get",
                                               [user("bob")]), token="tok-alice")
        self.assertEqual(b["message"],
                         'rolebindings.rbac.authorization.k8s.io "bob-secrets" is forbidden: user '
                         '"alice" (groups=%s) is attempting to grant RBAC permissions not '
                         'currently held:\n{APIGroups:[""], Resources:["secrets"], '
                         'Verbs:["get"]}' % ALICE_GROUPS)
        st, b = call("POST", bindings, binding("bob-admin", "esc", "ClusterRole", "nope",
                                               [user("bob")]), token="tok-alice")
        self.assertEqual(b["message"], 'rolebindings.rbac.authorization.k8s.io "bob-admin" is '
                         'forbidden: clusterroles.rbac.authorization.k8s.io "nope" not found')
        # "bind" on that role, and "escalate" on roles, lift the checks
        admin("POST", RBAC + "/namespaces/esc/roles", role("binder", "esc", [
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"],
             "resourceNames": ["secret-get"], "verbs": ["bind"]}]))
        admin("POST", bindings, binding("alice-binder", "esc", "Role", "binder",
                                        [user("alice")]))
        eventually(lambda: call("POST", bindings, binding(
            "bob-secrets", "esc", "Role", "secret-get", [user("bob")]),
            token="tok-alice")[0] == 201, "alice may bind secret-get")
        admin("POST", RBAC + "/namespaces/esc/roles", role("escalator", "esc", [
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"],
             "verbs": ["escalate"]}]))
        admin("POST", bindings, binding("alice-escalator", "esc", "Role", "escalator",
                                        [user("alice")]))
        eventually(lambda: call("POST", roles, role("anything", "esc", [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
            token="tok-alice")[0] == 201, "alice may escalate")

    def test_aggregation_rule_needs_every_right(self):
        admin("POST", RBAC + "/clusterroles",
              {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "clusterrole-writer"},
               "rules": [{"apiGroups": ["rbac.authorization.k8s.io"],
                          "resources": ["clusterroles"], "verbs": ["create"]}]})
        admin("POST", RBAC + "/clusterrolebindings",
              binding("bob-clusterrole-writer", None, "ClusterRole", "clusterrole-writer",
                      [user("bob")]))
        agg = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "bobs-aggregate"},
               "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}

        def attempt():
            return call("POST", RBAC + "/clusterroles", agg, token="tok-bob")
        eventually(lambda: attempt()[0] != 403 or "aggregationRule" in attempt()[1]["message"],
                   "bob's binding")
        st, b = attempt()
        self.assertEqual((st, b["message"]), (403, 'clusterroles.rbac.authorization.k8s.io '
                                              '"bobs-aggregate" is forbidden: must have '
                                              'cluster-admin privileges to use the '
                                              'aggregationRule'))
        # the admin may
        self.assertEqual(call("POST", RBAC + "/clusterroles", agg)[0], 201)

    def test_serviceaccount_token_in_cluster(self):
        ensure_namespace("apps")
        admin("POST", "/api/v1/namespaces/apps/serviceaccounts",
              {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ctl"}})
        tr = admin("POST", "/api/v1/namespaces/apps/serviceaccounts/ctl/token",
                   {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {}})
        tok = tr["status"]["token"]
        st, b = call("GET", "/api/v1/namespaces/apps/configmaps", token=tok)
        self.assertEqual(b["message"], 'configmaps is forbidden: User '
                         '"system:serviceaccount:apps:ctl" cannot list resource "configmaps" '
                         'in API group "" in the namespace "apps"')
        # the issuer's documents: every ServiceAccount may read them
        self.assertEqual(call("GET", "/.well-known/openid-configuration", token=tok)[0], 200)
        admin("POST", RBAC + "/namespaces/apps/roles",
              role("cm", "apps", [{"apiGroups": [""], "resources": ["configmaps"],
                                   "verbs": ["list"]}]))
        # an unqualified ServiceAccount subject is of the binding's namespace
        admin("POST", RBAC + "/namespaces/apps/rolebindings",
              binding("ctl-cm", "apps", "Role", "cm", [{"kind": "ServiceAccount",
                                                         "name": "ctl"}]))
        eventually(lambda: call("GET", "/api/v1/namespaces/apps/configmaps", token=tok)[0]
                   == 200, "the ServiceAccount may list")


class RestartTest(unittest.TestCase):
    def test_bindings_survive_a_restart(self):
        """The index is rebuilt from what is stored: right after a restart
        the bindings grant what they granted (a regression: the index
        once started empty, and nothing rewrote unchanged objects)."""
        ensure_namespace("restart")
        admin("POST", RBAC + "/namespaces/restart/roles",
              role("cm-list", "restart", [{"apiGroups": [""], "resources": ["configmaps"],
                                           "verbs": ["list"]}]))
        admin("POST", RBAC + "/namespaces/restart/rolebindings",
              binding("carol-list", "restart", "Role", "cm-list", [user("carol")]))
        path = "/api/v1/namespaces/restart/configmaps"
        eventually(lambda: call("GET", path, token="tok-carol")[0] == 200, "before")
        SERVER.stop()
        SERVER.start()
        self.assertEqual(call("GET", path, token="tok-carol")[0], 200)
        # and the bootstrap policy's bindings: discovery for everyone
        self.assertEqual(call("GET", "/api", token="tok-carol")[0], 200)


class ImpersonationTest(unittest.TestCase):
    """Impersonate-* headers (kubectl --as, --as-group, --as-uid), checked
    with the "impersonate" verb."""

    def whoami(self, headers, token=None):
        st, b = call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                     {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                     token=token, headers=headers)
        self.assertEqual(st, 201, b)
        return b["status"]["userInfo"]

    def test_who_the_request_becomes(self):
        # the admin may impersonate anyone
        self.assertEqual(self.whoami({"Impersonate-User": "bob"}),
                         {"username": "bob", "groups": ["system:authenticated"]})
        got = self.whoami([("Impersonate-User", "bob"), ("Impersonate-Group", "g1"),
                           ("Impersonate-Group", "g2"), ("Impersonate-Uid", "u-1"),
                           ("Impersonate-Extra-Scopes", "a"), ("Impersonate-Extra-Scopes", "b"),
                           ("Impersonate-Extra-Example.com%2fteam", "x")])
        self.assertEqual(got, {"username": "bob", "uid": "u-1",
                               "groups": ["g1", "g2", "system:authenticated"],
                               "extra": {"scopes": ["a", "b"], "example.com/team": ["x"]}})
        self.assertEqual(self.whoami({"Impersonate-User": "system:serviceaccount:apps:ctl"}),
                         {"username": "system:serviceaccount:apps:ctl",
                          "groups": ["system:serviceaccounts", "system:serviceaccounts:apps",
                                     "system:authenticated"]})
        # the groups given are the groups; which of authenticated and
        # unauthenticated is not added twice
        # (system:masters, so that the review itself is allowed)
        self.assertEqual(self.whoami([("Impersonate-User", "bob"),
                                      ("Impersonate-Group", "system:masters"),
                                      ("Impersonate-Group", "system:unauthenticated")])["groups"],
                         ["system:masters", "system:unauthenticated"])
        self.assertEqual(self.whoami([("Impersonate-User", "system:anonymous"),
                                      ("Impersonate-Group", "system:masters")])["groups"],
                         ["system:masters", "system:unauthenticated"])
        # the impersonated user is then authorized as themselves
        st, b = call("GET", "/api/v1/namespaces/default/secrets",
                     headers={"Impersonate-User": "bob"})
        self.assertEqual(b["message"], 'secrets is forbidden: User "bob" cannot list resource '
                         '"secrets" in API group "" in the namespace "default"')
        rc, out, err = kubectl("auth", "whoami", "--as", "carol", "--as-group", "team",
                               "-o", "jsonpath={.status.userInfo.groups}")
        self.assertEqual((rc, out), (0, '["team","system:authenticated"]'), err)
        rc, out, _ = kubectl("auth", "can-i", "list", "secrets", "--as", "carol")
        self.assertEqual(out.strip(), "no")

    def test_impersonate_verb(self):
        hdr = {"Impersonate-User": "alice"}
        st, b = call("GET", "/api/v1/namespaces", token="tok-bob", headers=hdr)
        self.assertEqual((st, b), (403, forbidden(
            'users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API '
            'group "" at the cluster scope', "", "users", "alice")))
        admin("POST", RBAC + "/clusterroles",
              {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "impersonate-carol"},
               "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"],
                          "resourceNames": ["carol"]}]})
        admin("POST", RBAC + "/clusterrolebindings",
              binding("bob-as-carol", None, "ClusterRole", "impersonate-carol", [user("bob")]))
        eventually(lambda: call("GET", "/api/v1/namespaces", token="tok-bob",
                                headers={"Impersonate-User": "carol"})[0] == 403 and
                   "User \"carol\"" in call("GET", "/api/v1/namespaces", token="tok-bob",
                                             headers={"Impersonate-User": "carol"})[1]["message"],
                   "bob acting as carol")
        self.assertEqual(call("GET", "/api/v1/namespaces", token="tok-bob", headers=hdr)[0], 403)
        rc, out, err = kubectl("auth", "whoami", "--as", "carol", "-o",
                               "jsonpath={.status.userInfo.username}", token="tok-bob")
        self.assertEqual((rc, out), (0, "carol"), err)
        # groups, service accounts, uids and extras each need their own right
        st, b = call("GET", "/version", token="tok-bob",
                     headers=[("Impersonate-User", "carol"), ("Impersonate-Group", "dev")])
        self.assertEqual(b["message"], 'groups "dev" is forbidden: User "bob" cannot impersonate '
                         'resource "groups" in API group "" at the cluster scope')
        st, b = call("GET", "/version", token="tok-bob",
                     headers={"Impersonate-User": "system:serviceaccount:apps:ctl"})
        self.assertEqual(b["message"], 'serviceaccounts "ctl" is forbidden: User "bob" cannot '
                         'impersonate resource "serviceaccounts" in API group "" in the '
                         'namespace "apps"')
        st, b = call("GET", "/version", token="tok-bob",
                     headers={"Impersonate-User": "carol", "Impersonate-Extra-Scopes": "x"})
        self.assertEqual(b["message"], 'userextras.authentication.k8s.io "x" is forbidden: User '
                         '"bob" cannot impersonate resource "userextras/scopes" in API group '
                         '"authentication.k8s.io" at the cluster scope')
        st, b = call("GET", "/version", token="tok-bob",
                     headers={"Impersonate-User": "carol", "Impersonate-Uid": "u9"})
        self.assertEqual(b["message"], 'uids.authentication.k8s.io "u9" is forbidden: User '
                         '"bob" cannot impersonate resource "uids" in API group '
                         '"authentication.k8s.io" at the cluster scope')

    def test_groups_without_a_user(self):
        st, body = call("GET", "/api?x=1", headers=[("Impersonate-Group", "system:masters"),
                                                    ("Impersonate-Extra-Scopes", "a")])
        self.assertEqual(st, 500)
        self.assertEqual(body, b'Internal Server Error: &#34;/api?x=1&#34;: requested '
                         b'[{Group  system:masters    } {UserExtra  a  '
                         b'authentication.k8s.io/v1  scopes}] without impersonating a user\n')
        rc, _, err = kubectl("get", "ns", "--as-group", "system:masters")
        # (kubectl refuses it itself)
        self.assertEqual(rc, 1)
        self.assertIn("without impersonating a user", err)


class ListenEverywhereTest(unittest.TestCase):
    def test_any_address_once_tls_and_rbac_guard_it(self):
        """--listen 0.0.0.0 is served (TLS, authentication and RBAC on);
        --plain-http there is refused."""
        wide = Server("--controller-manager=false")
        wide.flags = ("--listen", "0.0.0.0:%d" % wide.port, "--controller-manager=false")
        try:
            wide.start()
            # the kubeconfig reaches a wildcard address on loopback
            self.assertIn("https://127.0.0.1:%d" % wide.port, open(wide.kubeconfig).read())
            self.assertEqual(wide.urlopen("/api").status, 200)
            ctx = wide.ssl_context(cert=False)
            conn = http.client.HTTPSConnection("127.0.0.1", wide.port, timeout=10, context=ctx)
            conn.request("GET", "/api/v1/namespaces")
            r = conn.getresponse()
            self.assertEqual(r.status, 403)
            self.assertIn(b'User \\"system:anonymous\\" cannot list', r.read())
        finally:
            wide.stop()
        r = subprocess.run([wide_bin(), "server", "--plain-http", "--listen", "0.0.0.0:1",
                            "--data-dir", os.path.join(wide.tmp, "plain")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("refusing to serve plain HTTP on 0.0.0.0", r.stdout)


def wide_bin():
    from ckube_harness import BIN
    return BIN


if __name__ == "__main__":
    run_unittests()
