"""End-to-end tests of large lists, which the server streams (chunked
transfer encoding, built from a snapshot a piece at a time) rather than
assembling whole: the official Python client and kubectl read them; the
raw bytes are one JSON document whose items equal the objects' GETs; pages
(limit/continue) stream too and chain; the snapshot is fixed when the
request arrives even if objects are deleted while it is being sent;
clients that hang up mid-list and a server stopped mid-list lose nothing
and leak nothing (the server must exit 0 under the sanitizers)."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

from kubernetes import client  # noqa: E402

NS = "big"
COUNT = 600  # about 900 KB of JSON: several of the server's 256 KiB chunks
SERVER = None
API = None
KUBECTLS = ["/usr/lib/google-cloud-sdk/bin/kubectl.1.27", "/usr/lib/google-cloud-sdk/bin/kubectl.1.33"]


def pad(i):
    # 1 KiB of varied text, with escapes and non-ASCII that must survive.
    base = "line %d \"quoted\" \\ back\u00e9\u4e2d\n\t" % i
    return (base * (1024 // len(base) + 1))[:1024]


def raw_get(path):
    """GET with http.client: (status, headers dict, body bytes)."""
    conn = SERVER.connection(timeout=30)
    try:
        conn.request("GET", path, headers={"Accept": "application/json"})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def start_raw_list(path):
    """Sends a GET on a raw socket and returns the socket, unread."""
    # A small receive buffer (set before connecting, so the window stays
    # small) keeps most of the list in the server while we do not read.
    s = SERVER.socket(timeout=30, rcvbuf=4096)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n" % path).encode())
    return s


def server_log():
    with open(os.path.join(SERVER.tmp, "server.log"), "rb") as f:
        return f.read().decode(errors="replace")


def dechunk(data):
    """Decodes a complete HTTP/1.1 chunked response: (headers, body)."""
    head, _, rest = data.partition(b"\r\n\r\n")
    body = b""
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        body += rest[:size]
        rest = rest[size + 2:]
    return head.decode(), body


def read_until_end(s):
    data = b""
    while not data.endswith(b"\r\n0\r\n\r\n"):
        b = s.recv(1 << 16)
        if not b:
            break
        data += b
    return data


class LargeListTest(unittest.TestCase):
    def test_python_client_reads_the_streamed_list(self):
        items = API.list_namespaced_config_map(NS).items
        self.assertEqual(len(items), COUNT)
        self.assertEqual(sorted(i.metadata.name for i in items),
                         sorted("cm-%04d" % i for i in range(COUNT)))
        by_name = {i.metadata.name: i for i in items}
        self.assertEqual(by_name["cm-0042"].data["pad"], pad(42))

    def test_raw_body_is_chunked_json_with_exact_items(self):
        status, headers, body = raw_get("/api/v1/namespaces/%s/configmaps" % NS)
        self.assertEqual(status, 200)
        self.assertEqual(headers.get("transfer-encoding"), "chunked")
        self.assertEqual(headers.get("content-type"), "application/json")
        doc = json.loads(body)
        self.assertEqual(doc["kind"], "ConfigMapList")
        self.assertEqual(doc["apiVersion"], "v1")
        self.assertNotIn("continue", doc["metadata"])
        self.assertGreater(int(doc["metadata"]["resourceVersion"]), 0)
        self.assertEqual(len(doc["items"]), COUNT)
        # Key order, and each item as a GET serves it.
        names = [i["metadata"]["name"] for i in doc["items"]]
        self.assertEqual(names, sorted(names))
        for i in (0, 299, COUNT - 1):
            name = doc["items"][i]["metadata"]["name"]
            _, _, one = raw_get("/api/v1/namespaces/%s/configmaps/%s" % (NS, name))
            self.assertEqual(doc["items"][i], json.loads(one))

    def test_small_list_is_not_chunked(self):
        status, headers, body = raw_get(
            "/api/v1/namespaces/%s/configmaps?labelSelector=tenth%%3Dyes" % NS)
        self.assertEqual(status, 200)
        self.assertIn("content-length", headers)
        self.assertEqual(len(json.loads(body)["items"]), COUNT // 10)

    def test_pages_stream_and_chain(self):
        seen, cont, first_rv, pages = [], None, None, 0
        while True:
            path = "/api/v1/namespaces/%s/configmaps?limit=250" % NS
            if cont:
                path += "&continue=" + cont
            status, headers, body = raw_get(path)
            self.assertEqual(status, 200, body[:300])
            doc = json.loads(body)
            pages += 1
            first_rv = first_rv or doc["metadata"]["resourceVersion"]
            self.assertEqual(doc["metadata"]["resourceVersion"], first_rv)
            seen += [i["metadata"]["name"] for i in doc["items"]]
            cont = doc["metadata"].get("continue")
            if not cont:
                self.assertNotIn("remainingItemCount", doc["metadata"])
                break
            self.assertEqual(headers.get("transfer-encoding"), "chunked")
            self.assertEqual(doc["metadata"]["remainingItemCount"], COUNT - len(seen))
        self.assertEqual(pages, 3)
        self.assertEqual(seen, sorted("cm-%04d" % i for i in range(COUNT)))

    def test_kubectl_reads_the_streamed_list(self):
        for kc in KUBECTLS:
            if not os.access(kc, os.X_OK):
                self.fail("%s is not installed" % kc)
            out = subprocess.run([kc, "--kubeconfig", SERVER.kubeconfig, "get", "configmaps",
                                  "-n", NS, "-o", "json"], capture_output=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(len(json.loads(out.stdout)["items"]), COUNT, kc)

    def test_table_is_streamed_row_by_row(self):
        # kubectl's human output asks for a Table; a large one is streamed
        # with its rows rendered as the stream reaches them, and says the
        # same as the Table of each page built whole.
        accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

        def table(path):
            conn = SERVER.connection(timeout=30)
            try:
                conn.request("GET", path, headers={"Accept": accept})
                r = conn.getresponse()
                return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
            finally:
                conn.close()
        base = "/api/v1/namespaces/%s/configmaps" % NS
        status, headers, body = table(base)
        self.assertEqual(status, 200, body[:300])
        self.assertEqual(headers.get("transfer-encoding"), "chunked")
        whole = json.loads(body)
        self.assertEqual(whole["kind"], "Table")
        self.assertEqual(whole["apiVersion"], "meta.k8s.io/v1")
        self.assertEqual([c["name"] for c in whole["columnDefinitions"]], ["Name", "Data", "Age"])
        self.assertEqual(len(whole["rows"]), COUNT)
        self.assertNotIn("continue", whole["metadata"])
        # The same rows, page by page (small pages are built whole).
        rows, cont = [], None
        while True:
            status, headers, body = table(base + "?limit=100" + ("&continue=" + cont if cont else ""))
            self.assertEqual(status, 200, body[:300])
            self.assertIn("content-length", headers)
            page = json.loads(body)
            self.assertEqual(page["columnDefinitions"], whole["columnDefinitions"])
            rows += page["rows"]
            cont = page["metadata"].get("continue")
            if not cont:
                break
        strip_age = lambda rs: [r["cells"][:2] + [r["object"]["metadata"]["name"]] for r in rs]
        self.assertEqual(strip_age(rows), strip_age(whole["rows"]))
        self.assertEqual(whole["rows"][42]["object"]["kind"], "PartialObjectMetadata")
        self.assertEqual(whole["rows"][42]["cells"][:2], ["cm-0042", 1])
        # A large page with its continue token streams too.
        status, headers, body = table(base + "?limit=500")
        page = json.loads(body)
        self.assertEqual(headers.get("transfer-encoding"), "chunked")
        self.assertEqual(len(page["rows"]), 500)
        self.assertEqual(page["metadata"]["remainingItemCount"], COUNT - 500)
        self.assertTrue(page["metadata"]["continue"])
        # kubectl prints it.
        out = subprocess.run([KUBECTLS[-1], "--kubeconfig", SERVER.kubeconfig, "get", "configmaps",
                              "-n", NS, "--chunk-size=0"], capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.decode().splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "DATA", "AGE"])
        self.assertEqual(len(lines), COUNT + 1)

    def test_snapshot_is_fixed_when_the_list_starts(self):
        # Extra objects, deleted while a slow reader is mid-list.
        for i in range(200):
            API.create_namespaced_config_map("churn", {
                "metadata": {"name": "tmp-%03d" % i}, "data": {"pad": pad(i)}})
        s = start_raw_list("/api/v1/namespaces/churn/configmaps")
        try:
            first = s.recv(4096)
            self.assertTrue(first.startswith(b"HTTP/1.1 200"), first[:100])
            for i in range(200):
                API.delete_namespaced_config_map("tmp-%03d" % i, "churn")
            head, body = dechunk(first + read_until_end(s))
        finally:
            s.close()
        doc = json.loads(body)
        self.assertEqual(len(doc["items"]), 200)
        self.assertEqual(doc["items"][199]["data"]["pad"], pad(199))
        self.assertEqual(API.list_namespaced_config_map("churn").items, [])

    def test_clients_hanging_up_mid_list(self):
        for _ in range(20):
            s = start_raw_list("/api/v1/configmaps")
            s.recv(1000)
            s.close()
        # A client that reads some of a list larger than the socket
        # buffers, then resets the connection.
        s = start_raw_list("/api/v1/namespaces/huge/configmaps")
        s.recv(50000)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
        time.sleep(0.2)
        # The server noticed and stopped encoding (its -v=4 log says so).
        self.assertTrue("client went away after" in server_log(), SERVER.logtail(5))
        self.assertEqual(len(API.list_namespaced_config_map(NS).items), COUNT)
        self.assertIn(b'"kind":"ConfigMapList"', raw_get("/api/v1/configmaps")[2][:200])


class ZStopMidListTest(unittest.TestCase):
    """Runs last: the server is stopped while a list is being streamed to
    a client that does not read. The graceful shutdown waits for the list
    (up to 60 s); a second SIGTERM stops it at once, dropping the list,
    and it must still exit 0 (no leak, no crash)."""

    def test_stop_while_streaming(self):
        # 8 MB: more than the kernel's socket buffers take in.
        s = start_raw_list("/api/v1/namespaces/huge/configmaps")
        try:
            self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 200"))
            time.sleep(0.3)
            SERVER.proc.send_signal(signal.SIGTERM)
            deadline = time.time() + 20
            while "received SIGTERM, shutting down" not in server_log():
                self.assertLess(time.time(), deadline, SERVER.logtail(5))
                time.sleep(0.05)
            time.sleep(0.5)
            self.assertIsNone(SERVER.proc.poll(), "did not wait for the list in flight")
            SERVER.stop()  # the second SIGTERM
        finally:
            s.close()
        log = server_log()
        self.assertIn("received a second SIGTERM, stopping now", log)
        self.assertIn("stopping with 1 requests in flight", log)
        self.assertTrue("dropped at shutdown after" in log, SERVER.logtail(5))


def setUpModule():
    global SERVER, API
    SERVER = Server("--controller-manager=false", "-v", "4").start()
    API = client.CoreV1Api(SERVER.client())
    for ns in (NS, "churn", "huge"):
        API.create_namespace({"metadata": {"name": ns}})
    for i in range(COUNT):
        labels = {"tenth": "yes"} if i % 10 == 0 else {}
        API.create_namespaced_config_map(NS, {"metadata": {"name": "cm-%04d" % i,
                                                           "labels": labels},
                                              "data": {"pad": pad(i)}})


    for i in range(8):
        API.create_namespaced_config_map("huge", {"metadata": {"name": "mb-%d" % i},
                                                  "data": {"pad": "x" * (1 << 20)}})


def tearDownModule():
    SERVER.stop()


if __name__ == "__main__":
    run_unittests()
