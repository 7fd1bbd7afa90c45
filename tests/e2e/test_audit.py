"""End-to-end tests of the audit log against a real `ckube server`
(--audit-policy-file, --audit-log-path), as kube-apiserver writes it: one
audit.k8s.io/v1 Event per JSON line per stage (RequestReceived,
ResponseStarted for watches, ResponseComplete), at the level of the
policy's first matching rule, with omitStages; the authorizer's decision
and reason as annotations; the impersonated user; failed authentication
(401) as one ResponseStarted event without a user; Audit-ID echoed; a bad
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


def events(audit_id=None, timeout=5.0, want=1):
    """The log's events (of one audit ID), waiting up to timeout for at
    least `want` of them (the last stage is written as the reply goes)."""
    deadline = time.time() + timeout
    while True:
        out = []
        with open(SERVER.audit_log) as f:
            for line in f:
                e = json.loads(line)  # every line is one whole event
                if audit_id is None or e["auditID"] == audit_id:
                    out.append(e)
        if len(out) >= want or time.time() > deadline:
            return out
        time.sleep(0.05)


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
        self.assertEqual(e["objectRef"], {"resource": "configmaps", "namespace": "default",
                                          "apiVersion": "v1"})
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
