"""End-to-end tests of ServiceAccount tokens against a real `ckube
server`, as kube-apiserver issues and checks them: `kubectl create token`
(the PATH kubectl, 1.27 and 1.33) and the TokenRequest it sends, the
token used without a client certificate (http.client, curl, a kubeconfig
that has only `token:` and `kubectl auth whoami`), revocation by deleting
the ServiceAccount (a new one of the same name does not bring the token
back) or the pod or secret the token is bound to, TokenRequest's refusals
in upstream's words, TokenReview (ServiceAccount tokens, a
--token-auth-file token, spec.audiences), --service-account-issuer and
--api-audiences, the issuer's discovery documents (the JWKS verifies a
token's signature), and forged tokens: a changed payload, alg none,
another key, expired and not-yet-valid ones signed with the server's own
key (pki/sa.key), all 401 with kube-apiserver's bare Status.

Signatures are checked and made with the `cryptography` module when
/usr/bin/python3 has it, else with the openssl CLI."""
import atexit
import base64
import hashlib
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import BIN, SRC, Server, run_unittests  # noqa: E402

try:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    HAVE_CRYPTOGRAPHY = True
except ImportError:  # the openssl CLI does it
    HAVE_CRYPTOGRAPHY = False

SDK = "/usr/lib/google-cloud-sdk/bin"
KUBECTLS = {"path": "kubectl", "1.27": os.path.join(SDK, "kubectl.1.27"),
            "1.33": os.path.join(SDK, "kubectl.1.33")}
ISSUER = "https://kubernetes.default.svc.cluster.local"
NS = "sat"
SSR = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
TR = "/apis/authentication.k8s.io/v1/tokenreviews"
UNAUTHORIZED = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                b'"message":"Unauthorized","reason":"Unauthorized","code":401}')
SA_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:" + NS, "system:authenticated"]

_base = os.environ.get("CKUBE_TEST_TMP", "/tmp")
os.makedirs(_base, exist_ok=True)
FIX = tempfile.mkdtemp(prefix="e2e-sat.", dir=_base)
atexit.register(shutil.rmtree, FIX, True)
TOKENS = os.path.join(FIX, "tokens.csv")

# S: the defaults, with a token file; I: another issuer and the API's
# audiences set by flag.
S = Server("--controller-manager=false", "--token-auth-file", TOKENS)
I_ISSUER = "https://issuer.example.com/cluster-i"
I = Server("--controller-manager=false", "--service-account-issuer", I_ISSUER,
           "--api-audiences", "api-a,api-b")


def setUpModule():
    with open(TOKENS, "w") as f:
        f.write('tok-alice,alice,uid-alice,"dev"\n')
    S.start()
    I.start()
    for s in (S, I):
        rc, out, err = kubectl(s, None, "create", "namespace", NS)
        if rc != 0:
            raise RuntimeError("create namespace: " + err)
        # RBAC: the namespace's ServiceAccounts may read what the tests
        # read with their tokens (authentication is what is tested here;
        # test_rbac_authorization.py tests the denials)
        admin(s, "create", "role", "sa-reader", "-n", NS, "--verb=get,list",
              "--resource=serviceaccounts,pods")
        admin(s, "create", "rolebinding", "sa-reader", "-n", NS, "--role=sa-reader",
              "--group=system:serviceaccounts:" + NS)
        for _ in range(100):  # the authorizer sees it through the watch cache
            if kubectl(s, None, "auth", "can-i", "list", "pods", "-n", NS,
                       "--as=system:serviceaccount:%s:x" % NS)[0] == 0:
                break
            time.sleep(0.05)


def tearDownModule():
    for s in (S, I):
        s.stop()


# ---- helpers -------------------------------------------------------------

def kubectl(server, kubeconfig, *args, version="path", stdin=None):
    """(rc, stdout, stderr) of kubectl `version` with `kubeconfig` (None:
    the server's admin kubeconfig)."""
    return server.kubectl(*args, stdin=stdin, binary=KUBECTLS[version], kubeconfig=kubeconfig)


def admin(server, *args, stdin=None):
    rc, out, err = kubectl(server, None, *args, stdin=stdin)
    if rc != 0:
        raise AssertionError("kubectl %s: %s" % (" ".join(args), err))
    return out


def create_token(server, sa, *flags, version="path"):
    rc, out, err = kubectl(server, None, "create", "token", sa, "-n", NS, *flags,
                           version=version)
    if rc != 0:
        raise AssertionError("kubectl %s create token %s: %s" % (version, sa, err))
    return out.strip()


def new_sa(server, name):
    """Creates ServiceAccount NS/name; returns its UID."""
    admin(server, "create", "serviceaccount", name, "-n", NS)
    return admin(server, "get", "serviceaccount", name, "-n", NS,
                 "-o", "jsonpath={.metadata.uid}")


def call(server, method, path, body=None, token=None, cert=None, authorization=None):
    """(status, raw body, headers) of a request. With a token (or an
    Authorization header) and no `cert`, no client certificate is sent;
    otherwise as the admin."""
    if cert is None:
        cert = token is None and authorization is None
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=30,
                                       context=server.ssl_context(cert=cert))
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
        body = json.dumps(body).encode() if not isinstance(body, bytes) else body
    if token is not None:
        headers["Authorization"] = "Bearer " + token
    if authorization is not None:
        headers["Authorization"] = authorization
    try:
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.read(), dict((k.lower(), v) for k, v in r.getheaders())
    finally:
        conn.close()


def call_json(server, method, path, body=None, **kw):
    status, raw, _ = call(server, method, path, body, **kw)
    return status, json.loads(raw or b"null")


def whoami(server, token):
    """(status, userInfo or the raw body) of a SelfSubjectReview with `token`."""
    status, raw, _ = call(server, "POST", SSR, {"apiVersion": "authentication.k8s.io/v1",
                                                 "kind": "SelfSubjectReview"}, token=token)
    if status != 201:
        return status, raw
    return status, json.loads(raw)["status"]["userInfo"]


def token_kubeconfig(server, token, name):
    """A kubeconfig with only a bearer token (and the cluster CA)."""
    path = os.path.join(FIX, name + ".kubeconfig")
    with open(path, "w") as f:
        f.write("""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: u
  user:
    token: %s
contexts:
- name: x
  context: {cluster: c, user: u, namespace: %s}
current-context: x
""" % (server.url, os.path.join(server.data, "pki", "ca.crt"), token, NS))
    return path


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jwt_parts(token):
    h, p, s = token.split(".")
    return json.loads(b64url_decode(h)), json.loads(b64url_decode(p)), b64url_decode(s)


def wait_log(server, pattern, timeout=5):
    deadline = time.time() + timeout
    while True:
        log = server.logtail(100000)
        if re.search(pattern, log):
            return log
        if time.time() > deadline:
            raise AssertionError("no %r in the log:\n%s" % (pattern, server.logtail()))
        time.sleep(0.05)


def rs256_sign(key_file, data):
    """An RS256 signature of `data` with the PEM private key `key_file`."""
    if HAVE_CRYPTOGRAPHY:
        with open(key_file, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
        return key.sign(data, padding.PKCS1v15(), hashes.SHA256())
    r = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_file], input=data,
                       stdout=subprocess.PIPE, check=True, timeout=30)
    return r.stdout


def signed_token(key_file, claims, header=None):
    header = header or {"alg": "RS256"}
    signing = (b64url(json.dumps(header, separators=(",", ":")).encode()) + "." +
               b64url(json.dumps(claims, separators=(",", ":")).encode()))
    return signing + "." + b64url(rs256_sign(key_file, signing.encode()))


def sa_claims(sa, uid, now, exp_in=3600, aud=None, issuer=ISSUER):
    """The claims kube-apiserver puts in a token for NS/sa (uid)."""
    return {"aud": aud or [issuer], "exp": now + exp_in, "iat": now, "nbf": now, "iss": issuer,
            "jti": "hand-made-jti", "sub": "system:serviceaccount:%s:%s" % (NS, sa),
            "kubernetes.io": {"namespace": NS, "serviceaccount": {"name": sa, "uid": uid}}}


class ServiceAccountTokensTest(unittest.TestCase):
    def assertUnauthorized(self, server, token, what=""):
        status, raw, headers = call(server, "GET", "/api/v1/namespaces", token=token)
        self.assertEqual((status, raw), (401, UNAUTHORIZED), what)
        self.assertEqual(headers.get("content-type"), "application/json", what)

    def assertAuthorized(self, server, token, what=""):
        status, raw, _ = call(server, "GET", "/api/v1/namespaces/%s/serviceaccounts" % NS,
                              token=token)
        self.assertEqual(status, 200, "%s: %s" % (what, raw[:300]))

    # ---- kubectl create token, and the token in use ----------------------

    def test_create_token_and_use_it(self):
        uid = new_sa(S, "bot")
        for version in KUBECTLS:
            t0 = int(time.time())
            token = create_token(S, "bot", version=version)
            header, claims, sig = jwt_parts(token)
            self.assertEqual(header["alg"], "RS256", version)
            self.assertEqual(len(header["kid"]), 43, version)
            self.assertEqual(len(sig), 256, version)  # RSA 2048
            self.assertEqual(claims["iss"], ISSUER)
            self.assertEqual(claims["aud"], [ISSUER])
            self.assertEqual(claims["sub"], "system:serviceaccount:%s:bot" % NS)
            self.assertEqual(claims["kubernetes.io"],
                             {"namespace": NS, "serviceaccount": {"name": "bot", "uid": uid}})
            self.assertEqual(claims["exp"] - claims["iat"], 3600)
            self.assertEqual(claims["nbf"], claims["iat"])
            self.assertLessEqual(abs(claims["iat"] - t0), 5)
            self.assertRegex(claims["jti"], r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-"
                                            r"[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
            # Without the client certificate, trusting the cluster CA only.
            self.assertAuthorized(S, token, version)
            status, info = whoami(S, token)
            self.assertEqual(status, 201, info)
            self.assertEqual(info, {
                "username": "system:serviceaccount:%s:bot" % NS, "uid": uid,
                "groups": SA_GROUPS,
                "extra": {"authentication.kubernetes.io/credential-id":
                          ["JTI=" + claims["jti"]]}}, version)

        # --duration and --audience
        token = create_token(S, "bot", "--duration", "20m", "--audience", "aud-1",
                             "--audience", "aud-2")
        _, claims, _ = jwt_parts(token)
        self.assertEqual(claims["exp"] - claims["iat"], 1200)
        self.assertEqual(claims["aud"], ["aud-1", "aud-2"])
        # not for this API: its audience is the issuer
        self.assertUnauthorized(S, token, "a token for other audiences")
        # klog quotes the value as Go's %q: inner quotes are escaped
        wait_log(S, re.escape('"Unable to authenticate the request" err="token audiences '
                              '[\\"aud-1\\" \\"aud-2\\"] is invalid for the target audiences '
                              '[\\"%s\\"]"' % ISSUER))
        token = create_token(S, "bot", "--duration", "20m", "--audience", "aud-1",
                             "--audience", ISSUER)
        self.assertAuthorized(S, token, "one audience is the API's")

    def test_curl_with_token(self):
        if not shutil.which("curl"):
            self.skipTest("no curl")
        uid = new_sa(S, "curly")
        token = create_token(S, "curly")
        ca = os.path.join(S.data, "pki", "ca.crt")
        r = subprocess.run(["curl", "-sS", "--cacert", ca, "-H", "Authorization: Bearer " + token,
                            "-H", "Content-Type: application/json", "-X", "POST", "-d",
                            '{"apiVersion":"authentication.k8s.io/v1",'
                            '"kind":"SelfSubjectReview"}', S.url + SSR],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        info = json.loads(r.stdout)["status"]["userInfo"]
        self.assertEqual((info["username"], info["uid"], info["groups"]),
                         ("system:serviceaccount:%s:curly" % NS, uid, SA_GROUPS))
        admin(S, "delete", "serviceaccount", "curly", "-n", NS)
        r = subprocess.run(["curl", "-sS", "--cacert", ca, "-H", "Authorization: Bearer " + token,
                            "-w", "\n%{http_code}", S.url + "/api/v1/namespaces"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(r.stdout, UNAUTHORIZED + b"\n401")

    def test_kubeconfig_with_only_a_token(self):
        uid = new_sa(S, "kc")
        token = create_token(S, "kc")
        kc = token_kubeconfig(S, token, "kc")
        for version in KUBECTLS:
            rc, out, err = kubectl(S, kc, "auth", "whoami", "-o", "json", version=version)
            self.assertEqual(rc, 0, version + err)
            info = json.loads(out)["status"]["userInfo"]
            self.assertEqual((info["username"], info["uid"], info["groups"]),
                             ("system:serviceaccount:%s:kc" % NS, uid, SA_GROUPS), version)
            self.assertEqual(list(info["extra"]), ["authentication.kubernetes.io/credential-id"])
            rc, out, err = kubectl(S, kc, "auth", "whoami", version=version)
            self.assertEqual(rc, 0, version + err)
            self.assertRegex(out, r"Username\s+system:serviceaccount:%s:kc\n" % NS)
            rc, out, err = kubectl(S, kc, "get", "serviceaccount", "kc", "-o", "name",
                                   version=version)
            self.assertEqual((rc, out.strip()), (0, "serviceaccount/kc"), version + err)

    # ---- revocation -----------------------------------------------------

    def test_deleting_the_serviceaccount_revokes(self):
        uid = new_sa(S, "gone")
        token = create_token(S, "gone")
        kc = token_kubeconfig(S, token, "gone")
        self.assertAuthorized(S, token)
        admin(S, "delete", "serviceaccount", "gone", "-n", NS)
        self.assertUnauthorized(S, token, "the ServiceAccount is gone")
        wait_log(S, r'"Unable to authenticate the request" err="serviceaccounts \\?"gone\\?" '
                    r'not found"')
        for version in KUBECTLS:
            for args in (("auth", "whoami"), ("get", "--raw", "/api/v1/namespaces")):
                rc, out, err = kubectl(S, kc, *args, version=version)
                self.assertEqual((rc, err.splitlines()[-1:]),
                                 (1, ["error: You must be logged in to the server "
                                      "(Unauthorized)"]), "%s %s" % (version, args))
            # through discovery, client-go words the same 401 its own way
            rc, out, err = kubectl(S, kc, "get", "pods", version=version)
            self.assertEqual(rc, 1, version)
            self.assertRegex(err.splitlines()[-1],
                             r"^error: You must be logged in to the server \((Unauthorized|the "
                             r"server has asked for the client to provide credentials)\)$")
        # A ServiceAccount of the same name is another one (another UID).
        uid2 = new_sa(S, "gone")
        self.assertNotEqual(uid, uid2)
        self.assertUnauthorized(S, token, "a new ServiceAccount of the same name")
        wait_log(S, re.escape('"Unable to authenticate the request" err="service account UID '
                              '(%s) does not match claim (%s)"' % (uid2, uid)))
        status, review = call_json(S, "POST", TR, {"spec": {"token": token}})
        self.assertEqual(status, 201)
        self.assertEqual(review["status"], {
            "user": {}, "error": "service account UID (%s) does not match claim (%s)"
            % (uid2, uid)})
        # ... whose own tokens work
        token2 = create_token(S, "gone")
        self.assertAuthorized(S, token2)
        status, info = whoami(S, token2)
        self.assertEqual(info["uid"], uid2)

    def test_pod_bound_token(self):
        sa_uid = new_sa(S, "runner")
        admin(S, "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": NS},
            "spec": {"serviceAccountName": "runner",
                     "containers": [{"name": "c", "image": "nginx"}]}}))
        pod_uid = admin(S, "get", "pod", "web", "-n", NS, "-o", "jsonpath={.metadata.uid}")
        for version in ("1.27", "1.33"):
            token = create_token(S, "runner", "--bound-object-kind", "Pod",
                                 "--bound-object-name", "web", version=version)
            _, claims, _ = jwt_parts(token)
            self.assertEqual(claims["kubernetes.io"], {
                "namespace": NS, "serviceaccount": {"name": "runner", "uid": sa_uid},
                "pod": {"name": "web", "uid": pod_uid}}, version)
            status, info = whoami(S, token)
            self.assertEqual(status, 201, info)
            self.assertEqual(info["extra"], {
                "authentication.kubernetes.io/credential-id": ["JTI=" + claims["jti"]],
                "authentication.kubernetes.io/pod-name": ["web"],
                "authentication.kubernetes.io/pod-uid": [pod_uid]}, version)
        # with the pod's UID given, as the kubelet asks
        token = create_token(S, "runner", "--bound-object-kind", "Pod", "--bound-object-name",
                             "web", "--bound-object-uid", pod_uid)
        self.assertAuthorized(S, token)
        admin(S, "delete", "pod", "web", "-n", NS, "--wait=true")
        self.assertUnauthorized(S, token, "the pod is gone")
        wait_log(S, r'"Unable to authenticate the request" err="pods \\?"web\\?" not found"')
        # a pod of the same name is another pod
        admin(S, "run", "web", "-n", NS, "--image=nginx",
              '--overrides={"spec":{"serviceAccountName":"runner"}}')
        new_uid = admin(S, "get", "pod", "web", "-n", NS, "-o", "jsonpath={.metadata.uid}")
        self.assertUnauthorized(S, token, "a new pod of the same name")
        wait_log(S, re.escape('err="pod UID (%s) does not match claim (%s)"'
                              % (new_uid, pod_uid)))
        # the ServiceAccount's unbound tokens live on
        self.assertAuthorized(S, create_token(S, "runner"))

    def test_secret_bound_token(self):
        new_sa(S, "keeper")
        admin(S, "create", "secret", "generic", "held", "-n", NS, "--from-literal=k=v")
        secret_uid = admin(S, "get", "secret", "held", "-n", NS, "-o",
                           "jsonpath={.metadata.uid}")
        token = create_token(S, "keeper", "--bound-object-kind", "Secret",
                             "--bound-object-name", "held")
        _, claims, _ = jwt_parts(token)
        self.assertEqual(claims["kubernetes.io"]["secret"], {"name": "held", "uid": secret_uid})
        self.assertNotIn("pod", claims["kubernetes.io"])
        status, info = whoami(S, token)
        self.assertEqual(status, 201, info)
        self.assertEqual(list(info["extra"]), ["authentication.kubernetes.io/credential-id"])
        admin(S, "delete", "secret", "held", "-n", NS)
        self.assertUnauthorized(S, token, "the secret is gone")
        wait_log(S, r'err="secrets \\?"held\\?" not found"')

    # ---- TokenRequest's refusals ------------------------------------------

    def token_request(self, sa, spec, server=None):
        return call_json(server or S, "POST",
                         "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (NS, sa),
                         {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                          "spec": spec})

    def test_token_request(self):
        uid = new_sa(S, "tr")
        t0 = int(time.time())
        status, tr = self.token_request("tr", {})
        self.assertEqual(status, 201, tr)
        self.assertEqual((tr["kind"], tr["apiVersion"]),
                         ("TokenRequest", "authentication.k8s.io/v1"))
        self.assertEqual((tr["metadata"]["name"], tr["metadata"]["namespace"]), ("tr", NS))
        self.assertEqual(tr["spec"], {"audiences": [ISSUER], "expirationSeconds": 3600,
                                      "boundObjectRef": None})
        _, claims, _ = jwt_parts(tr["status"]["token"])
        self.assertEqual(claims["kubernetes.io"]["serviceaccount"], {"name": "tr", "uid": uid})
        exp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(claims["exp"]))
        self.assertEqual(tr["status"]["expirationTimestamp"], exp)
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(claims["iat"]))
        self.assertEqual(tr["metadata"]["creationTimestamp"], created)
        self.assertLessEqual(abs(claims["iat"] - t0), 5)
        # the bounds themselves are allowed
        for secs in (600, 2 ** 32):
            status, tr = self.token_request("tr", {"expirationSeconds": secs})
            self.assertEqual(status, 201, tr)
            _, claims, _ = jwt_parts(tr["status"]["token"])
            self.assertEqual(claims["exp"] - claims["iat"], secs)

    def test_token_request_errors(self):
        new_sa(S, "err")
        admin(S, "run", "errpod", "-n", NS, "--image=nginx",
              '--overrides={"spec":{"serviceAccountName":"err"}}')
        admin(S, "run", "otherpod", "-n", NS, "--image=nginx")  # runs as "default"

        def invalid(secs, why):
            msg = ("TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: "
                   "Invalid value: %d: may not specify a duration %s" % (secs, why))
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": msg, "reason": "Invalid", "code": 422,
                    "details": {"group": "authentication.k8s.io", "kind": "TokenRequest",
                                "causes": [{"reason": "FieldValueInvalid",
                                            "message": "Invalid value: %d: may not specify a "
                                                       "duration %s" % (secs, why),
                                            "field": "spec.expirationSeconds"}]}}

        status, st = self.token_request("err", {"expirationSeconds": 599})
        self.assertEqual((status, st), (422, invalid(599, "less than 10 minutes")))
        status, st = self.token_request("err", {"expirationSeconds": 2 ** 32 + 1})
        self.assertEqual((status, st), (422, invalid(2 ** 32 + 1, "larger than 2^32 seconds")))
        for version in KUBECTLS:
            rc, out, err = kubectl(S, None, "create", "token", "err", "-n", NS, "--duration",
                                   "5m", version=version)
            self.assertEqual((rc, err), (1, 'error: failed to create token: '
                                            'TokenRequest.authentication.k8s.io "" is invalid: '
                                            'spec.expirationSeconds: Invalid value: 300: may not '
                                            'specify a duration less than 10 minutes\n'), version)

        # no such ServiceAccount (before any other check, as upstream)
        status, st = self.token_request("nobody", {"expirationSeconds": 1})
        self.assertEqual((status, st["message"], st["reason"], st["details"]),
                         (404, 'serviceaccounts "nobody" not found', "NotFound",
                          {"name": "nobody", "kind": "serviceaccounts"}))
        rc, out, err = kubectl(S, None, "create", "token", "nobody", "-n", NS)
        self.assertEqual((rc, err), (1, 'error: failed to create token: serviceaccounts '
                                        '"nobody" not found\n'))

        # a name or namespace in the body must be the URL's (checked
        # first, as upstream: even for a ServiceAccount that does not exist)
        for sa, meta, field, value, what in (
                ("err", {"name": "other"}, "metadata.name", "other", "name"),
                ("nobody", {"name": "x"}, "metadata.name", "x", "name"),
                ("err", {"name": "err", "namespace": "elsewhere"}, "metadata.namespace",
                 "elsewhere", "namespace")):
            status, st = call_json(S, "POST",
                                   "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (NS, sa),
                                   {"apiVersion": "authentication.k8s.io/v1",
                                    "kind": "TokenRequest", "metadata": meta, "spec": {}})
            why = 'Invalid value: "%s": must match the service account %s if specified' % (
                value, what)
            self.assertEqual((status, st["message"], st["details"]),
                             (422, 'TokenRequest.authentication.k8s.io "%s" is invalid: %s: %s'
                              % (sa, field, why),
                              {"name": sa, "group": "authentication.k8s.io",
                               "kind": "TokenRequest",
                               "causes": [{"reason": "FieldValueInvalid", "message": why,
                                           "field": field}]}))
        # matching ones are fine
        status, tr = call_json(S, "POST",
                               "/api/v1/namespaces/%s/serviceaccounts/err/token" % NS,
                               {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "metadata": {"name": "err", "namespace": NS}, "spec": {}})
        self.assertEqual(status, 201, tr)

        # the bound object
        def bound(kind, name, uid=None, api_version="v1"):
            ref = {"kind": kind, "apiVersion": api_version, "name": name}
            if uid:
                ref["uid"] = uid
            return self.token_request("err", {"boundObjectRef": ref})

        status, st = bound("Pod", "nope")
        self.assertEqual((status, st["message"], st["details"]),
                         (404, 'pods "nope" not found', {"name": "nope", "kind": "pods"}))
        status, st = bound("Secret", "nope")
        self.assertEqual((status, st["message"]), (404, 'secrets "nope" not found'))
        for version in ("1.27", "1.33"):
            rc, out, err = kubectl(S, None, "create", "token", "err", "-n", NS,
                                   "--bound-object-kind", "Pod", "--bound-object-name", "nope",
                                   version=version)
            self.assertEqual((rc, err), (1, 'error: failed to create token: pods "nope" not '
                                            'found\n'), version)
        status, st = bound("Pod", "errpod", uid="not-the-uid")
        msg = ('Operation cannot be fulfilled on Pod "errpod": the UID in the bound object '
               'reference (not-the-uid) does not match the UID in record. The object might have '
               'been deleted and then recreated')
        self.assertEqual((status, st["reason"], st["message"], st["details"]),
                         (409, "Conflict", msg, {"name": "errpod", "kind": "Pod"}))
        rc, out, err = kubectl(S, None, "create", "token", "err", "-n", NS, "--bound-object-kind",
                               "Pod", "--bound-object-name", "errpod", "--bound-object-uid",
                               "not-the-uid")
        self.assertEqual((rc, err), (1, "error: failed to create token: " + msg + "\n"))
        # a pod that runs as another ServiceAccount
        status, st = bound("Pod", "otherpod")
        msg = ('cannot bind token for serviceaccount "err" to pod running with different '
               'serviceaccount name.')
        self.assertEqual((status, st["reason"], st["message"]), (400, "BadRequest", msg))
        # kinds upstream does not bind (kubectl refuses most before asking)
        status, st = bound("ConfigMap", "x")
        self.assertEqual(st, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Failure", "reason": "BadRequest", "code": 400,
                              "message": "cannot bind token to object of type /v1, "
                                         "Kind=ConfigMap"})
        status, st = bound("Pod", "errpod", api_version="apps/v1")
        self.assertEqual((status, st["message"]),
                         (400, "cannot bind token to object of type apps/v1, Kind=Pod"))
        rc, out, err = kubectl(S, None, "create", "token", "err", "-n", NS,
                               "--bound-object-kind", "ConfigMap", "--bound-object-name", "x",
                               version="1.27")
        self.assertEqual((rc, err), (1, "error: supported --bound-object-kind values are Pod, "
                                        "Secret\n"))
        # nothing was stored: TokenRequest is create-only
        status, raw, _ = call(S, "GET", "/api/v1/namespaces/%s/serviceaccounts/err/token" % NS)
        self.assertEqual(status, 405, raw)

    # ---- TokenReview ------------------------------------------------------

    def review(self, token, audiences=None, server=None):
        spec = {"token": token}
        if audiences is not None:
            spec["audiences"] = audiences
        status, r = call_json(server or S, "POST", TR, {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec})
        self.assertEqual(status, 201, r)
        self.assertEqual(r["kind"], "TokenReview")
        self.assertEqual(r["spec"]["token"], token)
        return r["status"]

    def test_token_review(self):
        uid = new_sa(S, "rev")
        token = create_token(S, "rev")
        _, claims, _ = jwt_parts(token)
        user = {"username": "system:serviceaccount:%s:rev" % NS, "uid": uid,
                "groups": SA_GROUPS,
                "extra": {"authentication.kubernetes.io/credential-id": ["JTI=" + claims["jti"]]}}
        self.assertEqual(self.review(token),
                         {"authenticated": True, "user": user, "audiences": [ISSUER]})
        self.assertEqual(self.review(token, [ISSUER]),
                         {"authenticated": True, "user": user, "audiences": [ISSUER]})
        # a token for other audiences
        other = create_token(S, "rev", "--audience", "x")
        self.assertEqual(self.review(other), {
            "user": {}, "error": 'token audiences ["x"] is invalid for the target audiences '
                                 '["%s"]' % ISSUER})
        self.assertEqual(self.review(other, ["y", "z"]), {
            "user": {}, "error": 'token audiences ["x"] is invalid for the target audiences '
                                 '["y" "z"]'})
        st = self.review(other, ["x"])
        self.assertEqual((st["authenticated"], st["user"]["username"], st["audiences"]),
                         (True, user["username"], ["x"]))
        # bad tokens
        self.assertEqual(self.review("garbage"), {"user": {}, "error": "invalid bearer token"})
        h, p, s = token.split(".")
        forged = h + "." + b64url(json.dumps(dict(claims, sub="x")).encode()) + "." + s
        st = self.review(forged)
        self.assertNotIn("authenticated", st)
        self.assertEqual(st["user"], {})
        self.assertTrue(st["error"], st)
        # the token file's tokens are the API's audiences' only
        alice = {"username": "alice", "uid": "uid-alice", "groups": ["dev", "system:authenticated"]}
        self.assertEqual(self.review("tok-alice"),
                         {"authenticated": True, "user": alice, "audiences": [ISSUER]})
        self.assertEqual(self.review("tok-alice", [ISSUER]),
                         {"authenticated": True, "user": alice, "audiences": [ISSUER]})
        self.assertEqual(self.review("tok-alice", ["other"]),
                         {"user": {}, "error": "invalid bearer token"})
        # no token: upstream's 400
        for spec in ({}, {"token": ""}):
            status, st = call_json(S, "POST", TR, {"apiVersion": "authentication.k8s.io/v1",
                                                   "kind": "TokenReview", "spec": spec})
            self.assertEqual((status, st["reason"], st["message"]),
                             (400, "BadRequest",
                              "token is required for TokenReview in authentication"))

    def test_token_review_audiences_are_the_intersection(self):
        # SERVER BUG (reviews.c token_review): upstream's status.audiences
        # is what the authenticator returned, the requested audiences that
        # the token is good for (authenticator.Audiences.Intersect in
        # pkg/serviceaccount/jwt.go; WrapAudienceAgnosticToken for the
        # token file), in the order asked; ckube echoes spec.audiences.
        new_sa(S, "inter")
        token = create_token(S, "inter", "--audience", "a", "--audience", "b")
        st = self.review(token, ["b", "c"])
        self.assertTrue(st.get("authenticated"), st)
        self.assertEqual(st["audiences"], ["b"], "SERVER BUG: want the intersection")
        st = self.review("tok-alice", [ISSUER, "zzz"])
        self.assertTrue(st.get("authenticated"), st)
        self.assertEqual(st["audiences"], [ISSUER], "SERVER BUG: want the intersection")

    # ---- --service-account-issuer, --api-audiences ------------------------

    def test_issuer_and_audience_flags(self):
        uid = new_sa(I, "iss")
        token = create_token(I, "iss")
        _, claims, _ = jwt_parts(token)
        self.assertEqual((claims["iss"], claims["aud"]), (I_ISSUER, ["api-a", "api-b"]))
        self.assertEqual(claims["kubernetes.io"]["serviceaccount"], {"name": "iss", "uid": uid})
        self.assertAuthorized(I, token)
        # one of the API's audiences is enough; none of them is not
        self.assertAuthorized(I, create_token(I, "iss", "--audience", "api-b"))
        self.assertUnauthorized(I, create_token(I, "iss", "--audience", ISSUER))
        wait_log(I, re.escape('token audiences [\\"%s\\"] is invalid for the target audiences '
                              '[\\"api-a\\" \\"api-b\\"]' % ISSUER))
        # each server knows only its own issuer's tokens
        new_sa(S, "iss")
        self.assertUnauthorized(I, create_token(S, "iss"), "S's token on I")
        self.assertUnauthorized(S, token, "I's token on S")
        wait_log(S, r'"Unable to authenticate the request" err="invalid bearer token"')
        st = self.review(token, server=I)
        self.assertEqual((st["authenticated"], st["audiences"]), (True, ["api-a", "api-b"]))
        # the discovery document names the issuer
        status, doc = call_json(I, "GET", "/.well-known/openid-configuration")
        self.assertEqual(status, 200)
        self.assertEqual((doc["issuer"], doc["jwks_uri"]),
                         (I_ISSUER, I_ISSUER + "/openid/v1/jwks"))

    # ---- the issuer's documents -------------------------------------------

    def test_discovery_documents(self):
        new_sa(S, "oidc")
        token = create_token(S, "oidc")
        status, raw, headers = call(S, "GET", "/.well-known/openid-configuration")
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], "application/json")
        self.assertEqual(json.loads(raw), {
            "issuer": ISSUER, "jwks_uri": ISSUER + "/openid/v1/jwks",
            "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"]})
        status, raw, headers = call(S, "GET", "/openid/v1/jwks")
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], "application/jwk-set+json")
        jwks = json.loads(raw)
        self.assertEqual(len(jwks["keys"]), 1)
        jwk = jwks["keys"][0]
        self.assertEqual(sorted(jwk), ["alg", "e", "kid", "kty", "n", "use"])
        self.assertEqual((jwk["kty"], jwk["alg"], jwk["use"], jwk["e"]),
                         ("RSA", "RS256", "sig", "AQAB"))
        header, claims, sig = jwt_parts(token)
        self.assertEqual(header["kid"], jwk["kid"])
        # a ServiceAccount reads them too (upstream's
        # system:service-account-issuer-discovery binding)
        for path in ("/.well-known/openid-configuration", "/openid/v1/jwks"):
            status, raw2, _ = call(S, "GET", path, token=token)
            self.assertEqual(status, 200, path)

        # The JWKS verifies the token's signature; its key is pki/sa.pub and
        # the kid the SHA-256 of that key's DER.
        n = int.from_bytes(b64url_decode(jwk["n"]), "big")
        e = int.from_bytes(b64url_decode(jwk["e"]), "big")
        signing = token.rsplit(".", 1)[0].encode()
        sa_pub = os.path.join(S.data, "pki", "sa.pub")
        if HAVE_CRYPTOGRAPHY:
            key = rsa.RSAPublicNumbers(e, n).public_key()
            key.verify(sig, signing, padding.PKCS1v15(), hashes.SHA256())
            with self.assertRaises(Exception):
                key.verify(sig, signing + b"x", padding.PKCS1v15(), hashes.SHA256())
            with open(sa_pub, "rb") as f:
                pub = serialization.load_pem_public_key(f.read())
            self.assertEqual(pub.public_numbers(), key.public_numbers())
            der = key.public_bytes(serialization.Encoding.DER,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)
        else:
            out = subprocess.run(["openssl", "rsa", "-pubin", "-in", sa_pub, "-noout",
                                  "-modulus"], stdout=subprocess.PIPE, text=True,
                                 check=True).stdout
            self.assertEqual(int(out.strip().split("=", 1)[1], 16), n)
            sigf = os.path.join(FIX, "sig.bin")
            with open(sigf, "wb") as f:
                f.write(sig)
            r = subprocess.run(["openssl", "dgst", "-sha256", "-verify", sa_pub, "-signature",
                                sigf], input=signing, stdout=subprocess.PIPE)
            self.assertEqual(r.returncode, 0, r.stdout)
            der = subprocess.run(["openssl", "pkey", "-pubin", "-in", sa_pub, "-outform", "DER"],
                                 stdout=subprocess.PIPE, check=True).stdout
        self.assertEqual(jwk["kid"], b64url(hashlib.sha256(der).digest()))

    def test_discovery_documents_cache_control(self):
        # SERVER BUG (apiserver.c's issuer routes and
        # req_add_common_headers): kube-apiserver answers the two documents
        # with one `Cache-Control: public, max-age=3600` (its handler's Set
        # replaces WithCacheControl's default); ckube sends that and also
        # `Cache-Control: no-cache, private`, and a cache may honour either.
        for path in ("/.well-known/openid-configuration", "/openid/v1/jwks"):
            conn = S.connection()
            try:
                conn.request("GET", path)
                r = conn.getresponse()
                r.read()
                values = [v for k, v in r.getheaders() if k.lower() == "cache-control"]
            finally:
                conn.close()
            self.assertEqual(values, ["public, max-age=3600"],
                             "SERVER BUG: one Cache-Control on " + path)

    # ---- a controller in a "pod" ----------------------------------------------

    def test_hello_controller_in_cluster(self):
        # examples/hello-controller with nothing but a pod's view: the
        # service account directory (a token from `kubectl create token`,
        # the cluster CA, the namespace) and KUBERNETES_SERVICE_HOST/PORT;
        # no kubeconfig anywhere. It lists and watches ConfigMaps and
        # patches them as the ServiceAccount.
        cc = shutil.which("cc")
        libdir = os.path.dirname(os.path.abspath(BIN))
        lib = os.path.join(libdir, "libckube.so")
        if not cc or not os.path.exists(lib) or not shutil.which("pkg-config"):
            self.skipTest("needs cc, pkg-config and libckube.so beside $CKUBE_BIN")
        # A sanitized build's library needs the same runtime in the program.
        san = []
        nm = subprocess.run(["nm", "-D", lib], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True).stdout if shutil.which("nm") else ""
        if "__asan_init" in nm:
            san = ["-fsanitize=address,undefined"]
        elif "__tsan_init" in nm:
            san = ["-fsanitize=thread"]
        jansson = subprocess.run(["pkg-config", "--cflags", "--libs", "jansson"],
                                 stdout=subprocess.PIPE, text=True, check=True).stdout.split()
        # its ConfigMap type, as its Makefile makes it (ckube-gen is built
        # beside $CKUBE_BIN)
        gen = os.path.join(FIX, "hello-gen")
        os.makedirs(gen, exist_ok=True)
        r = subprocess.run([os.path.join(libdir, "ckube-gen"), "--package", "k8s", "--out", gen,
                            "--kinds", "ConfigMap",
                            os.path.join(SRC, "examples", "hello-controller",
                                         "configmap.openapi.json")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout)
        exe = os.path.join(FIX, "hello-controller")
        r = subprocess.run([cc, *san, "-O1", "-g", "-Wall", "-Wextra", "-Werror",
                            "-I" + os.path.join(SRC, "include"), "-I" + gen,
                            os.path.join(SRC, "examples", "hello-controller", "main.c"),
                            os.path.join(gen, "k8s.c"),
                            "-o", exe, lib, "-Wl,-rpath," + libdir, *jansson, "-lpthread"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout)

        uid = new_sa(S, "hello")
        # where RBAC is served, what the controller asks (else all is allowed)
        kubectl(S, None, "create", "clusterrole", "hello", "--verb=get,list,watch,patch",
                "--resource=configmaps")
        kubectl(S, None, "create", "clusterrolebinding", "hello", "--clusterrole=hello",
                "--serviceaccount=%s:hello" % NS)
        token = create_token(S, "hello")
        sadir = os.path.join(FIX, "hello-sa")
        os.makedirs(sadir)
        shutil.copy(os.path.join(S.data, "pki", "ca.crt"), os.path.join(sadir, "ca.crt"))
        with open(os.path.join(sadir, "token"), "w") as f:
            f.write(token)
        with open(os.path.join(sadir, "namespace"), "w") as f:
            f.write(NS)
        home = os.path.join(FIX, "hello-home")
        os.makedirs(home)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
               "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(S.port),
               "CKUBE_SERVICEACCOUNT_DIR": sadir,
               "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1"}
        log_path = os.path.join(FIX, "hello.log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([exe, "-v", "4"], env=env, stdout=log,
                                    stderr=subprocess.STDOUT)
        try:
            admin(S, "create", "configmap", "counted", "-n", NS, "--from-literal=a=1",
                  "--from-literal=b=2", "--from-literal=c=3")
            admin(S, "label", "configmap", "counted", "-n", NS, "hello.ckube.io/enabled=true")

            def annotation():
                return admin(S, "get", "configmap", "counted", "-n", NS, "-o",
                             r"jsonpath={.metadata.annotations.hello\.ckube\.io/keys}")
            deadline = time.time() + 20
            while annotation() != "3" and time.time() < deadline and proc.poll() is None:
                time.sleep(0.1)
            with open(log_path, errors="replace") as f:
                log_text = f.read()
            self.assertEqual(annotation(), "3", log_text[-3000:])
            self.assertIn("Using in-cluster configuration", log_text)
            self.assertIn("Successfully synced '%s/counted'" % NS, log_text)
            # its token is the ServiceAccount's
            status, info = whoami(S, token)
            self.assertEqual((status, info["username"], info["uid"]),
                             (201, "system:serviceaccount:%s:hello" % NS, uid))
        finally:
            if proc.poll() is None:
                proc.terminate()
            rc = proc.wait(timeout=30)
        with open(log_path, errors="replace") as f:
            log_text = f.read()
        self.assertEqual(rc, 0, log_text[-3000:])
        self.assertIn("All workers finished", log_text)

    # ---- forged tokens ------------------------------------------------------

    def test_forged_tokens(self):
        uid = new_sa(S, "victim")
        token = create_token(S, "victim")
        h, p, s = token.split(".")
        header, claims, _ = jwt_parts(token)
        enc = lambda obj: b64url(json.dumps(obj, separators=(",", ":")).encode())  # noqa: E731
        # a changed payload under the real signature: another identity, a
        # later expiry
        for change in ({"sub": "system:serviceaccount:kube-system:admin"},
                       {"exp": claims["exp"] + 86400 * 365},
                       {"aud": [ISSUER, "more"]}):
            self.assertUnauthorized(S, h + "." + enc(dict(claims, **change)) + "." + s,
                                    str(change))
        # a flipped signature character
        bad = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
        self.assertUnauthorized(S, bad, "flipped signature")
        # alg none, with and without a signature, the kid kept
        for hd in ({"alg": "none"}, {"alg": "none", "typ": "JWT"},
                   {"alg": "none", "kid": header["kid"]}, {"alg": "HS256", "kid": header["kid"]}):
            for sig in ("", s):
                self.assertUnauthorized(S, enc(hd) + "." + p + "." + sig, "%s %d" % (hd, len(sig)))
        wait_log(S, r'"Unable to authenticate the request" err="[^"\n]*RS256')
        # two and four parts
        self.assertUnauthorized(S, h + "." + p, "two parts")
        self.assertUnauthorized(S, token + "." + s, "four parts")
        # oversized
        self.assertUnauthorized(S, "a" * 70000 + "." + p + "." + s, "oversized")

        now = int(time.time())
        sa_key = os.path.join(S.data, "pki", "sa.key")
        # The server's own key signs a good token by hand: the checks below
        # fail for their reason only.
        self.assertAuthorized(S, signed_token(sa_key, sa_claims("victim", uid, now)), "by hand")
        # another key, the same claims and kid
        other_key = os.path.join(FIX, "other.key")
        subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt",
                        "rsa_keygen_bits:2048", "-out", other_key], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        self.assertUnauthorized(S, signed_token(other_key, sa_claims("victim", uid, now),
                                                {"alg": "RS256", "kid": header["kid"]}),
                                "another key")
        wait_log(S, r'"Unable to authenticate the request" err="[^"\n]*invalid signature')
        # expired: beyond go-jose's 60 s of leeway, and just within it
        self.assertUnauthorized(S, signed_token(sa_key, sa_claims("victim", uid, now - 4000,
                                                                  exp_in=3600)), "expired")
        wait_log(S, r'"Unable to authenticate the request" err="service account token has '
                    r'expired"')
        self.assertAuthorized(S, signed_token(sa_key, sa_claims("victim", uid, now - 3630,
                                                                exp_in=3600)), "leeway")
        # not valid yet
        self.assertUnauthorized(S, signed_token(sa_key, sa_claims("victim", uid, now + 600)),
                                "nbf in the future")
        wait_log(S, r'"Unable to authenticate the request" err="service account token is not '
                    r'valid yet"')
        # another namespace's name with this one's UID (the claims say who)
        self.assertUnauthorized(S, signed_token(sa_key, dict(
            sa_claims("victim", uid, now), **{"kubernetes.io": {
                "namespace": "default", "serviceaccount": {"name": "victim", "uid": uid}}})),
            "another namespace")
        # the real token still works after all that
        self.assertAuthorized(S, token)


if __name__ == "__main__":
    run_unittests()
