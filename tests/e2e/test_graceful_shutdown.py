"""End-to-end tests of `ckube server`'s graceful shutdown against a real
server, in kube-apiserver's order: on SIGTERM /readyz fails at once (its
"shutdown" check) while /livez and every API request are still served
for --shutdown-delay-duration; then the port refuses new connections, a
request that arrives on an open connection is answered with "Connection:
close", a list still being streamed to a slow reader is finished, open
watches end cleanly, and the server exits 0. A second SIGTERM cuts the
delay short."""
import json
import os
import signal
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

CM = "/api/v1/namespaces/default/configmaps"
N_BIG = 1500          # objects of ...
PAD = "x" * 4000      # ... 4 KB: a 6 MB list, more than the sockets buffer
DELAY = 2.0


def call(server, method, path, body=None, conn=None):
    own = conn is None
    conn = conn or server.connection(timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read(), r.getheader("Connection")
    finally:
        if own:
            conn.close()


def create_many(server, prefix, n, threads=4):
    def work(k):
        conn = server.connection(timeout=30)
        for i in range(k, n, threads):
            st, body, _ = call(server, "POST", CM, {"apiVersion": "v1", "kind": "ConfigMap",
                                                  "metadata": {"name": "%s-%d" % (prefix, i)},
                                                  "data": {"pad": PAD}}, conn)
            assert st == 201, body
        conn.close()
    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def slow_list(server):
    """A GET of the whole list on a socket with a small receive buffer,
    its status line read and the rest left waiting."""
    s = server.socket(timeout=30, rcvbuf=8192)
    s.sendall(b"GET " + CM.encode() + b" HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n")
    first = s.recv(64)
    assert first.startswith(b"HTTP/1.1 200"), first
    return s, first


def read_all(s, first):
    data = bytearray(first)
    s.settimeout(30)
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    return head, dechunk(body)


def dechunk(body):
    out = bytearray()
    while True:
        line, _, rest = body.partition(b"\r\n")
        size = int(line, 16)
        if size == 0:
            return bytes(out)
        out += rest[:size]
        body = rest[size + 2:]


class GracefulShutdownTest(unittest.TestCase):
    def serve(self, delay):
        self.server = Server("--controller-manager=false",
                             "--shutdown-delay-duration=%gs" % delay)
        self.addCleanup(self.server.cleanup)
        self.server.start()

    def wait_exit(self, timeout):
        rc = self.server.proc.wait(timeout=timeout)
        self.assertEqual(rc, 0, self.server.logtail())

    def test_delay_then_drain(self):
        self.serve(DELAY)
        srv = self.server
        create_many(srv, "big", N_BIG)
        # a watch, a keep-alive connection, and a list the client reads slowly
        watch = srv.connection(timeout=30)
        watch.request("GET", CM + "?watch=1&resourceVersion=0&allowWatchBookmarks=false")
        wr = watch.getresponse()
        self.assertEqual(wr.status, 200)
        got = {}  # the watch is read as it comes, like a client's would be

        def read_watch():
            try:
                got["body"] = wr.read()
            except Exception as e:  # noqa: BLE001 (reported below)
                got["error"] = e
        reader = threading.Thread(target=read_watch)
        reader.start()
        keep = srv.connection(timeout=30)
        self.assertEqual(call(srv, "GET", "/version", conn=keep)[0], 200)
        slow, first = slow_list(srv)

        t0 = time.monotonic()
        self.server.proc.send_signal(signal.SIGTERM)
        # during the delay: not ready, but alive and serving everything
        deadline = t0 + DELAY / 2
        while True:
            st, body, _ = call(srv, "GET", "/readyz")
            if st == 500 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertEqual(st, 500, body)
        self.assertIn(b"[-]shutdown failed", body)
        st, body, _ = call(srv, "GET", "/readyz?verbose")
        self.assertEqual(st, 500)
        self.assertIn(b"[+]storage ok", body)
        self.assertEqual(call(srv, "GET", "/readyz/shutdown")[0], 500)
        self.assertEqual(call(srv, "GET", "/readyz?exclude=shutdown")[0], 200)
        self.assertEqual(call(srv, "GET", "/livez")[0], 200)
        self.assertEqual(call(srv, "GET", "/healthz")[0], 200)
        st, body, conn_hdr = call(srv, "POST", CM, {"apiVersion": "v1", "kind": "ConfigMap",
                                                     "metadata": {"name": "during-delay"}})
        self.assertEqual(st, 201, body)
        self.assertIsNone(conn_hdr)  # connections are kept until the drain
        self.assertLess(time.monotonic() - t0, DELAY, "the checks took longer than the delay")

        # after the delay: no new connections; what is open still gets answers
        deadline = t0 + DELAY + 10
        while time.monotonic() < deadline:
            try:
                # a bare TCP connect, no TLS handshake: whether the port
                # still accepts is a TCP-level question (a handshake could
                # also time out on a listener no longer accept()ed from)
                socket.create_connection(("127.0.0.1", srv.port), timeout=1).close()
            except ConnectionRefusedError:
                break
            time.sleep(0.05)
        else:
            self.fail("the port still accepts connections after the delay")
        self.assertGreaterEqual(time.monotonic() - t0, DELAY - 0.1)
        self.assertIsNone(self.server.proc.poll(), "exited with a list still in flight")
        st, body, conn_hdr = call(srv, "GET", CM + "/during-delay", conn=keep)
        self.assertEqual(st, 200, body)
        self.assertEqual(conn_hdr, "close")
        keep.close()

        # the list in flight is finished, whole
        head, body = read_all(slow, first)
        items = json.loads(body)["items"]
        self.assertEqual(len(items), N_BIG)
        self.assertEqual(items[-1]["data"]["pad"], PAD)

        # then the watch ends cleanly and the server exits 0
        self.wait_exit(30)
        reader.join(30)
        self.assertNotIn("error", got)  # a clean end of the stream, not a reset
        events = [json.loads(line) for line in got["body"].splitlines() if line.strip()]
        self.assertTrue(all(e["type"] == "ADDED" for e in events), events[-3:])
        self.assertEqual(len(events), N_BIG + 1)  # the initial state and during-delay
        watch.close()
        log = self.server.logtail(200)
        self.assertIn("received SIGTERM, shutting down", log)
        self.assertIn("serving for 2.0s more (--shutdown-delay-duration)", log)

    def test_second_signal_skips_the_delay(self):
        self.serve(60)
        self.server.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        while call(self.server, "GET", "/readyz")[0] != 500:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.02)
        t = time.monotonic()
        self.server.proc.send_signal(signal.SIGINT)
        self.wait_exit(30)  # not the 60 s of the delay
        self.assertIn("received a second SIGINT", self.server.logtail())
        self.assertLess(time.monotonic() - t, 30)


class DefaultShutdownTest(unittest.TestCase):
    def test_no_delay_by_default(self):
        server = Server("--controller-manager=false")
        try:
            server.start()
            t = time.monotonic()
            server.stop()  # SIGTERM; exit 0 checked by the harness
            self.assertLess(time.monotonic() - t, DELAY)
        finally:
            server.cleanup()


if __name__ == "__main__":
    run_unittests()
