"""Watch fan-out on the wire, with raw sockets so framing and timing are
under the test's control (src/apiserver/endpoints/handlers/watch.c shares
encoded event lines between watches and, on plain HTTP, writes chunks
straight to the socket; each case runs over TLS and on plain HTTP):

- one flush serving many kinds of watch at once (all namespaces, one
  namespace, metadata.name / metadata.namespace field selectors, label
  selectors with ADDED/DELETED translation, a table watch, an HTTP/1.0
  watch without chunking): each gets exactly its events, in order, and
  the JSON lines are byte-identical whichever path encoded them;
- hundreds of watchers at two different revisions: identical streams;
- more watchers on one loop than one flush serves at a time (the flush
  goes in slices of 256 and lets the loop's other connections in
  between), under a steady stream of creates: every watcher gets every
  event, in order, including those that arrive while a round is under
  way for watchers it has already served;
- a reader that stalls (tiny receive buffer) while 6 MB of events go
  out: it later gets every event, in order, in well-formed chunks, and a
  fast reader on the same resource is not held up meanwhile;
- a reader that never reads is cut off past the 16 MiB backlog, without
  hurting the others;
- watchers that vanish (RST or FIN) while events are flowing: the server
  keeps serving the rest and exits cleanly (leak-checked under ASan).

Every chunk is checked: lowercase hex size line, CRLF after the data,
and whole lines per chunk; a stream ends with the 0-size chunk."""
import json
import os
import re
import select
import socket
import ssl
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server  # noqa: E402

FAILURES = []
SRV = None
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, flush=True)
    return cond


def api(method, path, body=None, ctype="application/json"):
    c = SRV.connection(timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data, headers={"Content-Type": ctype} if data else {})
        r = c.getresponse()
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None)
    finally:
        c.close()


def cms(ns):
    return "/api/v1/namespaces/%s/configmaps" % ns


def mkns(ns):
    st, _ = api("POST", "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    check(st == 201, "create namespace %s: %s" % (ns, st))


def create(ns, name, labels=None, pad=0):
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels or {}},
            "data": {"pad": "p" * pad}}
    st, o = api("POST", cms(ns), body)
    check(st == 201, "create %s/%s: %s %s" % (ns, name, st, str(o)[:200]))
    return o


def patch(ns, name, p):
    st, o = api("PATCH", cms(ns) + "/" + name, p, "application/merge-patch+json")
    check(st == 200, "patch %s/%s: %s" % (ns, name, st))
    return o


def delete(ns, name):
    st, _ = api("DELETE", cms(ns) + "/" + name)
    check(st == 200, "delete %s/%s: %s" % (ns, name, st))


def list_rv(path):
    st, o = api("GET", path)
    check(st == 200, "list %s: %s" % (path, st))
    return o["metadata"]["resourceVersion"]


class Raw:
    """A watch over a raw (TLS) socket. pump() reads what has arrived and
    de-chunks it strictly into self.body; FAILURES get framing errors."""

    def __init__(self, path, rcvbuf=None, http10=False, accept="application/json"):
        self.path = path
        # the receive buffer is set before connecting (harness), so the
        # window stays small; the request goes out before the socket
        # turns non-blocking (a TLS write on it could want a retry)
        self.s = SRV.socket(timeout=30, rcvbuf=rcvbuf)
        req = "GET %s HTTP/1.%d\r\nHost: 127.0.0.1\r\nAccept: %s\r\n\r\n" % (
            path, 0 if http10 else 1, accept)
        self.s.sendall(req.encode())
        self.s.setblocking(False)
        self.buf = b""
        self.status = None
        self.chunked = None
        self.body = b""
        self.ended = False  # the 0-size chunk arrived
        self.eof = False
        self.bad = None  # first framing error

    def pump(self, timeout=0.0):
        """Reads until nothing arrives for `timeout` seconds (0: what is
        there now). Returns True if anything was read."""
        got = False
        while not self.eof:
            # plaintext already decrypted and buffered in the TLS layer is
            # not seen by select(): take it first
            if not (isinstance(self.s, ssl.SSLSocket) and self.s.pending()):
                p = select.poll()  # (select() takes no descriptor above 1023)
                p.register(self.s, select.POLLIN)
                if not p.poll(timeout * 1000):
                    break
            try:
                d = self.s.recv(1 << 20)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                # readable, but no whole TLS record yet (or only a
                # session ticket): nothing for the stream
                continue
            except (ConnectionResetError, BrokenPipeError):
                d = b""
            if not d:
                self.eof = True
                break
            got = True
            self.buf += d
            self._parse()
        return got

    def _fail(self, msg):
        if self.bad is None:
            self.bad = msg
            check(False, "%s: %s" % (self.path, msg))

    def _parse(self):
        if self.status is None:
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                return
            head = self.buf[:i].decode("latin-1").split("\r\n")
            self.buf = self.buf[i + 4:]
            self.status = int(head[0].split()[1])
            hdrs = {h.split(":", 1)[0].strip().lower(): h.split(":", 1)[1].strip()
                    for h in head[1:] if ":" in h}
            self.headers = hdrs
            self.chunked = hdrs.get("transfer-encoding", "").lower() == "chunked"
        if not self.chunked:
            self.body += self.buf
            self.buf = b""
            return
        while self.bad is None and not self.ended:
            i = self.buf.find(b"\r\n")
            if i < 0:
                if len(self.buf) > 20:
                    self._fail("chunk size line too long: %r" % self.buf[:40])
                return
            line = self.buf[:i]
            if not re.fullmatch(rb"[0-9a-f]+", line):
                self._fail("bad chunk size line %r" % line[:40])
                return
            n = int(line, 16)
            if len(self.buf) < i + 2 + n + 2:
                return
            data = self.buf[i + 2:i + 2 + n]
            if self.buf[i + 2 + n:i + 4 + n] != b"\r\n":
                self._fail("chunk of %d bytes not followed by CRLF" % n)
                return
            self.buf = self.buf[i + 4 + n:]
            if n == 0:
                self.ended = True
                return
            if not data.endswith(b"\n"):
                self._fail("chunk ends mid-line")
            self.body += data

    def lines(self):
        return self.body.split(b"\n")[:-1]

    def events(self):
        return [json.loads(x) for x in self.lines()]

    def wait(self, n, timeout=15.0):
        """Pumps until n lines arrived (or the stream ended / timeout)."""
        end = time.monotonic() + timeout
        while len(self.lines()) < n and not self.eof and time.monotonic() < end:
            self.pump(0.05)
        return len(self.lines()) >= n

    def close(self, rst=False):
        if rst:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.s.close()


def key(e):
    m = e["object"]["metadata"]
    return (e["type"], m.get("namespace"), m["name"], m["resourceVersion"])


def pump_all(ws, timeout=0.0):
    for w in ws:
        w.pump(timeout)


# ---------------------------------------------------------------------------

def t_mixed_watches_one_flush():
    a, b = "fo-a", "fo-b"
    mkns(a)
    mkns(b)
    rv = list_rv("/api/v1/configmaps")
    q = "?watch=1&resourceVersion=%s&timeoutSeconds=30" % rv
    ws = {
        "all": Raw("/api/v1/configmaps" + q),
        "a": Raw(cms(a) + q),
        "b": Raw(cms(b) + q),
        "a2": Raw(cms(a) + q),
        "name": Raw(cms(a) + q + "&fieldSelector=metadata.name%3Dx1"),
        "nsfield": Raw("/api/v1/configmaps" + q + "&fieldSelector=metadata.namespace%3D" + b),
        "web": Raw(cms(a) + q + "&labelSelector=tier%3Dweb"),
        "app": Raw(cms(a) + q + "&labelSelector=app"),
        "table": Raw(cms(a) + q, accept=TABLE),
    }
    h10 = Raw(cms(a) + "?watch=1&resourceVersion=%s&timeoutSeconds=4" % rv, http10=True)
    time.sleep(0.3)
    # Writes from two threads, so several events can land in one flush.

    def side_a():
        create(a, "x1", {"app": "t", "tier": "web"})
        create(a, "x2", {"app": "t", "tier": "db"})
        patch(a, "x2", {"metadata": {"labels": {"tier": "web"}}})
        patch(a, "x1", {"metadata": {"labels": {"tier": "db"}}})
        delete(a, "x2")

    def side_b():
        create(b, "y1", {"app": "t"})
        patch(b, "y1", {"data": {"k": "v"}})
        create(b, "x1", {"app": "t", "tier": "web"})
        delete(b, "y1")
    ths = [threading.Thread(target=side_a), threading.Thread(target=side_b)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    check(ws["all"].wait(9), "all-namespaces watch got %d/9 events" % len(ws["all"].lines()))
    for name, w in ws.items():
        w.pump(0.3)
        check(w.status == 200 and w.chunked, "%s: status %s chunked %s" % (name, w.status,
                                                                           w.chunked))
    allev = ws["all"].events()
    check([e["type"] for e in allev].count("DELETED") == 2, "all: %s" % [key(e) for e in allev])
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in allev]
    check(rvs == sorted(rvs), "all: events out of order")
    alllines = ws["all"].lines()

    def sub(pred):
        return [ln for ln, e in zip(alllines, allev) if pred(e["object"]["metadata"])]
    want_a = sub(lambda m: m["namespace"] == a)
    want_b = sub(lambda m: m["namespace"] == b)
    check(len(want_a) == 5 and len(want_b) == 4, "a/b split %d/%d" % (len(want_a), len(want_b)))
    check(ws["a"].lines() == want_a, "namespace watch differs from the all-namespaces one")
    check(ws["a2"].lines() == want_a, "two watches of one namespace differ")
    check(ws["b"].lines() == want_b, "namespace b watch differs")
    check(ws["nsfield"].lines() == want_b, "metadata.namespace field selector watch differs")
    check(ws["name"].lines() == sub(lambda m: m["namespace"] == a and m["name"] == "x1"),
          "metadata.name field selector watch: %s" % [key(e) for e in ws["name"].events()])
    # A label selector every object matches: encoded per watch, same bytes.
    check(ws["app"].lines() == want_a, "label-selector watch bytes differ from plain watch")
    web = [(e["type"], e["object"]["metadata"]["name"]) for e in ws["web"].events()]
    check(web == [("ADDED", "x1"), ("ADDED", "x2"), ("DELETED", "x1"), ("DELETED", "x2")],
          "tier=web translation: %s" % web)
    tev = ws["table"].events()
    check(len(tev) == 5 and all(e["object"]["kind"] == "Table" for e in tev),
          "table watch: %d events" % len(tev))
    check(tev and len(tev[0]["object"]["columnDefinitions"]) > 0
          and all(e["object"]["columnDefinitions"] == [] for e in tev[1:]),
          "table watch: column definitions only in the first event")
    # HTTP/1.0: no chunking; the stream ends with the connection.
    end = time.monotonic() + 10
    while not h10.eof and time.monotonic() < end:
        h10.pump(0.2)
    check(h10.status == 200 and h10.chunked is False, "HTTP/1.0 watch: %s" % h10.status)
    check(h10.eof, "HTTP/1.0 watch did not end at its timeout")
    check(h10.lines() == want_a, "HTTP/1.0 watch: %d lines" % len(h10.lines()))
    for w in ws.values():
        w.close()
    h10.close()


def t_many_watchers_two_revisions():
    ns = "fo-many"
    mkns(ns)
    rv0 = list_rv(cms(ns))
    first = [Raw(cms(ns) + "?watch=1&timeoutSeconds=60&resourceVersion=" + rv0)
             for _ in range(150)]
    for i in range(10):
        create(ns, "m%d" % i, {"app": "m"})
    rv1 = list_rv(cms(ns))
    second = [Raw(cms(ns) + "?watch=1&timeoutSeconds=60&resourceVersion=" + rv1)
              for _ in range(150)]
    pump_all(first + second)

    def writer(k):
        for i in range(10 + k, 40, 2):
            create(ns, "m%d" % i, {"app": "m"})
    ths = [threading.Thread(target=writer, args=(k,)) for k in (0, 1)]
    for t in ths:
        t.start()
    while any(t.is_alive() for t in ths):
        pump_all(first + second, 0.0)
        time.sleep(0.01)
    for t in ths:
        t.join()
    for w in first + second:
        w.wait(40 if w in first else 30, timeout=10)
    ref1 = first[0].lines()
    ref2 = second[0].lines()
    check(len(ref1) == 40 and len(ref2) == 30, "got %d/40 and %d/30" % (len(ref1), len(ref2)))
    check(ref1[10:] == ref2, "watchers from two revisions disagree")
    check(all(w.lines() == ref1 for w in first), "watchers from rv0 disagree")
    check(all(w.lines() == ref2 for w in second), "watchers from rv1 disagree")
    names = [json.loads(x)["object"]["metadata"]["name"] for x in ref1]
    check(sorted(names) == sorted("m%d" % i for i in range(40)), "wrong objects")
    for w in first + second:
        w.close()


def t_watchers_beyond_one_slice():
    """300 plain watchers and 30 with a label selector on a one-loop
    server: more than one slice (FLUSH_SLICE 256, watch.c)."""
    ns = "fo-slices"
    mkns(ns)
    rv0 = list_rv(cms(ns))
    plain = [Raw(cms(ns) + "?watch=1&timeoutSeconds=120&resourceVersion=" + rv0)
             for _ in range(300)]
    sel = [Raw(cms(ns) + "?watch=1&timeoutSeconds=120&labelSelector=app%3Dodd&resourceVersion="
               + rv0) for _ in range(30)]
    ws = plain + sel
    done = threading.Event()

    def writer():
        for i in range(40):
            create(ns, "s%d" % i, {"app": "odd" if i % 2 else "even"})
        done.set()
    t = threading.Thread(target=writer)
    t.start()
    while not done.is_set():
        pump_all(ws, 0.0)
        time.sleep(0.005)
    t.join()
    for w in ws:  # the last create too: no watcher waits for a later event
        w.wait(40 if w in plain else 20, timeout=20)
    ref = plain[0].lines()
    names = [json.loads(x)["object"]["metadata"]["name"] for x in ref]
    check(names == ["s%d" % i for i in range(40)], "first watcher: %d events, %s..."
          % (len(names), names[:3]))
    short = [i for i, w in enumerate(plain) if w.lines() != ref]
    check(not short, "%d of 300 watchers got another stream (first: #%s, %d lines)"
          % (len(short), short[:1], len(plain[short[0]].lines()) if short else 0))
    odd = [json.loads(x)["object"]["metadata"]["name"] for x in sel[0].lines()]
    check(odd == ["s%d" % i for i in range(1, 40, 2)], "selector watcher: %s" % odd[:5])
    check(all(w.lines() == sel[0].lines() for w in sel), "selector watchers disagree")
    for w in ws:
        w.close()


def t_event_during_a_round():
    """An event the cache takes while a flush round is under way reaches
    the watchers the round served before it came (watch_loop_flush: a round
    that ends after the cache moved on starts another). The server pauses
    40 ms between slices (CKUBE_TEST_FLUSH_PAUSE_MS) and 600 watchers make
    three slices of 256: the second create, sent 10 ms after the first,
    lands in the first pause, so its wake serves the second slice, the
    pause's timer the third, and the round ends with nothing pending. Only
    the restart takes that event to the first slice; nothing else would
    until the watchers' timeout (they have no bookmarks)."""
    ns = "fo-round"
    mkns(ns)
    rv0 = list_rv(cms(ns))
    ws = [Raw(cms(ns) + "?watch=1&timeoutSeconds=120&resourceVersion=" + rv0)
          for _ in range(600)]
    for k in range(3):
        create(ns, "p%d-a" % k)
        time.sleep(0.01)
        create(ns, "p%d-b" % k)
        want = 2 * (k + 1)
        end = time.monotonic() + 3
        short = ws
        while short and time.monotonic() < end:
            pump_all(short, 0.0)
            short = [w for w in short if len(w.lines()) < want]
            time.sleep(0.01)
        check(not short, "pair %d: %d of 600 watchers without its second event after 3 s "
              "(first short: #%d, %d lines)" % (k, len(short), ws.index(short[0]) if short else -1,
                                                len(short[0].lines()) if short else 0))
        if short:
            break
    ref = ws[0].lines()
    check(all(w.lines() == ref for w in ws), "watchers got different streams")
    for w in ws:
        w.close()


def t_stalled_reader_catches_up():
    ns = "fo-slow"
    mkns(ns)
    rv = list_rv(cms(ns))
    q = cms(ns) + "?watch=1&timeoutSeconds=60&resourceVersion=" + rv
    slow = Raw(q, rcvbuf=4096)
    # a label selector takes the per-watch path: it must catch up the same way
    slow_sel = Raw(q + "&labelSelector=app", rcvbuf=4096)
    fast = Raw(q)
    time.sleep(0.2)
    slow.pump(0.2)  # headers only
    slow_sel.pump(0.0)
    n = 150
    t0 = time.monotonic()
    for i in range(n):
        create(ns, "s%d" % i, {"app": "s"}, pad=40000)
        fast.pump(0.0)
    check(fast.wait(n, timeout=20), "fast reader got %d/%d while the slow one stalled"
          % (len(fast.lines()), n))
    lag = time.monotonic() - t0
    got_before = len(slow.lines())
    check(got_before < n, "the stalled reader was not stalled (%d)" % got_before)
    check(slow.wait(n, timeout=30), "stalled reader got %d/%d after resuming"
          % (len(slow.lines()), n))
    check(slow.lines() == fast.lines(), "stalled reader's stream differs")
    check(slow_sel.wait(n, timeout=30) and slow_sel.lines() == fast.lines(),
          "stalled label-selector reader got %d/%d, %s" % (
              len(slow_sel.lines()), n, "same" if slow_sel.lines() == fast.lines() else "differs"))
    print("  stalled reader: fast reader done in %.1fs; slow had %d/%d before reading"
          % (lag, got_before, n), flush=True)
    # The stream is still alive and in order after the backlog drained.
    create(ns, "after", {"app": "s"})
    check(slow.wait(n + 1) and fast.wait(n + 1) and slow_sel.wait(n + 1),
          "event after the backlog missing")
    check(slow.lines() == fast.lines() == slow_sel.lines(), "streams differ after the backlog")
    slow_sel.close()
    slow.close()
    fast.close()


def t_reader_too_slow_is_cut_off():
    ns = "fo-cut"
    mkns(ns)
    rv = list_rv(cms(ns))
    q = cms(ns) + "?watch=1&timeoutSeconds=120&resourceVersion=" + rv
    dead = Raw(q, rcvbuf=4096)
    ok = Raw(q)
    time.sleep(0.2)
    dead.pump(0.2)
    n = 26  # 26 MB of events: past the 16 MiB backlog plus socket buffers
    for i in range(n):
        create(ns, "c%d" % i, pad=1000000)
        ok.pump(0.0)
    check(ok.wait(n, timeout=30), "healthy watcher got %d/%d" % (len(ok.lines()), n))
    end = time.monotonic() + 30
    while not dead.eof and time.monotonic() < end:
        dead.pump(0.2)
    check(dead.eof, "a reader that never read was not cut off")
    check(not dead.ended and len(dead.lines()) < n,
          "cut-off reader got a clean end or all events (%d)" % len(dead.lines()))
    check(dead.bad is None, "cut-off reader saw bad framing before the cut")
    ok.close()
    dead.close()
    with open(os.path.join(SRV.tmp, "server.log"), "rb") as f:
        check(b"client too slow" in f.read(), "no 'client too slow' in the server log")


def t_watchers_vanish():
    ns = "fo-gone"
    mkns(ns)
    rv = list_rv(cms(ns))
    q = cms(ns) + "?watch=1&timeoutSeconds=60&resourceVersion=" + rv
    ws = [Raw(q) for _ in range(120)]
    time.sleep(0.3)
    pump_all(ws)
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set() and i < 60:
            create(ns, "g%d" % i)
            i += 1
    t = threading.Thread(target=writer)
    t.start()
    time.sleep(0.2)
    for i, w in enumerate(ws[:80]):
        w.close(rst=(i % 2 == 0))
    t.join()
    stop.set()
    rest = ws[80:]
    for w in rest:
        w.wait(60, timeout=15)
    check(all(len(w.lines()) == 60 for w in rest),
          "remaining watchers got %s" % sorted({len(w.lines()) for w in rest}))
    check(all(w.lines() == rest[0].lines() for w in rest), "remaining watchers disagree")
    st, _ = api("GET", cms(ns) + "/g0")
    check(st == 200, "server unhealthy after watchers vanished: %s" % st)
    for w in rest:
        w.close()


def t_timeout_ends_stream_cleanly():
    ns = "fo-end"
    mkns(ns)
    create(ns, "e0")
    w = Raw(cms(ns) + "?watch=1&timeoutSeconds=2")
    w.wait(1)
    end = time.monotonic() + 8
    while not w.ended and not w.eof and time.monotonic() < end:
        w.pump(0.2)
    check(w.ended, "timeoutSeconds=2: no terminating chunk")
    check([e["type"] for e in w.events()] == ["ADDED"], "initial event: %s" % w.events())
    w.close()


def main():
    global SRV
    t0 = time.monotonic()
    tests = (t_mixed_watches_one_flush, t_many_watchers_two_revisions,
             t_stalled_reader_catches_up, t_reader_too_slow_is_cut_off, t_watchers_vanish,
             t_timeout_ends_stream_cleanly)
    # Every case twice: over TLS (the server's default), where the events
    # go out through the connection's buffer and OpenSSL a record at a
    # time, and on a --plain-http server, because only there does the
    # watch write its chunks straight to the socket (sendmsg of up to 64
    # pieces, partial sends on a full socket: handlers/watch.c, which
    # httpd_req_fd() leaves out on a TLS connection). TLS cannot reach
    # that path, and it is the one these cases were written for. The
    # slices need one loop, so that all the watchers share it (plain HTTP:
    # 330 TLS handshakes would be most of the test's time).
    # The last server pauses between slices (a test hook read at start),
    # so that a round lasts long enough for an event to land inside it.
    one_loop = ("--plain-http", "--http-threads", "1")
    runs = (("TLS", (), {}, tests), ("plain HTTP", ("--plain-http",), {}, tests),
            ("plain HTTP, one loop", one_loop, {}, (t_watchers_beyond_one_slice,)),
            ("plain HTTP, one loop, 40 ms between slices", one_loop,
             {"CKUBE_TEST_FLUSH_PAUSE_MS": "40"}, (t_event_during_a_round,)))
    passed = total = 0
    for mode, flags, env, cases in runs:
        os.environ.update(env)
        try:
            SRV = Server("--controller-manager=false", *flags).start()
        finally:
            for k in env:
                del os.environ[k]
        for t in cases:
            n = len(FAILURES)
            try:
                t()
            except Exception as e:  # noqa: BLE001 - report and go on
                check(False, "%s (%s) raised %r" % (t.__name__, mode, e))
            ok = len(FAILURES) == n
            passed += ok
            total += 1
            print("%s (%s): %s (%.1fs)" % (t.__name__, mode, "ok" if ok else "FAILED",
                                          time.monotonic() - t0), flush=True)
        try:
            SRV.stop()
        except RuntimeError as e:
            check(False, "server stop (%s): %s" % (mode, e))
    print("%d passed, %d failed (%.1fs)" % (passed, total - passed, time.monotonic() - t0))
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
