"""Watch semantics on the wire (raw HTTP, then kubectl): initial events,
resuming from a resourceVersion, selector transitions, single-object
watches, bookmarks, 410 Expired (after a restart and after the event ring
overflows), timeoutSeconds, the deprecated /watch/ prefix, all-namespace
watches and consistent ordering across watchers.

The bookmark check needs the server's 30 s bookmark interval
(BOOKMARK_INTERVAL_SEC in src/apiserver/watch.c); it runs in the
background while the other checks run, so the file takes about 35 s."""
import http.client
import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server  # noqa: E402

BOOKMARK_INTERVAL = 30
RING = 512  # the server runs with --watch-cache-size RING
FAILURES = []
PASSED = []
SRV = None


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, flush=True)
    return cond


class Client:
    def __init__(self):
        self.c = SRV.connection(timeout=10)

    def req(self, method, path, body=None, ctype="application/json"):
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = ctype
        self.c.request(method, path, body=data, headers=headers)
        r = self.c.getresponse()
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None)

    def close(self):
        self.c.close()


def api(method, path, body=None, ctype="application/json", want=None):
    c = Client()
    try:
        st, b = c.req(method, path, body, ctype)
    finally:
        c.close()
    if want is not None:
        assert st == want, (method, path, st, b)
    return b


def cms(ns):
    return "/api/v1/namespaces/%s/configmaps" % ns


def mkns(ns):
    api("POST", "/api/v1/namespaces", {"metadata": {"name": ns}}, want=201)


def create(ns, name, labels=None, data=None):
    return api("POST", cms(ns), {"metadata": {"name": name, "labels": labels or {}},
                                 "data": data or {}}, want=201)


def patch(ns, name, p):
    return api("PATCH", cms(ns) + "/" + name, p, "application/merge-patch+json", want=200)


def delete(ns, name):
    return api("DELETE", cms(ns) + "/" + name, want=200)


def rv_of(o):
    return int(o["metadata"]["resourceVersion"])


class Watch:
    """A raw watch stream read by a thread into a queue of
    (arrival time, event dict); None marks the end of the stream."""

    def __init__(self, path, headers=None, **params):
        q = urllib.parse.urlencode(dict(params, watch="true"))
        self.path = path + ("&" if "?" in path else "?") + q
        self.q = queue.Queue()
        self.status = None
        self.headers = None
        self.ended = None
        self.conn = SRV.connection(timeout=60)
        self.conn.request("GET", self.path, headers=headers or {})
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = dict(self.resp.getheaders())
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    break
                if line.strip():
                    self.q.put((time.monotonic(), json.loads(line)))
        except (OSError, ValueError, AttributeError, http.client.HTTPException) as e:
            self.q.put((time.monotonic(), {"type": "READ-ERROR", "object": str(e)}))
        self.ended = time.monotonic()
        self.q.put((time.monotonic(), None))

    def next(self, timeout=5.0):
        """The next event, or None at the end of the stream; 'TIMEOUT'."""
        try:
            return self.q.get(timeout=timeout)[1]
        except queue.Empty:
            return "TIMEOUT"

    def take(self, n, timeout=5.0):
        out = []
        for _ in range(n):
            ev = self.next(timeout)
            if ev == "TIMEOUT" or ev is None:
                break
            out.append(ev)
        return out

    def quiet(self, secs=0.5):
        """True if nothing arrives within secs."""
        ev = self.next(secs)
        if ev != "TIMEOUT":
            self.q.queue.appendleft((time.monotonic(), ev))
            return False
        return True

    def close(self):
        try:
            self.conn.sock.shutdown(2)
        except (OSError, AttributeError):
            pass
        self.conn.close()


def summary(evs):
    return [(e["type"], e["object"].get("metadata", {}).get("name")) for e in evs]


# ---------------------------------------------------------------------------

def t_initial_events():
    ns = "w-init"
    mkns(ns)
    a = create(ns, "a")
    b = create(ns, "b")
    expect = [("ADDED", "a"), ("ADDED", "b")]
    for rv in ("0", ""):
        w = Watch(cms(ns), resourceVersion=rv, timeoutSeconds=10) if rv else \
            Watch(cms(ns), timeoutSeconds=10)
        check(w.status == 200, "watch status %s" % w.status)
        ct = w.headers.get("Content-Type", "")
        check(ct.startswith("application/json"), "watch content type %r" % ct)
        check(w.headers.get("Transfer-Encoding") == "chunked", "watch not chunked: %s" % w.headers)
        evs = w.take(len(expect))
        check(summary(evs) == expect, "rv=%r: initial events %s" % (rv, summary(evs)))
        check(all(e["object"].get("kind") == "ConfigMap" and e["object"].get("apiVersion") == "v1"
                  for e in evs), "initial events carry kind/apiVersion: %s" % evs)
        check(w.quiet(0.3), "rv=%r: more than the initial events" % rv)
        c = create(ns, "c" + (rv or "e"))
        ev = w.next()
        check(ev != "TIMEOUT" and ev and (ev["type"], ev["object"]["metadata"]["name"]) ==
              ("ADDED", c["metadata"]["name"]), "rv=%r: live event %s" % (rv, ev))
        check(ev and ev != "TIMEOUT" and rv_of(ev["object"]) == rv_of(c),
              "live event resourceVersion equals the create's")
        expect.append(("ADDED", c["metadata"]["name"]))
        w.close()
    del a, b


def t_from_list_rv():
    ns = "w-rv"
    mkns(ns)
    create(ns, "old1")
    create(ns, "old2")
    lst = api("GET", cms(ns), want=200)
    rv = lst["metadata"]["resourceVersion"]
    w = Watch(cms(ns), resourceVersion=rv, timeoutSeconds=10)
    check(w.quiet(0.5), "watch from the list rv replayed old objects")
    n = create(ns, "new1")
    m = patch(ns, "old1", {"data": {"x": "1"}})
    d = delete(ns, "old2")
    evs = w.take(3)
    check(summary(evs) == [("ADDED", "new1"), ("MODIFIED", "old1"), ("DELETED", "old2")],
          "events after list rv: %s" % summary(evs))
    if len(evs) == 3:
        check(rv_of(evs[0]["object"]) == rv_of(n), "ADDED rv")
        check(rv_of(evs[1]["object"]) == rv_of(m), "MODIFIED rv")
        check(evs[1]["object"]["data"] == {"x": "1"}, "MODIFIED carries the new state")
        check(rv_of(evs[2]["object"]) > rv_of(m), "DELETED rv is the deletion revision")
        check(evs[2]["object"]["metadata"]["name"] == "old2", "DELETED carries the object")
        rvs = [rv_of(e["object"]) for e in evs]
        check(rvs == sorted(rvs) and len(set(rvs)) == 3, "event rvs increase: %s" % rvs)
    del d
    # resuming from the middle gives exactly the rest
    if len(evs) == 3:
        w2 = Watch(cms(ns), resourceVersion=str(rv_of(evs[0]["object"])), timeoutSeconds=5)
        evs2 = w2.take(2)
        check(summary(evs2) == [("MODIFIED", "old1"), ("DELETED", "old2")],
              "resume from the middle: %s" % summary(evs2))
        check(w2.quiet(0.3), "resume gave extra events")
        w2.close()
    w.close()


def t_label_transitions():
    ns = "w-label"
    mkns(ns)
    create(ns, "o", labels={"app": "other"})
    w = Watch(cms(ns), labelSelector="app=web", resourceVersion="0", timeoutSeconds=15)
    check(w.quiet(0.3), "label watch: non-matching object was sent")
    patch(ns, "o", {"metadata": {"labels": {"app": "web"}}})          # starts matching
    patch(ns, "o", {"data": {"k": "v"}})                              # still matching
    stop = patch(ns, "o", {"metadata": {"labels": {"app": "db"}}})    # stops matching
    patch(ns, "o", {"data": {"k": "v2"}})                             # not matching: nothing
    create(ns, "p", labels={"app": "web"})
    delete(ns, "p")
    delete(ns, "o")                                                   # not matching: nothing
    evs = w.take(5, timeout=3)
    check(summary(evs) == [("ADDED", "o"), ("MODIFIED", "o"), ("DELETED", "o"),
                           ("ADDED", "p"), ("DELETED", "p")],
          "label transitions: %s" % summary(evs))
    if len(evs) >= 3:
        gone = evs[2]["object"]
        check(gone["metadata"]["labels"] == {"app": "db"} and rv_of(gone) == rv_of(stop),
              "stops-matching DELETED carries the new object and rv: %s" % gone["metadata"])
    check(w.quiet(0.5), "label watch: events for a non-matching object")
    w.close()
    # set-based and negative selectors on watches
    create(ns, "q", labels={"tier": "a"})
    w = Watch(cms(ns), labelSelector="tier notin (b),!skip", resourceVersion="0",
              timeoutSeconds=5)
    evs = w.take(1)
    check(summary(evs) == [("ADDED", "q")], "set-based selector watch: %s" % summary(evs))
    patch(ns, "q", {"metadata": {"labels": {"skip": "1"}}})
    evs = w.take(1)
    check(summary(evs) == [("DELETED", "q")], "!key transition: %s" % summary(evs))
    w.close()


def t_field_selector_single_object():
    ns = "w-field"
    mkns(ns)
    create(ns, "x")
    create(ns, "y")
    w = Watch(cms(ns), fieldSelector="metadata.name=x", resourceVersion="0", timeoutSeconds=10)
    check(summary(w.take(1)) == [("ADDED", "x")], "single-object watch initial event")
    patch(ns, "y", {"data": {"a": "1"}})
    patch(ns, "x", {"data": {"a": "1"}})
    delete(ns, "y")
    delete(ns, "x")
    evs = w.take(2)
    check(summary(evs) == [("MODIFIED", "x"), ("DELETED", "x")],
          "single-object watch: %s" % summary(evs))
    check(w.quiet(0.3), "single-object watch saw another object")
    w.close()
    # all namespaces, filtered by namespace field
    w = Watch("/api/v1/configmaps", fieldSelector="metadata.namespace=w-field",
              resourceVersion="0", timeoutSeconds=5)
    create(ns, "z")
    create("w-rv", "not-me")
    evs = w.take(1)
    check(summary(evs) == [("ADDED", "z")], "namespace field selector watch: %s" % summary(evs))
    check(w.quiet(0.3), "namespace field selector watch leaked another namespace")
    w.close()

    # kubectl wait --for=delete while another client deletes the object
    create(ns, "gone")
    env = dict(os.environ, KUBECONFIG=SRV.kubeconfig, HOME=SRV.tmp)
    p = subprocess.Popen(["kubectl", "wait", "--for=delete", "-n", ns, "cm/gone",
                          "--timeout=10s"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         env=env)
    time.sleep(1.0)
    delete(ns, "gone")
    out = p.communicate(timeout=20)[0].decode()
    check(p.returncode == 0 and "configmap/gone condition met" in out,
          "kubectl wait --for=delete: rc %s %s" % (p.returncode, out))
    # kubectl get NAME -w: synthetic ADDED, then the change
    create(ns, "kw")
    p = subprocess.Popen(["kubectl", "get", "-n", ns, "cm/kw", "-w", "--output-watch-events",
                          "--request-timeout=5s"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=env)
    time.sleep(1.0)
    patch(ns, "kw", {"data": {"a": "1"}})
    time.sleep(1.0)
    p.terminate()
    out = p.communicate(timeout=10)[0].decode()
    rows = [ln.split()[0] for ln in out.splitlines()[1:] if ln.strip()]
    check(rows[:2] == ["ADDED", "MODIFIED"], "kubectl get cm/kw -w: %r" % out)


def t_deprecated_prefix_and_all_namespaces():
    mkns("w-pre")
    w1 = Watch("/api/v1/watch/namespaces/w-pre/configmaps", resourceVersion="0",
               timeoutSeconds=5)
    w2 = Watch("/api/v1/watch/configmaps", fieldSelector="metadata.namespace=w-pre",
               timeoutSeconds=5)
    w3 = Watch("/api/v1/watch/namespaces/w-pre/configmaps/solo", timeoutSeconds=5)
    create("w-pre", "solo")
    create("w-pre", "duo")
    check(summary(w1.take(2)) == [("ADDED", "solo"), ("ADDED", "duo")], "/watch/ namespaced")
    check(summary(w2.take(2)) == [("ADDED", "solo"), ("ADDED", "duo")], "/watch/ cluster-wide")
    check(summary(w3.take(1)) == [("ADDED", "solo")], "/watch/ single object by path")
    check(w3.quiet(0.3), "/watch/NAME saw another object")
    for w in (w1, w2, w3):
        w.close()


def t_timeout_seconds():
    mkns("w-to")
    t0 = time.monotonic()
    w = Watch(cms("w-to"), timeoutSeconds=2)
    end = w.take(1, timeout=6)
    el = time.monotonic() - t0
    check(end == [] and w.ended is not None, "timeoutSeconds=2 stream did not end: %s" % end)
    check(1.5 <= el <= 4.0, "timeoutSeconds=2 ended after %.1fs" % el)
    w.close()


def t_many_watchers_same_order():
    mkns("w-many")
    ws = [Watch(cms("w-many"), timeoutSeconds=15) for _ in range(12)]
    names = ["m%d" % i for i in range(30)]

    def writer(sub):
        for n in sub:
            create("w-many", n)
    ths = [threading.Thread(target=writer, args=(names[i::3],)) for i in range(3)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    seqs = []
    for w in ws:
        evs = w.take(30)
        seqs.append([(e["type"], e["object"]["metadata"]["name"], rv_of(e["object"]))
                     for e in evs])
        w.close()
    check(len(seqs[0]) == 30, "watcher saw %d/30 events" % len(seqs[0]))
    check(all(s == seqs[0] for s in seqs), "watchers disagree on the event sequence")
    rvs = [x[2] for x in seqs[0]]
    check(rvs == sorted(rvs), "events out of revision order")


def t_send_initial_events():
    mkns("w-sie")
    create("w-sie", "i1")
    w = Watch(cms("w-sie"), sendInitialEvents="true", resourceVersionMatch="NotOlderThan",
              allowWatchBookmarks="true", timeoutSeconds=5)
    evs = w.take(2)
    check(summary(evs) == [("ADDED", "i1"), ("BOOKMARK", None)], "sendInitialEvents: %s" % evs)
    if len(evs) == 2:
        ann = evs[1]["object"]["metadata"].get("annotations", {})
        check(ann.get("k8s.io/initial-events-end") == "true", "initial-events-end: %s" % evs[1])
    w.close()


def t_expired_after_ring_overflow():
    """More than RING events on one resource: a watch from before them
    gets one ERROR 410 Expired event and the stream ends."""
    ns = "w-ring"
    mkns(ns)
    path = "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % ns
    first = api("POST", path, {"metadata": {"name": "l0"}, "spec": {"holderIdentity": "a"}},
                want=201)
    api("POST", path, {"metadata": {"name": "l00"}, "spec": {"holderIdentity": "a"}}, want=201)
    old_rv = rv_of(first)
    # the first page of a paginated list, continued after the overflow
    page1 = api("GET", path + "?limit=1", want=200)
    token = page1["metadata"].get("continue")
    check(bool(token), "a first page with a continue token: %s" % page1["metadata"])
    w_live = Watch(path, resourceVersion=str(old_rv), timeoutSeconds=30)

    def writer(t):
        c = Client()
        for i in range(RING // 8 + 40):
            st, b = c.req("POST", path, {"metadata": {"name": "l%d-%d" % (t, i)},
                                         "spec": {"holderIdentity": "x"}})
            assert st == 201, (st, b)
        c.close()
    ths = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    w = Watch(path, resourceVersion=str(old_rv), timeoutSeconds=5)
    evs = w.take(2)
    ok = len(evs) == 1 and evs[0]["type"] == "ERROR"
    if check(ok, "watch from an rv older than the ring: %s" % summary(evs)[:3]):
        st = evs[0]["object"]
        check(st.get("kind") == "Status" and st.get("code") == 410 and
              st.get("reason") == "Expired", "410 status: %s" % st)
        check(st.get("message", "").startswith("too old resource version: %d (" % old_rv),
              "410 message: %s" % st.get("message"))
    check(w.ended is not None or w.next(2) is None, "stream did not end after the 410")
    w.close()
    # the watch that was open all along got every event, in order
    n = 8 * (RING // 8 + 40)
    got = 0
    last = old_rv
    while got < n:
        ev = w_live.next(10)
        if ev in ("TIMEOUT", None) or ev["type"] != "ADDED":
            check(False, "live watch through the overflow: got %d/%d, then %s" %
                  (got, n, ev if ev in ("TIMEOUT", None) else ev["type"]))
            break
        r = rv_of(ev["object"])
        if not check(r > last, "live watch out of order"):
            break
        last = r
        got += 1
    w_live.close()
    # the continue token outlived the ring: 410 Expired, as upstream, with a
    # token for the rest of the list as it is now (inconsistent)
    c = Client()
    st, b = c.req("GET", path + "?limit=500&continue=" + token)
    check(st == 410 and b.get("reason") == "Expired" and
          b.get("message", "").startswith("The provided continue parameter is too old to "
                                          "display a consistent list result."),
          "continue past the ring: %s %s" % (st, str(b)[:300]))
    rest = b.get("metadata", {}).get("continue")
    check(bool(rest), "an inconsistent continuation is offered: %s" % b.get("metadata"))
    if rest:
        st, b2 = c.req("GET", path + "?limit=100000&continue=" + rest)
        names = [i["metadata"]["name"] for i in b2.get("items", [])] if st == 200 else []
        check(st == 200 and names and names[0] > page1["items"][0]["metadata"]["name"] and
              len(names) >= 8 * (RING // 8 + 40),
              "the inconsistent rest: %s, %d items" % (st, len(names)))
        check(int(b2["metadata"]["resourceVersion"]) > old_rv if st == 200 else False,
              "the inconsistent rest is listed now")
    c.close()
    # list with resourceVersionMatch=Exact on an old revision: 410
    c = Client()
    st, b = c.req("GET", path + "?resourceVersion=%d&resourceVersionMatch=Exact" % old_rv)
    c.close()
    check(st == 410 and b.get("reason") == "Expired", "Exact list of an old rv: %s %s" % (st, b))


def bookmark_watch():
    mkns("w-bm")
    create("w-bm", "b1")
    return (Watch(cms("w-bm"), allowWatchBookmarks="true", timeoutSeconds=BOOKMARK_INTERVAL + 20),
            Watch(cms("w-bm"), headers={"Accept": META_ACCEPT}, allowWatchBookmarks="true",
                  timeoutSeconds=BOOKMARK_INTERVAL + 20))


def t_bookmarks(both, t0):
    w, pw = both
    evs = w.take(1)
    check(summary(evs) == [("ADDED", "b1")], "bookmark watch initial: %s" % summary(evs))
    last = create("w-bm", "b2")
    evs = w.take(1)
    check(summary(evs) == [("ADDED", "b2")], "bookmark watch live: %s" % summary(evs))
    left = BOOKMARK_INTERVAL + 8 - (time.monotonic() - t0)
    ev = w.next(max(left, 1))
    if check(ev not in ("TIMEOUT", None) and ev["type"] == "BOOKMARK",
             "no BOOKMARK within %ds: %s" % (BOOKMARK_INTERVAL + 8, ev)):
        o = ev["object"]
        check(o.get("kind") == "ConfigMap" and o.get("apiVersion") == "v1", "bookmark kind %s" % o)
        check(set(o["metadata"]) <= {"resourceVersion", "annotations"} and
              rv_of(o) >= rv_of(last), "bookmark metadata %s (last event rv %s)" %
              (o["metadata"], rv_of(last)))
    w.close()
    # The same watch as PartialObjectMetadata: its bookmarks are of that
    # kind too (the metadata client's decoder knows no other).
    evs = []
    ev = pw.next(10)
    while ev not in ("TIMEOUT", None) and ev["type"] != "BOOKMARK":
        evs.append(ev)
        ev = pw.next(10)
    check(summary(evs) == [("ADDED", "b1"), ("ADDED", "b2")], "partial bookmark watch: %s" % evs)
    if check(ev not in ("TIMEOUT", None), "no BOOKMARK on the partial watch: %s" % (ev,)):
        check((ev["object"].get("kind"), ev["object"].get("apiVersion")) ==
              ("PartialObjectMetadata", "meta.k8s.io/v1"), "partial bookmark kind %s" % ev)
    pw.close()


def t_expired_after_restart():
    mkns("w-restart")
    c = create("w-restart", "r1")
    rv = rv_of(c)  # older than the restart revision (r2 comes after it)
    create("w-restart", "r2")
    SRV.stop()
    SRV.start()
    w = Watch(cms("w-restart"), resourceVersion=str(rv), timeoutSeconds=5)
    evs = w.take(2)
    ok = len(evs) == 1 and evs[0]["type"] == "ERROR" and evs[0]["object"].get("code") == 410
    check(ok, "watch from a pre-restart rv: %s" % evs)
    if ok:
        check(evs[0]["object"].get("reason") == "Expired", "reason %s" % evs[0]["object"])
    w.close()
    # a watch from "0" after the restart still sees the object
    w = Watch(cms("w-restart"), resourceVersion="0", timeoutSeconds=5)
    check(summary(w.take(2)) == [("ADDED", "r1"), ("ADDED", "r2")], "initial events after restart")
    w.close()


def t_future_rv():
    """A list "not older than" a revision the server has not reached may not
    answer with older data: upstream waits briefly, then 504 Timeout with
    cause ResourceVersionTooLarge (client-go retries)."""
    mkns("w-future")
    cur = int(api("GET", cms("w-future"), want=200)["metadata"]["resourceVersion"])
    c = Client()
    t0 = time.monotonic()
    st, b = c.req("GET", cms("w-future") + "?resourceVersion=%d" % (cur + 1000))
    el = time.monotonic() - t0
    c.close()
    check(st == 504 and b.get("reason") == "Timeout" and
          any(x.get("reason") == "ResourceVersionTooLarge"
              for x in (b.get("details") or {}).get("causes", [])),
          "list from a future rv: %s %s" % (st, json.dumps(b)[:200]))
    check(el < 10, "future rv list took %.1fs" % el)


def t_watch_flag_spelling():
    """The Python client sends watch=True (str(True)); upstream treats any
    value but "false"/"0" as true."""
    mkns("w-flag")
    create("w-flag", "f1")
    c2 = SRV.connection(timeout=10)
    c2.request("GET", cms("w-flag") + "?watch=True&timeoutSeconds=1")
    r = c2.getresponse()
    body = r.read().decode()
    c2.close()
    check(body.startswith('{"type":"ADDED"'), "watch=True is not a watch: %s" % body[:120])


# What client-go's metadata client sends (k8s.io/client-go/metadata).
META_ACCEPT = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
               "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")
META_LIST_ACCEPT = META_ACCEPT.replace("PartialObjectMetadata;", "PartialObjectMetadataList;")


def raw_get(path, accept):
    c = SRV.connection(timeout=30)
    try:
        c.request("GET", path, headers={"Accept": accept})
        r = c.getresponse()
        body = r.read()
        return r.status, r.getheader("Content-Type"), json.loads(body) if body else None
    finally:
        c.close()


def t_partial_object_metadata():
    """as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1 on get, list
    (small and streamed) and watch; the wrong form is a 406; v1beta1 for
    old clients; Table and plain JSON unchanged."""
    ns = "w-meta"
    mkns(ns)
    full = create(ns, "m1", labels={"a": "b"}, data={"k": "v" * 100})
    st, ct, o = raw_get(cms(ns) + "/m1", META_ACCEPT)
    check(st == 200 and ct.startswith("application/json"), "partial get: %s %s" % (st, ct))
    check(o == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": full["metadata"]}, "partial get body %s" % o)
    st, _, o = raw_get(cms(ns) + "/m1", META_ACCEPT.replace("=v1", "=v1beta1"))
    check(st == 200 and o["apiVersion"] == "meta.k8s.io/v1beta1", "v1beta1 partial get %s" % o)
    # A list: 250 objects of 1.5 KB are streamed (over 256 KiB).
    for i in range(250):
        create(ns, "n%03d" % i, data={"pad": "x" * 1200})
    st, _, lst = raw_get(cms(ns), META_LIST_ACCEPT)
    check(st == 200 and lst["kind"] == "PartialObjectMetadataList" and
          lst["apiVersion"] == "meta.k8s.io/v1", "partial list head %s" % str(lst)[:200])
    items = lst["items"]
    check(len(items) == 251 and all(
        set(x) == {"kind", "apiVersion", "metadata"} and x["kind"] == "PartialObjectMetadata"
        for x in items), "partial list items (%d)" % len(items))
    check(items[0]["metadata"] == full["metadata"], "partial list item metadata")
    check(lst["metadata"]["resourceVersion"] != "", "partial list resourceVersion")
    st, _, page = raw_get(cms(ns) + "?limit=10", META_LIST_ACCEPT)
    check(st == 200 and len(page["items"]) == 10 and page["metadata"].get("continue") and
          page["metadata"].get("remainingItemCount") == 241, "partial list page %s" %
          str(page)[:200])
    st, _, sel = raw_get(cms(ns) + "?labelSelector=a%3Db", META_LIST_ACCEPT)
    check(st == 200 and [x["metadata"]["name"] for x in sel["items"]] == ["m1"],
          "partial list with a selector")
    # The wrong form for the endpoint: 406, as upstream.
    st, _, body = raw_get(cms(ns), "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
    check(st == 406 and body.get("reason") == "NotAcceptable" and
          "is a list" in body.get("message", ""), "object form on a list: %s %s" % (st, body))
    st, _, body = raw_get(cms(ns) + "/m1",
                          "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
    check(st == 406 and "not a list" in body.get("message", ""),
          "list form on an object: %s %s" % (st, body))
    st, _, body = raw_get(cms(ns) + "/m1", "application/json;as=PartialObjectMetadata;g=x;v=v1")
    check(st == 406, "a conversion of another group is not acceptable: %s" % st)
    # Unchanged: plain JSON and Table.
    st, _, o = raw_get(cms(ns) + "/m1", "application/json")
    check(st == 200 and o["data"] == full["data"], "plain get")
    st, _, o = raw_get(cms(ns) + "/m1", "application/json;as=Table;v=v1;g=meta.k8s.io")
    check(st == 200 and o["kind"] == "Table", "table get")
    # A watch: initial, live and deleted events as PartialObjectMetadata.
    w = Watch(cms(ns), headers={"Accept": META_ACCEPT}, labelSelector="a=b", timeoutSeconds=20)
    check(w.status == 200, "partial watch status %s" % w.status)
    ev = w.next()
    check(ev not in ("TIMEOUT", None) and ev["type"] == "ADDED" and
          ev["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                           "metadata": full["metadata"]}, "partial watch initial %s" % (ev,))
    p = patch(ns, "m1", {"metadata": {"annotations": {"x": "1"}}})
    ev = w.next()
    check(ev not in ("TIMEOUT", None) and ev["type"] == "MODIFIED" and
          ev["object"]["metadata"] == p["metadata"] and "data" not in ev["object"],
          "partial watch live %s" % (ev,))
    delete(ns, "m1")
    ev = w.next()
    check(ev not in ("TIMEOUT", None) and ev["type"] == "DELETED" and
          ev["object"]["kind"] == "PartialObjectMetadata", "partial watch deleted %s" % (ev,))
    w.close()
    w = Watch(cms(ns), headers={"Accept": META_LIST_ACCEPT.split(",")[1]}, timeoutSeconds=5)
    check(w.status == 406, "list form on a watch: %s" % w.status)
    w.close()
    # Writes answer in that form too (client-go's metadata client patches
    # and deletes); a Status stays a Status.
    def write(method, path, body, ctype="application/json"):
        c = SRV.connection(timeout=30)
        try:
            c.request(method, path, body=json.dumps(body),
                      headers={"Accept": META_ACCEPT, "Content-Type": ctype})
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()
    st, o = write("POST", cms(ns), {"metadata": {"name": "w1"}, "data": {"k": "v"}})
    check(st == 201 and o.get("kind") == "PartialObjectMetadata" and "data" not in o and
          o["metadata"]["name"] == "w1", "partial create %s %s" % (st, o))
    st, o = write("PATCH", cms(ns) + "/w1", {"metadata": {"labels": {"p": "1"}}},
                  "application/merge-patch+json")
    check(st == 200 and o.get("kind") == "PartialObjectMetadata" and
          o["metadata"].get("labels") == {"p": "1"}, "partial patch %s %s" % (st, o))
    st, o = write("PUT", cms(ns) + "/w1", {"metadata": {"name": "w1",
                                                        "resourceVersion":
                                                            o["metadata"]["resourceVersion"]},
                                           "data": {"k": "2"}})
    check(st == 200 and o.get("kind") == "PartialObjectMetadata", "partial update %s %s" % (st, o))
    st, o = write("DELETE", cms(ns) + "/w1", {})
    check(st == 200 and o.get("kind") == "Status", "partial delete answers a Status: %s" % o)
    st, o = write("PUT", cms(ns) + "/nosuch", {"metadata": {"name": "nosuch"}})
    check(st == 404 and o.get("kind") == "Status", "partial error stays a Status: %s" % o)
    # deletecollection answers a list: PartialObjectMetadataList when
    # asked; the object form is a 406 and deletes nothing.
    for i in range(3):
        create(ns, "dc%d" % i, labels={"dc": "1"}, data={"k": "v"})
    c = SRV.connection(timeout=30)
    c.request("DELETE", cms(ns) + "?labelSelector=dc%3D1",
              headers={"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"})
    r = c.getresponse()
    o = json.loads(r.read())
    c.close()
    check(r.status == 406 and "is a list" in o.get("message", ""),
          "object form on deletecollection: %s %s" % (r.status, o))
    c = SRV.connection(timeout=30)
    c.request("DELETE", cms(ns) + "/dc0",
              headers={"Accept": META_LIST_ACCEPT.split(",")[1]})
    r = c.getresponse()
    o = json.loads(r.read())
    c.close()
    check(r.status == 406 and "not a list" in o.get("message", ""),
          "list form on a delete: %s %s" % (r.status, o))
    st, _, left = raw_get(cms(ns) + "?labelSelector=dc%3D1", "application/json")
    check(st == 200 and len(left["items"]) == 3, "a refused delete(collection) deleted objects")
    c = SRV.connection(timeout=30)
    c.request("DELETE", cms(ns) + "?labelSelector=dc%3D1", headers={"Accept": META_LIST_ACCEPT})
    r = c.getresponse()
    o = json.loads(r.read())
    c.close()
    check(r.status == 200 and o.get("kind") == "PartialObjectMetadataList" and
          o.get("apiVersion") == "meta.k8s.io/v1" and
          sorted(x["metadata"]["name"] for x in o["items"]) == ["dc0", "dc1", "dc2"] and
          all(set(x) == {"kind", "apiVersion", "metadata"} and
              x["kind"] == "PartialObjectMetadata" for x in o["items"]),
          "partial deletecollection %s %s" % (r.status, str(o)[:300]))
    st, _, left = raw_get(cms(ns) + "?labelSelector=dc%3D1", "application/json")
    check(st == 200 and left["items"] == [], "deletecollection left %s" % left["items"])


def crd_body(name="gadgets", kind="Gadget"):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name + ".ws.example.com"},
            "spec": {"group": "ws.example.com", "scope": "Namespaced",
                     "names": {"plural": name, "singular": name[:-1], "kind": kind},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


def t_crd_deletion_ends_watches():
    """A watch on a custom resource sees its objects' DELETED events when
    the CRD goes, then ends (upstream tears the CRD's storage down); a
    change of the CRD's spec ends it too (upstream rebuilds the storage),
    one of its metadata leaves it running; a watch of another CRD's
    resource and one of a built-in are untouched."""
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    api("POST", crds, crd_body(), want=201)
    api("POST", crds, crd_body("others", "Other"), want=201)
    ns = "w-crd"
    mkns(ns)
    path = "/apis/ws.example.com/v1/namespaces/%s/gadgets" % ns
    other = "/apis/ws.example.com/v1/namespaces/%s/others" % ns
    for _ in range(50):  # served once the registry has it
        if Client().req("GET", path)[0] == 200:
            break
        time.sleep(0.05)
    api("POST", path, {"apiVersion": "ws.example.com/v1", "kind": "Gadget",
                       "metadata": {"name": "g1"}}, want=201)
    w = Watch(path, timeoutSeconds=30)
    wo = Watch(other, timeoutSeconds=30)
    wb = Watch(cms(ns), timeoutSeconds=30)
    check(wo.status == 200 and wb.status == 200, "other watches: %s %s" % (wo.status, wb.status))
    check(summary(w.take(1)) == [("ADDED", "g1")], "CR watch: initial event")
    # An update of the CRD's metadata (a label) changes nothing it serves:
    # no effect.
    api("PATCH", crds + "/gadgets.ws.example.com", {"metadata": {"labels": {"x": "y"}}},
        "application/merge-patch+json", want=200)
    check(w.quiet(0.5), "a CRD label update disturbed the CR watch")
    # A change of its spec (a printer column) rebuilds the storage
    # upstream, which ends the watches on it: no event, the end.
    v1 = crd_body()["spec"]["versions"][0]
    v1["additionalPrinterColumns"] = [{"name": "Mode", "type": "string",
                                       "jsonPath": ".spec.mode"}]
    api("PATCH", crds + "/gadgets.ws.example.com", {"spec": {"versions": [v1]}},
        "application/merge-patch+json", want=200)
    end = w.next(10)
    check(end is None, "CR watch did not end after a CRD spec change: %s" % (end,))
    check(wo.quiet(0.3) and wo.ended is None, "a spec change of one CRD ended another's watch")
    w = Watch(path, timeoutSeconds=30)
    check(w.status == 200 and summary(w.take(1)) == [("ADDED", "g1")],
          "a new CR watch after the spec change")
    api("DELETE", crds + "/gadgets.ws.example.com", want=200)
    ev = w.next(10)
    check(ev not in ("TIMEOUT", None) and (ev["type"], ev["object"]["metadata"]["name"]) ==
          ("DELETED", "g1"), "CR watch: DELETED of g1 before the end, got %s" % (ev,))
    end = w.next(10)
    check(end is None, "CR watch did not end after its CRD was deleted: %s" % (end,))
    check(wo.quiet(0.3), "the other CRD's watch was disturbed")
    check(wo.ended is None and wb.ended is None, "unrelated watches ended")
    # The same name again is a new CRD: its watches live on.
    api("POST", crds, crd_body(), want=201)
    for _ in range(50):
        if Client().req("GET", path)[0] == 200:
            break
        time.sleep(0.05)
    w2 = Watch(path, timeoutSeconds=30)
    check(w2.status == 200, "watch on the re-created CRD: %s" % w2.status)
    api("POST", path, {"apiVersion": "ws.example.com/v1", "kind": "Gadget",
                       "metadata": {"name": "g2"}}, want=201)
    check(summary(w2.take(1)) == [("ADDED", "g2")], "watch on the re-created CRD sees g2")
    for x in (w, wo, wb, w2):
        x.close()


def main():
    global SRV
    t0 = time.monotonic()
    # API behaviour only: no controllers (kube-root-ca.crt in every
    # namespace would show in the ConfigMap watches below)
    SRV = Server("--controller-manager=false", "--watch-cache-size", str(RING)).start()
    bm = bookmark_watch()
    bm_t0 = time.monotonic()
    for t in (t_initial_events, t_from_list_rv, t_label_transitions,
              t_field_selector_single_object, t_deprecated_prefix_and_all_namespaces,
              t_timeout_seconds, t_many_watchers_same_order, t_send_initial_events,
              t_expired_after_ring_overflow, t_watch_flag_spelling, t_future_rv,
              t_crd_deletion_ends_watches, t_partial_object_metadata):
        n = len(FAILURES)
        try:
            t()
        except Exception as e:  # noqa: BLE001 - report and go on
            check(False, "%s raised %r" % (t.__name__, e))
        (PASSED.append(t.__name__) if len(FAILURES) == n else None)
        print("%s: %s (%.1fs)" % (t.__name__, "ok" if len(FAILURES) == n else "FAILED",
                                  time.monotonic() - t0), flush=True)
    n = len(FAILURES)
    try:
        t_bookmarks(bm, bm_t0)
    except Exception as e:  # noqa: BLE001
        check(False, "t_bookmarks raised %r" % e)
    print("t_bookmarks: %s" % ("ok" if len(FAILURES) == n else "FAILED"), flush=True)
    if len(FAILURES) == n:
        PASSED.append("t_bookmarks")
    n = len(FAILURES)
    try:
        t_expired_after_restart()
    except Exception as e:  # noqa: BLE001
        check(False, "t_expired_after_restart raised %r" % e)
    print("t_expired_after_restart: %s" % ("ok" if len(FAILURES) == n else "FAILED"), flush=True)
    if len(FAILURES) == n:
        PASSED.append("t_expired_after_restart")
    SRV.stop()
    total = 15
    print("%d passed, %d failed (%.1fs)" % (len(PASSED), total - len(PASSED),
                                             time.monotonic() - t0))
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
