"""The acceptance of libckube's webhook server (issue #25, seed 001's
manager piece), as a new user runs it: `ckube server`, the Network CRD,
the example operator (examples/webhook-operator) serving HTTPS with a
certificate of the test's own, the webhook configurations that send
reviews to it, and kubectl 1.33 creating Networks that are defaulted
(a missing gateway filled in), denied (overlapping CIDRs, a gateway
outside the CIDR, in upstream's `admission webhook "..." denied the
request: ...` words) and warned about; ConversionReviews answered
between v1alpha1 and v1; the manager's readyz and the webhook metrics;
a rotated certificate served to the next connection; and, once the
operator stops, Networks refused under failurePolicy Fail while kubectl
keeps working for everything else."""
import base64
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import SRC, Server, run_unittests  # noqa: E402
from free_port import free_port  # noqa: E402
from webhook_backend import make_certs  # noqa: E402

SERVER = Server("--controller-manager=false")
OPERATOR = os.environ.get("CKUBE_WEBHOOKOP") or os.path.join(SRC, "build", "ckube-webhook-operator")
CRD = os.path.join(SRC, "examples", "network-controller", "manifests", "crd.yaml")
TWO_VERSION_CRD = os.path.join(SRC, "examples", "webhook-operator", "manifests", "crd.yaml")
STATE = {}


def kubectl(*args, stdin=None):
    return SERVER.kubectl(*args, stdin=stdin)


def start_operator():
    port, health, metrics = free_port(), free_port(), free_port()
    log = open(os.path.join(SERVER.tmp, "operator.log"), "ab")
    proc = subprocess.Popen(
        [OPERATOR, "--kubeconfig", SERVER.kubeconfig, "--cert-dir", STATE["certs"],
         "--webhook-host", "127.0.0.1", "--webhook-port", str(port),
         "--health-probe-bind-address", "127.0.0.1:%d" % health,
         "--metrics-bind-address", "127.0.0.1:%d" % metrics],
        stdout=log, stderr=subprocess.STDOUT)
    STATE.update(proc=proc, port=port, health=health, metrics=metrics, log=log)
    deadline = time.time() + 30
    while time.time() < deadline:
        assert proc.poll() is None, "operator exited:\n" + logtail()
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % health, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("operator not ready:\n" + logtail())


def stop_operator():
    proc = STATE.get("proc")
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        STATE["log"].close()
        assert rc == 0, "operator exited %d:\n%s" % (rc, logtail())


def logtail():
    with open(os.path.join(SERVER.tmp, "operator.log"), "rb") as f:
        return f.read()[-4000:].decode(errors="replace")


def use_certs(name):
    """Makes a CA and a certificate for 127.0.0.1 and puts them where the
    operator reads them; returns the CA (PEM)."""
    d = os.path.join(SERVER.tmp, name)
    ca, crt, key = make_certs(d, ["127.0.0.1"])
    os.makedirs(STATE["certs"], exist_ok=True)
    # replaced by rename, as a Secret volume's update is seen
    for src, dst in ((crt, "tls.crt"), (key, "tls.key")):
        tmp = os.path.join(STATE["certs"], "." + dst)
        shutil.copy(src, tmp)
        os.replace(tmp, os.path.join(STATE["certs"], dst))
    return ca


def configurations(ca_pem):
    hook = lambda name, path: {  # noqa: E731
        "name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": "https://127.0.0.1:%d%s" % (STATE["port"], path),
                         "caBundle": base64.b64encode(ca_pem).decode()},
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["samplecrd.k8s.io"],
                   "apiVersions": ["v1"], "resources": ["networks"]}]}
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "network-defaults"},
         "webhooks": [hook("mnetwork.kb.io", "/mutate-samplecrd-k8s-io-v1-network")]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "network-checks"},
         "webhooks": [hook("vnetwork.kb.io", "/validate-samplecrd-k8s-io-v1-network")]},
    ]


def apply_two_version_crd(ca_pem):
    """The example's two-version Network CRD, its conversion webhook the
    operator's /convert, as the README has users fill it in."""
    with open(TWO_VERSION_CRD) as f:
        text = f.read()
    text = text.replace("CA_BUNDLE", base64.b64encode(ca_pem).decode())
    text = text.replace("https://127.0.0.1:9443/", "https://127.0.0.1:%d/" % STATE["port"])
    rc, out, err = kubectl("apply", "-f", "-", stdin=text)
    assert rc == 0, err
    time.sleep(0.3)  # served again with the webhook


def network(name, cidr, gateway=None):
    spec = {"cidr": cidr}
    if gateway:
        spec["gateway"] = gateway
    return json.dumps({"apiVersion": "samplecrd.k8s.io/v1", "kind": "Network",
                       "metadata": {"name": name, "namespace": "default"}, "spec": spec})


def post_review(path, review, ca_pem):
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    req = urllib.request.Request("https://127.0.0.1:%d%s" % (STATE["port"], path),
                                 data=json.dumps(review).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        return r.status, json.loads(r.read())


def setUpModule():
    SERVER.start()
    STATE["certs"] = os.path.join(SERVER.tmp, "serving-certs")
    STATE["ca"] = use_certs("ca1")
    rc, out, err = kubectl("apply", "-f", CRD)
    assert rc == 0, err
    rc, out, err = kubectl("wait", "--for=condition=Established", "crd/networks.samplecrd.k8s.io")
    assert rc == 0, err
    start_operator()
    rc, out, err = kubectl("apply", "-f", "-", stdin=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": configurations(STATE["ca"])}))
    assert rc == 0, err
    time.sleep(0.5)


def tearDownModule():
    try:
        stop_operator()
    finally:
        SERVER.stop()


class WebhookOperatorTest(unittest.TestCase):
    def test_1_defaulted(self):
        rc, out, err = kubectl("apply", "-f", "-", stdin=network("net-a", "10.1.0.0/16"))
        self.assertEqual(rc, 0, err + logtail())
        rc, out, err = kubectl("get", "network", "net-a", "-o", "jsonpath={.spec.gateway}")
        self.assertEqual(out, "10.1.0.1")
        # a gateway given is kept
        rc, out, err = kubectl("apply", "-f", "-",
                               stdin=network("net-b", "10.2.0.0/24", "10.2.0.254"))
        self.assertEqual(rc, 0, err)
        rc, out, err = kubectl("get", "network", "net-b", "-o", "jsonpath={.spec.gateway}")
        self.assertEqual(out, "10.2.0.254")

    def test_2_denied(self):
        rc, out, err = kubectl("apply", "-f", "-", stdin=network("net-c", "10.1.5.0/24"))
        self.assertNotEqual(rc, 0)
        self.assertIn('admission webhook "vnetwork.kb.io" denied the request: spec.cidr: '
                      '10.1.5.0/24 overlaps Network default/net-a (10.1.0.0/16)', err)
        rc, out, err = kubectl("apply", "-f", "-",
                               stdin=network("net-d", "10.3.0.0/24", "10.4.0.1"))
        self.assertNotEqual(rc, 0)
        self.assertIn('admission webhook "vnetwork.kb.io" denied the request: spec: ', err)
        rc, out, err = kubectl("get", "networks", "-o", "name")
        self.assertNotIn("net-c", out)
        self.assertNotIn("net-d", out)
        # an update that would overlap is denied too; net-a is left as it was
        rc, out, err = kubectl("patch", "network", "net-b", "--type=merge", "-p",
                               '{"spec":{"cidr":"10.1.2.0/24","gateway":"10.1.2.1"}}')
        self.assertNotEqual(rc, 0)
        self.assertIn("overlaps Network default/net-a", err)

    def test_3_warned(self):
        rc, out, err = kubectl("apply", "-f", "-", stdin=network("net-big", "11.0.0.0/8"))
        self.assertEqual(rc, 0, err)
        self.assertIn("Warning: spec.cidr: a /8 network holds over 65 thousand addresses", err)

    def test_4_conversion(self):
        review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                  "request": {"uid": "u-1", "desiredAPIVersion": "samplecrd.k8s.io/v1",
                              "objects": [{"apiVersion": "samplecrd.k8s.io/v1alpha1",
                                           "kind": "Network",
                                           "metadata": {"name": "old", "uid": "x"},
                                           "spec": {"subnet": "10.9.0.0/24",
                                                    "gw": "10.9.0.1"}}]}}
        st, body = post_review("/convert", review, STATE["ca"])
        self.assertEqual(st, 200)
        resp = body["response"]
        self.assertEqual((resp["uid"], resp["result"]["status"]), ("u-1", "Success"), body)
        obj = resp["convertedObjects"][0]
        self.assertEqual(obj["apiVersion"], "samplecrd.k8s.io/v1")
        self.assertEqual(obj["spec"], {"cidr": "10.9.0.0/24", "gateway": "10.9.0.1"})
        self.assertEqual(obj["metadata"], {"name": "old", "uid": "x"})
        review["request"]["desiredAPIVersion"] = "samplecrd.k8s.io/v9"
        st, body = post_review("/convert", review, STATE["ca"])
        self.assertEqual(body["response"]["result"]["status"], "Failure", body)
        self.assertIn("unexpected conversion", body["response"]["result"]["message"])

    def test_4b_two_versions_through_the_webhook(self):
        """The acceptance: a two-version CRD with a conversion webhook,
        objects written and read in both versions with kubectl."""
        apply_two_version_crd(STATE["ca"])
        old = {"apiVersion": "samplecrd.k8s.io/v1alpha1", "kind": "Network",
               "metadata": {"name": "net-old", "namespace": "default"},
               "spec": {"subnet": "10.20.0.0/24", "gw": "10.20.0.1"}}
        rc, out, err = kubectl("apply", "-f", "-", stdin=json.dumps(old))
        self.assertEqual(rc, 0, err + logtail())
        self.assertIn("network.samplecrd.k8s.io/net-old created", out)
        # stored as v1, read as v1 and as v1alpha1
        rc, out, err = kubectl("get", "networks.v1.samplecrd.k8s.io", "net-old", "-o",
                               "jsonpath={.apiVersion} {.spec.cidr} {.spec.gateway}")
        self.assertEqual((rc, out), (0, "samplecrd.k8s.io/v1 10.20.0.0/24 10.20.0.1"), err)
        rc, out, err = kubectl("get", "networks.v1alpha1.samplecrd.k8s.io", "net-old", "-o",
                               "jsonpath={.apiVersion} {.spec.subnet} {.spec.gw}")
        self.assertEqual((rc, out), (0, "samplecrd.k8s.io/v1alpha1 10.20.0.0/24 10.20.0.1"), err)
        # every Network, those written as v1 by the earlier tests too, as v1alpha1
        rc, out, err = kubectl("get", "networks.v1alpha1.samplecrd.k8s.io")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"(?m)^NAME\s+SUBNET\s+GATEWAY\s+AGE")
        self.assertRegex(out, r"(?m)^net-a\s+10\.1\.0\.0/16\s+10\.1\.0\.1\s")
        self.assertRegex(out, r"(?m)^net-old\s+10\.20\.0\.0/24\s+10\.20\.0\.1\s")
        # the admission webhooks match v1 (matchPolicy Equivalent, the
        # default): a v1alpha1 Network is defaulted and checked as v1
        short = {"apiVersion": "samplecrd.k8s.io/v1alpha1", "kind": "Network",
                 "metadata": {"name": "net-old2", "namespace": "default"},
                 "spec": {"subnet": "10.30.0.0/24"}}
        rc, out, err = kubectl("apply", "-f", "-", stdin=json.dumps(short))
        self.assertEqual(rc, 0, err + logtail())
        rc, out, err = kubectl("get", "networks.v1alpha1.samplecrd.k8s.io", "net-old2", "-o",
                               "jsonpath={.spec.gw}")
        self.assertEqual((rc, out), (0, "10.30.0.1"), err)
        short["metadata"]["name"] = "net-old3"
        short["spec"]["subnet"] = "10.30.0.0/25"
        rc, out, err = kubectl("apply", "-f", "-", stdin=json.dumps(short))
        self.assertNotEqual(rc, 0)
        self.assertIn('admission webhook "vnetwork.kb.io" denied the request: spec.cidr: '
                      '10.30.0.0/25 overlaps Network default/net-old2 (10.30.0.0/24)', err)
        # an edit through v1alpha1 is stored as v1
        rc, out, err = kubectl("patch", "networks.v1alpha1.samplecrd.k8s.io", "net-old",
                               "--type=merge", "-p", '{"spec":{"gw":"10.20.0.254"}}')
        self.assertEqual(rc, 0, err)
        rc, out, err = kubectl("get", "networks.v1.samplecrd.k8s.io", "net-old", "-o",
                               "jsonpath={.spec.gateway}")
        self.assertEqual(out, "10.20.0.254", err)

    def test_5_bad_reviews(self):
        ctx = ssl.create_default_context(cadata=STATE["ca"].decode())
        req = urllib.request.Request("https://127.0.0.1:%d/validate-samplecrd-k8s-io-v1-network"
                                     % STATE["port"], data=b"not json",
                                     headers={"Content-Type": "application/json"})
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, context=ctx, timeout=10)
        self.assertEqual(e.exception.code, 400)
        body = json.loads(e.exception.read())
        self.assertIs(body["response"]["allowed"], False)
        self.assertEqual(body["response"]["status"]["code"], 400)

    def test_5b_reviews_at_once(self):
        # the operator answers on four handler threads: twelve kubectl
        # creates at once, each defaulted through the mutating webhook and
        # judged by the validating one against the cache
        import concurrent.futures
        names = ["net-par-%d" % i for i in range(12)]
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            results = list(pool.map(
                lambda i: kubectl("apply", "-f", "-",
                                  stdin=network(names[i], "10.%d.0.0/24" % (100 + i))),
                range(12)))
        for rc, out, err in results:
            self.assertEqual(rc, 0, err + logtail())
        rc, out, err = kubectl("get", "networks", "-o",
                               "jsonpath={range .items[*]}{.metadata.name}={.spec.gateway} {end}")
        got = dict(kv.split("=") for kv in out.split())
        for i, n in enumerate(names):
            self.assertEqual(got.get(n), "10.%d.0.1" % (100 + i))
        rc, out, err = kubectl("delete", "networks", *names)
        self.assertEqual(rc, 0, err)

    def test_5c_workers_flag(self):
        for bad in ("-1", "1025", "four", ""):
            r = subprocess.run([OPERATOR, "--webhook-workers", bad], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=30)
            self.assertEqual(r.returncode, 2)
            self.assertIn("ckube-webhook-operator: invalid --webhook-workers %s: 0 to 1024" % bad,
                          r.stderr)

    def test_6_metrics_and_readyz(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % STATE["metrics"]) as r:
            text = r.read().decode()
        self.assertRegex(text, r'controller_runtime_webhook_requests_total\{webhook="/validate-'
                               r'samplecrd-k8s-io-v1-network",code="200"\} [1-9]')
        self.assertIn("controller_runtime_webhook_latency_seconds_bucket", text)
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz?verbose" % STATE["health"]) as r:
            self.assertIn("[+]webhook ok", r.read().decode())

    def test_7_certificate_rotation(self):
        ca2 = use_certs("ca2")
        time.sleep(1.2)  # the server looks at the files at most once a second
        deadline = time.time() + 10
        while True:
            try:
                st, _ = post_review("/convert", {"apiVersion": "apiextensions.k8s.io/v1",
                                                 "kind": "ConversionReview",
                                                 "request": {"uid": "r", "objects": [],
                                                             "desiredAPIVersion": "x/v1"}}, ca2)
                self.assertEqual(st, 200)
                break
            except (ssl.SSLError, urllib.error.URLError):
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        # the API server trusts the new CA once the configurations say so
        rc, out, err = kubectl("apply", "-f", "-", stdin=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": configurations(ca2)}))
        self.assertEqual(rc, 0, err)
        apply_two_version_crd(ca2)
        STATE["ca"] = ca2
        time.sleep(0.5)
        rc, out, err = kubectl("get", "networks.v1alpha1.samplecrd.k8s.io", "net-old")
        self.assertEqual(rc, 0, err)
        rc, out, err = kubectl("apply", "-f", "-", stdin=network("net-e", "10.5.0.0/24"))
        self.assertEqual(rc, 0, err + logtail())

    def test_8_operator_gone(self):
        stop_operator()
        rc, out, err = kubectl("apply", "-f", "-", stdin=network("net-f", "10.6.0.0/24"))
        self.assertNotEqual(rc, 0)
        self.assertIn('failed calling webhook "mnetwork.kb.io"', err)
        self.assertIn("connect: connection refused", err)
        # everything else still works
        rc, out, err = kubectl("create", "configmap", "still-fine", "--from-literal=a=b")
        self.assertEqual(rc, 0, err)
        rc, out, err = kubectl("get", "networks")
        self.assertEqual(rc, 0, err)
        self.assertIn("net-a", out)
        # the stored version needs no webhook; v1alpha1 does, and says so
        rc, out, err = kubectl("get", "networks.v1alpha1.samplecrd.k8s.io")
        self.assertNotEqual(rc, 0)
        self.assertIn("Error from server: conversion webhook for samplecrd.k8s.io/v1, "
                      "Kind=Network failed: Post \"https://127.0.0.1:%d/convert?timeout=30s\": "
                      "dial tcp 127.0.0.1:%d: connect: connection refused"
                      % (STATE["port"], STATE["port"]), err)


if __name__ == "__main__":
    run_unittests()
