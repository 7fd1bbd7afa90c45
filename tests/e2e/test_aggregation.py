"""End-to-end tests of API aggregation (issue #25 item 3) against a real
`ckube server` with kubectl 1.33: an aggregated API server of the test's
own (extension_backend.py, metrics.example.com/v1 counts) behind a
Service and Endpoints, registered as an APIService; the server marks it
Available after its discovery check, proxies requests to it over TLS
with the front-proxy client certificate and the user in X-Remote-*
headers (and not the client's credentials), streams watches through,
merges its group into discovery (legacy and aggregated), and when the
backend goes away marks it unavailable with upstream's reasons, answers
503 for it, and keeps kubectl working for everything else."""
import base64
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402
from extension_backend import GROUP, VERSION, Backend  # noqa: E402

SERVER = Server("--controller-manager=false")
APISVC = "/apis/apiregistration.k8s.io/v1/apiservices"
STATE = {}


def call(method, path, body=None, headers=None):
    conn = SERVER.connection(timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw or b"null"), r
        except ValueError:
            return r.status, raw.decode(errors="replace"), r
    finally:
        conn.close()


def kubectl(*args, stdin=None):
    return SERVER.kubectl(*args, stdin=stdin)


def condition(name):
    st, obj, _ = call("GET", APISVC + "/" + name)
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == "Available":
            return c
    return None


def wait_condition(name, status, timeout=20):
    deadline = time.time() + timeout
    while True:
        c = condition(name)
        if c and c["status"] == status:
            return c
        if time.time() > deadline:
            raise AssertionError("APIService %s not Available=%s: %s" % (name, status, c))
        time.sleep(0.3)


def touch_endpoints():
    """A change the availability checks react to at once (instead of
    their 30 s resync)."""
    st, body, _ = call("PATCH", "/api/v1/namespaces/default/endpoints/ext",
                       {"metadata": {"annotations": {"touched": str(time.time())}}},
                       {"Content-Type": "application/merge-patch+json"})
    assert st == 200, body


def setUpModule():
    SERVER.start()
    st, cm, _ = call("GET", "/api/v1/namespaces/kube-system/configmaps/"
                            "extension-apiserver-authentication")
    assert st == 200, cm
    STATE["cm"] = cm["data"]
    backend = Backend(os.path.join(SERVER.tmp, "ext"), cm["data"]["requestheader-client-ca-file"],
                      json.loads(cm["data"]["requestheader-allowed-names"])).start()
    STATE["backend"] = backend
    for path, obj in (
            ("/api/v1/namespaces/default/services",
             {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"},
              "spec": {"ports": [{"name": "https", "port": 443,
                                  "targetPort": backend.port}]}}),
            ("/api/v1/namespaces/default/endpoints",
             {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "ext"},
              "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                           "ports": [{"name": "https", "port": backend.port}]}]}),
            (APISVC,
             {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
              "metadata": {"name": "%s.%s" % (VERSION, GROUP)},
              "spec": {"group": GROUP, "version": VERSION,
                       "service": {"namespace": "default", "name": "ext", "port": 443},
                       "caBundle": base64.b64encode(backend.ca_pem).decode(),
                       "groupPriorityMinimum": 1000, "versionPriority": 15}})):
        st, body, _ = call("POST", path, obj)
        assert st == 201, body


def tearDownModule():
    try:
        if STATE.get("backend"):
            STATE["backend"].stop()
    finally:
        SERVER.stop()


class AggregationTest(unittest.TestCase):
    def test_1_published_for_extension_servers(self):
        cm = STATE["cm"]
        self.assertIn("BEGIN CERTIFICATE", cm["requestheader-client-ca-file"])
        self.assertEqual(json.loads(cm["requestheader-allowed-names"]), ["front-proxy-client"])
        self.assertEqual(json.loads(cm["requestheader-username-headers"]), ["X-Remote-User"])
        self.assertEqual(json.loads(cm["requestheader-group-headers"]), ["X-Remote-Group"])
        self.assertEqual(json.loads(cm["requestheader-extra-headers-prefix"]),
                         ["X-Remote-Extra-"])
        self.assertIn("BEGIN CERTIFICATE", cm["client-ca-file"])

    def test_2_available_then_proxied(self):
        c = wait_condition("%s.%s" % (VERSION, GROUP), "True")
        self.assertEqual((c["reason"], c["message"]), ("Passed", "all checks passed"))
        rc, out, err = kubectl("get", "apiservice", "%s.%s" % (VERSION, GROUP))
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"v1\.metrics\.example\.com\s+default/ext\s+True")
        # kubectl through discovery, the proxy and the backend's Table
        rc, out, err = kubectl("get", "counts", "-n", "default")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"NAME\s+OBJECTS")
        self.assertRegex(out, r"configmaps\s+10")
        rc, out, err = kubectl("get", "cnt", "secrets", "-n", "default", "-o", "json")
        self.assertEqual(rc, 0, err)
        obj = json.loads(out)
        self.assertEqual(obj["objects"], 7)
        # the backend saw the front proxy's certificate and the user, not
        # the client's credentials
        self.assertEqual(obj["seenBy"]["user"], "system:admin")
        self.assertIn("system:masters", obj["seenBy"]["groups"])
        self.assertIn("system:authenticated", obj["seenBy"]["groups"])
        last = [r for r in STATE["backend"].requests if r["path"].endswith("/secrets")][-1]
        self.assertNotIn("Authorization", last["headers"])
        self.assertNotIn("Impersonate-User", last["headers"])
        # errors of the backend pass through
        rc, out, err = kubectl("get", "counts", "nothere", "-n", "default")
        self.assertNotEqual(rc, 0)
        self.assertIn('counts.metrics.example.com "nothere" not found', err)

    def test_3_discovery_merged(self):
        wait_condition("%s.%s" % (VERSION, GROUP), "True")
        rc, out, err = kubectl("api-resources", "--api-group", GROUP)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"counts\s+cnt\s+metrics\.example\.com/v1\s+true\s+Count")
        st, groups, _ = call("GET", "/apis")
        self.assertIn(GROUP, [g["name"] for g in groups["groups"]])
        st, g, _ = call("GET", "/apis/" + GROUP)
        self.assertEqual((st, g["kind"], g["preferredVersion"]["version"]),
                         (200, "APIGroup", VERSION), g)
        st, rl, _ = call("GET", "/apis/%s/%s" % (GROUP, VERSION))  # proxied
        self.assertEqual((st, rl["kind"]), (200, "APIResourceList"), rl)

    def test_3b_openapi_of_the_backend(self):
        """The backend's /openapi/v3 is read after each passed check: only
        a URL of its own group/version's document is named in the server's
        /openapi/v3 (and proxied); anything else is left out."""
        backend = STATE["backend"]
        key = "apis/%s/%s" % (GROUP, VERSION)
        wait_condition("%s.%s" % (VERSION, GROUP), "True")

        def named(want, why):
            # an Endpoints change makes the aggregator check again at once
            rc, out, err = kubectl("annotate", "endpoints", "ext", "touched=%f" % time.time(),
                                   "--overwrite")
            self.assertEqual(rc, 0, err)
            deadline = time.time() + 15
            while True:
                st, index, _ = call("GET", "/openapi/v3")
                self.assertEqual(st, 200, index)
                got = index["paths"].get(key, {}).get("serverRelativeURL")
                if got == want or time.time() > deadline:
                    break
                time.sleep(0.2)
            self.assertEqual(got, want, why)
            self.assertIn("api/v1", index["paths"])

        named(None, "no /openapi/v3 at the backend (404)")
        url = "/openapi/v3/%s?hash=ABC123" % key
        backend.openapi_index = {"paths": {key: {"serverRelativeURL": url}}}
        named(url, "the backend's document")
        n = len(backend.requests)
        st, doc, _ = call("GET", url)
        self.assertEqual((st, doc["info"]["title"]), (200, "ext"), doc)
        seen = [r for r in backend.requests[n:] if r["path"] == "/openapi/v3/" + key]
        self.assertEqual([r["query"] for r in seen], ["hash=ABC123"])
        self.assertEqual(seen[0]["user"][0], "system:admin")
        # each bad answer takes a named document out again
        good = backend.openapi_index
        for bad, why in (
                ({"paths": {key: {"serverRelativeURL": "/api/v1/secrets"}}},
                 "a URL outside the group/version's document"),
                ({"paths": {key: {"serverRelativeURL": "/openapi/v3/%sx?hash=1" % key}}},
                 "another group/version's document"),
                (b"not json", "an index that is no JSON"),
                (None, "no index any more (404)")):
            backend.openapi_index = good
            named(url, "the backend's document again")
            backend.openapi_index = bad
            named(None, why)

    def test_4_watch_streams_through(self):
        wait_condition("%s.%s" % (VERSION, GROUP), "True")
        conn = SERVER.connection(timeout=30)
        conn.request("GET", "/apis/%s/%s/namespaces/default/counts?watch=1" % (GROUP, VERSION))
        r = conn.getresponse()
        self.assertEqual(r.status, 200)
        events = [json.loads(line) for line in r.read().splitlines() if line.strip()]
        conn.close()
        self.assertEqual([e["object"]["metadata"]["name"] for e in events],
                         ["configmaps", "secrets", "pods"])

    def test_5_missing_service(self):
        st, body, _ = call("POST", APISVC, {
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1.ghost.example.com"},
            "spec": {"group": "ghost.example.com", "version": "v1",
                     "service": {"namespace": "default", "name": "ghost"},
                     "insecureSkipTLSVerify": True,
                     "groupPriorityMinimum": 100, "versionPriority": 10}})
        self.assertEqual(st, 201, body)
        c = wait_condition("v1.ghost.example.com", "False")
        self.assertEqual((c["reason"], c["message"]),
                         ("ServiceNotFound", 'service/ghost in "default" is not present'))
        st, body, r = call("GET", "/apis/ghost.example.com/v1/namespaces/default/things")
        self.assertEqual((st, body), (503, "service unavailable\n"))
        rc, out, err = kubectl("get", "apiservice", "v1.ghost.example.com")
        self.assertRegex(out, r"v1\.ghost\.example\.com\s+default/ghost\s+False \(ServiceNotFound\)")
        # kubectl's discovery still works for everything else
        rc, out, err = kubectl("get", "configmaps", "-A")
        self.assertEqual(rc, 0, err)
        self.assertNotIn("ghost", err)

    def test_6_backend_gone(self):
        wait_condition("%s.%s" % (VERSION, GROUP), "True")
        STATE["backend"].stop()
        STATE["backend"] = None
        touch_endpoints()
        c = wait_condition("%s.%s" % (VERSION, GROUP), "False")
        self.assertEqual(c["reason"], "FailedDiscoveryCheck")
        self.assertIn("failing or missing response from https://127.0.0.1:", c["message"])
        rc, out, err = kubectl("get", "counts", "-n", "default")
        self.assertNotEqual(rc, 0)
        rc, out, err = kubectl("create", "configmap", "still-works", "--from-literal=a=b")
        self.assertEqual(rc, 0, err)
        rc, out, err = kubectl("get", "configmaps", "still-works")
        self.assertEqual(rc, 0, err)
        rc, out, err = kubectl("api-resources")
        self.assertEqual(rc, 0, err)
        self.assertNotRegex(out, r"(?m)^counts\s")  # its group left out while unavailable


if __name__ == "__main__":
    run_unittests()
