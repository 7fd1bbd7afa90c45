"""End-to-end tests of the review resources against a real `ckube server`:
kubectl auth can-i (JSON from kubectl 1.27, protobuf from 1.33), can-i
--list, auth whoami, kubectl explain of the review types, the official
Python client's review calls, the decoding and validation upstream applies
to the questions, and that nothing is stored and no other verb is
allowed."""
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
AUTHZ = "/apis/authorization.k8s.io/v1"


def call(method, path, body=None, headers=None):
    """(status, decoded body); with a `headers` list, also the response's headers."""
    conn = SERVER.connection(timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        if headers is not None:
            headers.extend(r.getheaders())
        return r.status, json.loads(r.read() or b"null")
    finally:
        conn.close()


def kubectl(version, *args):
    return SERVER.kubectl(*args, binary=os.path.join(SDK, "kubectl." + version))


class ReviewsTest(unittest.TestCase):
    def test_kubectl_auth(self):
        for v in ("1.27", "1.33"):
            rc, out, err = kubectl(v, "auth", "can-i", "create", "deployments.apps", "-n", "x")
            self.assertEqual((rc, out.strip()), (0, "yes"), v + err)
            rc, out, err = kubectl(v, "auth", "can-i", "get", "/healthz")
            self.assertEqual((rc, out.strip()), (0, "yes"), v + err)
            rc, out, err = kubectl(v, "auth", "can-i", "--list")
            self.assertEqual(rc, 0, v + err)
            rows = [line.split() for line in out.splitlines()[1:]]
            self.assertIn(["*.*", "[]", "[]", "[*]"], rows, out)
            self.assertIn(["[*]", "[]", "[*]"], rows, out)
            rc, out, err = kubectl(v, "auth", "whoami", "-o", "json")
            self.assertEqual(rc, 0, v + err)
            info = json.loads(out)["status"]["userInfo"]
            # the written kubeconfig's admin certificate, as authentication
            # found it (the whole matrix is test_authentication.py's)
            self.assertEqual(info, {"username": "system:admin",
                                    "groups": ["system:masters", "system:authenticated"]})

    def test_kubectl_explain(self):
        # the review types have schemas: /openapi/v3 and kubectl explain
        for v in ("1.27", "1.33"):
            rc, out, err = kubectl(v, "explain", "selfsubjectaccessreview.spec.resourceAttributes")
            self.assertEqual(rc, 0, v + err)
            self.assertIn("KIND:       SelfSubjectAccessReview", out)
            for field in ("namespace", "verb", "group", "resource", "subresource", "name",
                          "fieldSelector", "labelSelector"):
                self.assertRegex(out, r"\n  %s\t<" % field, v)
            rc, out, err = kubectl(v, "explain", "subjectaccessreview.spec.extra")
            self.assertEqual(rc, 0, v + err)
            self.assertIn("map[string][]string", out)
            rc, out, err = kubectl(v, "explain", "selfsubjectrulesreview.status.resourceRules")
            self.assertEqual(rc, 0, v + err)
            self.assertIn("resourceNames\t<[]string>", out)
        rc, out, err = kubectl("1.33", "explain", "selfsubjectreview.status.userInfo")
        self.assertEqual(rc, 0, err)
        self.assertIn("username\t<string>", out)
        rc, out, err = kubectl("1.27", "explain", "selfsubjectreviews",
                               "--api-version=authentication.k8s.io/v1beta1")
        self.assertEqual(rc, 0, err)
        self.assertIn("VERSION:    v1beta1", out)

    def test_python_client(self):
        api = client.AuthorizationV1Api(SERVER.client())
        r = api.create_self_subject_access_review(
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
             "spec": {"resourceAttributes": {"verb": "delete", "resource": "secrets",
                                             "namespace": "default"}}})
        self.assertTrue(r.status.allowed)
        self.assertEqual(r.spec.resource_attributes.resource, "secrets")
        r = api.create_subject_access_review(
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
             "spec": {"user": "alice", "nonResourceAttributes": {"path": "/x", "verb": "get"}}})
        self.assertFalse(r.status.allowed)  # nothing grants alice anything
        r = api.create_namespaced_local_subject_access_review(
            "team", {"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
                     "spec": {"groups": ["devs", "system:masters"],
                              "resourceAttributes": {"verb": "get"}}})
        self.assertTrue(r.status.allowed)
        self.assertEqual(r.spec.resource_attributes.namespace, "team")  # defaulted
        r = api.create_self_subject_rules_review(
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
             "spec": {"namespace": "default"}})
        self.assertFalse(r.status.incomplete)
        # the admin's: cluster-admin, through system:masters' binding
        self.assertEqual(r.status.resource_rules[0].verbs, ["*"])
        self.assertEqual(r.status.resource_rules[0].resources, ["*"])

    def test_answer_metadata(self):
        """Upstream answers a review as its typed object: metadata with a
        null creationTimestamp, whatever the question carried."""
        st, b = call("POST", AUTHZ + "/selfsubjectaccessreviews",
                     {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                      "spec": {"nonResourceAttributes": {"verb": "get", "path": "/version"}}})
        self.assertEqual((st, b["metadata"], b["status"]["allowed"]),
                         (201, {"creationTimestamp": None}, True))
        st, b = call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                     {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
                      "metadata": {"name": "asked"}})
        self.assertEqual((st, b["metadata"]), (201, {"name": "asked", "creationTimestamp": None}))

    def test_validation_and_nothing_stored(self):
        ssar = AUTHZ + "/selfsubjectaccessreviews"
        st, b = call("POST", ssar, {"apiVersion": "authorization.k8s.io/v1",
                                    "kind": "SelfSubjectAccessReview", "spec": {}})
        self.assertEqual((st, b["reason"]), (422, "Invalid"))
        self.assertIn("exactly one of nonResourceAttributes or resourceAttributes",
                      b["message"])
        st, b = call("POST", AUTHZ + "/subjectaccessreviews",
                     {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                      "spec": {"resourceAttributes": {"verb": "get"}}})
        self.assertEqual(st, 422)
        self.assertEqual(b["details"]["causes"][0]["field"], "spec.user")
        st, b = call("POST", AUTHZ + "/namespaces/a/localsubjectaccessreviews",
                     {"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
                      "spec": {"user": "u", "resourceAttributes": {"verb": "get",
                                                                   "namespace": "b"}}})
        self.assertEqual(st, 422)
        self.assertEqual(b["details"]["causes"][0]["field"], "spec.resourceAttributes.namespace")
        st, b = call("POST", ssar, {"apiVersion": "v1", "kind": "ConfigMap"})
        self.assertEqual(st, 400, b)
        # decoded against the schema: unknown fields as fieldValidation asks,
        # ill-typed ones a 400
        q = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
             "spec": {"resourceAttributes": {"verb": "get", "bogus": 1}}}
        st, b = call("POST", ssar + "?fieldValidation=Strict", q)
        self.assertEqual(st, 400, b)
        self.assertIn('strict decoding error: unknown field '
                      '"spec.resourceAttributes.bogus"', b["message"])
        hdrs = []
        st, b = call("POST", ssar, q, hdrs)
        self.assertEqual(st, 201, b)
        self.assertEqual(b["spec"]["resourceAttributes"], {"verb": "get"})  # dropped
        self.assertTrue(b["status"]["allowed"])
        self.assertIn(("Warning", '299 - "unknown field \\"spec.resourceAttributes.bogus\\""'),
                      hdrs)
        st, b = call("POST", ssar + "?fieldValidation=Ignore", q, hdrs)
        self.assertEqual(st, 201, b)
        st, b = call("POST", ssar, {"apiVersion": "authorization.k8s.io/v1",
                                    "kind": "SelfSubjectAccessReview",
                                    "spec": {"resourceAttributes": {"verb": 5}}})
        self.assertEqual(st, 400, b)
        self.assertIn("spec.resourceAttributes.verb", b["message"])
        st, b = call("POST", ssar + "?fieldValidation=Sometimes", q)
        self.assertEqual((st, b["reason"]), (400, "BadRequest"))
        st, b = call("POST", ssar, ["not", "an", "object"])
        self.assertEqual(st, 400, b)
        # create only: no list, get, delete
        for method, path in (("GET", ssar), ("GET", ssar + "/x"), ("DELETE", ssar + "/x"),
                             ("PUT", ssar + "/x")):
            st, b = call(method, path, {} if method == "PUT" else None)
            self.assertEqual((st, b["reason"]), (405, "MethodNotAllowed"), (method, path))
        # discovery says so
        st, b = call("GET", AUTHZ)
        verbs = {r["name"]: r["verbs"] for r in b["resources"]}
        self.assertEqual(verbs["selfsubjectaccessreviews"], ["create"])


if __name__ == "__main__":
    run_unittests()
