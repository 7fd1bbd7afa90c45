"""End-to-end tests of CRD conversion webhooks (issue #25, item 2)
against a real `ckube server` over TLS, with kubectl 1.33 and raw HTTP
as clients and a webhook of the test's own (webhook_backend.py) that
converts conv.example.com Widgets between v1 (spec.size, the storage
version) and v2 (spec.dims.size): objects written in either version are
stored in v1 and read back in both; a list is one review; watches
deliver converted events in order; patches convert the current object
both ways; spec.conversion is defaulted and validated in upstream's
words; and every way a webhook can fail (a Failure result, garbage, the
wrong uid, a renamed object, no objects, a bad label, unreachable) is a
Status error in upstream's words with nothing written."""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402
from prom_text import sample, scrape  # noqa: E402
from webhook_backend import Backend, closed_port  # noqa: E402

SERVER = Server("--controller-manager=false")
BACKEND = None
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
V1 = "/apis/conv.example.com/v1/namespaces/default/widgets"
V2 = "/apis/conv.example.com/v2/namespaces/default/widgets"
GVK = "conv.example.com/v1, Kind=Widget"


def setUpModule():
    global BACKEND
    SERVER.start()
    BACKEND = Backend(os.path.join(SERVER.tmp, "hook")).start()


def tearDownModule():
    if BACKEND:
        BACKEND.stop()
    SERVER.stop()


def call(method, path, body=None, ctype="application/json"):
    conn = SERVER.connection(timeout=60)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": ctype})
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        conn.close()


def kubectl(*args, stdin=None):
    return SERVER.kubectl(*args, stdin=stdin, timeout=90)


def schema(spec_props):
    return {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": spec_props}}}}


def crd(conversion, name="widgets.conv.example.com", plural="widgets", kind="Widget"):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": "conv.example.com", "scope": "Namespaced",
                     "names": {"plural": plural, "singular": plural[:-1], "kind": kind},
                     "versions": [
                         {"name": "v1", "served": True, "storage": True,
                          "schema": schema({"size": {"type": "integer"}}),
                          "subresources": {"scale": {"specReplicasPath": ".spec.size",
                                                     "statusReplicasPath": ".status.size"}}},
                         {"name": "v2", "served": True, "storage": False,
                          "schema": schema({"dims": {"type": "object", "properties": {
                              "size": {"type": "integer"}}}}),
                          "subresources": {"scale": {"specReplicasPath": ".spec.dims.size",
                                                     "statusReplicasPath": ".status.size"}}}],
                     "conversion": conversion}}


def webhook(path=None, url=None, versions=("v1",)):
    return {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": list(versions),
        "clientConfig": {"url": url or BACKEND.url(path), "caBundle": BACKEND.ca_bundle}}}


def use_webhook(path=None, url=None):
    """Points the CRD at another webhook path and waits until served so."""
    st, cur = call("GET", CRDS + "/widgets.conv.example.com")
    assert st == 200, cur
    cur["spec"]["conversion"] = webhook(path, url)
    st, body = call("PUT", CRDS + "/widgets.conv.example.com", cur)
    assert st == 200, body
    time.sleep(0.3)  # the types are registered again after the write


def widget(name, version, size):
    spec = {"size": size} if version == "v1" else {"dims": {"size": size}}
    return {"apiVersion": "conv.example.com/" + version, "kind": "Widget",
            "metadata": {"name": name, "labels": {"app": "w"}}, "spec": spec}


class ConversionWebhooks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        st, body = call("POST", CRDS, crd(webhook("/convert")))
        assert st == 201, body
        rc, out, err = kubectl("wait", "--for=condition=Established",
                               "crd/widgets.conv.example.com", "--timeout=30s")
        assert rc == 0, err

    def setUp(self):
        use_webhook("/convert")

    def test_metrics(self):
        """kube-apiserver's conversion metrics: each webhook call a success
        once its review is a good answer (as 1.30+), and each conversion
        timed per CRD and versions, failed when its objects do not pass."""
        st, body = call("POST", V1, widget("mx", "v1", 2))
        self.assertEqual(st, 201, body)
        before = scrape(SERVER)
        self.assertEqual(call("GET", V2 + "/mx")[0], 200)
        use_webhook("/convert-rename")  # a good review whose object is renamed
        self.assertEqual(call("GET", V2 + "/mx")[0], 500)
        use_webhook("/convert-fail")  # result Failure
        self.assertEqual(call("GET", V2 + "/mx")[0], 500)
        use_webhook(url="https://127.0.0.1:%d/x" % closed_port())
        self.assertEqual(call("GET", V2 + "/mx")[0], 500)
        ms = scrape(SERVER)

        def delta(metric, /, **labels):
            return sample(ms, metric, **labels) - sample(before, metric, **labels)

        calls = "apiserver_conversion_webhook_request_total"
        self.assertEqual(delta(calls, result="success", failure_type=""), 2)
        self.assertEqual(delta(calls, result="failure",
                               failure_type="conversion_webhook_call_failure"), 2)
        self.assertEqual(delta("apiserver_conversion_webhook_duration_seconds_count",
                               result="success", failure_type=""), 2)
        crd = "apiserver_crd_conversion_webhook_duration_seconds_count"
        labels = dict(crd_name="widgets.conv.example.com", from_version="v1", to_version="v2")
        self.assertEqual(delta(crd, succeeded="true", **labels), 1)
        self.assertEqual(delta(crd, succeeded="false", **labels), 3)
        # upstream's buckets for it: 1 ms doubling, the last 16.384 s
        self.assertEqual(delta("apiserver_crd_conversion_webhook_duration_seconds_bucket",
                               succeeded="true", le="16.384", **labels), 1)

    def test_1_written_in_v2_read_in_both(self):
        rc, out, err = kubectl("apply", "-f", "-", stdin=json.dumps(widget("a", "v2", 3)))
        self.assertEqual(rc, 0, err)
        self.assertIn("widget.conv.example.com/a created", out)
        # stored in v1: the v1 read needs no webhook and shows spec.size
        n = len(BACKEND.conversions())
        rc, out, err = kubectl("get", "widgets.v1.conv.example.com", "a", "-o", "json")
        self.assertEqual(rc, 0, err)
        got = json.loads(out)
        self.assertEqual(got["apiVersion"], "conv.example.com/v1")
        self.assertEqual(got["spec"], {"size": 3})
        # the webhook's label is kept, its other metadata is not
        self.assertEqual(got["metadata"]["labels"], {"app": "w", "converted-by": "hook"})
        self.assertEqual(got["metadata"]["generation"], 1)
        self.assertEqual(len(BACKEND.conversions()), n)
        rc, out, err = kubectl("get", "widgets.v2.conv.example.com", "a", "-o", "json")
        self.assertEqual(rc, 0, err)
        got = json.loads(out)
        self.assertEqual(got["apiVersion"], "conv.example.com/v2")
        self.assertEqual(got["spec"], {"dims": {"size": 3}})
        reqs = BACKEND.conversions()[n:]
        self.assertEqual(len(reqs), 1)
        self.assertEqual(reqs[0]["desiredAPIVersion"], "conv.example.com/v2")
        self.assertEqual(reqs[0]["objects"][0]["apiVersion"], "conv.example.com/v1")
        path = [p for p, r in BACKEND.reviews if r.get("kind") == "ConversionReview"][-1]
        self.assertTrue(path.endswith("?timeout=30s"), path)

    def test_2_written_in_v1_listed_in_v2_in_one_review(self):
        for i in range(5):
            st, body = call("POST", V1, widget("l%d" % i, "v1", 10 + i))
            self.assertEqual(st, 201, body)
        n = len(BACKEND.conversions())
        st, body = call("GET", V2 + "?labelSelector=app%3Dw")
        self.assertEqual(st, 200, body)
        self.assertEqual(body["apiVersion"], "conv.example.com/v2")
        items = {i["metadata"]["name"]: i for i in body["items"]}
        for i in range(5):
            self.assertEqual(items["l%d" % i]["spec"], {"dims": {"size": 10 + i}})
            self.assertEqual(items["l%d" % i]["apiVersion"], "conv.example.com/v2")
        reqs = BACKEND.conversions()[n:]
        self.assertEqual(len(reqs), 1, "one review for the whole list")
        self.assertGreaterEqual(len(reqs[0]["objects"]), 5)
        # kubectl's table in v2 goes through the same conversion
        rc, out, err = kubectl("get", "widgets.v2.conv.example.com", "-o", "name")
        self.assertEqual(rc, 0, err)
        self.assertIn("widget.conv.example.com/l4", out)

    def test_3_watch_in_v2_converted_in_order(self):
        sock = SERVER.connection(timeout=30)
        sock.request("GET", V2 + "?watch=1&fieldSelector=metadata.name%3Dw1")
        r = sock.getresponse()
        self.assertEqual(r.status, 200)
        for size in (1, 2, 3):
            if size == 1:
                st, body = call("POST", V1, widget("w1", "v1", 1))
                self.assertEqual(st, 201, body)
            else:
                st, body = call("PATCH", V1 + "/w1", {"spec": {"size": size}},
                                "application/merge-patch+json")
                self.assertEqual(st, 200, body)
        st, body = call("DELETE", V1 + "/w1")
        self.assertEqual(st, 200, body)
        events = [json.loads(r.readline()) for _ in range(4)]
        sock.close()
        self.assertEqual([e["type"] for e in events], ["ADDED", "MODIFIED", "MODIFIED", "DELETED"])
        self.assertEqual([e["object"]["spec"]["dims"]["size"] for e in events], [1, 2, 3, 3])
        self.assertTrue(all(e["object"]["apiVersion"] == "conv.example.com/v2" for e in events))

    def test_4_patch_in_v2_converts_both_ways(self):
        st, body = call("POST", V1, widget("p", "v1", 5))
        self.assertEqual(st, 201, body)
        n = len(BACKEND.conversions())
        st, body = call("PATCH", V2 + "/p", {"spec": {"dims": {"size": 6}}},
                        "application/merge-patch+json")
        self.assertEqual(st, 200, body)
        self.assertEqual(body["apiVersion"], "conv.example.com/v2")
        self.assertEqual(body["spec"], {"dims": {"size": 6}})
        want = [r["desiredAPIVersion"] for r in BACKEND.conversions()[n:]]
        # the current object to v2, the patched one to v1 to be stored,
        # the stored one back to v2 for the answer
        self.assertEqual(want, ["conv.example.com/v2", "conv.example.com/v1",
                                "conv.example.com/v2"])
        st, body = call("GET", V1 + "/p")
        self.assertEqual(body["spec"], {"size": 6})
        # a PUT in v2 of what was read in v2
        st, cur = call("GET", V2 + "/p")
        cur["spec"]["dims"]["size"] = 7
        st, body = call("PUT", V2 + "/p", cur)
        self.assertEqual(st, 200, body)
        self.assertEqual(call("GET", V1 + "/p")[1]["spec"], {"size": 7})
        # deleting through v2 (a Status answers, as upstream's for custom resources)
        st, body = call("DELETE", V2 + "/p")
        self.assertEqual(st, 200, body)
        self.assertEqual(body["status"], "Success")
        self.assertEqual(call("GET", V1 + "/p")[0], 404)

    def test_5_failures_are_statuses_and_nothing_is_written(self):
        st, body = call("POST", V1, widget("f", "v1", 1))
        self.assertEqual(st, 201, body)
        cases = [
            ("/convert-fail", "conversion webhook for %s failed: cannot convert this" % GVK),
            ("/convert-garbage", "conversion webhook for %s failed: couldn't get version/kind; "
                                 "json parse error" % GVK),
            ("/convert-wrong-uid", "conversion webhook for %s failed: expected response.uid=" % GVK),
            ("/convert-rename", "conversion webhook for %s returned invalid object: must have "
                                "the same name: f != f-renamed" % GVK),
            ("/convert-none", "conversion webhook for %s returned 0 objects, expected 1" % GVK),
            ("/convert-bad-label", "conversion webhook for %s returned invalid metadata: "
                                   "metadata.labels: Invalid value: \"not ok!\"" % GVK),
        ]
        for path, words in cases:
            with self.subTest(path=path):
                use_webhook(path)
                rc, out, err = kubectl("get", "widgets.v2.conv.example.com", "f")
                self.assertNotEqual(rc, 0)
                self.assertIn("Error from server: " + words, err)
                st, body = call("GET", V2 + "/f")
                self.assertEqual(st, 500)
                self.assertEqual(body["kind"], "Status")
                self.assertNotIn("reason", body)
                # a write through v2 fails whole: nothing stored
                st, body = call("POST", V2, widget("nope", "v2", 1))
                self.assertEqual(st, 500, body)
                self.assertEqual(call("GET", V1 + "/nope")[0], 404)
                st, body = call("PATCH", V2 + "/f", {"spec": {"dims": {"size": 9}}},
                                "application/merge-patch+json")
                self.assertEqual(st, 500, body)
                self.assertEqual(call("GET", V1 + "/f")[1]["spec"], {"size": 1})
                # the storage version needs no webhook: it keeps working
                rc, out, err = kubectl("get", "widgets.v1.conv.example.com", "f")
                self.assertEqual(rc, 0, err)
        # a watch in v2 ends with an ERROR event
        use_webhook("/convert-fail")
        conn = SERVER.connection(timeout=30)
        conn.request("GET", V2 + "?watch=1&fieldSelector=metadata.name%3Df")
        r = conn.getresponse()
        ev = json.loads(r.readline())
        conn.close()
        self.assertEqual(ev["type"], "ERROR")
        self.assertEqual(ev["object"]["code"], 500)
        self.assertIn("cannot convert this", ev["object"]["message"])

    def test_6_unreachable(self):
        port = closed_port()
        use_webhook(url="https://127.0.0.1:%d/convert" % port)
        rc, out, err = kubectl("get", "widgets.v2.conv.example.com")
        self.assertNotEqual(rc, 0)
        self.assertIn('Error from server: conversion webhook for %s failed: Post '
                      '"https://127.0.0.1:%d/convert?timeout=30s": dial tcp 127.0.0.1:%d: '
                      'connect: connection refused' % (GVK, port, port), err)
        rc, out, err = kubectl("get", "widgets.v1.conv.example.com")
        self.assertEqual(rc, 0, err)
        # everything else keeps working
        rc, out, err = kubectl("get", "namespaces")
        self.assertEqual(rc, 0, err)
        # a Service with no endpoints, in upstream's words
        st, cur = call("GET", CRDS + "/widgets.conv.example.com")
        cur["spec"]["conversion"]["webhook"]["clientConfig"] = {
            "service": {"namespace": "default", "name": "nohook", "path": "/convert"},
            "caBundle": BACKEND.ca_bundle}
        st, body = call("PUT", CRDS + "/widgets.conv.example.com", cur)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"],
                         443)
        time.sleep(0.3)
        st, body = call("GET", V2)
        self.assertEqual(st, 500)
        self.assertIn('failed: Post "https://nohook.default.svc:443/convert?timeout=30s": '
                      'service "nohook" not found', body["message"])


    def test_7_admission_webhooks_matched_through_another_version(self):
        """matchPolicy Equivalent (the default): a webhook for v1 is asked
        about a v2 write with the objects converted to v1, and its patch
        comes back converted; Exact leaves it out."""
        MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
        conf = {"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration", "metadata": {"name": "widgets-v1"},
                "webhooks": [{"name": "v1.widgets.example.com", "sideEffects": "None",
                              "admissionReviewVersions": ["v1"],
                              "clientConfig": {"url": BACKEND.url("/mutate"),
                                               "caBundle": BACKEND.ca_bundle},
                              "rules": [{"operations": ["CREATE"],
                                         "apiGroups": ["conv.example.com"],
                                         "apiVersions": ["v1"], "resources": ["widgets"]}]}]}
        st, body = call("POST", MWC, conf)
        self.assertEqual(st, 201, body)
        self.assertEqual(body["webhooks"][0]["matchPolicy"], "Equivalent")
        time.sleep(0.3)
        try:
            n = len(BACKEND.reviews)
            st, body = call("POST", V2, widget("eq", "v2", 4))
            self.assertEqual(st, 201, body)
            self.assertEqual(body["apiVersion"], "conv.example.com/v2")
            self.assertEqual(body["metadata"]["labels"]["mutated"], "yes")
            self.assertEqual(body["spec"], {"dims": {"size": 4}})
            adm = [r["request"] for _, r in BACKEND.reviews[n:] if r["kind"] == "AdmissionReview"]
            self.assertEqual(len(adm), 1)
            self.assertEqual(adm[0]["kind"], {"group": "conv.example.com", "version": "v1",
                                              "kind": "Widget"})
            self.assertEqual(adm[0]["requestKind"]["version"], "v2")
            self.assertEqual(adm[0]["resource"]["version"], "v1")
            self.assertEqual(adm[0]["requestResource"]["version"], "v2")
            self.assertEqual(adm[0]["object"]["apiVersion"], "conv.example.com/v1")
            self.assertEqual(adm[0]["object"]["spec"], {"size": 4})
            # Exact: only v1 requests
            st, cur = call("GET", MWC + "/widgets-v1")
            cur["webhooks"][0]["matchPolicy"] = "Exact"
            st, body = call("PUT", MWC + "/widgets-v1", cur)
            self.assertEqual(st, 200, body)
            time.sleep(0.3)
            n = len(BACKEND.reviews)
            st, body = call("POST", V2, widget("exact", "v2", 5))
            self.assertEqual(st, 201, body)
            self.assertNotIn("mutated", body["metadata"]["labels"])
            self.assertFalse([r for _, r in BACKEND.reviews[n:] if r["kind"] == "AdmissionReview"])
        finally:
            call("DELETE", MWC + "/widgets-v1")


    def test_8_delete_admitted_in_the_requests_version(self):
        """A delete through v2: validating webhooks see the object as v2,
        not as stored."""
        VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
        st, body = call("POST", V1, widget("gone", "v1", 8))
        self.assertEqual(st, 201, body)
        conf = {"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "widgets-del"},
                "webhooks": [{"name": "del.widgets.example.com", "sideEffects": "None",
                              "admissionReviewVersions": ["v1"],
                              "clientConfig": {"url": BACKEND.url("/allow"),
                                               "caBundle": BACKEND.ca_bundle},
                              "rules": [{"operations": ["DELETE"],
                                         "apiGroups": ["conv.example.com"],
                                         "apiVersions": ["v2"], "resources": ["widgets"]}]}]}
        st, body = call("POST", VWC, conf)
        self.assertEqual(st, 201, body)
        time.sleep(0.3)
        try:
            n = len(BACKEND.reviews)
            st, body = call("DELETE", V2 + "/gone")
            self.assertEqual(st, 200, body)
            adm = [r["request"] for _, r in BACKEND.reviews[n:] if r["kind"] == "AdmissionReview"]
            self.assertEqual(len(adm), 1)
            self.assertEqual(adm[0]["operation"], "DELETE")
            self.assertEqual(adm[0]["kind"]["version"], "v2")
            self.assertEqual(adm[0]["oldObject"]["apiVersion"], "conv.example.com/v2")
            self.assertEqual(adm[0]["oldObject"]["spec"], {"dims": {"size": 8}})
        finally:
            call("DELETE", VWC + "/widgets-del")


    def test_9_scale_through_another_version(self):
        """/scale of v2 reads and writes v2's replica path (spec.dims.size),
        stored as v1's (spec.size)."""
        st, body = call("POST", V1, widget("sc", "v1", 2))
        self.assertEqual(st, 201, body)
        st, body = call("GET", V2 + "/sc/scale")
        self.assertEqual(st, 200, body)
        self.assertEqual((body["kind"], body["spec"]["replicas"]), ("Scale", 2))
        rc, out, err = kubectl("scale", "widgets.v2.conv.example.com", "sc", "--replicas=6")
        self.assertEqual(rc, 0, err)
        self.assertEqual(call("GET", V1 + "/sc")[1]["spec"], {"size": 6})
        self.assertEqual(call("GET", V2 + "/sc")[1]["spec"], {"dims": {"size": 6}})


class ConversionValidation(unittest.TestCase):
    def post(self, conversion, version="v1"):
        obj = crd(conversion, name="gadgets.conv.example.com", plural="gadgets", kind="Gadget")
        if version == "v1beta1":
            obj["apiVersion"] = "apiextensions.k8s.io/v1beta1"
        st, body = call("POST", CRDS.replace("/v1/", "/%s/" % version), obj)
        if st == 201:
            call("DELETE", CRDS + "/gadgets.conv.example.com")
        return st, body

    def test_defaulted_to_none(self):
        obj = crd(None, name="things.conv.example.com", plural="things", kind="Thing")
        del obj["spec"]["conversion"]
        st, body = call("POST", CRDS, obj)
        self.assertEqual(st, 201, body)
        self.assertEqual(body["spec"]["conversion"], {"strategy": "None"})
        call("DELETE", CRDS + "/things.conv.example.com")

    def test_refused_in_upstream_words(self):
        cases = [
            ({"strategy": "Sometimes"},
             'spec.conversion.strategy: Unsupported value: "Sometimes": supported values: '
             '"None", "Webhook"'),
            ({"strategy": "Webhook"},
             "spec.conversion.webhook: Required value: required when strategy is set to "
             "Webhook"),
            ({"strategy": "None", "webhook": {"conversionReviewVersions": ["v1"]}},
             "spec.conversion.webhook: Forbidden: should not be set when strategy is not set "
             "to Webhook"),
            ({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v3"],
                                                 "clientConfig": {"url": "https://h/c"}}},
             'spec.conversion.webhook.conversionReviewVersions: Invalid value: []string{"v3"}: '
             "must include at least one of v1, v1beta1"),
            ({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                                                 "clientConfig": {"url": "http://h/c"}}},
             "spec.conversion.webhook.clientConfig.url: Invalid value: \"http\": 'https' is "
             "the only allowed URL scheme"),
            ({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                                                 "clientConfig": {}}},
             "spec.conversion.webhook.clientConfig: Required value: exactly one of url or "
             "service is required"),
        ]
        for conv, words in cases:
            with self.subTest(conv=conv):
                st, body = self.post(conv)
                self.assertEqual(st, 422, body)
                self.assertEqual(body["reason"], "Invalid")
                self.assertIn(words, body["message"])

    def test_v1beta1_shape(self):
        obj = crd(None, name="olds.conv.example.com", plural="olds", kind="Old")
        obj["apiVersion"] = "apiextensions.k8s.io/v1beta1"
        obj["spec"]["conversion"] = {"strategy": "Webhook", "webhookClientConfig": {
            "url": "https://127.0.0.1:1/convert"}}
        st, body = call("POST", CRDS.replace("/v1/", "/v1beta1/"), obj)
        self.assertEqual(st, 201, body)
        self.assertEqual(body["spec"]["conversion"],
                         {"strategy": "Webhook", "conversionReviewVersions": ["v1beta1"],
                          "webhookClientConfig": {"url": "https://127.0.0.1:1/convert"}})
        st, body = call("GET", CRDS + "/olds.conv.example.com")
        self.assertEqual(body["spec"]["conversion"],
                         {"strategy": "Webhook", "webhook": {
                             "conversionReviewVersions": ["v1beta1"],
                             "clientConfig": {"url": "https://127.0.0.1:1/convert"}}})
        call("DELETE", CRDS + "/olds.conv.example.com")


if __name__ == "__main__":
    run_unittests()
