"""End-to-end tests with the official Python client (python3-kubernetes)
against a real `ckube server`: the watch scenario of the client's own e2e
suite (list for a resourceVersion, write, watch from it with
timeout_seconds), the ConfigMap and Service API scenarios (strategic and
JSON patches, replace, label lists, delete) and error statuses.

Each test uses its own names; one server serves the whole file and must
exit 0 on SIGTERM at the end (sanitizer checks included)."""
import json
import os
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

from kubernetes import client, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

NS = "default"
SERVER = None
API = None


def short_uuid():
    return str(uuid.uuid4())[-12:]


def cm_manifest(name, value, labels=None):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {"e2e-tests": "true"}},
        "data": {"config.json": '{"command":"/usr/bin/mysqld_safe"}', "frontend.cnf": value},
    }


def status_body(exc):
    """The Status object of an ApiException (asserts it is one)."""
    body = json.loads(exc.body)
    assert body.get("kind") == "Status", body
    assert body.get("apiVersion") == "v1", body
    assert body.get("status") == "Failure", body
    assert body.get("code") == exc.status, (body, exc.status)
    return body


def setUpModule():
    global SERVER, API
    # API behaviour only: no controllers (kube-root-ca.crt in every
    # namespace would show in the ConfigMap lists below)
    SERVER = Server("--controller-manager=false").start()
    API = client.CoreV1Api(SERVER.client())


def tearDownModule():
    SERVER.stop()


class WatchTest(unittest.TestCase):
    def test_watch_configmaps(self):
        """As kubernetes-client/python's e2e test_watch: events after a
        list's resourceVersion, and the stream ends by itself."""
        sel = "e2e-watch=%s" % short_uuid()
        lab = dict([sel.split("=")])
        name_a = "configmap-a-" + short_uuid()
        API.create_namespaced_config_map(NS, cm_manifest(name_a, "a", lab))

        resp = API.list_namespaced_config_map(NS, label_selector=sel)
        self.assertEqual([i.metadata.name for i in resp.items], [name_a])
        rv = resp.metadata.resource_version
        self.assertTrue(rv and rv.isdigit(), rv)

        name_b = "configmap-b-" + short_uuid()
        cm_b = cm_manifest(name_b, "b", lab)
        API.create_namespaced_config_map(NS, cm_b)
        cm_b["data"]["config"] = "{}"
        API.patch_namespaced_config_map(name_b, NS, cm_b)
        API.delete_collection_namespaced_config_map(NS, label_selector=sel)

        w = watch.Watch()
        seen = []
        start = time.monotonic()
        for ev in w.stream(API.list_namespaced_config_map, namespace=NS, resource_version=rv,
                           timeout_seconds=5, label_selector=sel):
            seen.append((ev["type"], ev["object"].metadata.name,
                         ev["object"].metadata.resource_version))
            if len(seen) > 10:
                break
        elapsed = time.monotonic() - start
        types = [s[0] for s in seen]
        self.assertEqual(types, ["ADDED", "MODIFIED", "DELETED", "DELETED"], seen)
        self.assertEqual(seen[0][1], name_b)
        self.assertEqual(seen[1][1], name_b)
        self.assertEqual(sorted(s[1] for s in seen[2:]), sorted([name_a, name_b]))
        rvs = [int(s[2]) for s in seen]
        self.assertEqual(rvs, sorted(rvs), "event resourceVersions must increase")
        self.assertTrue(all(r > int(rv) for r in rvs), (rv, rvs))
        self.assertGreaterEqual(elapsed, 4.0, "stream ended before timeout_seconds")
        self.assertLess(elapsed, 8.0, "stream did not end on timeout_seconds=5")

    def test_watch_stop_and_resume(self):
        """Watch.stop() ends the stream; w.resource_version resumes it."""
        sel = "e2e-resume=%s" % short_uuid()
        lab = dict([sel.split("=")])
        w = watch.Watch()
        name = "resume-" + short_uuid()
        API.create_namespaced_config_map(NS, cm_manifest(name, "x", lab))
        got = None
        for ev in w.stream(API.list_namespaced_config_map, namespace=NS, label_selector=sel,
                           timeout_seconds=5):
            got = ev
            w.stop()
        self.assertEqual(got["type"], "ADDED")  # synthetic ADDED of a watch from ""
        self.assertEqual(got["object"].metadata.name, name)
        rv = w.resource_version
        API.patch_namespaced_config_map(name, NS, {"data": {"frontend.cnf": "y"}})
        evs = []
        for ev in w.stream(API.list_namespaced_config_map, namespace=NS, label_selector=sel,
                           resource_version=rv, timeout_seconds=3):
            evs.append(ev["type"])
            w.stop()
        self.assertEqual(evs, ["MODIFIED"])
        API.delete_namespaced_config_map(name, NS)


class ConfigMapTest(unittest.TestCase):
    def test_configmap_apis(self):
        name = "test-configmap-" + short_uuid()
        manifest = cm_manifest(name, "[mysqld]\nbind-address = 10.0.0.3\n")
        resp = API.create_namespaced_config_map(NS, manifest)
        self.assertEqual(resp.metadata.name, name)
        self.assertEqual(resp.metadata.namespace, NS)
        self.assertTrue(resp.metadata.uid)
        self.assertTrue(resp.metadata.resource_version)
        self.assertIsNotNone(resp.metadata.creation_timestamp)
        uid = resp.metadata.uid

        resp = API.read_namespaced_config_map(name, NS)
        self.assertEqual(resp.metadata.name, name)
        self.assertEqual(resp.data["frontend.cnf"], "[mysqld]\nbind-address = 10.0.0.3\n")

        # dict body: strategic merge patch
        resp = API.patch_namespaced_config_map(name, NS, {"data": {"config.json": "{}"}})
        self.assertEqual(resp.data["config.json"], "{}")
        self.assertIn("frontend.cnf", resp.data)
        # list body: JSON patch
        resp = API.patch_namespaced_config_map(
            name, NS, [{"op": "replace", "path": "/data", "value": {"new_value": "bar"}}])
        self.assertEqual(resp.data, {"new_value": "bar"})
        resp = API.patch_namespaced_config_map(
            name, NS, [{"op": "add", "path": "/metadata/labels/extra", "value": "1"},
                       {"op": "test", "path": "/data/new_value", "value": "bar"}])
        self.assertEqual(resp.metadata.labels, {"e2e-tests": "true", "extra": "1"})
        # strategic $patch: delete of a map key via null
        resp = API.patch_namespaced_config_map(name, NS, {"metadata": {"labels": {"extra": None}}})
        self.assertEqual(resp.metadata.labels, {"e2e-tests": "true"})

        # replace (PUT) with the current resourceVersion
        cur = API.read_namespaced_config_map(name, NS)
        cur.data = {"replaced": "yes"}
        resp = API.replace_namespaced_config_map(name, NS, cur)
        self.assertEqual(resp.data, {"replaced": "yes"})
        self.assertGreater(int(resp.metadata.resource_version),
                           int(cur.metadata.resource_version))
        self.assertEqual(resp.metadata.uid, uid)

        # list by label
        other = "other-" + short_uuid()
        API.create_namespaced_config_map(NS, cm_manifest(other, "o", {"e2e-other": "true"}))
        names = [i.metadata.name for i in
                 API.list_namespaced_config_map(NS, label_selector="e2e-tests=true").items]
        self.assertIn(name, names)
        self.assertNotIn(other, names)
        names = [i.metadata.name for i in
                 API.list_namespaced_config_map(NS, label_selector="e2e-tests!=true").items]
        self.assertIn(other, names)
        self.assertNotIn(name, names)
        items = API.list_config_map_for_all_namespaces(field_selector="metadata.name=" + name).items
        self.assertEqual([(i.metadata.namespace, i.metadata.name) for i in items], [(NS, name)])

        # delete
        st = API.delete_namespaced_config_map(name, NS)
        self.assertEqual(st.status, "Success")
        self.assertEqual(st.details.name, name)
        self.assertEqual(st.details.uid, uid)
        with self.assertRaises(ApiException) as cm:
            API.read_namespaced_config_map(name, NS)
        self.assertEqual(cm.exception.status, 404)
        API.delete_namespaced_config_map(other, NS)

    def test_error_404(self):
        name = "err-" + short_uuid()
        with self.assertRaises(ApiException) as cm:
            API.read_namespaced_config_map(name, NS)
        b = status_body(cm.exception)
        self.assertEqual((cm.exception.status, b["reason"]), (404, "NotFound"))
        self.assertEqual(b["message"], 'configmaps "%s" not found' % name)
        self.assertEqual(b["details"], {"name": name, "kind": "configmaps"})
        with self.assertRaises(ApiException) as cm:
            API.delete_namespaced_config_map(name, NS)
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(ApiException) as cm:
            API.patch_namespaced_config_map(name, NS, {"data": {"a": "b"}})
        self.assertEqual(cm.exception.status, 404)

    def test_error_409(self):
        name = "err-" + short_uuid()
        created = API.create_namespaced_config_map(NS, cm_manifest(name, "v"))
        with self.assertRaises(ApiException) as cm:
            API.create_namespaced_config_map(NS, cm_manifest(name, "v"))
        b = status_body(cm.exception)
        self.assertEqual((cm.exception.status, b["reason"]), (409, "AlreadyExists"))
        self.assertEqual(b["message"], 'configmaps "%s" already exists' % name)
        self.assertEqual(b["details"]["name"], name)
        self.assertEqual(b["details"]["kind"], "configmaps")

        # 409 Conflict: replace with a stale resourceVersion
        API.patch_namespaced_config_map(name, NS, {"data": {"bump": "1"}})
        stale = created
        stale.data = {"stale": "write"}
        with self.assertRaises(ApiException) as cm:
            API.replace_namespaced_config_map(name, NS, stale)
        b = status_body(cm.exception)
        self.assertEqual((cm.exception.status, b["reason"]), (409, "Conflict"))
        self.assertEqual(
            b["message"],
            'Operation cannot be fulfilled on configmaps "%s": the object has been modified; '
            'please apply your changes to the latest version and try again' % name)
        self.assertNotIn("stale", API.read_namespaced_config_map(name, NS).data)
        # ... and a JSON patch with a stale resourceVersion test/precondition
        with self.assertRaises(ApiException) as cm:
            API.patch_namespaced_config_map(
                name, NS, {"metadata": {"resourceVersion": created.metadata.resource_version},
                           "data": {"x": "y"}})
        self.assertEqual(cm.exception.status, 409)
        API.delete_namespaced_config_map(name, NS)

    def test_error_422_name(self):
        with self.assertRaises(ApiException) as cm:
            API.create_namespaced_config_map(NS, cm_manifest("Bad_Name", "v"))
        b = status_body(cm.exception)
        self.assertEqual((cm.exception.status, b["reason"]), (422, "Invalid"))
        self.assertTrue(b["message"].startswith(
            'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
            'a lowercase RFC 1123 subdomain must consist of'), b["message"])
        self.assertEqual(b["details"]["name"], "Bad_Name")
        self.assertEqual(b["details"]["kind"], "ConfigMap")
        causes = b["details"]["causes"]
        self.assertEqual(causes[0]["field"], "metadata.name")
        self.assertEqual(causes[0]["reason"], "FieldValueInvalid")

    def test_error_422_data_key(self):
        """A data key that is not a valid config key."""
        with self.assertRaises(ApiException) as cm:
            API.create_namespaced_config_map(
                NS, {"metadata": {"name": "badkey-" + short_uuid()}, "data": {"a b": "x"}})
        b = status_body(cm.exception)
        self.assertEqual(cm.exception.status, 422)
        self.assertEqual(b["details"]["causes"][0]["field"], "data[a b]")

    def test_error_missing_namespace(self):
        with self.assertRaises(ApiException) as cm:
            API.create_namespaced_config_map("nope-" + short_uuid(), cm_manifest("x", "v"))
        b = status_body(cm.exception)
        self.assertEqual((cm.exception.status, b["reason"]), (404, "NotFound"))
        self.assertTrue(b["message"].startswith('namespaces "nope-'), b["message"])

    def test_generate_name_and_namespaces(self):
        ns = "py-" + short_uuid()
        resp = API.create_namespace({"metadata": {"name": ns}})
        self.assertEqual(resp.status.phase, "Active")
        self.assertEqual(resp.metadata.labels.get("kubernetes.io/metadata.name"), ns)
        made = API.create_namespaced_config_map(
            ns, {"metadata": {"generateName": "gen-"}, "data": {"a": "b"}})
        self.assertTrue(made.metadata.name.startswith("gen-"))
        self.assertEqual(len(made.metadata.name), len("gen-") + 5)
        self.assertEqual(API.read_namespaced_config_map(made.metadata.name, ns).data, {"a": "b"})
        lst = API.list_namespaced_config_map(ns)
        self.assertEqual([i.metadata.name for i in lst.items], [made.metadata.name])
        # the list's own kind/apiVersion (the client needs them to decode)
        raw = API.list_namespaced_config_map(ns, _preload_content=False)
        doc = json.loads(raw.data)
        self.assertEqual((doc["kind"], doc["apiVersion"]), ("ConfigMapList", "v1"))
        self.assertEqual(doc["items"][0]["kind"], "ConfigMap")


class ServiceTest(unittest.TestCase):
    def test_service_apis(self):
        """As the client's test_service_apis: a strategic merge patch adds a
        port (ports merge on `port`)."""
        name = "frontend-" + short_uuid()
        manifest = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"labels": {"name": name}, "name": name, "resourceversion": "v1"},
            "spec": {"ports": [{"name": "port", "port": 80, "protocol": "TCP",
                                "targetPort": 80}],
                     "selector": {"name": name}},
        }
        resp = API.create_namespaced_service(NS, manifest)
        self.assertEqual(resp.metadata.name, name)
        self.assertTrue(resp.status)
        self.assertEqual(resp.spec.type, "ClusterIP")  # defaulted
        resp = API.read_namespaced_service(name, NS)
        self.assertEqual(resp.metadata.name, name)
        self.assertTrue(resp.status)

        manifest["spec"]["ports"] = [{"name": "new", "port": 8080, "protocol": "TCP",
                                      "targetPort": 8080}]
        resp = API.patch_namespaced_service(name, NS, manifest)
        self.assertEqual(len(resp.spec.ports), 2, resp.spec.ports)
        self.assertEqual(sorted(p.port for p in resp.spec.ports), [80, 8080])
        self.assertTrue(resp.status)

        # $patch: delete of one list element by its merge key
        resp = API.patch_namespaced_service(
            name, NS, {"spec": {"ports": [{"port": 80, "$patch": "delete"}]}})
        self.assertEqual([p.port for p in resp.spec.ports], [8080])
        # $patch: replace of the whole list
        resp = API.patch_namespaced_service(
            name, NS, {"spec": {"ports": [{"$patch": "replace"},
                                          {"name": "only", "port": 9090, "targetPort": 9090}]}})
        self.assertEqual([(p.name, p.port) for p in resp.spec.ports], [("only", 9090)])

        st = API.delete_namespaced_service(name, NS, body={})
        self.assertIsNotNone(st)
        with self.assertRaises(ApiException) as cm:
            API.read_namespaced_service(name, NS)
        self.assertEqual(cm.exception.status, 404)


class DeploymentTest(unittest.TestCase):
    def test_deployment_containers_merge(self):
        """Strategic merge of containers by name, and the scale subresource."""
        apps = client.AppsV1Api(API.api_client)
        name = "dep-" + short_uuid()
        body = {
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                             "spec": {"containers": [{"name": "a", "image": "nginx"}]}},
            },
        }
        d = apps.create_namespaced_deployment(NS, body)
        self.assertEqual(d.spec.replicas, 1)
        self.assertEqual(d.metadata.generation, 1)
        d = apps.patch_namespaced_deployment(name, NS, {"spec": {"template": {"spec": {
            "containers": [{"name": "b", "image": "busybox"}]}}}})
        self.assertEqual(sorted(c.name for c in d.spec.template.spec.containers), ["a", "b"])
        self.assertEqual(d.metadata.generation, 2)
        d = apps.patch_namespaced_deployment(name, NS, {"spec": {"template": {"spec": {
            "containers": [{"name": "a", "image": "nginx:2"}]}}}})
        imgs = {c.name: c.image for c in d.spec.template.spec.containers}
        self.assertEqual(imgs, {"a": "nginx:2", "b": "busybox"})
        sc = apps.read_namespaced_deployment_scale(name, NS)
        self.assertEqual((sc.kind, sc.spec.replicas), ("Scale", 1))
        sc = apps.patch_namespaced_deployment_scale(name, NS, {"spec": {"replicas": 4}})
        self.assertEqual(sc.kind, "Scale")
        self.assertEqual(sc.spec.replicas, 4)
        self.assertEqual(apps.read_namespaced_deployment(name, NS).spec.replicas, 4)
        apps.delete_namespaced_deployment(name, NS)


class PagingTest(unittest.TestCase):
    def test_limit_continue(self):
        ns = "page-" + short_uuid()
        API.create_namespace({"metadata": {"name": ns}})
        for i in range(5):
            API.create_namespaced_config_map(ns, {"metadata": {"name": "p%d" % i}})
        got, cont, pages, rvs = [], None, 0, set()
        while True:
            kw = {"limit": 2}
            if cont:
                kw["_continue"] = cont
            lst = API.list_namespaced_config_map(ns, **kw)
            pages += 1
            got += [i.metadata.name for i in lst.items]
            rvs.add(lst.metadata.resource_version)
            cont = lst.metadata._continue
            if pages == 1:
                self.assertEqual(lst.metadata.remaining_item_count, 3)
            if not cont:
                break
            self.assertLess(pages, 10)
        self.assertEqual(got, ["p0", "p1", "p2", "p3", "p4"])
        self.assertEqual(pages, 3)
        self.assertEqual(len(rvs), 1, "pages of one list report one resourceVersion")


    def test_pages_show_the_first_pages_revision(self):
        """Later pages list the state at the first page's resourceVersion,
        as upstream's paginated lists (etcd snapshots) do: writes between
        pages do not show."""
        ns = "snap-" + short_uuid()
        API.create_namespace({"metadata": {"name": ns}})
        for i in range(6):
            API.create_namespaced_config_map(ns, {"metadata": {"name": "s%d" % i},
                                                  "data": {"v": "1"}})
        first = API.list_namespaced_config_map(ns, limit=2)
        self.assertEqual([i.metadata.name for i in first.items], ["s0", "s1"])
        rv = first.metadata.resource_version
        API.patch_namespaced_config_map("s2", ns, {"data": {"v": "2"}})
        API.delete_namespaced_config_map("s3", ns)
        API.create_namespaced_config_map(ns, {"metadata": {"name": "s25"}})
        API.delete_namespaced_config_map("s0", ns)
        got, cont = [], first.metadata._continue
        while cont:
            page = API.list_namespaced_config_map(ns, limit=2, _continue=cont)
            self.assertEqual(page.metadata.resource_version, rv)
            got += [(i.metadata.name, (i.data or {}).get("v")) for i in page.items]
            cont = page.metadata._continue
        self.assertEqual(got, [("s2", "1"), ("s3", "1"), ("s4", "1"), ("s5", "1")])
        # the same revision, asked for exactly, in one list
        exact = API.list_namespaced_config_map(ns, resource_version=rv,
                                               resource_version_match="Exact")
        self.assertEqual([i.metadata.name for i in exact.items],
                         ["s0", "s1", "s2", "s3", "s4", "s5"])
        self.assertEqual(exact.metadata.resource_version, rv)
        # upstream's legacy rule: a resourceVersion with a limit and no
        # match is exact too
        legacy = API.list_namespaced_config_map(ns, resource_version=rv, limit=10)
        self.assertEqual([(i.metadata.name, (i.data or {}).get("v")) for i in legacy.items],
                         [("s%d" % i, "1") for i in range(6)])
        # without a limit it means "not older than": now
        newer = API.list_namespaced_config_map(ns, resource_version=rv)
        self.assertEqual(len(newer.items), 5)
        # and a new list shows the writes
        now = API.list_namespaced_config_map(ns)
        self.assertEqual([(i.metadata.name, (i.data or {}).get("v")) for i in now.items],
                         [("s1", "1"), ("s2", "2"), ("s25", None), ("s4", "1"), ("s5", "1")])


class ZRestartTest(unittest.TestCase):
    """Runs last (unittest orders classes by name): restarts the server."""

    def test_watch_410_after_restart(self):
        name = "old-" + short_uuid()
        old = API.create_namespaced_config_map(NS, cm_manifest(name, "v"))
        API.patch_namespaced_config_map(name, NS, {"data": {"x": "1"}})
        SERVER.stop()
        SERVER.start()
        w = watch.Watch()
        with self.assertRaises(ApiException) as cm:
            for _ in w.stream(API.list_namespaced_config_map, namespace=NS,
                              resource_version=old.metadata.resource_version,
                              timeout_seconds=5):
                pass
        self.assertEqual(cm.exception.status, 410)
        self.assertTrue(str(cm.exception.reason).startswith(
            "Expired: too old resource version: %s (" % old.metadata.resource_version),
            cm.exception.reason)
        # and the data survived the restart
        self.assertEqual(API.read_namespaced_config_map(name, NS).data["x"], "1")


if __name__ == "__main__":
    run_unittests()
