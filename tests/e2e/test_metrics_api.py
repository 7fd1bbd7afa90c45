"""End-to-end tests of libckube's extension API server (issue #25 item 5,
ckube/apiext.h) through its sample, ckube-metrics-api, as a new user
runs it: `ckube server`, the sample's manifest (its ServiceAccount and
RBAC, Service, Endpoints, APIService) applied with kubectl, the sample
started with a token of that ServiceAccount and a serving certificate;
then the APIService turns Available, `kubectl get objectcounts` goes
through discovery and the proxy to the sample, which takes the user
from the front proxy's headers and asks the API server
(SubjectAccessReview) before it counts; directly, its delegated
authentication (client certificates, TokenReviews, anonymous) and
authorization answer 401 and 403 in upstream's words, request headers
without the front proxy's certificate are not believed, writes get 405;
its serving certificate rotated on disk reaches the next connection
(and, with the APIService's caBundle updated, the API server's proxy)
without a restart; and when the sample stops, its group goes
unavailable (503) while kubectl keeps working for everything else."""
import base64
import json
import os
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
SAMPLE = os.environ.get("CKUBE_METRICSAPI") or os.path.join(SRC, "build", "ckube-metrics-api")
MANIFEST = os.path.join(SRC, "examples", "metrics-api", "manifests", "metrics-api.yaml")
APISVC = "v1alpha1.metrics.ckube.io"
OC = "/apis/metrics.ckube.io/v1alpha1/namespaces/default/objectcounts"
STATE = {}


def kubectl(*args, stdin=None, kubeconfig=None):
    return SERVER.kubectl(*args, stdin=stdin, kubeconfig=kubeconfig)


def token_kubeconfig(sa, ns):
    """A kubeconfig for ServiceAccount ns/sa (a token from `kubectl create
    token`), with the admin kubeconfig's server and CA."""
    rc, out, err = kubectl("create", "token", sa, "-n", ns, "--duration=1h")
    assert rc == 0, err
    with open(SERVER.kubeconfig) as f:
        admin = json.loads(json.dumps(__import__("yaml").safe_load(f)))
    cluster = admin["clusters"][0]["cluster"]
    kc = {"apiVersion": "v1", "kind": "Config",
          "clusters": [{"name": "c", "cluster": cluster}],
          "users": [{"name": sa, "user": {"token": out.strip()}}],
          "contexts": [{"name": "c", "context": {"cluster": "c", "user": sa}}],
          "current-context": "c"}
    path = os.path.join(SERVER.tmp, "%s.kubeconfig" % sa)
    with open(path, "w") as f:
        json.dump(kc, f)
    return path, out.strip()


def apiservice_available():
    rc, out, err = kubectl("get", "apiservice", APISVC, "-o", "json")
    if rc != 0:
        return None
    for c in json.loads(out).get("status", {}).get("conditions") or []:
        if c["type"] == "Available":
            return c
    return None


def wait_available(status, timeout=30):
    deadline = time.time() + timeout
    while True:
        c = apiservice_available()
        if c and c["status"] == status:
            return c
        if time.time() > deadline:
            raise AssertionError("APIService not Available=%s: %s\n%s" % (status, c, logtail()))
        time.sleep(0.3)


def logtail():
    try:
        with open(os.path.join(SERVER.tmp, "metrics-api.log"), "rb") as f:
            return f.read()[-3000:].decode(errors="replace")
    except OSError:
        return ""


def direct(path, token=None, cert=False, headers=None, method="GET"):
    """A request straight to the sample, not through the API server;
    cert: the admin's client certificate, or "front-proxy" the API
    server's front-proxy client certificate."""
    ctx = ssl.create_default_context(cadata=STATE["ca"].decode())
    pki = os.path.join(SERVER.data, "pki")
    if cert == "front-proxy":
        ctx.load_cert_chain(os.path.join(pki, "front-proxy-client.crt"),
                            os.path.join(pki, "front-proxy-client.key"))
    elif cert:
        ctx.load_cert_chain(os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"))
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    req = urllib.request.Request("https://127.0.0.1:%d%s" % (STATE["port"], path), headers=h,
                                 method=method)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=20) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def setUpModule():
    SERVER.start()
    STATE["port"] = free_port()
    ca, crt, key = make_certs(os.path.join(SERVER.tmp, "metrics-api-certs"), ["127.0.0.1",
                                                                            "metrics-api.kube-system.svc"])
    STATE["ca"], STATE["crt"], STATE["key"] = ca, crt, key
    with open(MANIFEST) as f:
        text = f.read()
    text = text.replace("CA_BUNDLE", base64.b64encode(ca).decode())
    text = text.replace("6443", str(STATE["port"]))
    rc, out, err = kubectl("apply", "-f", "-", stdin=text)
    assert rc == 0, err
    kc, _ = token_kubeconfig("metrics-api", "kube-system")
    log = open(os.path.join(SERVER.tmp, "metrics-api.log"), "wb")
    STATE["log"] = log
    STATE["proc"] = subprocess.Popen(
        [SAMPLE, "--kubeconfig", kc, "--bind-address", "127.0.0.1", "--secure-port",
         str(STATE["port"]), "--tls-cert-file", crt, "--tls-private-key-file", key, "-v", "2"],
        stdout=log, stderr=subprocess.STDOUT)
    # a user with no rights yet
    rc, out, err = kubectl("create", "serviceaccount", "viewer", "-n", "default")
    assert rc == 0, err
    STATE["viewer_kc"], STATE["viewer_token"] = token_kubeconfig("viewer", "default")


def stop_sample():
    proc = STATE.get("proc")
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        STATE["log"].close()
        assert rc == 0, "ckube-metrics-api exited %d:\n%s" % (rc, logtail())


def tearDownModule():
    try:
        stop_sample()
    finally:
        SERVER.stop()


class MetricsApiTest(unittest.TestCase):
    def test_1_available_and_listed_through_the_api_server(self):
        c = wait_available("True")
        self.assertEqual((c["reason"], c["message"]), ("Passed", "all checks passed"))
        for i in range(3):
            rc, out, err = kubectl("create", "configmap", "cm%d" % i, "-n", "default")
            self.assertEqual(rc, 0, err)
        rc, out, err = kubectl("get", "objectcounts", "-n", "default")
        self.assertEqual(rc, 0, err + logtail())
        self.assertRegex(out, r"(?m)^NAME\s+AGE$")
        self.assertRegex(out, r"(?m)^configmaps\s+\d+s$")
        self.assertRegex(out, r"(?m)^serviceaccounts\s")
        rc, out, err = kubectl("get", "oc", "configmaps", "-n", "default", "-o", "json")
        self.assertEqual(rc, 0, err)
        obj = json.loads(out)
        self.assertEqual((obj["apiVersion"], obj["kind"]), ("metrics.ckube.io/v1alpha1",
                                                            "ObjectCount"))
        # default holds the three made here (no controller-manager: no kube-root-ca.crt)
        self.assertEqual(obj["count"], 3)
        rc, out, err = kubectl("get", "objectcounts", "-A", "-o", "json")
        self.assertEqual(rc, 0, err)
        items = json.loads(out)["items"]
        self.assertIn(("kube-system", "serviceaccounts"),
                      {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items})

    def test_2_discovery(self):
        wait_available("True")
        rc, out, err = kubectl("api-resources", "--api-group=metrics.ckube.io")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"objectcounts\s+oc\s+metrics\.ckube\.io/v1alpha1\s+true\s+"
                              r"ObjectCount")
        st, body = direct("/apis", cert=True)
        self.assertEqual(st, 200)
        self.assertEqual(body["groups"][0]["preferredVersion"]["groupVersion"],
                         "metrics.ckube.io/v1alpha1")

    def test_2b_openapi_and_explain(self):
        # the extension server publishes its kind's schema; the API server
        # names it in its own /openapi/v3 (after the availability check
        # reads it) and proxies the document, so kubectl explain reads it
        wait_available("True")
        st, index = direct("/openapi/v3", cert=True)
        self.assertEqual(st, 200, index)
        url = index["paths"]["apis/metrics.ckube.io/v1alpha1"]["serverRelativeURL"]
        self.assertRegex(url, r"^/openapi/v3/apis/metrics\.ckube\.io/v1alpha1\?hash=[0-9A-F]{128}$")
        deadline = time.time() + 40
        while True:
            rc, out, err = kubectl("get", "--raw", "/openapi/v3")
            self.assertEqual(rc, 0, err)
            paths = json.loads(out)["paths"]
            if "apis/metrics.ckube.io/v1alpha1" in paths or time.time() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(paths["apis/metrics.ckube.io/v1alpha1"]["serverRelativeURL"], url)
        self.assertIn("api/v1", paths)  # the server's own stay
        rc, out, err = kubectl("get", "--raw", url)
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        schema = doc["components"]["schemas"]["io.ckube.metrics.v1alpha1.ObjectCount"]
        self.assertEqual(schema["x-kubernetes-group-version-kind"],
                         [{"group": "metrics.ckube.io", "kind": "ObjectCount",
                           "version": "v1alpha1"}])
        self.assertEqual(schema["properties"]["count"]["type"], "integer")
        rc, out, err = kubectl("explain", "objectcounts")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"GROUP:\s+metrics\.ckube\.io")
        self.assertRegex(out, r"KIND:\s+ObjectCount")
        self.assertRegex(out, r"VERSION:\s+v1alpha1")
        self.assertIn("How many objects of one resource a namespace holds", out)
        self.assertRegex(out, r"count\s+<integer>")
        self.assertRegex(out, r"metadata\s+<ObjectMeta>")
        rc, out, err = kubectl("explain", "objectcounts.count")
        self.assertEqual(rc, 0, err)
        self.assertIn("The number of objects of the resource the object is named after", out)
        # every kubectl on the machine (1.27 to 1.33) reads it
        for minor in range(27, 34):
            with self.subTest(kubectl=minor):
                rc, out, err = SERVER.kubectl(
                    "explain", "objectcounts.count",
                    binary="/usr/lib/google-cloud-sdk/bin/kubectl.1.%d" % minor)
                self.assertEqual(rc, 0, err)
                self.assertRegex(out, r"KIND:\s+ObjectCount")
                self.assertRegex(out, r"FIELD:\s+count <integer>")
                self.assertIn("The number of objects of the resource", out)

    def test_3_not_found_and_read_only(self):
        wait_available("True")
        rc, out, err = kubectl("get", "objectcounts", "nope", "-n", "default")
        self.assertNotEqual(rc, 0)
        self.assertIn('Error from server (NotFound): objectcounts.metrics.ckube.io "nope" not '
                      'found', err)
        rc, out, err = kubectl("create", "-f", "-", stdin=json.dumps(
            {"apiVersion": "metrics.ckube.io/v1alpha1", "kind": "ObjectCount",
             "metadata": {"name": "x", "namespace": "default"}}))
        self.assertNotEqual(rc, 0)
        self.assertIn("Error from server (MethodNotAllowed): error when creating \"STDIN\": the "
                      "server does not allow this method on the requested resource", err)

    def test_4_authorized_through_subject_access_reviews(self):
        wait_available("True")
        # the API server refuses the viewer before proxying
        rc, out, err = kubectl("get", "objectcounts", "-n", "default",
                               kubeconfig=STATE["viewer_kc"])
        self.assertNotEqual(rc, 0)
        self.assertIn('User "system:serviceaccount:default:viewer" cannot list resource '
                      '"objectcounts" in API group "metrics.ckube.io" in the namespace '
                      '"default"', err)
        # the sample refuses it too when asked directly (TokenReview, then SAR)
        st, body = direct(OC, token=STATE["viewer_token"])
        self.assertEqual(st, 403, body)
        self.assertEqual(body["reason"], "Forbidden")
        self.assertEqual(body["message"],
                         'objectcounts.metrics.ckube.io is forbidden: User '
                         '"system:serviceaccount:default:viewer" cannot list resource '
                         '"objectcounts" in API group "metrics.ckube.io" in the namespace '
                         '"default"')
        # once bound to the reader role, both let it through
        rc, out, err = kubectl("create", "rolebinding", "viewer-counts", "-n", "default",
                               "--clusterrole=metrics-api:reader",
                               "--serviceaccount=default:viewer")
        self.assertEqual(rc, 0, err)
        deadline = time.time() + 15  # the sample caches decisions for 10 s
        while True:
            st, body = direct(OC, token=STATE["viewer_token"])
            if st == 200 or time.time() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["kind"], "ObjectCountList")
        rc, out, err = kubectl("get", "objectcounts", "-n", "default",
                               kubeconfig=STATE["viewer_kc"])
        self.assertEqual(rc, 0, err)
        self.assertIn("configmaps", out)
        # but only in default
        st, body = direct("/apis/metrics.ckube.io/v1alpha1/namespaces/kube-system/objectcounts",
                          token=STATE["viewer_token"])
        self.assertEqual(st, 403, body)

    def test_5_authentication(self):
        wait_available("True")
        # a client certificate of the cluster CA: the admin, in system:masters
        st, body = direct(OC, cert=True)
        self.assertEqual(st, 200, body)
        # a token the TokenReview refuses: 401
        st, body = direct(OC, token="not-a-token")
        self.assertEqual(st, 401, body)
        self.assertEqual((body["reason"], body["message"]), ("Unauthorized", "Unauthorized"))
        # no credentials: anonymous, refused by authorization
        st, body = direct(OC)
        self.assertEqual(st, 403, body)
        self.assertIn('User "system:anonymous" cannot list resource "objectcounts"',
                      body["message"])
        # request headers without the front proxy's certificate mean nothing
        st, body = direct(OC, headers={"X-Remote-User": "admin",
                                       "X-Remote-Group": "system:masters"})
        self.assertEqual(st, 403, body)
        self.assertIn('User "system:anonymous"', body["message"])
        # the front proxy's certificate makes the headers count
        st, body = direct(OC, cert="front-proxy", headers={"X-Remote-User": "alice"})
        self.assertEqual(st, 403, body)
        self.assertIn('User "alice" cannot list resource "objectcounts"', body["message"])
        st, body = direct(OC, cert="front-proxy", headers={"X-Remote-User": "alice",
                                                           "X-Remote-Group": "system:masters"})
        self.assertEqual(st, 200, body)
        # a front-proxied user is authenticated like any other: a binding
        # to system:authenticated lets alice in (the SAR carries the group)
        for args in (("create", "clusterrole", "objectcounts-reader", "--verb=list",
                      "--resource=objectcounts.metrics.ckube.io"),
                     ("create", "clusterrolebinding", "objectcounts-authenticated",
                      "--clusterrole=objectcounts-reader", "--group=system:authenticated")):
            rc, out, err = kubectl(*args)
            self.assertEqual(rc, 0, err)
        try:
            deadline = time.time() + 20
            while True:
                st, body = direct(OC, cert="front-proxy", headers={"X-Remote-User": "alice"})
                if st == 200 or time.time() > deadline:
                    break
                time.sleep(0.2)
            self.assertEqual(st, 200, body)
            st, body = direct(OC)  # anonymous is not authenticated
            self.assertEqual(st, 403, body)
        finally:
            kubectl("delete", "clusterrolebinding", "objectcounts-authenticated")
            kubectl("delete", "clusterrole", "objectcounts-reader")
        # ... and without a user header it is no client certificate at all
        st, body = direct(OC, cert="front-proxy")
        self.assertEqual(st, 401, body)
        # health is open to anyone
        ctx = ssl.create_default_context(cadata=STATE["ca"].decode())
        with urllib.request.urlopen("https://127.0.0.1:%d/readyz" % STATE["port"], context=ctx,
                                    timeout=10) as r:
            self.assertEqual(r.read(), b"ok")

    def test_5_certificate_rotation(self):
        wait_available("True")
        ca2, crt2, key2 = make_certs(os.path.join(SERVER.tmp, "metrics-api-certs2"),
                                     ["127.0.0.1", "metrics-api.kube-system.svc"])
        # replaced whole, each file by a rename, as kubelet and cert-manager do
        for src, dst in ((crt2, STATE["crt"]), (key2, STATE["key"])):
            with open(src, "rb") as f, open(dst + ".new", "wb") as g:
                g.write(f.read())
            os.rename(dst + ".new", dst)
        old_ca, STATE["ca"] = STATE["ca"], ca2
        deadline = time.time() + 10
        while True:  # the sample looks at its files at most once a second
            try:
                st, body = direct(OC, cert=True)
                break
            except (ssl.SSLError, urllib.error.URLError):
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        self.assertEqual(st, 200, body)
        self.assertIn("loaded a new serving certificate", logtail())
        # the old CA no longer verifies it
        STATE["ca"] = old_ca
        with self.assertRaises((ssl.SSLError, urllib.error.URLError)):
            direct(OC, cert=True)
        STATE["ca"] = ca2
        # the API server's proxy follows once the APIService trusts the new CA
        rc, out, err = kubectl("patch", "apiservice", APISVC, "--type", "merge", "-p",
                               json.dumps({"spec": {"caBundle": base64.b64encode(ca2).decode()}}))
        self.assertEqual(rc, 0, err)
        deadline = time.time() + 20
        while True:
            rc, out, err = kubectl("get", "objectcounts", "configmaps", "-n", "default")
            if rc == 0 or time.time() > deadline:
                break
            time.sleep(0.3)
        self.assertEqual(rc, 0, err + logtail())
        self.assertRegex(out, r"(?m)^configmaps\s")
        wait_available("True")

    def test_6_sample_gone(self):
        wait_available("True")
        stop_sample()
        # the availability check reacts to the Endpoints changing
        rc, out, err = kubectl("annotate", "endpoints", "metrics-api", "-n", "kube-system",
                               "touched=%d" % time.time(), "--overwrite")
        self.assertEqual(rc, 0, err)
        c = wait_available("False")
        self.assertEqual(c["reason"], "FailedDiscoveryCheck")
        rc, out, err = kubectl("get", "--raw", OC)
        self.assertNotEqual(rc, 0)
        self.assertIn("the server is currently unable to handle the request", err)
        rc, out, err = kubectl("get", "configmaps", "-n", "default")
        self.assertEqual(rc, 0, err)
        self.assertIn("cm0", out)
        # its OpenAPI document is no longer named, the server's own still are
        rc, out, err = kubectl("get", "--raw", "/openapi/v3")
        self.assertEqual(rc, 0, err)
        paths = json.loads(out)["paths"]
        self.assertNotIn("apis/metrics.ckube.io/v1alpha1", paths)
        self.assertIn("api/v1", paths)


if __name__ == "__main__":
    run_unittests()
