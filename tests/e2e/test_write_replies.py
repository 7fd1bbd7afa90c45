"""End-to-end tests of what a write answers. The server replies to a
stored create or update with the bytes it stored plus the new
resourceVersion, without encoding the object again; those bytes must be
exactly what a GET of the object then serves (the cache builds them the
same way from storage), for every kind of write and for objects the fast
path does not take (a custom resource holding a real number, which is
encoded the slow way). Raw HTTP, so the bytes themselves are compared."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

SERVER = None
CM = "/api/v1/namespaces/default/configmaps"
CRD_PATH = "/apis/stable.example.com/v1/namespaces/default/widgets"


def call(method, path, body=None, ctype="application/json"):
    conn = SERVER.connection(timeout=30)
    try:
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": ctype,
                                                       "Accept": "application/json"})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


class WriteReplyTest(unittest.TestCase):
    def assert_reply_is_stored(self, status, body, path, want_status):
        self.assertEqual(status, want_status, body[:400])
        doc = json.loads(body)
        rv = doc["metadata"]["resourceVersion"]
        self.assertTrue(rv.isdigit(), rv)
        gstatus, got = call("GET", path)
        self.assertEqual(gstatus, 200)
        self.assertEqual(body, got)
        # resourceVersion comes last in metadata, as the cache has it.
        self.assertEqual(list(doc["metadata"])[-1], "resourceVersion")
        return doc

    def test_create_update_patch_apply(self):
        obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "w1", "labels": {"a": "b"},
                            "annotations": {"note": "tab\t \"q\" \\ \u00e9 \u2603 \U0001F600"}},
               "data": {"k": "v\n"}}
        st, body = call("POST", CM, obj)
        created = self.assert_reply_is_stored(st, body, CM + "/w1", 201)
        self.assertEqual(created["metadata"]["annotations"]["note"],
                         obj["metadata"]["annotations"]["note"])

        created["data"]["k"] = "v2"
        st, body = call("PUT", CM + "/w1", created)
        updated = self.assert_reply_is_stored(st, body, CM + "/w1", 200)
        self.assertGreater(int(updated["metadata"]["resourceVersion"]),
                           int(created["metadata"]["resourceVersion"]))

        st, body = call("PATCH", CM + "/w1", {"data": {"m": "1"}},
                        "application/merge-patch+json")
        self.assert_reply_is_stored(st, body, CM + "/w1", 200)
        st, body = call("PATCH", CM + "/w1", {"data": {"s": "2"}},
                        "application/strategic-merge-patch+json")
        self.assert_reply_is_stored(st, body, CM + "/w1", 200)
        st, body = call("PATCH", CM + "/w1", [{"op": "add", "path": "/data/j", "value": "3"}],
                        "application/json-patch+json")
        doc = self.assert_reply_is_stored(st, body, CM + "/w1", 200)
        self.assertEqual(doc["data"], {"k": "v2", "m": "1", "s": "2", "j": "3"})

        apply = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w2"},
                 "data": {"x": "y"}}
        st, body = call("PATCH", CM + "/w2?fieldManager=t", apply, "application/apply-patch+yaml")
        self.assert_reply_is_stored(st, body, CM + "/w2", 201)

    def test_generate_name_and_yaml_body(self):
        st, body = call("POST", CM, b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                        b"  generateName: gen-\ndata:\n  a: '1'\n", "application/yaml")
        self.assertEqual(st, 201, body)
        name = json.loads(body)["metadata"]["name"]
        self.assertTrue(name.startswith("gen-"))
        self.assert_reply_is_stored(st, body, CM + "/" + name, 201)

    def test_dry_run_is_not_stored(self):
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}}
        st, body = call("POST", CM + "?dryRun=All", obj)
        self.assertEqual(st, 201, body)
        self.assertEqual(json.loads(body)["metadata"]["name"], "dry")
        self.assertEqual(call("GET", CM + "/dry")[0], 404)

    def test_dry_run_delete_of_an_object_with_finalizers(self):
        # A dry-run delete of an object with finalizers is a dry-run
        # update (deletionTimestamp): it answers and changes nothing.
        st, body = call("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "fin", "finalizers": ["e2e/keep"]}})
        self.assertEqual(st, 201, body)
        before = call("GET", CM + "/fin")[1]
        for _ in range(3):
            st, body = call("DELETE", CM + "/fin?dryRun=All")
            self.assertEqual(st, 200, body)
            self.assertIn("deletionTimestamp", json.loads(body)["metadata"])
        self.assertEqual(call("GET", CM + "/fin")[1], before)
        st, body = call("PATCH", CM + "/fin", {"metadata": {"finalizers": None}},
                        "application/merge-patch+json")
        self.assertEqual(st, 200, body)
        self.assertEqual(call("DELETE", CM + "/fin")[0], 200)
        self.assertEqual(call("GET", CM + "/fin")[0], 404)

    def test_update_past_the_object_limit(self):
        # Each value fits the request limit; the object stops fitting the
        # 1.5 MiB object limit after the second patch: 413, nothing stored.
        st, body = call("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "big"}, "data": {"a": "x" * 900000}})
        self.assertEqual(st, 201)
        st, body = call("PATCH", CM + "/big", {"data": {"b": "y" * 900000}},
                        "application/merge-patch+json")
        self.assertEqual(st, 413, body[:300])
        self.assertEqual(json.loads(body)["reason"], "RequestEntityTooLarge")
        self.assertNotIn("b", json.loads(call("GET", CM + "/big")[1])["data"])

    def test_custom_resource_with_a_real_number(self):
        # Reals are outside the scanner's canonical form: the reply is
        # encoded from the object instead, and still equals the GET.
        st, body = call("POST", CRD_PATH, {"apiVersion": "stable.example.com/v1",
                                           "kind": "Widget", "metadata": {"name": "r1"},
                                           "spec": {"ratio": 0.25, "count": 3}})
        doc = self.assert_reply_is_stored(st, body, CRD_PATH + "/r1", 201)
        self.assertEqual(doc["spec"], {"ratio": 0.25, "count": 3})
        st, body = call("POST", CRD_PATH, {"apiVersion": "stable.example.com/v1",
                                           "kind": "Widget", "metadata": {"name": "i1"},
                                           "spec": {"count": 3}})
        self.assert_reply_is_stored(st, body, CRD_PATH + "/i1", 201)

    def test_errors_are_statuses(self):
        st, body = call("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "dup"}})
        self.assertEqual(st, 201)
        st, body = call("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "dup"}})
        self.assertEqual(st, 409)
        self.assertEqual(json.loads(body)["reason"], "AlreadyExists")
        st, body = call("POST", CM, b"{not json")
        self.assertEqual(st, 400)
        self.assertEqual(json.loads(body)["kind"], "Status")


def setUpModule():
    global SERVER
    SERVER = Server("--controller-manager=false").start()
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.stable.example.com"},
           "spec": {"group": "stable.example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {
                                      "type": "object",
                                      "x-kubernetes-preserve-unknown-fields": True}}}]}}
    st, body = call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert st == 201, body
    for _ in range(100):
        if call("GET", CRD_PATH)[0] == 200:
            break
        import time
        time.sleep(0.05)


def tearDownModule():
    SERVER.stop()


if __name__ == "__main__":
    run_unittests()
