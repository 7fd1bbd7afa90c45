"""End-to-end tests of the API server's /metrics against a real `ckube
server`: kube-apiserver's metric names and labels, counted for every kind
of request (buffered, streamed list, watch), the long-running gauge of open
watches, stored objects per resource (a CRD's too), process metrics, and a
well-formed Prometheus text exposition, named threads; and the health endpoints
(/healthz, /livez, /readyz: terse, verbose, exclude, one check, 404)."""
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prom_text  # noqa: E402
from ckube_harness import Server, run_unittests  # noqa: E402

SERVER = Server("--controller-manager=false")
setUpModule, tearDownModule = SERVER.start, SERVER.stop
CM = "/api/v1/namespaces/default/configmaps"


def call(method, path, body=None, ctype="application/json", accept="application/json"):
    conn = SERVER.connection(timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": ctype, "Accept": accept})
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type"), r.read()
    finally:
        conn.close()


def scrape():
    """{(name, frozenset(labels)): value}, checking every line's syntax."""
    return prom_text.scrape(SERVER)


def proc_cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def value(metrics, name, **labels):
    want = set(labels.items())
    total = 0.0
    for (n, ls), v in metrics.items():
        if n == name and want <= set(ls):
            total += v
    return total


def req_labels(verb, resource="configmaps", scope="namespace", code=None, **extra):
    labels = dict(verb=verb, group="", version="v1", resource=resource, subresource="",
                  scope=scope, component="apiserver", dry_run="")
    labels.update(extra)
    if code is not None:
        labels["code"] = str(code)
    return labels


class ServerMetricsTest(unittest.TestCase):
    def test_requests_by_verb_scope_and_code(self):
        before = scrape()
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m1"}}
        self.assertEqual(call("POST", CM, cm)[0], 201)
        self.assertEqual(call("POST", CM, cm)[0], 409)
        self.assertEqual(call("POST", CM + "?dryRun=All",
                              dict(cm, metadata={"name": "dry"}))[0], 201)
        self.assertEqual(call("GET", CM + "/m1")[0], 200)
        self.assertEqual(call("GET", CM + "/nope")[0], 404)
        self.assertEqual(call("GET", CM)[0], 200)
        self.assertEqual(call("GET", "/api/v1/configmaps")[0], 200)
        self.assertEqual(call("PATCH", CM + "/m1", {"data": {"a": "1"}},
                              "application/merge-patch+json")[0], 200)
        self.assertEqual(call("PATCH", CM + "/m2?fieldManager=t",
                              dict(cm, metadata={"name": "m2"}),
                              "application/apply-patch+yaml")[0], 201)
        st, _, body = call("GET", CM + "/m1")
        self.assertEqual(call("PUT", CM + "/m1", json.loads(body))[0], 200)
        self.assertEqual(call("DELETE", CM + "/m2")[0], 200)
        self.assertEqual(call("GET", "/api")[0], 200)
        call("POST", "/version", {})
        after = scrape()

        def delta(**labels):
            return (value(after, "apiserver_request_total", **labels)
                    - value(before, "apiserver_request_total", **labels))
        self.assertEqual(delta(**req_labels("POST", code=201)), 1)
        self.assertEqual(delta(**req_labels("POST", code=409)), 1)
        self.assertEqual(delta(**req_labels("POST", code=201, dry_run="All")), 1)
        self.assertEqual(delta(**req_labels("GET", scope="resource", code=200)), 2)
        self.assertEqual(delta(**req_labels("GET", scope="resource", code=404)), 1)
        self.assertEqual(delta(**req_labels("LIST", code=200)), 1)
        self.assertEqual(delta(**req_labels("LIST", scope="cluster", code=200)), 1)
        self.assertEqual(delta(**req_labels("PATCH", scope="resource", code=200)), 1)
        self.assertEqual(delta(**req_labels("APPLY", scope="resource", code=201)), 1)
        self.assertEqual(delta(**req_labels("PUT", scope="resource", code=200)), 1)
        self.assertEqual(delta(**req_labels("DELETE", scope="resource", code=200)), 1)
        # non-resource paths: GET with empty resource labels
        self.assertGreaterEqual(delta(verb="GET", resource="", scope="", code="200"), 1)
        self.assertEqual(delta(verb="POST", resource="", scope=""), 1)
        # the latency histogram counts the same requests, without the code
        h = "apiserver_request_duration_seconds_count"
        self.assertEqual(value(after, h, **req_labels("GET", scope="resource"))
                         - value(before, h, **req_labels("GET", scope="resource")), 3)
        buckets = [(dict(ls)["le"], v) for (n, ls), v in after.items()
                   if n == "apiserver_request_duration_seconds_bucket"
                   and set(req_labels("POST").items()) <= set(ls)]
        self.assertIn("+Inf", [le for le, _ in buckets])
        self.assertIn("0.005", [le for le, _ in buckets])

    def test_watch_is_long_running(self):
        lr = req_labels("WATCH")
        del lr["dry_run"]
        before = value(scrape(), "apiserver_longrunning_requests", **lr)
        s = SERVER.socket(timeout=10)
        try:
            s.sendall(b"GET " + CM.encode() + b"?watch=true HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertIn(b"200 OK", s.recv(4096))
            self.assertEqual(value(scrape(), "apiserver_longrunning_requests", **lr), before + 1)
            # a watch is counted when it ends, and not in the latency histogram
            hist = value(scrape(), "apiserver_request_duration_seconds_count", verb="WATCH")
            self.assertEqual(hist, 0)
        finally:
            s.close()
        for _ in range(100):
            m = scrape()
            if value(m, "apiserver_longrunning_requests", **lr) == before:
                break
            time.sleep(0.05)
        self.assertEqual(value(m, "apiserver_longrunning_requests", **lr), before)
        self.assertGreaterEqual(value(m, "apiserver_request_total", **req_labels("WATCH", code=200)), 1)

    def test_large_list_streamed_is_counted(self):
        big = "x" * 200000
        for i in range(3):  # > 256 KiB of items: the streamed path
            self.assertEqual(call("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": "big%d" % i},
                                               "data": {"b": big}})[0], 201)
        before = value(scrape(), "apiserver_request_total", **req_labels("LIST", code=200))
        st, _, body = call("GET", CM)
        self.assertEqual(st, 200)
        self.assertGreater(len(body), 600000)
        after = value(scrape(), "apiserver_request_total", **req_labels("LIST", code=200))
        self.assertEqual(after - before, 1)
        for i in range(3):
            call("DELETE", CM + "/big%d" % i)

    def test_storage_objects_and_process(self):
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "gauges.metrics.example.com"},
               "spec": {"group": "metrics.example.com", "scope": "Namespaced",
                        "names": {"plural": "gauges", "singular": "gauge", "kind": "Gauge"},
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": {
                                          "type": "object",
                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}
        self.assertEqual(call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                              crd)[0], 201)
        path = "/apis/metrics.example.com/v1/namespaces/default/gauges"
        for _ in range(100):
            st = call("POST", path, {"apiVersion": "metrics.example.com/v1", "kind": "Gauge",
                                     "metadata": {"name": "g1"}})[0]
            if st == 201:
                break
            time.sleep(0.05)
        self.assertEqual(st, 201)
        self.assertEqual(call("POST", path, {"apiVersion": "metrics.example.com/v1",
                                             "kind": "Gauge", "metadata": {"name": "g2"}})[0], 201)
        cpu_before = proc_cpu_seconds(SERVER.proc.pid)
        m = scrape()
        cpu_after = proc_cpu_seconds(SERVER.proc.pid)
        self.assertEqual(value(m, "apiserver_storage_objects", resource="gauges.metrics.example.com"), 2)
        st, _, body = call("GET", "/api/v1/namespaces")
        self.assertEqual(value(m, "apiserver_storage_objects", resource="namespaces"),
                         len(json.loads(body)["items"]))
        self.assertGreater(value(m, "process_resident_memory_bytes"), 1 << 20)
        self.assertGreater(value(m, "process_virtual_memory_bytes"),
                           value(m, "process_resident_memory_bytes"))
        self.assertGreater(value(m, "process_open_fds"), 3)
        self.assertLess(abs(value(m, "process_start_time_seconds") - time.time()), 3600)
        self.assertGreaterEqual(value(m, "process_cpu_seconds_total"), cpu_before)
        self.assertLessEqual(value(m, "process_cpu_seconds_total"), cpu_after)
        # the group committer: every write of this test went through a commit
        self.assertGreaterEqual(value(m, "ckube_storage_writes_total"), 3)
        self.assertGreaterEqual(value(m, "ckube_storage_commits_total"), 1)
        self.assertLessEqual(value(m, "ckube_storage_commits_total"),
                             value(m, "ckube_storage_writes_total"))
        self.assertGreater(value(m, "ckube_storage_commit_seconds_total"), 0)
        self.assertGreaterEqual(value(m, "ckube_storage_largest_commit_writes"), 1)
        self.assertEqual(value(m, "ckube_storage_failed_commits_total"), 0)
        # the WAL's checkpoints, by whom: both series are there from the start
        # (this test writes too little for either to have run)
        for by in ("checkpointer", "writer"):
            self.assertIn(("ckube_storage_checkpoints_total", frozenset({("by", by)})), m)
        # and the WAL holds this test's commits (too few to checkpoint)
        self.assertGreaterEqual(value(m, "ckube_storage_wal_pages"), 1)
        rv = int(json.loads(call("GET", path + "/g2")[2])["metadata"]["resourceVersion"])
        self.assertGreaterEqual(value(m, "ckube_storage_revision"), rv)

    def test_threads_are_named(self):
        # what `top -H`, perf and gdb show: each thread says what it does
        pid = SERVER.proc.pid
        names = []
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                names.append(f.read().strip())
        self.assertIn("ckube-http", names)
        self.assertIn("ckube-commit", names)
        self.assertIn("ckube-compact", names)
        # the rest: the main thread (and a sanitizer runtime's own thread)
        self.assertLessEqual(names.count("ckube"), 2, names)

    def test_kubectl_get_raw(self):
        r = subprocess.run(["kubectl", "--kubeconfig", SERVER.kubeconfig, "get", "--raw",
                            "/metrics"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("# TYPE apiserver_request_total counter", r.stdout)
        self.assertIn("# TYPE apiserver_request_duration_seconds histogram", r.stdout)


class HealthTest(unittest.TestCase):
    def get(self, path):
        st, ctype, body = call("GET", path, accept="*/*")
        return st, body.decode()

    def test_health_endpoints(self):
        for ep in ("/healthz", "/livez", "/readyz"):
            self.assertEqual(self.get(ep), (200, "ok"))
        st, body = self.get("/readyz?verbose")
        self.assertEqual(st, 200)
        self.assertEqual(body.splitlines(), ["[+]ping ok", "[+]log ok", "[+]storage ok",
                                             "[+]shutdown ok", "readyz check passed"])
        st, body = self.get("/livez?verbose&exclude=log&exclude=ping")
        self.assertEqual((st, body.splitlines()), (200, ["[+]storage ok", "livez check passed"]))
        self.assertEqual(self.get("/readyz/storage"), (200, "ok"))
        self.assertEqual(self.get("/healthz/ping"), (200, "ok"))
        # shutdown is a readiness check only; unknown checks are 404
        self.assertEqual(self.get("/livez/shutdown")[0], 404)
        self.assertEqual(self.get("/readyz/etcd")[0], 404)
        self.assertEqual(self.get("/readyzz")[0], 404)


if __name__ == "__main__":
    run_unittests()
