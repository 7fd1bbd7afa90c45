"""End-to-end tests of admission webhooks (issue #25) against a real
`ckube server` over TLS, with kubectl 1.33 as the client and a webhook
backend of the test's own (webhook_backend.py) called over HTTPS, by URL
and through a Service's endpoints: creates mutated and denied in
upstream's words, updates and deletes admitted, failure policies for
every way a webhook can fail (unreachable, timed out, garbage, the wrong
uid, a patch that does not apply, a 500), nothing stored when refused,
warnings passed to kubectl, reinvocation, connections reused, and
webhook configurations exempt from webhooks."""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402
from prom_text import sample, scrape  # noqa: E402
from webhook_backend import Backend, closed_port  # noqa: E402

SERVER = Server("--controller-manager=false", "--audit-policy-file", "AUDIT_POLICY",
                "--audit-log-path", "AUDIT_LOG")
AUDIT_POLICY = os.path.join(SERVER.tmp, "audit-policy.yaml")
AUDIT_LOG = os.path.join(SERVER.tmp, "audit.log")
SERVER.flags = tuple({"AUDIT_POLICY": AUDIT_POLICY, "AUDIT_LOG": AUDIT_LOG}.get(f, f)
                     for f in SERVER.flags)
BACKEND = None
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
CM = "/api/v1/namespaces/default/configmaps"


def setUpModule():
    global BACKEND
    with open(AUDIT_POLICY, "w") as f:
        f.write("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n")
    SERVER.start()
    BACKEND = Backend(os.path.join(SERVER.tmp, "hook")).start()


def tearDownModule():
    if BACKEND:
        BACKEND.stop()
    SERVER.stop()


def call(method, path, body=None, ctype="application/json"):
    conn = SERVER.connection(timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": ctype})
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"null"), r.getheader("Warning")
    finally:
        conn.close()


def audit_annotations(name):
    """The annotations of the audit events of the create of configmap `name`."""
    with open(AUDIT_LOG) as f:
        events = [json.loads(line) for line in f]
    out = {}
    for e in events:
        ref = e.get("objectRef") or {}
        if ref.get("resource") == "configmaps" and ref.get("name") == name and e["verb"] == "create":
            out.update(e.get("annotations") or {})
    return out


def kubectl(*args, stdin=None):
    return SERVER.kubectl(*args, stdin=stdin)


def webhook(name, path, selector, url=None, ops=("CREATE",), resources=("configmaps",),
            groups=("",), **extra):
    w = {"name": name,
         "clientConfig": {"url": url or BACKEND.url(path), "caBundle": BACKEND.ca_bundle},
         "rules": [{"operations": list(ops), "apiGroups": list(groups), "apiVersions": ["*"],
                    "resources": list(resources)}],
         "objectSelector": {"matchLabels": {"hook": selector}},
         "sideEffects": "None", "admissionReviewVersions": ["v1"]}
    w.update(extra)
    return w


def configure(path, name, *hooks):
    kind = "ValidatingWebhookConfiguration" if path == VWC else "MutatingWebhookConfiguration"
    st, body, _ = call("POST", path, {"apiVersion": "admissionregistration.k8s.io/v1",
                                      "kind": kind, "metadata": {"name": name},
                                      "webhooks": list(hooks)})
    assert st == 201, body
    time.sleep(0.3)  # the configurations reach admission through the watch cache


def configmap(name, selector, **labels):
    labels["hook"] = selector
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


def create_cm(name, selector, **labels):
    return call("POST", CM, configmap(name, selector, **labels))


class AdmissionWebhooksTest(unittest.TestCase):
    def assertNotStored(self, name):
        st, _, _ = call("GET", CM + "/" + name)
        self.assertEqual(st, 404, "%s was stored" % name)

    def test_denied_in_upstreams_words_through_kubectl(self):
        configure(VWC, "deny", webhook("deny.example.com", "/deny", "deny"))
        manifest = json.dumps(configmap("denied-1", "deny"))
        rc, out, err = kubectl("apply", "-f", "-", stdin=manifest)
        self.assertNotEqual(rc, 0, out)
        self.assertIn('admission webhook "deny.example.com" denied the request: no thanks', err)
        self.assertNotStored("denied-1")
        st, body, _ = create_cm("denied-2", "deny")
        self.assertEqual((st, body["code"], body["reason"]), (403, 403, "Forbidden"), body)
        # the review the webhook got
        path, review = [x for x in BACKEND.reviews if x[0].startswith("/deny?")][-1]
        self.assertEqual(path, "/deny?timeout=10s")
        req = review["request"]
        self.assertEqual(review["apiVersion"], "admission.k8s.io/v1")
        self.assertEqual(req["operation"], "CREATE")
        self.assertEqual(req["kind"], {"group": "", "version": "v1", "kind": "ConfigMap"})
        self.assertEqual(req["resource"], {"group": "", "version": "v1", "resource": "configmaps"})
        self.assertEqual((req["namespace"], req["name"]), ("default", "denied-2"))
        self.assertEqual(req["object"]["data"], {"k": "v"})
        self.assertIsNone(req["oldObject"])
        self.assertIs(req["dryRun"], False)
        self.assertEqual(req["options"]["kind"], "CreateOptions")
        self.assertIn("system:masters", req["userInfo"]["groups"])
        # objects the selector leaves out are not sent
        n = len(BACKEND.reviews)
        st, body, _ = create_cm("not-selected", "other")
        self.assertEqual(st, 201, body)
        self.assertEqual(len(BACKEND.reviews), n)

    def test_denied_without_explanation(self):
        configure(VWC, "deny-bare", webhook("bare.example.com", "/deny-bare", "bare"))
        st, body, _ = create_cm("bare-1", "bare")
        self.assertEqual(st, 400, body)
        self.assertEqual(body["message"],
                         'admission webhook "bare.example.com" denied the request without '
                         'explanation')
        self.assertNotStored("bare-1")

    def test_mutated_create_and_update(self):
        configure(MWC, "mutate", webhook("mutate.example.com", "/mutate", "mutate",
                                         ops=("CREATE", "UPDATE")))
        rc, out, err = kubectl("create", "configmap", "mutated-1", "--from-literal=a=b")
        self.assertEqual(rc, 0, err)  # no hook label: not mutated
        rc, out, err = kubectl("apply", "-f", "-", stdin=json.dumps(configmap("mutated-2", "mutate")))
        self.assertEqual(rc, 0, err)
        rc, out, err = kubectl("get", "configmap", "mutated-2", "-o", "json")
        obj = json.loads(out)
        self.assertEqual(obj["metadata"]["labels"]["mutated"], "yes")
        # an update through kubectl: the label taken off comes back
        rc, out, err = kubectl("label", "configmap", "mutated-2", "mutated-")
        self.assertEqual(rc, 0, err)
        rc, out, err = kubectl("get", "configmap", "mutated-2", "-o", "jsonpath={.metadata.labels}")
        self.assertIn('"mutated":"yes"', out)
        path, review = [x for x in BACKEND.reviews if x[0].startswith("/mutate?")][-1]
        self.assertEqual(review["request"]["operation"], "UPDATE")
        self.assertEqual(review["request"]["oldObject"]["metadata"]["name"], "mutated-2")
        self.assertEqual(review["request"]["options"]["kind"], "PatchOptions")

    def test_reinvocation_if_needed(self):
        # "a-first" runs before "b-second" (configuration names in order);
        # b's change reinvokes a, which saw no label the first time.
        configure(MWC, "reinvoke-a", webhook("first.example.com", "/mutate-b", "reinvoke",
                                             reinvocationPolicy="IfNeeded"))
        configure(MWC, "reinvoke-b", webhook("second.example.com", "/mutate", "reinvoke"))
        st, body, _ = create_cm("reinvoked", "reinvoke")
        self.assertEqual(st, 201, body)
        labels = body["metadata"]["labels"]
        self.assertEqual((labels["mutated"], labels["second"]), ("yes", "yes"), labels)
        ann = audit_annotations("reinvoked")
        rounds = sorted(k for k in ann if k.startswith("mutation.webhook.admission.k8s.io/"))
        self.assertTrue(any("round_1_" in k for k in rounds), ann)
        # the patches only from level Request up (the policy here: Metadata)
        self.assertFalse(any(k.startswith("patch.webhook.admission.k8s.io/") for k in ann), ann)

    def test_delete_validated(self):
        st, body, _ = create_cm("keep-me", "nodelete")
        self.assertEqual(st, 201, body)
        configure(VWC, "nodelete", webhook("nodelete.example.com", "/deny", "nodelete",
                                           ops=("DELETE",)))
        rc, out, err = kubectl("delete", "configmap", "keep-me")
        self.assertNotEqual(rc, 0)
        self.assertIn('admission webhook "nodelete.example.com" denied the request: no thanks',
                      err)
        st, body, _ = call("GET", CM + "/keep-me")
        self.assertEqual(st, 200, body)
        path, review = [x for x in BACKEND.reviews if x[0].startswith("/deny?")][-1]
        self.assertEqual(review["request"]["operation"], "DELETE")
        self.assertIsNone(review["request"]["object"])
        self.assertEqual(review["request"]["oldObject"]["metadata"]["name"], "keep-me")
        self.assertEqual(review["request"]["options"]["kind"], "DeleteOptions")

    def test_delete_through_mutating_webhooks(self):
        # upstream asks mutating admission on a delete too (object null,
        # oldObject the object): it may refuse, not change
        for name in ("mdel-deny", "mdel-patch", "mdel-allow"):
            st, body, _ = create_cm(name, name)
            self.assertEqual(st, 201, body)
        configure(MWC, "mdel",
                  webhook("mdeny.example.com", "/deny", "mdel-deny", ops=("DELETE",)),
                  webhook("mpatch.example.com", "/mutate", "mdel-patch", ops=("DELETE",)),
                  webhook("mallow.example.com", "/", "mdel-allow", ops=("DELETE",)))
        rc, out, err = kubectl("delete", "configmap", "mdel-deny")
        self.assertNotEqual(rc, 0)
        self.assertIn('admission webhook "mdeny.example.com" denied the request: no thanks', err)
        path, review = [x for x in BACKEND.reviews if x[0].startswith("/deny?")][-1]
        self.assertEqual(review["request"]["operation"], "DELETE")
        self.assertIsNone(review["request"]["object"])
        self.assertEqual(review["request"]["oldObject"]["metadata"]["name"], "mdel-deny")
        st, body, _ = call("DELETE", CM + "/mdel-patch")
        self.assertEqual((st, body["reason"]), (500, "InternalError"), body)
        self.assertEqual(body["message"],
                         'Internal error occurred: admission webhook "mpatch.example.com" '
                         'attempted to modify the object, which is not supported for this '
                         'operation')
        for name in ("mdel-deny", "mdel-patch"):
            st, body, _ = call("GET", CM + "/" + name)
            self.assertEqual(st, 200, body)
        n = len([x for x in BACKEND.reviews if x[0] == "/?timeout=10s"])
        rc, out, err = kubectl("delete", "configmap", "mdel-allow")
        self.assertEqual(rc, 0, err)
        self.assertNotStored("mdel-allow")
        self.assertEqual(len([x for x in BACKEND.reviews if x[0] == "/?timeout=10s"]), n + 1)

    def test_namespace_checked_before_webhooks_and_validation(self):
        # upstream's NamespaceLifecycle is the first admission plugin: a
        # missing namespace is NotFound before any webhook is called and
        # before the object is validated
        configure(MWC, "nsorder", webhook("nsorder.example.com", "/mutate", "nsorder"))
        n = len(BACKEND.reviews)
        st, body, _ = call("POST", "/api/v1/namespaces/no-such-ns/configmaps",
                           configmap("in-no-ns", "nsorder"))
        self.assertEqual((st, body["reason"], body["message"]),
                         (404, "NotFound", 'namespaces "no-such-ns" not found'), body)
        bad = configmap("Not_A_Valid_Name", "nsorder")
        st, body, _ = call("POST", "/api/v1/namespaces/no-such-ns/configmaps", bad)
        self.assertEqual((st, body["reason"]), (404, "NotFound"), body)
        self.assertEqual(len(BACKEND.reviews), n)
        # in a namespace that exists, the webhook is called and validation
        # refuses the name
        st, body, _ = call("POST", CM, bad)
        self.assertEqual((st, body["reason"]), (422, "Invalid"), body)
        self.assertEqual(len(BACKEND.reviews), n + 1)

    def test_step_and_controller_metrics(self):
        """kube-apiserver's STABLE admission metrics: each phase of every
        write (admit, validate) and each admission plugin (here the two
        webhook plugins), by operation and whether it refused."""
        configure(MWC, "stepm", webhook("stepm.example.com", "/", "stepm",
                                        ops=("CREATE", "DELETE")))
        configure(VWC, "stepv", webhook("stepv.example.com", "/deny", "stepv-deny"))
        before = scrape(SERVER)
        st, body, _ = create_cm("stepm-1", "stepm")
        self.assertEqual(st, 201, body)
        st, body, _ = create_cm("stepv-1", "stepv-deny")
        self.assertEqual(st, 403, body)
        st, body, _ = call("DELETE", CM + "/stepm-1")
        self.assertEqual(st, 200, body)
        ms = scrape(SERVER)

        def delta(metric, /, **labels):
            return sample(ms, metric, **labels) - sample(before, metric, **labels)

        step = "apiserver_admission_step_admission_duration_seconds_count"
        ctl = "apiserver_admission_controller_admission_duration_seconds_count"
        self.assertGreaterEqual(delta(step, type="admit", operation="CREATE", rejected="false"), 2)
        self.assertGreaterEqual(delta(step, type="validate", operation="CREATE",
                                      rejected="false"), 1)
        self.assertEqual(delta(step, type="validate", operation="CREATE", rejected="true"), 1)
        self.assertGreaterEqual(delta(step, type="admit", operation="DELETE", rejected="false"), 1)
        self.assertGreaterEqual(delta(step, type="validate", operation="DELETE",
                                      rejected="false"), 1)
        self.assertGreaterEqual(delta(ctl, name="MutatingAdmissionWebhook", type="admit",
                                      operation="CREATE", rejected="false"), 2)
        self.assertEqual(delta(ctl, name="ValidatingAdmissionWebhook", type="validate",
                               operation="CREATE", rejected="true"), 1)
        # upstream's buckets
        self.assertEqual(
            delta("apiserver_admission_step_admission_duration_seconds_bucket", type="validate",
                  operation="CREATE", rejected="true", le="2.5"), 1)
        self.assertFalse([k for k in ms
                          if k[0] == "apiserver_admission_step_admission_duration_seconds_bucket"
                          and ("le", "10") in k[1]])

    def test_failures_under_fail_policy(self):
        port = closed_port()
        cases = [
            ("unreachable", None, "https://127.0.0.1:%d/x" % port, {},
             'failed calling webhook "unreachable.example.com": failed to call webhook: '
             'Post "https://127.0.0.1:%d/x?timeout=10s": dial tcp 127.0.0.1:%d: connect: '
             'connection refused' % (port, port)),
            ("slow", "/slow", None, {"timeoutSeconds": 1},
             'Post "https://127.0.0.1:%d/slow?timeout=1s": context deadline exceeded'
             % BACKEND.port),
            ("garbage", "/garbage", None, {},
             'failed calling webhook "garbage.example.com": failed to call webhook: '),
            ("wronguid", "/wrong-uid", None, {},
             'failed calling webhook "wronguid.example.com": received invalid webhook '
             'response: expected response.uid='),
            ("status500", "/status500", None, {},
             'failed to call webhook: the server responded with the status code 500 but did '
             'not return more information'),
        ]
        for sel, path, url, extra, want in cases:
            with self.subTest(sel):
                configure(VWC, "fail-" + sel,
                          webhook(sel + ".example.com", path, sel, url=url, **extra))
                st, body, _ = create_cm("fail-" + sel, sel)
                self.assertEqual((st, body["reason"]), (500, "InternalError"), body)
                self.assertTrue(body["message"].startswith("Internal error occurred: "), body)
                self.assertIn(want, body["message"])
                self.assertNotStored("fail-" + sel)
                rc, out, err = kubectl("create", "configmap", "kfail-" + sel)
                self.assertEqual(rc, 0, err)  # objects the webhook does not select go through

    def test_bad_patch_is_refused_whatever_the_policy(self):
        configure(MWC, "bad-patch", webhook("badpatch.example.com", "/bad-patch", "badpatch",
                                            failurePolicy="Ignore"))
        st, body, _ = create_cm("bad-patch-1", "badpatch")
        self.assertEqual((st, body["reason"]), (500, "InternalError"), body)
        self.assertNotStored("bad-patch-1")

    def test_failures_ignored_under_ignore_policy(self):
        port = closed_port()
        configure(VWC, "ignore", webhook("ignore1.example.com", None, "ignore",
                                         url="https://127.0.0.1:%d/x" % port,
                                         failurePolicy="Ignore"),
                  webhook("ignore2.example.com", "/garbage", "ignore", failurePolicy="Ignore"))
        configure(MWC, "ignore", webhook("ignore3.example.com", "/wrong-uid", "ignore",
                                         failurePolicy="Ignore"))
        st, body, _ = create_cm("ignored", "ignore")
        self.assertEqual(st, 201, body)
        ann = audit_annotations("ignored")
        self.assertEqual(ann.get("failed-open.validating.webhook.admission.k8s.io/round_0_index_0"),
                         "ignore1.example.com", ann)
        self.assertEqual(ann.get("failed-open.validating.webhook.admission.k8s.io/round_0_index_1"),
                         "ignore2.example.com", ann)
        self.assertIn("failed-open.mutation.webhook.admission.k8s.io/round_0_index_", str(ann))

    def test_metrics(self):
        """kube-apiserver's admission webhook metrics, with its label values:
        one request per call, rejected when the call ends the request, the
        rejection's kind and code, fail-open calls counted apart."""
        port = closed_port()
        configure(VWC, "metrics-v",
                  webhook("m-allow.example.com", "/", "m-allow"),
                  webhook("m-deny.example.com", "/deny", "m-deny"),
                  webhook("m-open.example.com", None, "m-open",
                          url="https://127.0.0.1:%d/x" % port, failurePolicy="Ignore"))
        configure(MWC, "metrics-m",
                  webhook("m-500.example.com", "/status500", "m-500"),
                  webhook("m-badpatch.example.com", "/bad-patch", "m-badpatch"))
        before = scrape(SERVER)
        want = {"m-allow": 201, "m-deny": 403, "m-open": 201, "m-500": 500, "m-badpatch": 500}
        for sel, code in want.items():
            st, body, _ = create_cm("metrics-" + sel, sel)
            self.assertEqual(st, code, body)
        st, body, _ = create_cm("metrics-m-allow-2", "m-allow")
        self.assertEqual(st, 201, body)
        ms = scrape(SERVER)

        def delta(metric, /, **labels):
            return sample(ms, metric, **labels) - sample(before, metric, **labels)

        req = "apiserver_admission_webhook_request_total"
        rej = "apiserver_admission_webhook_rejection_count"
        cases = [  # name, type, code, rejected, (error_type, rejection code) or None
            ("m-allow.example.com", "validating", "200", "false", 2, None),
            ("m-deny.example.com", "validating", "403", "true", 1, ("no_error", "403")),
            ("m-open.example.com", "validating", "503", "false", 1, None),
            ("m-500.example.com", "admit", "500", "true", 1, ("calling_webhook_error", "500")),
            ("m-badpatch.example.com", "admit", "0", "true", 1,
             ("apiserver_internal_error", "0")),
        ]
        for name, typ, code, rejected, n, rejection in cases:
            with self.subTest(name):
                self.assertEqual(delta(req, name=name, type=typ, operation="CREATE", code=code,
                                       rejected=rejected), n)
                self.assertEqual(delta("apiserver_admission_webhook_admission_duration_seconds"
                                       "_count", name=name, type=typ, operation="CREATE",
                                       rejected=rejected), n)
                if rejection:
                    self.assertEqual(delta(rej, name=name, type=typ, operation="CREATE",
                                           error_type=rejection[0],
                                           rejection_code=rejection[1]), 1)
                else:
                    self.assertFalse([k for k in ms if k[0] == rej and ("name", name) in k[1]])
        self.assertEqual(delta("apiserver_admission_webhook_fail_open_count",
                               name="m-open.example.com", type="validating"), 1)
        # the allowed calls' time is in the histogram's buckets
        self.assertEqual(delta("apiserver_admission_webhook_admission_duration_seconds_bucket",
                               name="m-allow.example.com", type="validating",
                               operation="CREATE", rejected="false", le="+Inf"), 2)
        self.assertGreater(delta("apiserver_admission_webhook_admission_duration_seconds_sum",
                                 name="m-allow.example.com", type="validating",
                                 operation="CREATE", rejected="false"), 0)

    def test_warnings_reach_kubectl(self):
        configure(VWC, "warn", webhook("warn.example.com", "/warn", "warn"))
        rc, out, err = kubectl("apply", "-f", "-", stdin=json.dumps(configmap("warned", "warn")))
        self.assertEqual(rc, 0, err)
        self.assertIn("Warning: careful with that", err)
        ann = audit_annotations("warned")
        self.assertEqual(ann.get("warn.example.com/checked"), "yes", ann)

    def test_service_reference_through_endpoints(self):
        # hook.default.svc:443 -> the backend's port on 127.0.0.1
        st, body, _ = call("POST", "/api/v1/namespaces/default/services", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": BACKEND.port}]}})
        self.assertEqual(st, 201, body)
        st, body, _ = call("POST", "/api/v1/namespaces/default/endpoints", {
            "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "hook"},
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                         "ports": [{"name": "https", "port": BACKEND.port}]}]})
        self.assertEqual(st, 201, body)
        w = webhook("svc.example.com", None, "svc")
        w["clientConfig"] = {"service": {"namespace": "default", "name": "hook",
                                         "path": "/deny"},
                             "caBundle": BACKEND.ca_bundle}
        missing = webhook("nosvc.example.com", None, "nosvc")
        missing["clientConfig"] = {"service": {"namespace": "default", "name": "nothere"},
                                   "caBundle": BACKEND.ca_bundle}
        configure(VWC, "svc", w, missing)
        st, body, _ = create_cm("via-svc", "svc")
        self.assertEqual(st, 403, body)
        self.assertIn('admission webhook "svc.example.com" denied the request: no thanks',
                      body["message"])
        st, body, _ = create_cm("via-nosvc", "nosvc")
        self.assertEqual(st, 500, body)
        self.assertIn('Post "https://nothere.default.svc:443/?timeout=10s": service "nothere" '
                      'not found', body["message"])

    def test_wrong_ca_is_a_tls_failure(self):
        w = webhook("wrongca.example.com", "/allow", "wrongca")
        w["clientConfig"].pop("caBundle")  # the system's roots do not know the test's CA
        configure(VWC, "wrongca", w)
        st, body, _ = create_cm("wrongca-1", "wrongca")
        self.assertEqual(st, 500, body)
        self.assertIn("x509: certificate signed by unknown authority", body["message"])
        self.assertNotStored("wrongca-1")

    def test_connections_reused(self):
        configure(VWC, "reuse", webhook("reuse.example.com", "/allow", "reuse"))
        st, body, _ = create_cm("reuse-0", "reuse")
        self.assertEqual(st, 201, body)
        before = BACKEND.connections
        for i in range(1, 21):
            st, body, _ = create_cm("reuse-%d" % i, "reuse")
            self.assertEqual(st, 201, body)
        # the server's loops each keep their connection: no handshake per call
        self.assertLessEqual(BACKEND.connections - before, 4)

    def test_webhook_configurations_are_exempt(self):
        # a webhook that would deny everything about webhook configurations
        configure(VWC, "lockout", webhook("lockout.example.com", "/deny", "lockout",
                                          ops=("*",), groups=("admissionregistration.k8s.io",),
                                          resources=("*",)))
        lock = {"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "another", "labels": {"hook": "lockout"}}, "webhooks": []}
        st, body, _ = call("POST", VWC, lock)
        self.assertEqual(st, 201, body)
        rc, out, err = kubectl("delete", "validatingwebhookconfiguration", "lockout", "another")
        self.assertEqual(rc, 0, err)

    def test_scale_writes_send_scale_objects(self):
        """Webhooks on deployments/scale see autoscaling/v1 Scales, and a
        mutating one's replicas are the Deployment's."""
        dep = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "scaled", "labels": {"hook": "scale"}},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "s"}},
                        "template": {"metadata": {"labels": {"app": "s"}},
                                     "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
        st, body, _ = call("POST", "/apis/apps/v1/namespaces/default/deployments", dep)
        self.assertEqual(st, 201, body)
        configure(VWC, "scale-v", webhook("scale-v.example.com", "/allow", "scale",
                                          ops=("UPDATE",), groups=("apps",),
                                          resources=("deployments/scale",),
                                          objectSelector={}))
        configure(MWC, "scale-m", webhook("scale-m.example.com", "/scale-to-5", "scale",
                                          ops=("UPDATE",), groups=("apps",),
                                          resources=("deployments/scale",),
                                          objectSelector={}))
        try:
            n = len(BACKEND.reviews)
            rc, out, err = kubectl("scale", "deployment", "scaled", "--replicas=3")
            self.assertEqual(rc, 0, err)
            reviews = {p.split("?")[0]: r["request"] for p, r in BACKEND.reviews[n:]}
            for path in ("/scale-to-5", "/allow"):
                req = reviews[path]
                self.assertEqual(req["kind"], {"group": "autoscaling", "version": "v1",
                                               "kind": "Scale"})
                self.assertEqual(req["requestKind"], req["kind"])
                self.assertEqual(req["resource"], {"group": "apps", "version": "v1",
                                                   "resource": "deployments"})
                self.assertEqual(req["subResource"], "scale")
                self.assertEqual(req["object"]["kind"], "Scale")
                self.assertEqual(req["oldObject"]["spec"]["replicas"], 1)
            self.assertEqual(reviews["/scale-to-5"]["object"]["spec"]["replicas"], 3)
            # the validating webhook saw the mutated Scale
            self.assertEqual(reviews["/allow"]["object"]["spec"]["replicas"], 5)
            st, body, _ = call("GET", "/apis/apps/v1/namespaces/default/deployments/scaled")
            self.assertEqual(body["spec"]["replicas"], 5)
        finally:
            call("DELETE", VWC + "/scale-v")
            call("DELETE", MWC + "/scale-m")

    def test_dry_run_reaches_webhooks(self):
        configure(VWC, "dryrun", webhook("dryrun.example.com", "/allow", "dryrun"))
        rc, out, err = kubectl("apply", "--dry-run=server", "-f", "-",
                               stdin=json.dumps(configmap("dry", "dryrun")))
        self.assertEqual(rc, 0, err)
        path, review = [x for x in BACKEND.reviews if x[0].startswith("/allow?")][-1]
        self.assertIs(review["request"]["dryRun"], True)
        self.assertNotStored("dry")


if __name__ == "__main__":
    run_unittests()
