"""Custom resources with the official Python client (python3-kubernetes)
against a real `ckube server`: the CRD is created with
ApiextensionsV1Api (tests/e2e/manifests/crd/foo-crd.yaml), then
CustomObjectsApi creates, gets, lists (label and field selectors, across
namespaces), merge-patches, replaces (409 on a stale resourceVersion, 422
without one), patches and reads the status and scale subresources, and
deletes namespaced custom objects; a cluster-scoped CRD is served too;
kubernetes.dynamic.DynamicClient finds the resources through discovery.
watch.Watch streams a custom resource with timeout_seconds=3 from a listed
resourceVersion and sees ADDED, MODIFIED, DELETED; a label-selected watch
sees an object leave the selection. Errors come back as Status objects
(404, 409, 422 with causes).

One server serves the whole file and must exit 0 on SIGTERM at the end
(sanitizer checks included)."""
import json
import os
import sys
import threading
import time
import unittest
import uuid

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

from kubernetes import client, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

CRD_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "manifests", "crd")
GROUP, VERSION, PLURAL = "e2e.ckube.io", "v1", "foos"
NS = "default"
SERVER = None
API = None  # CustomObjectsApi
CORE = None


def short_uuid():
    return str(uuid.uuid4())[-12:]


def foo(name, labels=None, **spec):
    spec.setdefault("image", "nginx")
    return {
        "apiVersion": "%s/%s" % (GROUP, VERSION),
        "kind": "Foo",
        "metadata": {"name": name, "labels": labels or {"e2e": "py"}},
        "spec": spec,
    }


def status_body(exc):
    """The Status object of an ApiException (asserts it is one)."""
    body = json.loads(exc.body)
    assert body.get("kind") == "Status", body
    assert body.get("status") == "Failure", body
    assert body.get("code") == exc.status, (body, exc.status)
    return body


def load_crd(fname):
    with open(os.path.join(CRD_DIR, fname)) as f:
        return yaml.safe_load(f)


def wait_established(ext, name, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        crd = ext.read_custom_resource_definition(name)
        conds = {c.type: c.status for c in (crd.status.conditions or [])}
        if conds.get("Established") == "True":
            return crd
        time.sleep(0.1)
    raise AssertionError("CRD %s not Established: %s" % (name, crd.status))


def setUpModule():
    global SERVER, API, CORE
    SERVER = Server().start()
    api_client = SERVER.client()
    API = client.CustomObjectsApi(api_client)
    CORE = client.CoreV1Api(api_client)
    ext = client.ApiextensionsV1Api(api_client)
    for fname, name in (("foo-crd.yaml", "foos.e2e.ckube.io"), ("bar-crd.yaml", "bars.e2e.ckube.io")):
        made = ext.create_custom_resource_definition(load_crd(fname))
        assert made.metadata.name == name, made.metadata
        wait_established(ext, name)


def tearDownModule():
    SERVER.stop()


class CrdTest(unittest.TestCase):
    def test_crd_read_back(self):
        ext = client.ApiextensionsV1Api(API.api_client)
        crd = ext.read_custom_resource_definition("foos.e2e.ckube.io")
        self.assertEqual(crd.spec.names.short_names, ["fo", "fu"])
        self.assertEqual(crd.status.accepted_names.kind, "Foo")
        self.assertEqual(crd.status.stored_versions, ["v1"])
        conds = {c.type: (c.status, c.reason) for c in crd.status.conditions}
        self.assertEqual(conds["Established"], ("True", "InitialNamesAccepted"))
        self.assertEqual(conds["NamesAccepted"], ("True", "NoConflicts"))
        names = [c.metadata.name for c in ext.list_custom_resource_definition().items]
        self.assertIn("foos.e2e.ckube.io", names)
        self.assertIn("bars.e2e.ckube.io", names)
        with self.assertRaises(ApiException) as cm:
            ext.create_custom_resource_definition(load_crd("foo-crd.yaml"))
        b = status_body(cm.exception)
        self.assertEqual((cm.exception.status, b["reason"]), (409, "AlreadyExists"))
        self.assertEqual(
            b["message"],
            'customresourcedefinitions.apiextensions.k8s.io "foos.e2e.ckube.io" already exists')


class CustomObjectsTest(unittest.TestCase):
    def test_crud(self):
        name = "py-" + short_uuid()
        made = API.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, foo(name, replicas=2))
        self.assertEqual(made["kind"], "Foo")
        self.assertEqual(made["apiVersion"], "e2e.ckube.io/v1")
        self.assertEqual(made["metadata"]["name"], name)
        self.assertEqual(made["metadata"]["namespace"], NS)
        self.assertEqual(made["metadata"]["generation"], 1)
        self.assertTrue(made["metadata"]["uid"])
        self.assertTrue(made["metadata"]["resourceVersion"].isdigit())
        self.assertEqual(made["spec"], {"image": "nginx", "replicas": 2, "mode": "slow"})
        uid = made["metadata"]["uid"]

        got = API.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
        self.assertEqual(got["metadata"]["uid"], uid)
        self.assertEqual(got["spec"]["replicas"], 2)

        # merge patch (the client's content type for custom objects)
        patched = API.patch_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, name,
            {"spec": {"mode": "fast", "extra": {"free": {"form": [1, 2]}}},
             "metadata": {"labels": {"patched": "yes"}}})
        self.assertEqual(patched["spec"]["mode"], "fast")
        self.assertEqual(patched["spec"]["replicas"], 2)
        self.assertEqual(patched["spec"]["extra"], {"free": {"form": [1, 2]}})
        self.assertEqual(patched["metadata"]["labels"], {"e2e": "py", "patched": "yes"})
        self.assertEqual(patched["metadata"]["generation"], 2)
        self.assertGreater(int(patched["metadata"]["resourceVersion"]),
                           int(made["metadata"]["resourceVersion"]))
        # null deletes in a merge patch
        patched = API.patch_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, name, {"spec": {"extra": None}})
        self.assertNotIn("extra", patched["spec"])

        # replace (PUT) with the current resourceVersion
        cur = API.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
        cur["spec"]["replicas"] = 4
        replaced = API.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name, cur)
        self.assertEqual(replaced["spec"]["replicas"], 4)
        self.assertEqual(replaced["metadata"]["uid"], uid)
        self.assertGreater(int(replaced["metadata"]["resourceVersion"]),
                           int(cur["metadata"]["resourceVersion"]))
        # ... with the stale one: 409
        cur["spec"]["replicas"] = 5
        with self.assertRaises(ApiException) as cm:
            API.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name, cur)
        b = status_body(cm.exception)
        self.assertEqual((cm.exception.status, b["reason"]), (409, "Conflict"))
        self.assertEqual(
            b["message"],
            'Operation cannot be fulfilled on foos.e2e.ckube.io "%s": the object has been '
            'modified; please apply your changes to the latest version and try again' % name)
        # ... without one: 422 for custom resources
        del cur["metadata"]["resourceVersion"]
        with self.assertRaises(ApiException) as cm:
            API.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name, cur)
        b = status_body(cm.exception)
        self.assertEqual((cm.exception.status, b["reason"]), (422, "Invalid"))
        self.assertTrue(b["message"].endswith(
            '"%s" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
            'must be specified for an update' % name), b["message"])
        self.assertEqual(b["details"]["causes"][0]["field"], "metadata.resourceVersion")
        self.assertEqual(API.get_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, name)["spec"]["replicas"], 4)

        # delete: a Status (or the object) naming it; then 404
        st = API.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
        if st.get("kind") == "Status":
            self.assertEqual(st["status"], "Success")
            self.assertEqual(st["details"]["name"], name)
            self.assertEqual(st["details"]["uid"], uid)
        else:
            self.assertEqual(st["metadata"]["uid"], uid)
        with self.assertRaises(ApiException) as cm:
            API.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
        b = status_body(cm.exception)
        self.assertEqual((cm.exception.status, b["reason"]), (404, "NotFound"))
        self.assertEqual(b["message"], 'foos.e2e.ckube.io "%s" not found' % name)
        self.assertEqual(b["details"]["group"], GROUP)
        self.assertEqual(b["details"]["kind"], "foos")
        with self.assertRaises(ApiException) as cm:
            API.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(ApiException) as cm:
            API.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name, {"spec": {}})
        self.assertEqual(cm.exception.status, 404)

    def test_list_selectors(self):
        ns = "pyl-" + short_uuid()
        CORE.create_namespace({"metadata": {"name": ns}})
        a, b, c = ("a-" + short_uuid(), "b-" + short_uuid(), "c-" + short_uuid())
        API.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, foo(a, {"app": "x", "tier": "1"}))
        API.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, foo(b, {"app": "y"}))
        API.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, foo(c, {"app": "x"}))

        lst = API.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
        self.assertEqual(lst["kind"], "FooList")
        self.assertEqual(lst["apiVersion"], "e2e.ckube.io/v1")
        self.assertTrue(lst["metadata"]["resourceVersion"].isdigit())
        self.assertEqual(sorted(i["metadata"]["name"] for i in lst["items"]), sorted([a, b]))
        self.assertTrue(all(i["kind"] == "Foo" for i in lst["items"]))

        def names(**kw):
            return sorted(i["metadata"]["name"] for i in
                          API.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, **kw)["items"])
        self.assertEqual(names(label_selector="app=x"), [a])
        self.assertEqual(names(label_selector="app!=x"), [b])
        self.assertEqual(names(label_selector="app in (x,y)"), sorted([a, b]))
        self.assertEqual(names(label_selector="tier"), [a])
        self.assertEqual(names(label_selector="!tier"), [b])
        self.assertEqual(names(label_selector="app=z"), [])
        self.assertEqual(names(field_selector="metadata.name=" + b), [b])
        self.assertEqual(names(field_selector="metadata.namespace=" + ns), sorted([a, b]))

        # across namespaces
        every = API.list_cluster_custom_object(GROUP, VERSION, PLURAL, label_selector="app=x")
        got = sorted((i["metadata"]["namespace"], i["metadata"]["name"]) for i in every["items"])
        self.assertEqual(got, sorted([(ns, a), (NS, c)]))

        # paging
        page = API.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, limit=1)
        self.assertEqual(len(page["items"]), 1)
        self.assertTrue(page["metadata"].get("continue"))
        self.assertEqual(page["metadata"].get("remainingItemCount"), 1)
        rest = API.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, limit=1,
                                                 _continue=page["metadata"]["continue"])
        self.assertEqual(sorted([page["items"][0]["metadata"]["name"],
                                 rest["items"][0]["metadata"]["name"]]), sorted([a, b]))
        self.assertFalse(rest["metadata"].get("continue"))
        # resourceVersion=0 is served whole from the watch cache, limit
        # ignored (kube-apiserver's cacher does the same; informers rely on it)
        whole = API.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, limit=1,
                                                  resource_version="0")
        self.assertEqual(len(whole["items"]), 2)
        self.assertFalse(whole["metadata"].get("continue"))

        # delete collection by selector
        # (this client version's delete_collection_namespaced_custom_object
        # takes no label_selector: the same request through call_api)
        API.api_client.call_api(
            "/apis/{group}/{version}/namespaces/{namespace}/{plural}", "DELETE",
            path_params={"group": GROUP, "version": VERSION, "namespace": ns, "plural": PLURAL},
            query_params=[("labelSelector", "app=y")], header_params={"Accept": "application/json"},
            response_type="object", auth_settings=["BearerToken"], _return_http_data_only=True)
        self.assertEqual(names(), [a])
        API.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, a)
        API.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, c)

    def test_validation_errors(self):
        name = "inv-" + short_uuid()
        with self.assertRaises(ApiException) as cm:
            API.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, foo(name, replicas=11, mode="x"))
        b = status_body(cm.exception)
        self.assertEqual((cm.exception.status, b["reason"]), (422, "Invalid"))
        self.assertEqual((b["details"]["name"], b["details"]["group"], b["details"]["kind"]),
                         (name, GROUP, "Foo"))
        causes = sorted((c["field"], c["reason"]) for c in b["details"]["causes"])
        self.assertEqual(causes, [("spec.mode", "FieldValueNotSupported"),
                                  ("spec.replicas", "FieldValueInvalid")])
        with self.assertRaises(ApiException) as cm:
            API.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
        self.assertEqual(cm.exception.status, 404)

        # a patch that breaks the schema leaves the object alone
        API.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, foo(name))
        with self.assertRaises(ApiException) as cm:
            API.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name, {"spec": {"image": None}})
        b = status_body(cm.exception)
        self.assertEqual(cm.exception.status, 422)
        self.assertEqual([(c["field"], c["reason"]) for c in b["details"]["causes"]],
                         [("spec.image", "FieldValueRequired")])
        self.assertEqual(API.get_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, name)["spec"]["image"], "nginx")
        # a missing namespace
        with self.assertRaises(ApiException) as cm:
            API.create_namespaced_custom_object(GROUP, VERSION, "nope-" + short_uuid(), PLURAL, foo(name))
        b = status_body(cm.exception)
        self.assertEqual((cm.exception.status, b["reason"]), (404, "NotFound"))
        self.assertTrue(b["message"].startswith('namespaces "nope-'), b["message"])
        # a duplicate
        with self.assertRaises(ApiException) as cm:
            API.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, foo(name))
        b = status_body(cm.exception)
        self.assertEqual((cm.exception.status, b["reason"]), (409, "AlreadyExists"))
        self.assertEqual(b["message"], 'foos.e2e.ckube.io "%s" already exists' % name)
        # an unknown plural in a known group
        with self.assertRaises(ApiException) as cm:
            API.list_namespaced_custom_object(GROUP, VERSION, NS, "nosuchthings")
        self.assertEqual(cm.exception.status, 404)
        API.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)

    def test_invalid_message_names_group_kind(self):
        """Upstream names the qualified kind in a 422 message (kubectl
        prints details.kind instead)."""
        name = "msg-" + short_uuid()
        with self.assertRaises(ApiException) as cm:
            API.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, foo(name, replicas=11))
        b = status_body(cm.exception)
        self.assertEqual(
            b["message"],
            'Foo.e2e.ckube.io "%s" is invalid: spec.replicas: Invalid value: 11: '
            'spec.replicas in body should be less than or equal to 10' % name)

    def test_status_and_scale(self):
        name = "sub-" + short_uuid()
        body = foo(name, replicas=1)
        body["status"] = {"phase": "Preset"}
        made = API.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body)
        self.assertNotIn("Preset", json.dumps(made.get("status", {})))

        st = API.patch_namespaced_custom_object_status(
            GROUP, VERSION, NS, PLURAL, name, {"status": {"phase": "Ready", "replicas": 1},
                                               "spec": {"replicas": 9}})
        self.assertEqual(st["status"], {"phase": "Ready", "replicas": 1})
        self.assertEqual(st["spec"]["replicas"], 1)
        self.assertEqual(st["metadata"]["generation"], 1)
        got = API.get_namespaced_custom_object_status(GROUP, VERSION, NS, PLURAL, name)
        self.assertEqual(got["status"]["phase"], "Ready")
        # a main-resource patch ignores status
        p = API.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name,
                                               {"status": {"phase": "Sneaky"}})
        self.assertEqual(p["status"]["phase"], "Ready")
        # replace_..._status with the current object
        cur = API.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
        cur["status"]["phase"] = "Replaced"
        r = API.replace_namespaced_custom_object_status(GROUP, VERSION, NS, PLURAL, name, cur)
        self.assertEqual(r["status"]["phase"], "Replaced")

        sc = API.get_namespaced_custom_object_scale(GROUP, VERSION, NS, PLURAL, name)
        self.assertEqual((sc["kind"], sc["apiVersion"]), ("Scale", "autoscaling/v1"))
        self.assertEqual((sc["spec"]["replicas"], sc["status"]["replicas"]), (1, 1))
        sc = API.patch_namespaced_custom_object_scale(GROUP, VERSION, NS, PLURAL, name,
                                                      {"spec": {"replicas": 6}})
        self.assertEqual((sc["kind"], sc["spec"]["replicas"]), ("Scale", 6))
        obj = API.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
        self.assertEqual(obj["spec"]["replicas"], 6)
        self.assertEqual(obj["metadata"]["generation"], 2)
        sc["spec"]["replicas"] = 2
        sc = API.replace_namespaced_custom_object_scale(GROUP, VERSION, NS, PLURAL, name, sc)
        self.assertEqual(sc["spec"]["replicas"], 2)
        with self.assertRaises(ApiException) as cm:
            API.patch_namespaced_custom_object_scale(GROUP, VERSION, NS, PLURAL, name,
                                                     {"spec": {"replicas": 50}})
        self.assertEqual(cm.exception.status, 422)
        self.assertEqual(API.get_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, name)["spec"]["replicas"], 2)
        API.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)

    def test_cluster_scoped(self):
        name = "bar-" + short_uuid()
        made = API.create_cluster_custom_object(
            GROUP, VERSION, "bars",
            {"apiVersion": "e2e.ckube.io/v1", "kind": "Bar", "metadata": {"name": name}, "spec": {}})
        self.assertNotIn("namespace", made["metadata"])
        self.assertEqual(made["spec"], {"size": 5})
        got = API.get_cluster_custom_object(GROUP, VERSION, "bars", name)
        self.assertEqual(got["metadata"]["uid"], made["metadata"]["uid"])
        p = API.patch_cluster_custom_object(GROUP, VERSION, "bars", name, {"spec": {"size": 7}})
        self.assertEqual(p["spec"]["size"], 7)
        names = [i["metadata"]["name"] for i in
                 API.list_cluster_custom_object(GROUP, VERSION, "bars")["items"]]
        self.assertIn(name, names)
        API.delete_cluster_custom_object(GROUP, VERSION, "bars", name)
        with self.assertRaises(ApiException) as cm:
            API.get_cluster_custom_object(GROUP, VERSION, "bars", name)
        self.assertEqual(cm.exception.status, 404)


class DynamicClientTest(unittest.TestCase):
    """kubernetes.dynamic finds the custom resource through discovery."""

    def test_dynamic_client(self):
        from kubernetes import dynamic
        dyn = dynamic.DynamicClient(API.api_client)
        foos = dyn.resources.get(api_version="e2e.ckube.io/v1", kind="Foo")
        self.assertEqual((foos.name, foos.namespaced), ("foos", True))
        self.assertEqual(dyn.resources.get(api_version="e2e.ckube.io/v1", short_names=["fo", "fu"]).name, "foos")
        self.assertEqual(dyn.resources.get(api_version="e2e.ckube.io/v1", kind="Bar").namespaced, False)
        name = "dyn-" + short_uuid()
        made = foos.create(body=foo(name), namespace=NS)
        self.assertEqual(made.spec.replicas, 1)
        got = foos.get(name=name, namespace=NS)
        self.assertEqual(got.metadata.uid, made.metadata.uid)
        # the dynamic client patches with strategic merge unless told: 415
        with self.assertRaises(ApiException) as cm:
            foos.patch(body={"spec": {"replicas": 2}}, name=name, namespace=NS)
        self.assertEqual(cm.exception.status, 415)
        self.assertEqual(status_body(cm.exception)["reason"], "UnsupportedMediaType")
        p = foos.patch(body={"spec": {"replicas": 2}}, name=name, namespace=NS,
                       content_type="application/merge-patch+json")
        self.assertEqual(p.spec.replicas, 2)
        p = foos.patch(body=[{"op": "replace", "path": "/spec/replicas", "value": 3}], name=name,
                       namespace=NS, content_type="application/json-patch+json")
        self.assertEqual(p.spec.replicas, 3)
        self.assertIn(name, [i.metadata.name for i in foos.get(namespace=NS).items])
        foos.delete(name=name, namespace=NS)
        with self.assertRaises(ApiException) as cm:
            foos.get(name=name, namespace=NS)
        self.assertEqual(cm.exception.status, 404)


class WatchTest(unittest.TestCase):
    def test_watch_custom_objects(self):
        """As the client's own watch e2e: list for a resourceVersion, write,
        then watch from it with a timeout."""
        ns = "pyw-" + short_uuid()
        CORE.create_namespace({"metadata": {"name": ns}})
        name = "w-" + short_uuid()
        rv = API.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["metadata"]["resourceVersion"]
        API.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, foo(name))
        API.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name, {"spec": {"replicas": 3}})
        API.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)

        w = watch.Watch()
        events = []
        start = time.time()
        for ev in w.stream(API.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL,
                           resource_version=rv, timeout_seconds=3):
            events.append((ev["type"], ev["object"]["metadata"]["name"],
                           ev["object"].get("spec", {}).get("replicas")))
            if ev["type"] == "DELETED":
                w.stop()
        self.assertLess(time.time() - start, 10)
        self.assertEqual(events, [("ADDED", name, 1), ("MODIFIED", name, 3), ("DELETED", name, 3)])

    def test_watch_live_and_timeout(self):
        """A watch from the current state: writes made while it runs arrive
        live; the stream ends on its own after timeout_seconds."""
        ns = "pyv-" + short_uuid()
        CORE.create_namespace({"metadata": {"name": ns}})
        name = "live-" + short_uuid()
        API.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, foo(name))

        def writer():
            time.sleep(0.5)
            API.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name, {"spec": {"mode": "fast"}})
            time.sleep(0.2)
            API.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)

        t = threading.Thread(target=writer)
        t.start()
        events = []
        start = time.time()
        # no resource_version: the current object first, as a synthetic ADDED
        for ev in watch.Watch().stream(API.list_namespaced_custom_object, GROUP, VERSION, ns,
                                       PLURAL, timeout_seconds=3):
            self.assertEqual(ev["object"]["kind"], "Foo")
            events.append((ev["type"], ev["object"]["spec"]["mode"]))
        elapsed = time.time() - start
        t.join()
        self.assertEqual(events, [("ADDED", "slow"), ("MODIFIED", "fast"), ("DELETED", "fast")])
        self.assertGreater(elapsed, 2.5, "the stream ended before timeout_seconds")
        self.assertLess(elapsed, 8, "the stream outlived timeout_seconds")

    def test_watch_label_selector(self):
        ns = "pys-" + short_uuid()
        CORE.create_namespace({"metadata": {"name": ns}})
        name = "sel-" + short_uuid()
        rv = API.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["metadata"]["resourceVersion"]
        API.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, foo(name, {"keep": "yes"}))
        API.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name,
                                           {"metadata": {"labels": {"keep": "no"}}})
        API.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name,
                                           {"metadata": {"labels": {"keep": "yes"}}})
        events = []
        for ev in watch.Watch().stream(API.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL,
                                       resource_version=rv, label_selector="keep=yes",
                                       timeout_seconds=3):
            events.append((ev["type"], ev["object"]["metadata"]["labels"]["keep"]))
        self.assertEqual(events, [("ADDED", "yes"), ("DELETED", "no"), ("ADDED", "yes")])
        API.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)


class ZCrdDeleteTest(unittest.TestCase):
    """Runs last: deleting the CRD takes its objects and endpoints with it."""

    def test_delete_crd(self):
        ext = client.ApiextensionsV1Api(API.api_client)
        name = "gone-" + short_uuid()
        API.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, foo(name))
        rv = API.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)["metadata"]["resourceVersion"]
        seen = []

        def watcher():
            try:
                for ev in watch.Watch().stream(API.list_namespaced_custom_object, GROUP, VERSION, NS,
                                               PLURAL, resource_version=rv, timeout_seconds=5):
                    seen.append((ev["type"], ev["object"].get("metadata", {}).get("name")))
            except Exception as e:  # the stream may end with an error: recorded, not raised
                seen.append(("EXC", str(e)[:200]))

        t = threading.Thread(target=watcher)
        t.start()
        time.sleep(0.5)
        ext.delete_custom_resource_definition("foos.e2e.ckube.io")
        deadline = time.time() + 15
        while time.time() < deadline:
            try:
                ext.read_custom_resource_definition("foos.e2e.ckube.io")
            except ApiException as e:
                if e.status == 404:
                    break
            time.sleep(0.1)
        else:
            self.fail("CRD still present 15 s after its delete")
        # the endpoints go with the CRD (allowing a moment, as upstream's
        # handler also learns of the delete through an informer)
        deadline = time.time() + 5
        status = 200
        while time.time() < deadline:
            try:
                API.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)
            except ApiException as e:
                status = e.status
                break
            time.sleep(0.05)
        self.assertEqual(status, 404, "foos still served 5 s after their CRD was deleted")
        t.join(10)
        self.assertFalse(t.is_alive(), "the watch did not end")
        self.assertIn(("DELETED", name), seen)
        # bars are untouched
        API.list_cluster_custom_object(GROUP, VERSION, "bars")


if __name__ == "__main__":
    run_unittests()
