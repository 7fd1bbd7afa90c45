"""End-to-end tests of the audit log against a real `ckube server`
(--audit-policy-file, --audit-log-path), as kube-apiserver writes it: one
audit.k8s.io/v1 Event per JSON line per stage (RequestReceived,
ResponseStarted for watches, ResponseComplete), at the level of the
policy's first matching rule, with omitStages; the authorizer's decision
and reason as annotations; the impersonated user; failed authentication
(401) as one ResponseStarted event without a user; objectRef completed
from a create's or an update's body; requestObject of JSON, YAML and
protobuf bodies (kubectl 1.32 sends protobuf); responseObject of replies
from the watch cache; Audit-ID on every reply, auditing on or off; a bad
policy file refused at start."""
import http.client
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import BIN, Server, run_unittests  # noqa: E402

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
- level: None
  users: ["system:kube-controller-manager"]
- level: None
  userGroups: ["system:serviceaccounts"]
- level: RequestResponse
  omitStages: ["RequestReceived"]
  resources:
  - group: ""
    resources: ["configmaps"]
- level: Request
  verbs: ["create"]
  resources:
  - group: ""
    resources: ["secrets"]
- level: Metadata
"""

SERVER = Server("--token-auth-file", "TOKENS", "--audit-policy-file", "POLICY",
                "--audit-log-path", "LOG")

# kubectl 1.32 and later send built-in types as protobuf.
KUBECTL = "/usr/lib/google-cloud-sdk/bin/kubectl.1.32"
UUID = r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"


def setUpModule():
    tokens = os.path.join(SERVER.tmp, "tokens.csv")
    policy = os.path.join(SERVER.tmp, "policy.yaml")
    SERVER.audit_log = os.path.join(SERVER.tmp, "audit", "audit.log")
    with open(tokens, "w") as f:
        f.write("tok-bob,bob,uid-bob,\"dev\"\n")
    with open(policy, "w") as f:
        f.write(POLICY)
    SERVER.flags = ("--token-auth-file", tokens, "--audit-policy-file", policy,
                    "--audit-log-path", SERVER.audit_log)
    SERVER.start()


def tearDownModule():
    SERVER.stop()


def call(method, path, body=None, token=None, headers=None):
    ctx = SERVER.ssl_context(cert=token is None)
    conn = http.client.HTTPSConnection("127.0.0.1", SERVER.port, timeout=30, context=ctx)
    hdrs = {"Accept": "application/json", "User-Agent": "audit-e2e"}
    if token:
        hdrs["Authorization"] = "Bearer " + token
    if body is not None:
        hdrs["Content-Type"] = "application/json"
    hdrs.update(headers or {})
    conn.request(method, path, json.dumps(body) if body is not None else None, hdrs)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data


def events(audit_id=None, timeout=5.0, want=1, match=None):
    """The log's events (of one audit ID, or those `match` accepts),
    waiting up to timeout for at least `want` of them (the last stage is
    written as the reply goes)."""
    deadline = time.time() + timeout
    while True:
        out = []
        with open(SERVER.audit_log) as f:
            for line in f:
                e = json.loads(line)  # every line is one whole event
                if (audit_id is None or e["auditID"] == audit_id) and (match is None or match(e)):
                    out.append(e)
        if len(out) >= want or time.time() > deadline:
            return out
        time.sleep(0.05)


def completed(verb, uri_prefix, timeout=5.0):
    """The one ResponseComplete event of a kubectl request (its audit ID
    is the server's) by verb and the start of its requestURI: each test
    sends kubectl's requests to URIs no other test's kubectl uses."""
    evs = events(match=lambda e: e["stage"] == "ResponseComplete" and e["verb"] == verb
                 and e["requestURI"].startswith(uri_prefix)
                 and e["userAgent"].startswith("kubectl"), timeout=timeout)
    if len(evs) != 1:
        raise AssertionError("%d events for %s %s" % (len(evs), verb, uri_prefix))
    return evs[0]


def kubectl(*args, stdin=None):
    r = subprocess.run([KUBECTL, "--kubeconfig", SERVER.kubeconfig, *args], input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    if r.returncode:
        raise AssertionError("kubectl %s: %s" % (" ".join(args), r.stdout))
    return r.stdout


def curl(*args):
    """curl over TLS as the admin: (status, headers lower-cased, body)."""
    pki = os.path.join(SERVER.data, "pki")
    r = subprocess.run(["curl", "-sS", "--cacert", os.path.join(pki, "ca.crt"),
                        "--cert", os.path.join(pki, "admin.crt"),
                        "--key", os.path.join(pki, "admin.key"), "-D", "-", *args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if r.returncode:
        raise AssertionError("curl: " + r.stderr.decode())
    head, _, body = r.stdout.decode().partition("\r\n\r\n")
    lines = head.split("\r\n")
    hdrs = dict((k.strip().lower(), v.strip()) for k, _, v in
                (ln.partition(":") for ln in lines[1:]))
    return int(lines[0].split()[1]), hdrs, body


class AuditTest(unittest.TestCase):
    def test_request_response_level(self):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "audited"},
                "data": {"k": "v"}}
        st, hdrs, _ = call("POST", "/api/v1/namespaces/default/configmaps", body,
                           headers={"Audit-ID": "e2e-create-1"})
        self.assertEqual(st, 201)
        self.assertEqual(hdrs["audit-id"], "e2e-create-1")  # the client's, echoed
        evs = events("e2e-create-1")
        # RequestReceived is omitted by the rule: one event
        self.assertEqual([e["stage"] for e in evs], ["ResponseComplete"])
        e = evs[0]
        self.assertEqual((e["kind"], e["apiVersion"], e["level"], e["verb"]),
                         ("Event", "audit.k8s.io/v1", "RequestResponse", "create"))
        self.assertEqual(e["requestURI"], "/api/v1/namespaces/default/configmaps")
        self.assertEqual(e["user"]["username"], "system:admin")
        self.assertEqual(e["sourceIPs"], ["127.0.0.1"])
        self.assertEqual(e["userAgent"], "audit-e2e")
        # the name is the created object's (upstream's LogRequestObject)
        self.assertEqual(e["objectRef"], {"resource": "configmaps", "namespace": "default",
                                          "name": "audited", "apiVersion": "v1"})
        self.assertEqual(e["responseStatus"], {"metadata": {}, "code": 201})
        self.assertEqual(e["requestObject"], body)
        self.assertEqual(e["responseObject"]["data"], {"k": "v"})
        self.assertEqual(e["annotations"], {"authorization.k8s.io/decision": "allow"})
        for k in ("requestReceivedTimestamp", "stageTimestamp"):
            self.assertRegex(e[k], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

    def test_metadata_and_request_levels(self):
        st, hdrs, _ = call("GET", "/api/v1/namespaces")
        self.assertEqual(st, 200)
        evs = events(hdrs["audit-id"], want=2)
        self.assertEqual([e["stage"] for e in evs], ["RequestReceived", "ResponseComplete"])
        for e in evs:
            self.assertEqual(e["level"], "Metadata")
            self.assertNotIn("requestObject", e)
            self.assertNotIn("responseObject", e)
        self.assertNotIn("responseStatus", evs[0])
        self.assertEqual(evs[1]["responseStatus"], {"metadata": {}, "code": 200})
        self.assertEqual(evs[1]["objectRef"], {"resource": "namespaces", "apiVersion": "v1"})
        # Request: the body, not the reply
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"},
                  "stringData": {"a": "b"}}
        st, hdrs, _ = call("POST", "/api/v1/namespaces/default/secrets", secret)
        self.assertEqual(st, 201)
        e = events(hdrs["audit-id"], want=2)[-1]
        self.assertEqual((e["level"], e["requestObject"]), ("Request", secret))
        self.assertNotIn("responseObject", e)
        # None: health checks are not logged
        st, hdrs, _ = call("GET", "/healthz")
        self.assertEqual(events(hdrs["audit-id"], timeout=0.5, want=1), [])

    def test_denials_impersonation_and_failed_authentication(self):
        st, hdrs, _ = call("GET", "/api/v1/namespaces/default/pods", token="tok-bob")
        self.assertEqual(st, 403)
        e = events(hdrs["audit-id"], want=2)[-1]
        self.assertEqual(e["annotations"], {"authorization.k8s.io/decision": "forbid"})
        self.assertEqual(e["responseStatus"]["reason"], "Forbidden")
        self.assertEqual(e["responseStatus"]["code"], 403)
        self.assertEqual(e["user"], {"username": "bob", "uid": "uid-bob",
                                     "groups": ["dev", "system:authenticated"]})
        # impersonation: the level is the real user's, impersonatedUser set
        st, hdrs, _ = call("GET", "/api/v1/namespaces/default/pods",
                           headers={"Impersonate-User": "carol"})
        e = events(hdrs["audit-id"], want=2)[-1]
        self.assertEqual(e["user"]["username"], "system:admin")
        self.assertEqual(e["impersonatedUser"], {"username": "carol",
                                                 "groups": ["system:authenticated"]})
        self.assertEqual(e["annotations"]["authorization.k8s.io/decision"], "forbid")
        # an allow by RBAC carries its reason
        st, hdrs, _ = call("GET", "/api", token="tok-bob")
        e = events(hdrs["audit-id"], want=2)[-1]
        self.assertEqual(e["annotations"], {
            "authorization.k8s.io/decision": "allow",
            "authorization.k8s.io/reason": 'RBAC: allowed by ClusterRoleBinding '
                                           '"system:discovery" of ClusterRole "system:discovery" '
                                           'to Group "system:authenticated"'})
        # a wrong token: one ResponseStarted event, no user
        st, _, _ = call("GET", "/api/v1/namespaces?x=401", token="wrong",
                        headers={"Audit-ID": "e2e-401"})
        self.assertEqual(st, 401)
        evs = events("e2e-401")
        self.assertEqual(len(evs), 1)
        self.assertEqual((evs[0]["stage"], evs[0]["user"], evs[0]["responseStatus"]),
                         ("ResponseStarted", {}, {"metadata": {}, "status": "Failure",
                                                  "message": "Unauthorized",
                                                  "reason": "Unauthorized", "code": 401}))

    def test_watch_stages(self):
        st, hdrs, _ = call("GET", "/api/v1/namespaces?watch=1&timeoutSeconds=1")
        self.assertEqual(st, 200)
        evs = events(hdrs["audit-id"], want=3)
        self.assertEqual([e["stage"] for e in evs],
                         ["RequestReceived", "ResponseStarted", "ResponseComplete"])
        self.assertEqual(evs[0]["verb"], "watch")

    def test_object_ref_from_the_body(self):
        # Metadata: a create's name is its body's (kubectl 1.32: protobuf)
        kubectl("create", "serviceaccount", "sa-ref")
        e = completed("create", "/api/v1/namespaces/default/serviceaccounts?")
        self.assertEqual(e["level"], "Metadata")
        self.assertEqual(e["objectRef"], {"resource": "serviceaccounts", "namespace": "default",
                                          "name": "sa-ref", "apiVersion": "v1"})
        self.assertNotIn("requestObject", e)
        # ... not at RequestReceived: upstream's handler logs it later
        first = events(e["auditID"], want=2)[0]
        self.assertEqual((first["stage"], first["objectRef"]),
                         ("RequestReceived", {"resource": "serviceaccounts",
                                              "namespace": "default", "apiVersion": "v1"}))
        # a cluster-scoped create
        kubectl("create", "namespace", "audit-ns")
        e = completed("create", "/api/v1/namespaces?")
        self.assertEqual(e["objectRef"], {"resource": "namespaces", "name": "audit-ns",
                                          "apiVersion": "v1"})
        # generateName: no name yet when upstream logs the body
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}
        st, hdrs, data = call("POST", "/api/v1/namespaces/default/configmaps", body)
        self.assertEqual(st, 201)
        e = events(hdrs["audit-id"])[-1]
        self.assertNotIn("name", e["objectRef"])
        self.assertTrue(e["responseObject"]["metadata"]["name"].startswith("gen-"))
        # an update: the uid and resourceVersion the client sent, not the
        # stored object's new ones
        obj = json.loads(data)
        name, rv, uid = (obj["metadata"][k] for k in ("name", "resourceVersion", "uid"))
        obj["data"] = {"k": "v2"}
        st, hdrs, data = call("PUT", "/api/v1/namespaces/default/configmaps/" + name, obj)
        self.assertEqual(st, 200)
        e = events(hdrs["audit-id"])[-1]
        self.assertEqual(e["objectRef"], {"resource": "configmaps", "namespace": "default",
                                          "name": name, "uid": uid, "apiVersion": "v1",
                                          "resourceVersion": rv})
        self.assertNotEqual(json.loads(data)["metadata"]["resourceVersion"], rv)
        # refused by the authorizer: the handler never saw the body
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bobs"}}
        st, hdrs, _ = call("POST", "/api/v1/namespaces/default/secrets", secret, token="tok-bob")
        self.assertEqual(st, 403)
        e = events(hdrs["audit-id"], want=2)[-1]
        self.assertEqual(e["level"], "Request")
        self.assertNotIn("name", e["objectRef"])
        self.assertNotIn("requestObject", e)

    def test_request_object_yaml_and_protobuf(self):
        # kubectl 1.32 sends the Secret as protobuf: recorded as JSON
        kubectl("create", "secret", "generic", "s-pb", "--from-literal=k=v")
        e = completed("create", "/api/v1/namespaces/default/secrets?")
        self.assertEqual(e["level"], "Request")
        ro = e["requestObject"]
        self.assertEqual((ro["apiVersion"], ro["kind"], ro["metadata"]["name"], ro["data"]),
                         ("v1", "Secret", "s-pb", {"k": "dg=="}))
        self.assertEqual(e["objectRef"]["name"], "s-pb")
        # a YAML body (curl)
        yaml_body = ("apiVersion: v1\nkind: Secret\nmetadata:\n  name: s-yaml\n"
                     "  labels: {a: b}\nstringData:\n  k: v\n  num: \"1\"\n")
        st, hdrs, _ = curl("-H", "Content-Type: application/yaml", "--data-binary", yaml_body,
                           "%s/api/v1/namespaces/default/secrets" % SERVER.url)
        self.assertEqual(st, 201)
        e = events(hdrs["audit-id"], want=2)[-1]
        self.assertEqual(e["requestObject"], {
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s-yaml", "labels": {"a": "b"}},
            "stringData": {"k": "v", "num": "1"}})
        self.assertEqual(e["objectRef"]["name"], "s-yaml")
        # a server-side apply's YAML patch, as JSON (configmaps: RequestResponse)
        kubectl("apply", "--server-side", "-f", "-",
                stdin="apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n"
                      "data:\n  k: v\n")
        e = completed("patch", "/api/v1/namespaces/default/configmaps/applied?")
        self.assertEqual(e["requestObject"], {"apiVersion": "v1", "kind": "ConfigMap",
                                              "metadata": {"name": "applied",
                                                           "namespace": "default"},
                                              "data": {"k": "v"}})
        # a patch leaves objectRef as the URL gave it
        self.assertEqual(e["objectRef"], {"resource": "configmaps", "namespace": "default",
                                          "name": "applied", "apiVersion": "v1"})

    def test_response_object_from_the_watch_cache(self):
        st, hdrs, _ = call("POST", "/api/v1/namespaces/default/configmaps",
                           {"metadata": {"name": "cached"}, "data": {"k": "v"}})
        self.assertEqual(st, 201)
        st, hdrs, data = call("GET", "/api/v1/namespaces/default/configmaps/cached")
        self.assertEqual(st, 200)
        e = events(hdrs["audit-id"])[-1]
        self.assertEqual(e["responseObject"], json.loads(data))
        # kubectl's Table, and a plain list
        kubectl("get", "configmap", "cached")
        e = completed("get", "/api/v1/namespaces/default/configmaps/cached")
        self.assertEqual(e["responseObject"]["kind"], "Table")
        st, hdrs, data = call("GET", "/api/v1/namespaces/default/configmaps?limit=500")
        e = events(hdrs["audit-id"])[-1]
        self.assertEqual(e["responseObject"], json.loads(data))

    # A list over 256 KiB is streamed from its cache snapshot
    # (endpoints/handlers/list_stream.c), which keeps a copy of what it
    # sends for the audit (up to 64 MiB) and hands it over at the end.
    def test_response_object_of_a_streamed_list(self):
        st, _, _ = call("POST", "/api/v1/namespaces", {"metadata": {"name": "audit-big"}})
        self.assertEqual(st, 201)
        big = "x" * 30000
        for i in range(12):
            st, _, _ = call("POST", "/api/v1/namespaces/audit-big/configmaps",
                            {"metadata": {"name": "big-%d" % i}, "data": {"k": big}})
            self.assertEqual(st, 201)
        st, hdrs, data = call("GET", "/api/v1/namespaces/audit-big/configmaps")
        self.assertEqual(st, 200)
        self.assertGreater(len(data), 256 * 1024)
        e = events(hdrs["audit-id"])[-1]
        self.assertEqual(e["stage"], "ResponseComplete")
        self.assertEqual(e["responseObject"], json.loads(data))

    def test_audit_id_on_every_reply(self):
        # audited server: a 401 carries it too, the ID of its event
        st, hdrs, _ = call("GET", "/api/v1/namespaces?x=401b", token="wrong")
        self.assertEqual(st, 401)
        self.assertRegex(hdrs["audit-id"], UUID)
        self.assertEqual([e["stage"] for e in events(hdrs["audit-id"])], ["ResponseStarted"])
        # a request the policy does not record
        st, hdrs, _ = call("GET", "/readyz", headers={"Audit-ID": "not-recorded"})
        self.assertEqual((st, hdrs["audit-id"]), (200, "not-recorded"))
        # auditing off: upstream's WithAuditInit is in every handler chain
        plain = Server()
        try:
            plain.start()
            ctx = plain.ssl_context()
            for path, hdr, want in (("/version", None, 200),
                                    ("/api/v1/namespaces/default", "client-id", 200),
                                    ("/api/v1/namespaces/nope", None, 404)):
                conn = http.client.HTTPSConnection("127.0.0.1", plain.port, timeout=30,
                                                   context=ctx)
                conn.request("GET", path, headers={"Audit-ID": hdr} if hdr else {})
                r = conn.getresponse()
                r.read()
                conn.close()
                self.assertEqual(r.status, want)
                if hdr:
                    self.assertEqual(r.getheader("Audit-ID"), hdr)
                else:
                    self.assertRegex(r.getheader("Audit-ID") or "", UUID)
            # a 401 (an unknown token), unaudited
            conn = http.client.HTTPSConnection("127.0.0.1", plain.port, timeout=30,
                                               context=plain.ssl_context(cert=False))
            conn.request("GET", "/api", headers={"Authorization": "Bearer nobody"})
            r = conn.getresponse()
            r.read()
            conn.close()
            self.assertEqual(r.status, 401)
            self.assertRegex(r.getheader("Audit-ID") or "", UUID)
        finally:
            plain.stop()

    def test_bad_policy_refused(self):
        bad = os.path.join(SERVER.tmp, "bad-policy.yaml")
        with open(bad, "w") as f:
            f.write("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n")
        r = subprocess.run([BIN, "server", "--data-dir", os.path.join(SERVER.tmp, "bad"),
                            "--listen", "127.0.0.1:1", "--audit-policy-file", bad],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("loading audit policy file: ", r.stdout)
        self.assertIn("from file " + bad, r.stdout)
        r = subprocess.run([BIN, "server", "--data-dir", os.path.join(SERVER.tmp, "bad"),
                            "--audit-log-format", "yaml"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertIn('invalid audit log format yaml, allowed formats are "legacy,json"',
                      r.stdout)


if __name__ == "__main__":
    run_unittests()
