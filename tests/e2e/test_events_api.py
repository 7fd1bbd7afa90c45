"""End-to-end tests of Events through both of their APIs against a real
`ckube server`: core/v1 Events and events.k8s.io/v1 Events are one set of
objects, as upstream stores them (pkg/apis/events/v1's conversion), so an
event recorded through client-go's old recorder (core/v1) is read through
the new one's API (events.k8s.io/v1) and the other way round: get, list,
watch, field selectors on either API's names, update and patch through the
other API, delete, kubectl get events and kubectl events."""
import json
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

from kubernetes import client  # noqa: E402

SERVER = Server("--controller-manager=false")
setUpModule, tearDownModule = SERVER.start, SERVER.stop
NS = "default"
CORE = "/api/v1/namespaces/%s/events" % NS
NEW = "/apis/events.k8s.io/v1/namespaces/%s/events" % NS


def call(method, path, body=None, ctype="application/json"):
    """(status, decoded body)."""
    conn = SERVER.connection(timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": ctype})
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        conn.close()


def kubectl(*args):
    return SERVER.kubectl(*args)


def core_event(name, pod="web-1", reason="Started", message="started the web"):
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": NS},
            "involvedObject": {"kind": "Pod", "namespace": NS, "name": pod, "uid": "u-" + pod,
                               "apiVersion": "v1"},
            "reason": reason, "message": message, "type": "Normal",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2026-11-27T10:00:00Z", "lastTimestamp": "2026-11-27T10:00:05Z",
            "count": 2, "reportingComponent": "kubelet", "reportingInstance": "node-1"}


def new_event(name, pod="db-1", reason="Pulled", note="pulled the image"):
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": NS},
            "eventTime": "2026-11-27T10:00:00.000000Z",
            "regarding": {"kind": "Pod", "namespace": NS, "name": pod, "uid": "u-" + pod,
                          "apiVersion": "v1"},
            "reason": reason, "note": note, "type": "Warning", "action": "Pulling",
            "reportingController": "example.com/puller", "reportingInstance": "puller-1"}


class EventsApiTest(unittest.TestCase):
    def test_core_event_read_as_events_k8s_io(self):
        st, made = call("POST", CORE, core_event("old-1"))
        self.assertEqual(st, 201, made)
        st, got = call("GET", NEW + "/old-1")
        self.assertEqual(st, 200, got)
        self.assertEqual((got["apiVersion"], got["kind"]), ("events.k8s.io/v1", "Event"))
        self.assertEqual(got["regarding"]["name"], "web-1")
        self.assertEqual(got["note"], "started the web")
        self.assertEqual(got["reportingController"], "kubelet")
        self.assertEqual(got["deprecatedSource"], {"component": "kubelet", "host": "node-1"})
        self.assertEqual(got["deprecatedCount"], 2)
        self.assertEqual(got["deprecatedFirstTimestamp"], "2026-11-27T10:00:00Z")
        self.assertEqual(got["deprecatedLastTimestamp"], "2026-11-27T10:00:05Z")
        for core_only in ("involvedObject", "message", "source", "count", "firstTimestamp",
                          "lastTimestamp", "reportingComponent"):
            self.assertNotIn(core_only, got)
        self.assertEqual(got["metadata"]["uid"], made["metadata"]["uid"])
        self.assertEqual(got["metadata"]["resourceVersion"], made["metadata"]["resourceVersion"])

    def test_events_k8s_io_event_read_as_core(self):
        ev = client.EventsV1Api(SERVER.client())
        made = ev.create_namespaced_event(NS, new_event("new-1"))
        self.assertEqual(made.note, "pulled the image")  # the reply is in the asked shape
        self.assertEqual(made.regarding.name, "db-1")
        core = client.CoreV1Api(SERVER.client()).read_namespaced_event("new-1", NS)
        self.assertEqual(core.involved_object.name, "db-1")
        self.assertEqual(core.message, "pulled the image")
        self.assertEqual(core.reporting_component, "example.com/puller")
        self.assertEqual(core.action, "Pulling")
        self.assertEqual(core.type, "Warning")
        self.assertEqual(core.metadata.uid, made.metadata.uid)
        st, raw = call("GET", CORE + "/new-1")
        self.assertEqual((raw["apiVersion"], raw["kind"]), ("v1", "Event"))
        self.assertNotIn("note", raw)
        self.assertNotIn("regarding", raw)

    def test_lists_and_field_selectors(self):
        call("POST", CORE, core_event("sel-a", pod="sel-pod-a", reason="Killing"))
        call("POST", NEW, new_event("sel-b", pod="sel-pod-b", reason="Killing"))
        for path, sel in ((NEW, "regarding.name=sel-pod-a"),
                          (CORE, "involvedObject.name=sel-pod-a")):
            st, lst = call("GET", path + "?fieldSelector=" + sel)
            self.assertEqual(st, 200, lst)
            self.assertEqual([i["metadata"]["name"] for i in lst["items"]], ["sel-a"], sel)
        st, lst = call("GET", NEW + "?fieldSelector=reportingController=example.com/puller,"
                       "reason=Killing")
        self.assertEqual([i["metadata"]["name"] for i in lst["items"]], ["sel-b"])
        st, lst = call("GET", CORE + "?fieldSelector=reportingComponent=example.com/puller,"
                       "reason=Killing")
        self.assertEqual([i["metadata"]["name"] for i in lst["items"]], ["sel-b"])
        names = {i["metadata"]["name"] for i in call("GET", NEW)[1]["items"]}
        self.assertTrue({"sel-a", "sel-b"} <= names, names)
        for item in call("GET", NEW)[1]["items"]:
            self.assertIn("regarding", item)  # every item in the list's shape
        # each API knows only its own names, as upstream
        st, bad = call("GET", CORE + "?fieldSelector=regarding.name=x")
        self.assertEqual((st, bad["message"]), (400, "field label not supported: regarding.name"))
        st, bad = call("GET", NEW + "?fieldSelector=involvedObject.name=x")
        self.assertEqual((st, bad["message"]),
                         (400, "field label not supported: involvedObject.name"))

    def test_update_and_patch_through_the_other_api(self):
        call("POST", NEW, new_event("upd-1"))
        st, got = call("PATCH", NEW + "/upd-1", {"note": "patched"},
                       "application/merge-patch+json")
        self.assertEqual((st, got.get("note")), (200, "patched"), got)
        st, core = call("GET", CORE + "/upd-1")
        self.assertEqual(core["message"], "patched")
        self.assertEqual(core["involvedObject"]["name"], "db-1")  # nothing else moved
        core["series"] = {"count": 2, "lastObservedTime": "2026-11-27T10:01:00.000000Z"}
        st, put = call("PUT", CORE + "/upd-1", core)
        self.assertEqual(st, 200, put)
        st, got = call("GET", NEW + "/upd-1")
        self.assertEqual((got["series"]["count"], got["note"]), (2, "patched"))
        got["series"]["count"] = 3
        st, put = call("PUT", NEW + "/upd-1", got)
        self.assertEqual((st, put.get("series", {}).get("count")), (200, 3), put)
        self.assertEqual(call("GET", CORE + "/upd-1")[1]["series"]["count"], 3)
        st, patched = call("PATCH", CORE + "/upd-1", {"message": "through core"},
                           "application/merge-patch+json")
        self.assertEqual((st, patched.get("message")), (200, "through core"), patched)
        self.assertEqual(call("GET", NEW + "/upd-1")[1]["note"], "through core")
        st, gone = call("DELETE", NEW + "/upd-1")
        self.assertEqual(st, 200, gone)
        self.assertEqual(call("GET", CORE + "/upd-1")[0], 404)
        # a core event (no eventTime) deleted through events.k8s.io
        call("POST", CORE, core_event("upd-2"))
        self.assertEqual(call("DELETE", NEW + "/upd-2")[0], 200)
        self.assertEqual(call("GET", CORE + "/upd-2")[0], 404)

    def test_watch_through_events_k8s_io_sees_core_events(self):
        rv = call("GET", NEW)[1]["metadata"]["resourceVersion"]
        seen = []

        def run():
            conn = SERVER.connection(timeout=30)
            conn.request("GET", NEW + "?watch=1&resourceVersion=%s&timeoutSeconds=10"
                         "&fieldSelector=regarding.name=watched-pod" % rv)
            r = conn.getresponse()
            while len(seen) < 2:
                line = r.readline()
                if not line:
                    break
                e = json.loads(line)
                seen.append((e["type"], e["object"]["apiVersion"], e["object"].get("note")))
            conn.close()
        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.3)  # the watch is open (from rv: nothing is missed either way)
        call("POST", CORE, core_event("w-1", pod="watched-pod", message="one"))
        call("POST", CORE, core_event("w-other", pod="other-pod", message="not this"))
        call("PATCH", CORE + "/w-1", {"message": "two"}, "application/merge-patch+json")
        t.join(30)
        self.assertEqual(seen, [("ADDED", "events.k8s.io/v1", "one"),
                                ("MODIFIED", "events.k8s.io/v1", "two")])

    def test_kubectl(self):
        call("POST", NEW, new_event("kc-1", pod="kc-pod", note="seen by kubectl"))
        rc, out, err = kubectl("get", "events", "-n", NS)
        self.assertEqual(rc, 0, err)
        self.assertIn("seen by kubectl", out)
        rc, out, err = kubectl("events", "-n", NS, "--for", "pod/kc-pod")
        self.assertEqual(rc, 0, err)
        self.assertIn("seen by kubectl", out)
        rc, out, err = kubectl("get", "events.v1.events.k8s.io", "-n", NS, "kc-1")
        self.assertEqual(rc, 0, err)
        self.assertIn("pod/kc-pod", out)


if __name__ == "__main__":
    run_unittests()
