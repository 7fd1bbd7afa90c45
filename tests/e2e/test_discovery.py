"""End-to-end tests of discovery, legacy and aggregated, against a real
`ckube server`, raw over HTTP and through unmodified kubectl:

 - /api and /apis answer an APIGroupDiscoveryList (apidiscovery.k8s.io v2,
   and v2beta1 for kubectl 1.27-1.29) when the Accept header asks for one
   first, with the matching Content-Type, an ETag honoured by
   If-None-Match (304) and Vary: Accept;
 - read the way client-go reads it, the aggregated document says exactly
   what the legacy documents (/api/v1, /apis/G/V) say;
 - groups in kube-apiserver's priority order (built-in groups first),
   versions by kube-aware priority, the first preferred, the same in both
   forms; a CRD's group-version appears and goes at once;
 - the aggregated form is refused (406) where it is not served, and a
   later Accept entry is used instead;
 - kubectl 1.27 and 1.33 discover with two requests and see the CRD;
 - the OpenAPI documents, cached and shared, served to many at once."""
import json
import os
import re
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

SERVER = Server("--controller-manager=false")
setUpModule, tearDownModule = SERVER.start, SERVER.stop
SDK = "/usr/lib/google-cloud-sdk/bin"
V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.disco.example.com"},
    "spec": {
        "group": "disco.example.com",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                  "shortNames": ["gd"], "categories": ["all"]},
        # v1 is stored, v2 is preferred (kube-aware order), v1alpha1 unserved
        "versions": [
            {"name": name, "served": served, "storage": name == "v1",
             "schema": {"openAPIV3Schema": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}},
             "subresources": {"status": {},
                              "scale": {"specReplicasPath": ".spec.replicas",
                                        "statusReplicasPath": ".status.replicas"}}}
            for name, served in (("v1beta1", True), ("v1", True), ("v2", True),
                                 ("v1alpha1", False))],
    },
}


def call(method, path, body=None, headers=None):
    conn = SERVER.connection(timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def get_json(path, accept="application/json"):
    st, hdrs, body = call("GET", path, headers={"Accept": accept})
    if st != 200:
        raise AssertionError("GET %s: %d %s" % (path, st, body[:300]))
    return hdrs, json.loads(body)


def legacy_view():
    """{group/version: {resource name: entry}} and the group list, read
    the legacy way."""
    out = {}
    _, api = get_json("/api")
    gvs = list(api["versions"])
    _, apis = get_json("/apis")
    for g in apis["groups"]:
        gvs += [v["groupVersion"] for v in g["versions"]]
    for gv in gvs:
        _, rl = get_json(("/api/" if "/" not in gv else "/apis/") + gv)
        out[gv] = {r["name"]: {"kind": r["kind"], "namespaced": r["namespaced"],
                               "verbs": r["verbs"], "singular": r.get("singularName", ""),
                               "shortNames": r.get("shortNames", []),
                               "categories": r.get("categories", []),
                               "gv": (r.get("group"), r.get("version"))}
                   for r in rl["resources"]}
    return out, apis["groups"]


def aggregated_view(accept=V2):
    """The same, from the two aggregated documents, converted the way
    client-go's SplitGroupsAndResources does."""
    out = {}
    groups = []
    for root in ("/api", "/apis"):
        _, doc = get_json(root, accept + ",application/json")
        for item in doc["items"]:
            name = item["metadata"].get("name", "")
            versions = [v["version"] for v in item["versions"]]
            if name:
                groups.append((name, versions))
            for v in item["versions"]:
                gv = (name + "/" if name else "") + v["version"]
                res = out.setdefault(gv, {})
                for r in v["resources"]:
                    rk = r["responseKind"]
                    same_gv = rk["group"] == name and rk["version"] == v["version"]
                    res[r["resource"]] = {
                        "kind": rk["kind"], "namespaced": r["scope"] == "Namespaced",
                        "verbs": r["verbs"], "singular": r["singularResource"],
                        "shortNames": r.get("shortNames", []),
                        "categories": r.get("categories", []),
                        "gv": (None, None) if same_gv else (rk["group"], rk["version"])}
                    for s in r.get("subresources", []):
                        sk = s["responseKind"]
                        same = sk["group"] == name and sk["version"] == v["version"]
                        res[r["resource"] + "/" + s["subresource"]] = {
                            "kind": sk["kind"], "namespaced": r["scope"] == "Namespaced",
                            "verbs": s["verbs"], "singular": "", "shortNames": [],
                            "categories": [],
                            "gv": (None, None) if same else (sk["group"], sk["version"])}
    return out, groups


def wait_established(name):
    for _ in range(100):
        _, _, body = call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name)
        conds = json.loads(body).get("status", {}).get("conditions", [])
        if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
            return
        time.sleep(0.1)
    raise AssertionError("CRD %s not established" % name)


class DiscoveryTest(unittest.TestCase):
    def test_aggregated_wire_form(self):
        for accept, version in ((V2, "v2"), (V2BETA1, "v2beta1")):
            for root in ("/api", "/apis"):
                st, hdrs, body = call("GET", root, headers={"Accept": accept + ",application/json"})
                self.assertEqual(st, 200, body)
                self.assertEqual(hdrs["content-type"], accept)
                self.assertEqual(hdrs.get("vary"), "Accept")
                doc = json.loads(body)
                self.assertEqual(doc["kind"], "APIGroupDiscoveryList")
                self.assertEqual(doc["apiVersion"], "apidiscovery.k8s.io/" + version)
                self.assertTrue(doc["items"])
                for item in doc["items"]:
                    for v in item["versions"]:
                        self.assertEqual(v["freshness"], "Current")
                etag = hdrs["etag"]
                self.assertRegex(etag, r'^"[0-9A-F]{128}"$')
                st, hdrs2, body2 = call("GET", root, headers={"Accept": accept,
                                                              "If-None-Match": etag})
                self.assertEqual((st, body2, hdrs2["etag"]), (304, b"", etag))
                st, _, body3 = call("GET", root, headers={"Accept": accept,
                                                          "If-None-Match": '"stale"'})
                self.assertEqual((st, body3), (200, body))
        # the core document holds the core group only, /apis every other
        _, core = get_json("/api", V2)
        self.assertEqual([i["metadata"] for i in core["items"]], [{}])
        _, groups = get_json("/apis", V2)
        self.assertNotIn({}, [i["metadata"] for i in groups["items"]])

    def test_legacy_when_not_asked_or_not_served(self):
        # plain JSON: the legacy documents, also Vary: Accept on the roots
        hdrs, api = get_json("/api")
        self.assertEqual((api["kind"], hdrs["content-type"], hdrs.get("vary")),
                         ("APIVersions", "application/json", "Accept"))
        _, apis = get_json("/apis")
        self.assertEqual(apis["kind"], "APIGroupList")
        # only where it is served: elsewhere the next entry, or 406
        for path in ("/api/v1", "/apis/apps", "/apis/apps/v1",
                     "/api/v1/namespaces/default/configmaps"):
            st, _, body = call("GET", path, headers={"Accept": V2})
            self.assertEqual(st, 406, path)
            self.assertEqual(json.loads(body)["reason"], "NotAcceptable")
            st, hdrs, body = call("GET", path, headers={"Accept": V2 + ", application/json"})
            self.assertEqual((st, hdrs["content-type"]), (200, "application/json"), path)
        # an unknown version or profile of it is not offered
        for accept in ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList",
                       V2 + ";profile=bogus"):
            st, _, _ = call("GET", "/apis", headers={"Accept": accept})
            self.assertEqual(st, 406, accept)
        st, hdrs, _ = call("GET", "/apis", headers={"Accept": V2 + ";profile=nopeer"})
        self.assertEqual((st, hdrs["content-type"]), (200, V2))

    def test_same_answer_both_ways_and_crd_at_once(self):
        st, _, body = call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
        self.assertEqual(st, 201, body)
        try:
            wait_established(CRD["metadata"]["name"])
            legacy, legacy_groups = legacy_view()
            agg, agg_groups = aggregated_view()
            self.assertEqual(agg, legacy)
            self.assertEqual(aggregated_view(V2BETA1)[0], legacy)
            # order: built-in groups by upstream priority, then CRD groups
            names = [g for g, _ in agg_groups]
            self.assertEqual(names[:9], ["apiregistration.k8s.io", "apps", "events.k8s.io",
                                         "authentication.k8s.io", "authorization.k8s.io",
                                         "rbac.authorization.k8s.io",
                                         "admissionregistration.k8s.io", "apiextensions.k8s.io",
                                         "coordination.k8s.io"])
            custom = names[9:]  # (another test's CRD group may be there too)
            self.assertEqual(custom, sorted(custom))
            self.assertIn("disco.example.com", custom)
            self.assertEqual([g["name"] for g in legacy_groups], names)
            # versions: v2 > v1 > v1beta1, the first preferred; v1alpha1 unserved
            self.assertEqual(dict(agg_groups)["disco.example.com"], ["v2", "v1", "v1beta1"])
            disco = [g for g in legacy_groups if g["name"] == "disco.example.com"][0]
            self.assertEqual([v["version"] for v in disco["versions"]], ["v2", "v1", "v1beta1"])
            self.assertEqual(disco["preferredVersion"]["version"], "v2")
            _, group = get_json("/apis/disco.example.com")
            self.assertEqual(group["preferredVersion"]["version"], "v2")
            g = legacy["disco.example.com/v2"]
            self.assertEqual(g["gadgets"]["shortNames"], ["gd"])
            self.assertEqual(g["gadgets/scale"]["gv"], ("autoscaling", "v1"))
            self.assertEqual(g["gadgets/status"]["kind"], "Gadget")
            self.assertNotIn("disco.example.com/v1alpha1", agg)
        finally:
            st, _, body = call("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                               + CRD["metadata"]["name"])
            self.assertEqual(st, 200, body)
        for _ in range(100):
            if "disco.example.com/v2" not in aggregated_view()[0]:
                break
            time.sleep(0.1)
        self.assertNotIn("disco.example.com", [g for g, _ in aggregated_view()[1]])

    def test_kubectl_discovers_in_two_requests(self):
        st, _, body = call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                           dict(CRD, metadata={"name": "gizmos.kubectl.example.com"},
                                spec=dict(CRD["spec"], group="kubectl.example.com",
                                          names={"plural": "gizmos", "singular": "gizmo",
                                                 "kind": "Gizmo", "shortNames": ["gz"]})))
        self.assertEqual(st, 201, body)
        wait_established("gizmos.kubectl.example.com")
        for kubectl in ("kubectl.1.27", "kubectl.1.33"):
            binary = os.path.join(SDK, kubectl)
            if not os.path.exists(binary):
                self.fail("%s is not installed" % binary)
            home = os.path.join(SERVER.tmp, "home-" + kubectl)  # a cold discovery cache
            env = dict(os.environ, HOME=home, KUBECONFIG=SERVER.kubeconfig)
            r = subprocess.run([binary, "api-resources", "-v=6"], env=env, timeout=60,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            gets = re.findall(r'(?:GET |verb="GET" url=")\S*?(/apis?\b[^?" ]*)', r.stderr)
            self.assertEqual(sorted(gets), ["/api", "/apis"], r.stderr[-2000:])
            rows = {tuple(line.split()[:2]) for line in r.stdout.splitlines()}
            self.assertIn(("gizmos", "gz"), rows, r.stdout)
            self.assertIn(("configmaps", "cm"), rows, r.stdout)
            self.assertIn(("deployments", "deploy"), rows, r.stdout)
            # the preferred version is the one kubectl uses
            r = subprocess.run([binary, "get", "gizmos", "-v=6"], env=env, timeout=60,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("/apis/kubectl.example.com/v2/namespaces/default/gizmos", r.stderr)

    def test_openapi_documents_to_many_clients_at_once(self):
        # The cached documents are shared by the serving threads (one
        # per CPU): served to many clients at once, each gets the same
        # document (under ThreadSanitizer, also without a race).
        paths = ["/openapi/v2", "/openapi/v3", "/openapi/v3/api/v1",
                 "/openapi/v3/apis/apps/v1"]
        want = {p: get_json(p)[1] for p in paths}
        got, errors = [], []

        def fetch(k):
            try:
                for i in range(6):
                    p = paths[(k + i) % len(paths)]
                    got.append((p, get_json(p)[1]))
            except Exception as e:  # reported below, with the others
                errors.append(repr(e))

        threads = [threading.Thread(target=fetch, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        self.assertEqual(len(got), 48)
        for p, doc in got:
            self.assertEqual(doc, want[p], p)


if __name__ == "__main__":
    run_unittests()
