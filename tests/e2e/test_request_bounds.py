"""Adversarial requests against a real `ckube server`: bodies built to
amplify (YAML alias bombs of several shapes, bodies dense in empty
containers, deep nesting, protobuf sub-messages that unpack to hundreds of
bytes each, patch and apply amplification, huge selectors, big Tables and
deletecollections). Each gets its Status (upstream's code, reason and
words) or its answer, quickly, while the server's peak RSS grows by less
than the bound docs/design.md states ("Bounded memory per request"), and
the server answers a normal request right after.

Each case runs on a fresh server: its resident set is read after a warm-up
request, the peak is reset (/proc/PID/clear_refs), the case is sent, and
the growth is VmHWM minus that baseline.

Under AddressSanitizer (make test) every allocation carries redzones and
shadow memory, so the measured growth is compared against the bound times
ASAN_FACTOR, with ASan's quarantine of freed memory kept small for these
servers (it would otherwise count a request's freed memory up to 256 MB).
"""
import json
import os
import string
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

sys.setrecursionlimit(20000)  # json.loads of the deepest bodies

MiB = 1 << 20
BODY_LIMIT = 3 * MiB          # APISERVER_MAX_BODY
MAX_DECODED = 32 * MiB        # APISERVER_MAX_DECODED
# docs/design.md: a request holds the body's tree and the stored object's
# (MAX_DECODED each), their result (at most both), and the body twice (as
# read, and contiguous).
BOUND = 4 * MAX_DECODED + 2 * BODY_LIMIT
ASAN_FACTOR = 2.5
SLACK = 4 * MiB  # the warm-up does not settle everything (a loop's first chunk, ...)

CM = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
BLOBS = "/apis/ex.com/v1/namespaces/default/blobs"
JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "blobs.ex.com"},
    "spec": {"group": "ex.com", "scope": "Namespaced",
             "names": {"plural": "blobs", "singular": "blob", "kind": "Blob"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {
                               "type": "object",
                               "properties": {
                                   "spec": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True},
                                   "counts": {"type": "object",
                                              "additionalProperties": {"type": "integer"}}}}}}]}}


def decode_budget(n):
    """apiserver_decode_budget: what a body of n bytes may decode into."""
    return min(MAX_DECODED, MiB + 64 * n)


def request_bound(n):
    """The bound for a request of n body bytes on no stored object."""
    return min(BOUND, 3 * decode_budget(n) + 2 * n)


def alias_bomb(levels, first):
    s = first + "\n"
    for i in range(1, levels):
        me, prev = string.ascii_lowercase[i], string.ascii_lowercase[i - 1]
        s += "%s: &%s [%s]\n" % (me, me, ",".join(["*" + prev] * 9))
    return s.encode()


def varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def ld(field, payload):
    """A length-delimited protobuf field."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def pb_envelope(api_version, kind, raw):
    """"k8s\\0" + runtime.Unknown{typeMeta, raw}, as client-go sends."""
    return b"k8s\x00" + ld(1, ld(1, api_version) + ld(2, kind)) + ld(2, raw)


def blob(name, spec_json):
    return ('{"apiVersion":"ex.com/v1","kind":"Blob","metadata":{"name":"%s"},"spec":%s}'
            % (name, spec_json)).encode()


def dense_arrays(n):
    """n empty arrays: 3 bytes of JSON, 144 bytes of memory each."""
    return '{"x":[' + ",".join(["[]"] * n) + "]}"


# About MAX_DECODED of empty arrays: the densest object the server stores.
DENSE_N = 215000


class Measured:
    """A fresh server, its baseline and peak resident set."""

    def __init__(self):
        self.srv = Server("--controller-manager=false").start()
        self.pid = self.srv.proc.pid
        with open("/proc/%d/maps" % self.pid) as f:
            self.factor = ASAN_FACTOR if "libasan" in f.read() else 1.0
        code, _, body = self.send("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                  json.dumps(CRD).encode(), JSON)
        assert code == 201, body
        deadline = time.time() + 10
        while self.send("GET", BLOBS)[0] != 200:
            assert time.time() < deadline, "the CRD is not served"
            time.sleep(0.05)
        code, _, body = self.send("POST", CM, b'{"apiVersion":"v1","kind":"ConfigMap",'
                                  b'"metadata":{"name":"warm"},"data":{"a":"b"}}', JSON)
        assert code == 201, body

    def vm(self, key):
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        raise AssertionError(key)

    def send(self, method, path, body=None, ctype=None, headers=None, timeout=120):
        conn = self.srv.connection(timeout=timeout)
        try:
            h = dict(headers or {})
            if ctype:
                h["Content-Type"] = ctype
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def measure(self, method, path, body=None, ctype=None, headers=None):
        """Sends one request; returns (code, headers, body, seconds, growth)."""
        base = self.vm("VmRSS")
        with open("/proc/%d/clear_refs" % self.pid, "w") as f:
            f.write("5")  # resets VmHWM to the current resident set
        t0 = time.monotonic()
        code, hdrs, data = self.send(method, path, body, ctype, headers)
        secs = time.monotonic() - t0
        return code, hdrs, data, secs, self.vm("VmHWM") - base

    def close(self):
        self.srv.stop()
        self.srv.cleanup()


class RequestBoundsTest(unittest.TestCase):
    def setUp(self):
        self.m = Measured()

    def tearDown(self):
        self.m.close()

    def check(self, method, path, body, ctype, want_code, want_reason=None, want_message=None,
              bound=None, max_seconds=None, headers=None):
        """Sends the case; checks its answer, its time, its memory, and that
        the server serves a normal request after it. Returns (headers, doc)."""
        code, hdrs, data, secs, growth = self.m.measure(method, path, body, ctype, headers)
        if bound is None:
            bound = request_bound(len(body or b""))
        limit = bound * self.m.factor + SLACK
        print("  %s %s: %d in %.0f ms, peak RSS +%.1f MiB (limit %.1f MiB)"
              % (method, path.split("?")[0], code, secs * 1000, growth / MiB, limit / MiB))
        self.assertEqual(code, want_code, data[:400])
        doc = json.loads(data) if data else None
        if want_reason:
            self.assertEqual((doc["kind"], doc["status"], doc["code"], doc["reason"]),
                             ("Status", "Failure", want_code, want_reason), data[:400])
        if want_message:
            self.assertIn(want_message, doc["message"])
        self.assertLess(growth, limit, "peak RSS grew %.1f MiB" % (growth / MiB))
        if max_seconds is not None:  # generous: these take about a millisecond
            self.assertLess(secs, max_seconds * self.m.factor)
        # Still serving, the earlier object intact.
        c, _, d = self.m.send("GET", CM + "/warm")
        self.assertEqual(c, 200, d)
        self.assertEqual(json.loads(d)["data"], {"a": "b"})
        return hdrs, doc

    # ---- YAML ----

    def test_yaml_seven_level_alias_bomb(self):
        # The body: 1.3 GB before; refused in milliseconds now.
        body = alias_bomb(7, "a: &a " + "x" * 1000)
        self.check("POST", CM, body, YAML, 400, "BadRequest",
                   "yaml: document contains excessive aliasing", max_seconds=0.2)

    def test_yaml_eight_level_alias_bomb(self):
        body = alias_bomb(8, "a: &a " + "x" * 1000)
        self.check("POST", CM, body, YAML, 400, "BadRequest",
                   "yaml: document contains excessive aliasing", max_seconds=0.2)

    def test_yaml_fuzzers_slow_unit(self):
        body = alias_bomb(7, "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]")
        self.check("POST", CM, body, YAML, 400, "BadRequest",
                   "yaml: document contains excessive aliasing", max_seconds=0.2)

    def test_yaml_shared_string_repeated(self):
        # Cheap to hold (the string is shared), 3 GB to print: bounded by
        # the JSON text aliases add, though go-yaml's ratio allows it.
        body = ("a: &a %s\nb: [%s]\n" % ("y" * 100000, ",".join(["*a"] * 30000))).encode()
        self.check("POST", CM, body, YAML, 400, "BadRequest",
                   "yaml: document contains excessive aliasing", max_seconds=0.5)

    def test_yaml_alias_as_key(self):
        # An alias used as a key is copied each time (jansson keeps keys).
        lines = ["k: &k %s" % ("z" * 100000), "maps:"]
        lines += ["- {*k : %d}" % i for i in range(40)]
        body = ("\n".join(lines) + "\n").encode()
        self.check("POST", CM, body, YAML, 400, "BadRequest",
                   "yaml: document contains excessive aliasing", max_seconds=0.5)

    def test_yaml_merge_key_bomb(self):
        body = b"a: &a {a1: x, a2: x, a3: x, a4: x, a5: x, a6: x, a7: x, a8: x}\n"
        for lvl in "bcdefg":
            prev = chr(ord(lvl) - 1)
            body += ("%s: &%s {<<: [*%s, *%s], %s}\n" % (
                lvl, lvl, prev, prev,
                ", ".join("%s%d: *%s" % (lvl, k, prev) for k in range(8)))).encode()
        self.check("POST", CM, body, YAML, 400, "BadRequest",
                   "yaml: document contains excessive aliasing", max_seconds=0.5)

    def test_apply_yaml_alias_bomb(self):
        body = alias_bomb(8, "a: &a " + "x" * 1000)
        self.check("PATCH", CM + "/warm?fieldManager=m", body, "application/apply-patch+yaml",
                   400, "BadRequest",
                   "error decoding YAML: yaml: document contains excessive aliasing",
                   max_seconds=0.2)

    def test_yaml_dense_empty_mappings(self):
        body = ("[" + ",".join(["{}"] * ((BODY_LIMIT - 8) // 3)) + "]").encode()
        self.check("POST", BLOBS, body, YAML, 413, "RequestEntityTooLarge",
                   "Request entity too large: decoding the body needs more than 33554432 bytes")

    def test_yaml_deep_nesting(self):
        body = b"[" * (BODY_LIMIT - 8)
        self.check("POST", CM, body, YAML, 400, "BadRequest", "exceeded max depth of 1000")

    # ---- JSON ----

    def test_json_dense_empty_objects(self):
        body = blob("b", '{"x":[' + ",".join(["{}"] * ((BODY_LIMIT - 200) // 3)) + "]}")
        self.check("POST", BLOBS, body, JSON, 413, "RequestEntityTooLarge",
                   "Request entity too large: decoding the body needs more than 33554432 bytes")

    def test_json_duplicate_key_then_dense(self):
        # A duplicate key sends the body through a second (non-strict) read.
        body = ('{"apiVersion":"ex.com/v1","kind":"Blob","metadata":{"name":"d"},'
                '"spec":{"a":1,"a":2,"x":[' + ",".join(["{}"] * ((BODY_LIMIT - 200) // 3))
                + "]}}").encode()
        self.check("POST", BLOBS, body, JSON, 413, "RequestEntityTooLarge",
                   "decoding the body needs more than")

    def test_json_deep_nesting(self):
        body = blob("b", "[" * (BODY_LIMIT - 200))
        self.check("POST", BLOBS, body, JSON, 400, "BadRequest", "maximum parsing depth reached")

    def test_json_many_unknown_fields_warn(self):
        n = (BODY_LIMIT - 200) // 16
        fields = ",".join('"u%07d":1' % i for i in range(n))
        body = ('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"u"},%s}'
                % fields).encode()
        hdrs, doc = self.check("POST", CM, body, JSON, 201)
        self.assertEqual(doc["metadata"]["name"], "u")
        self.assertNotIn("u0000000", doc)
        # upstream's recorder: each text once, ~4096 characters in all
        # (not the 180,000 warnings, 4.6 MB of header, sent before).
        warning = hdrs.get("warning", "")
        self.assertTrue(warning.startswith('299 - "unknown field \\"u0000000\\""'), warning[:200])
        texts = [w[len('299 - "'):-1] for w in warning.split(", ")]
        self.assertEqual(len(texts), len(set(texts)))
        # Once one does not fit, each is cut to 256 and they are taken until
        # 4096 is reached again: at most 4096 + 256.
        total = sum(len(t.replace('\\"', '"')) for t in texts)
        self.assertTrue(4096 - 256 < total <= 4096 + 256, total)
        self.assertEqual(texts[-1], 'unknown field \\"u%07d\\"' % (len(texts) - 1))

    def test_json_many_unknown_fields_strict(self):
        n = (BODY_LIMIT - 200) // 16
        fields = ",".join('"u%07d":1' % i for i in range(n))
        body = ('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"u"},%s}'
                % fields).encode()
        _, doc = self.check("POST", CM + "?fieldValidation=Strict", body, JSON, 400, "BadRequest",
                            'strict decoding error: unknown field "u0000000"')
        self.assertLess(len(doc["message"]), 64 * 1024)

    def test_json_many_invalid_values(self):
        n = 120000  # 1.7 MB, 25 MB decoded
        counts = ",".join('"c%06d":"x"' % i for i in range(n))
        body = ('{"apiVersion":"ex.com/v1","kind":"Blob","metadata":{"name":"i"},"counts":{%s}}'
                % counts).encode()
        _, doc = self.check("POST", BLOBS, body, JSON, 422, "Invalid", "more errors]")
        self.assertEqual(len(doc["details"]["causes"]), 1000)
        self.assertIn("and %d more errors]" % (n - 1000), doc["message"])

    def test_json_deepest_valid_body_through_every_write(self):
        # As deep as JSON is read (2048 levels): every recursion on the way
        # (validation, pruning, managed fields, patches, tables) survives it.
        d = 2040
        deep = '{"a":' * d + "1" + "}" * d
        self.check("POST", BLOBS, blob("deep", deep), JSON, 201)
        shallower = '{"spec":' + '{"a":' * (d - 3) + "2" + "}" * (d - 3) + "}"
        self.check("PATCH", BLOBS + "/deep", shallower.encode(), "application/merge-patch+json", 200,
                   bound=BOUND)
        ops = [{"op": "replace", "path": "/spec" + "/a" * (d - 3), "value": 3}]
        _, doc = self.check("PATCH", BLOBS + "/deep", json.dumps(ops).encode(),
                            "application/json-patch+json", 200, bound=BOUND)
        self.assertEqual(doc["metadata"]["name"], "deep")
        accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        _, doc = self.check("GET", BLOBS + "?includeObject=Object", None, None, 200, bound=BOUND,
                            headers={"Accept": accept})
        self.assertEqual(len(doc["rows"]), 1)
        self.check("DELETE", BLOBS + "/deep", None, None, 200, bound=BOUND)

    # ---- protobuf ----

    def test_protobuf_empty_containers(self):
        # Each empty container is 2 bytes on the wire, hundreds unpacked.
        spec = b"\x12\x00" * ((BODY_LIMIT - 100) // 2)
        body = pb_envelope(b"v1", b"Pod", ld(1, ld(1, b"p")) + ld(2, spec))
        self.check("POST", PODS, body, PROTOBUF, 413, "RequestEntityTooLarge",
                   "decoding the body needs more than 33554432 bytes")

    def test_protobuf_huge_declared_length(self):
        body = (b"k8s\x00" + ld(1, ld(1, b"v1") + ld(2, b"Pod")) + varint(2 << 3 | 2)
                + varint(1 << 60) + b"xx")
        self.check("POST", PODS, body, PROTOBUF, 400, "BadRequest",
                   "invalid protobuf: malformed envelope")

    def test_protobuf_dense_fields_v1(self):
        # managedFields[0].fieldsV1 is raw JSON, read by the bounded reader.
        fields = b"[" + b",".join([b"{}"] * ((BODY_LIMIT - 200) // 3)) + b"]"
        managed = ld(1, b"m") + ld(7, ld(1, fields))  # manager, fieldsV1{raw}
        meta = ld(1, b"f") + ld(17, managed)          # name, managedFields
        body = pb_envelope(b"v1", b"ConfigMap", ld(1, meta))
        self.check("POST", CM, body, PROTOBUF, 413, "RequestEntityTooLarge",
                   "decoding the body needs more than")

    # ---- patches and apply, on the densest object that can be stored ----

    def store_dense(self):
        code, _, data = self.m.send("POST", BLOBS, blob("d", dense_arrays(DENSE_N)), JSON)
        self.assertEqual(code, 201, data[:300])

    def test_json_patch_copies(self):
        # The shape the issue gives: 2000 copies of 1 MB (a 1.1 MB patch).
        code, _, data = self.m.send("POST", BLOBS, blob("s", '{"big":"%s"}' % ("q" * MiB)), JSON)
        self.assertEqual(code, 201, data[:200])
        ops = [{"op": "copy", "from": "/spec/big", "path": "/spec/c%d" % i} for i in range(2000)]
        self.check("PATCH", BLOBS + "/s", json.dumps(ops).encode(), "application/json-patch+json",
                   422, "Invalid", "the patch copies more than 3145728 bytes", bound=BOUND)

    def test_json_patch_copies_of_a_dense_tree(self):
        # 650 KB of text, 32 MiB of memory: the first copy passes 3 MiB.
        self.store_dense()
        ops = [{"op": "copy", "from": "/spec/x", "path": "/spec/y%d" % i} for i in range(8)]
        self.check("PATCH", BLOBS + "/d", json.dumps(ops).encode(), "application/json-patch+json",
                   422, "Invalid", "the patch copies more than 3145728 bytes", bound=BOUND)

    def test_merge_patch_on_the_densest_object(self):
        self.store_dense()
        patch = '{"spec":{"y":1,"x":[' + ",".join(["[]"] * DENSE_N) + "]}}"
        self.check("PATCH", BLOBS + "/d", patch.encode(), "application/merge-patch+json", 200,
                   bound=BOUND)

    def test_merge_patch_doubling_the_densest_object(self):
        # The result holds the object and the patch: built whole, then
        # refused for the memory it would take to decode once stored.
        self.store_dense()
        patch = '{"spec":{"y":[' + ",".join(["[]"] * DENSE_N) + "]}}"
        self.check("PATCH", BLOBS + "/d", patch.encode(), "application/merge-patch+json", 413,
                   "RequestEntityTooLarge",
                   "the object would take more than 33554432 bytes of memory to decode",
                   bound=BOUND)

    def test_apply_on_the_densest_object(self):
        self.store_dense()
        self.check("PATCH", BLOBS + "/d?fieldManager=other&force=true",
                   blob("d", dense_arrays(DENSE_N)), "application/apply-patch+yaml", 200,
                   bound=BOUND)

    def test_put_on_the_densest_object(self):
        self.store_dense()
        _, _, d = self.m.send("GET", BLOBS + "/d")
        rv = json.loads(d)["metadata"]["resourceVersion"]
        body = ('{"apiVersion":"ex.com/v1","kind":"Blob","metadata":{"name":"d",'
                '"resourceVersion":"%s"},"spec":%s}' % (rv, dense_arrays(DENSE_N))).encode()
        self.check("PUT", BLOBS + "/d", body, JSON, 200, bound=BOUND)

    def test_dense_object_with_managed_fields_refused(self):
        # managedFields add an empty object per field: a body within the
        # decode budget whose stored form would not be is refused, so every
        # stored object decodes within it.
        # 50,000 empty objects under three-letter keys: 17 MB decoded, 450
        # KB of body, 1 MB stored, and 35 MB to decode once stored.
        alphabet = string.ascii_letters + string.digits
        keys = [a + b + c for a in alphabet for b in alphabet for c in alphabet][:50000]
        spec = "{" + ",".join('"%s":{}' % k for k in keys) + "}"
        self.check("POST", BLOBS, blob("m", spec), JSON, 413, "RequestEntityTooLarge",
                   "the object would take more than 33554432 bytes of memory to decode")

    def test_managed_fields_with_a_dense_path_element(self):
        # A client may send managedFields; a path element's key is JSON
        # text ("k:{...}") the field manager reads within a few times its
        # size: 600 KB of `{}` there would be 48 MB.
        code, _, data = self.m.send("GET", CM + "/warm")
        obj = json.loads(data)
        key = "k:[" + ",".join(["{}"] * 200000) + "]"
        obj["metadata"]["managedFields"] = [{
            "manager": "evil", "operation": "Update", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {key: {}}}}]
        body = json.dumps(obj).encode()
        _, doc = self.check("PUT", CM + "/warm", body, JSON, 200)
        self.assertNotIn("evil", [m["manager"] for m in doc["metadata"]["managedFields"]])

    def test_strategic_patch_directive_lists(self):
        # $setElementOrder and $deleteFromPrimitiveList as long as the body.
        n = 60000  # 1.1 MB, 27 MB decoded
        order = ",".join('{"name":"c%06d"}' % i for i in range(n))
        patch = ('{"spec":{"template":{"spec":{"$setElementOrder/containers":[%s]}}}}'
                 % order).encode()
        code, _, data = self.m.send("POST", "/apis/apps/v1/namespaces/default/deployments", json.dumps({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "dep"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {"containers": [{"name": "c000000", "image": "i"}]}}}}
        ).encode(), JSON)
        self.assertEqual(code, 201, data[:300])
        self.check("PATCH", "/apis/apps/v1/namespaces/default/deployments/dep", patch,
                   "application/strategic-merge-patch+json", 200, bound=BOUND)

    # ---- reads ----

    def test_huge_label_selector(self):
        values = ",".join("v%06d" % i for i in range(120000))
        path = CM + "?labelSelector=a+in+(" + values + ")"
        self.check("GET", path, None, None, 200, bound=16 * MiB)  # ~11 bytes a byte

    def test_big_table_is_streamed(self):
        for i in range(1500):
            code, _, data = self.m.send("POST", CM, json.dumps({
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t%04d" % i},
                "data": {"pad": "p" * 2000}}).encode(), JSON)
            self.assertEqual(code, 201, data)
        accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        hdrs, doc = self.check("GET", CM + "?includeObject=Object", None, None, 200,
                               bound=16 * MiB, headers={"Accept": accept})
        self.assertEqual(hdrs.get("transfer-encoding"), "chunked")
        self.assertEqual(len(doc["rows"]), 1501)

    def test_deletecollection_many(self):
        for i in range(1200):
            code, _, data = self.m.send("POST", CM, json.dumps({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "d%04d" % i, "labels": {"del": "yes"}},
                "data": {"pad": "p" * 2000}}).encode(), JSON)
            self.assertEqual(code, 201, data)
        # A dry run settles every delete before run_delete returns: the
        # pump must not recurse once per object.
        _, doc = self.check("DELETE", CM + "?labelSelector=del%3Dyes&dryRun=All", None, None, 200,
                            bound=16 * MiB)
        self.assertEqual(doc["kind"], "ConfigMapList")
        self.assertEqual(len(doc["items"]), 1200)
        self.assertEqual(self.m.send("GET", CM + "/d0042")[0], 200)
        _, doc = self.check("DELETE", CM + "?labelSelector=del%3Dyes", None, None, 200,
                            bound=16 * MiB)
        self.assertEqual(sorted(i["metadata"]["name"] for i in doc["items"]),
                         ["d%04d" % i for i in range(1200)])
        code, _, data = self.m.send("GET", CM + "?labelSelector=del%3Dyes")
        self.assertEqual(json.loads(data)["items"], [])


if __name__ == "__main__":
    # Freed memory in ASan's quarantine would count against every case.
    os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "") +
                                  ":quarantine_size_mb=8:thread_local_quarantine_size_kb=256")
    run_unittests()
