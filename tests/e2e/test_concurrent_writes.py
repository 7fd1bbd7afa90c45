"""Concurrent writers on one object, over raw HTTP:

- PATCHes without a resourceVersion (what kubectl label/annotate/patch and
  most controllers send) never fail with 409: the server re-applies the
  patch to the newest object, like upstream's GuaranteedUpdate loop; every
  acknowledged patch is in the final object.
- Optimistic concurrency (GET, then PUT with the resourceVersion, retry on
  409, like client-go's RetryOnConflict) loses no update: a counter
  incremented N times ends at N.
- Unconditional PUTs (no resourceVersion) all succeed.
- Racing creates of one name: exactly one 201, the rest 409 AlreadyExists.
- Racing deletes of one object: exactly one 200, the rest 404.
"""
import collections
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server  # noqa: E402

THREADS = 16
PER_THREAD = 25
CM = "/api/v1/namespaces/default/configmaps"
SRV = None
FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, flush=True)
    return cond


class Conn:
    def __init__(self):
        self.c = SRV.connection(timeout=30)

    def req(self, method, path, body=None, ctype="application/json"):
        data = json.dumps(body).encode() if body is not None else None
        self.c.request(method, path, body=data,
                       headers={"Content-Type": ctype} if data is not None else {})
        r = self.c.getresponse()
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None)


def run_threads(fn):
    ths = [threading.Thread(target=fn, args=(t,)) for t in range(THREADS)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(timeout=60)
        check(not t.is_alive(), "writer thread stuck")


def t_patches_without_rv():
    c = Conn()
    st, obj = c.req("POST", CM, {"metadata": {"name": "hot"}, "data": {}})
    assert st == 201, (st, obj)
    rv0 = int(obj["metadata"]["resourceVersion"])
    codes = collections.Counter()
    bad = []
    acked = set()
    lock = threading.Lock()

    def writer(t):
        cc = Conn()
        for i in range(PER_THREAD):
            key = "k%d_%d" % (t, i)
            kind = i % 3
            if kind == 0:
                st, b = cc.req("PATCH", CM + "/hot", {"data": {key: "v"}},
                               "application/merge-patch+json")
            elif kind == 1:
                st, b = cc.req("PATCH", CM + "/hot", {"data": {key: "v"}},
                               "application/strategic-merge-patch+json")
            else:
                st, b = cc.req("PATCH", CM + "/hot",
                               [{"op": "add", "path": "/data/" + key, "value": "v"}],
                               "application/json-patch+json")
            with lock:
                codes[st] += 1
                if st == 200:
                    acked.add(key)
                elif len(bad) < 3:
                    bad.append((st, (b or {}).get("message")))
    t0 = time.monotonic()
    run_threads(writer)
    el = time.monotonic() - t0
    st, obj = c.req("GET", CM + "/hot")
    n = THREADS * PER_THREAD
    check(codes[200] == n, "patches without resourceVersion: %s, e.g. %s" % (dict(codes), bad))
    missing = acked - set(obj["data"])
    check(not missing, "%d acknowledged patches missing from the object" % len(missing))
    rv = int(obj["metadata"]["resourceVersion"])
    check(rv > rv0, "resourceVersion did not move")
    print("  %d concurrent patches in %.1fs: %s" % (n, el, dict(codes)), flush=True)


def t_optimistic_counter():
    c = Conn()
    st, obj = c.req("POST", CM, {"metadata": {"name": "counter"}, "data": {"n": "0"}})
    assert st == 201, (st, obj)
    conflicts = collections.Counter()
    lock = threading.Lock()
    per = 10

    def writer(t):
        cc = Conn()
        for _ in range(per):
            for attempt in range(200):
                st, cur = cc.req("GET", CM + "/counter")
                cur["data"]["n"] = str(int(cur["data"]["n"]) + 1)
                st, b = cc.req("PUT", CM + "/counter", cur)
                if st == 200:
                    break
                with lock:
                    conflicts[st] += 1
                if st != 409:
                    check(False, "PUT with resourceVersion: %s %s" % (st, b))
                    return
            else:
                check(False, "gave up after 200 conflicts")
                return
    run_threads(writer)
    st, obj = c.req("GET", CM + "/counter")
    check(obj["data"]["n"] == str(THREADS * per),
          "lost updates: counter %s after %d increments (%s)" %
          (obj["data"]["n"], THREADS * per, dict(conflicts)))
    print("  counter %s, retries %s" % (obj["data"]["n"], dict(conflicts)), flush=True)


def t_unconditional_put():
    c = Conn()
    st, obj = c.req("POST", CM, {"metadata": {"name": "blind"}, "data": {"w": "none"}})
    assert st == 201, (st, obj)
    codes = collections.Counter()
    lock = threading.Lock()

    def writer(t):
        cc = Conn()
        for i in range(10):
            st, b = cc.req("PUT", CM + "/blind", {"apiVersion": "v1", "kind": "ConfigMap",
                                                  "metadata": {"name": "blind"},
                                                  "data": {"w": "%d-%d" % (t, i)}})
            with lock:
                codes[st] += 1
    run_threads(writer)
    check(codes[200] == THREADS * 10, "unconditional PUTs: %s" % dict(codes))


def t_racing_creates_and_deletes():
    res = collections.Counter()
    lock = threading.Lock()

    def creator(t):
        st, b = Conn().req("POST", CM, {"metadata": {"name": "race"}})
        with lock:
            res[(st, (b or {}).get("reason", "") if st != 201 else "")] += 1
    run_threads(creator)
    check(res == collections.Counter({(201, ""): 1, (409, "AlreadyExists"): THREADS - 1}),
          "racing creates: %s" % dict(res))
    res.clear()

    def deleter(t):
        st, b = Conn().req("DELETE", CM + "/race")
        with lock:
            res[(st, (b or {}).get("reason", "") if st != 200 else "")] += 1
    run_threads(deleter)
    check(res == collections.Counter({(200, ""): 1, (404, "NotFound"): THREADS - 1}),
          "racing deletes: %s" % dict(res))


def main():
    global SRV
    SRV = Server().start()
    passed = 0
    tests = (t_patches_without_rv, t_optimistic_counter, t_unconditional_put,
             t_racing_creates_and_deletes)
    for t in tests:
        n = len(FAILURES)
        try:
            t()
        except Exception as e:  # noqa: BLE001 - report and go on
            check(False, "%s raised %r" % (t.__name__, e))
        ok = len(FAILURES) == n
        passed += ok
        print("%s: %s" % (t.__name__, "ok" if ok else "FAILED"), flush=True)
    SRV.stop()
    print("%d passed, %d failed" % (passed, len(tests) - passed))
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
