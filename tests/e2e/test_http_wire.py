"""End-to-end tests of the server's HTTP/1.1 layer (src/apiserver/httpd/)
with raw sockets (TLS-wrapped, as the server serves), so the HTTP bytes
themselves are what is checked: pipelined requests answered in order on
one connection, an oversized body refused before it is sent (Expect:
100-continue), HTTP/1.0, HEAD, malformed requests, and watch streams
whose first chunk carries many events (a chunk of more than 64 pieces
once lost bytes when written straight to the socket, which the server
does on plain HTTP only: that case also runs on a --plain-http server)."""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

SERVER = None
CM = "/api/v1/namespaces/wire/configmaps"


def connect(srv=None):
    """A connection to the server as the admin: TLS (the server's
    default), so the HTTP bytes checked are those inside it."""
    return (srv or SERVER).socket(timeout=20)


def read_response(s, buf=b""):
    """Reads one response (Content-Length or chunked) from s; returns
    (status, headers dict, body, rest of buf)."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise EOFError(buf)
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for ln in lines[1:]:
        k, v = ln.split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    if status == 100:
        return status, hdrs, b"", buf
    if "content-length" in hdrs:
        n = int(hdrs["content-length"])
        while len(buf) < n:
            d = s.recv(65536)
            if not d:
                raise EOFError(buf)
            buf += d
        return status, hdrs, buf[:n], buf[n:]
    if hdrs.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            while b"\r\n" not in buf:
                buf += s.recv(65536)
            line, buf = buf.split(b"\r\n", 1)
            size = int(line, 16)
            while len(buf) < size + 2:
                d = s.recv(65536)
                if not d:
                    raise EOFError(buf)
                buf += d
            if buf[size:size + 2] != b"\r\n":
                raise ValueError("bad chunk framing")
            body += buf[:size]
            buf = buf[size + 2:]
            if size == 0:
                return status, hdrs, body, buf
    body = buf
    while True:
        d = s.recv(65536)
        if not d:
            return status, hdrs, body, b""
        body += d


def request(method, path, body=None, extra=""):
    data = b"" if body is None else json.dumps(body).encode()
    head = "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s" % (
        method, path, extra)
    if body is not None:
        head += "Content-Length: %d\r\n" % len(data)
    return head.encode() + b"\r\n" + data


class HttpWireTest(unittest.TestCase):
    def test_pipelined_requests_answered_in_order(self):
        s = connect()
        reqs = b"".join([
            request("POST", CM, {"metadata": {"name": "pipe-a"}, "data": {"k": "1"}}),
            request("GET", CM + "/pipe-a"),
            request("GET", CM + "/does-not-exist"),
            request("DELETE", CM + "/pipe-a"),
            request("GET", "/version"),
        ])
        s.sendall(reqs)  # all at once: the server answers one after another
        buf = b""
        got = []
        for _ in range(5):
            st, hdrs, body, buf = read_response(s, buf)
            got.append((st, body))
        self.assertEqual([g[0] for g in got], [201, 200, 404, 200, 200])
        self.assertEqual(json.loads(got[1][1])["data"], {"k": "1"})
        self.assertEqual(json.loads(got[2][1])["reason"], "NotFound")
        self.assertIn(b"gitVersion", got[4][1])
        s.close()

    def test_oversized_body_refused_before_sending(self):
        s = connect()
        n = 3 * 1024 * 1024 + 100
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (CM, n)).encode())
        st, hdrs, body, _ = read_response(s)
        self.assertEqual(st, 413, body)  # not 100: the body is not wanted
        self.assertEqual(hdrs.get("connection"), "close")
        status = json.loads(body)
        self.assertEqual(status["reason"], "RequestEntityTooLarge")
        s.close()
        # and nothing was half-stored; the server still answers
        s = connect()
        s.sendall(request("GET", "/readyz"))
        self.assertEqual(read_response(s)[0], 200)
        s.close()

    def test_expect_continue_then_body(self):
        s = connect()
        data = json.dumps({"metadata": {"name": "expect"}, "data": {"k": "v"}}).encode()
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (CM, len(data))).encode())
        st, _, _, buf = read_response(s)
        self.assertEqual(st, 100)
        s.sendall(data)
        st, _, body, _ = read_response(s, buf)
        self.assertEqual(st, 201, body)
        s.close()

    def test_http10_head_and_bad_requests(self):
        s = connect()
        s.sendall(b"GET /version HTTP/1.0\r\n\r\n")
        st, hdrs, body, _ = read_response(s)
        self.assertEqual(st, 200)
        self.assertIn(b"gitVersion", body)
        self.assertEqual(s.recv(10), b"")  # 1.0 without keep-alive: closed
        s.close()

        s = connect()
        s.sendall(b"HEAD /version HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz HTTP/1.1\r\n\r\n")
        buf = b""
        while b"ok" not in buf:
            buf += s.recv(65536)
        head, rest = buf.split(b"\r\n\r\n", 1)
        self.assertTrue(head.startswith(b"HTTP/1.1 200"))
        self.assertIn(b"Content-Length: ", head)
        self.assertTrue(rest.startswith(b"HTTP/1.1 200"), rest[:80])  # no body after HEAD
        s.close()

        s = connect()
        s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        st, hdrs, body, _ = read_response(s)
        self.assertEqual(st, 400)
        self.assertEqual(hdrs.get("connection"), "close")
        s.close()

    def test_watch_first_chunk_with_many_events(self):
        # Over TLS, and on a --plain-http server too: the watch writes its
        # chunks straight to the socket (sendmsg of at most 64 pieces, the
        # path that lost bytes) only on plain HTTP; on TLS they go through
        # the connection's buffer and OpenSSL, which TLS cannot bypass.
        plain = Server("--controller-manager=false", "--plain-http").start()
        self.addCleanup(plain.cleanup)
        make_namespace(plain)
        for srv in (SERVER, plain):
            self.many_events(srv)
        plain.stop()

    def many_events(self, srv):
        names = ["many-%03d" % i for i in range(60)]
        s = connect(srv)
        s.sendall(b"".join(request("POST", CM, {"metadata": {"name": n, "labels": {"w": "1"}},
                                                "data": {"pad": "p" * 2000}})
                           for n in names))
        buf = b""
        for _ in names:
            st, _, body, buf = read_response(s, buf)
            self.assertEqual(st, 201, body)
        s.close()
        # both paths of the fan-out: grouped (no selector) and per watch
        for query in ("", "&labelSelector=w%3D1"):
            s = connect(srv)
            s.sendall(request("GET", CM + "?watch=1&resourceVersion=0&timeoutSeconds=1" + query))
            st, hdrs, body, _ = read_response(s)
            self.assertEqual(st, 200)
            lines = body.decode().splitlines()
            events = [json.loads(ln) for ln in lines]  # every line whole
            got = sorted(e["object"]["metadata"]["name"] for e in events
                         if e["object"]["metadata"]["name"].startswith("many-"))
            self.assertEqual(got, names, (srv.tls, query))
            s.close()


def make_namespace(srv):
    s = connect(srv)
    s.sendall(request("POST", "/api/v1/namespaces", {"metadata": {"name": "wire"}}))
    st, _, body, _ = read_response(s)
    assert st == 201, body
    s.close()
    time.sleep(0.1)


def setUpModule():
    global SERVER
    SERVER = Server("--controller-manager=false").start()
    make_namespace(SERVER)


def tearDownModule():
    SERVER.stop()


if __name__ == "__main__":
    run_unittests()
