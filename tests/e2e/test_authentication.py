"""End-to-end tests of authentication against a real `ckube server`, as
kube-apiserver's: the written kubeconfig's admin certificate, anonymous
requests (and --anonymous-auth=false), a static --token-auth-file, client
certificates from the cluster CA, from a foreign CA (401) and from a
--client-ca-file CA, expired ones, --plain-http's system:unsecured; the
exact 401 body, the log line, that a 401 stores nothing and that the
server keeps serving after many bad requests. Who a request is from is
read back through SelfSubjectReview (and `kubectl auth whoami`).

Certificates are made with the openssl CLI (an expired one with
`openssl ca -startdate/-enddate`, as `openssl x509 -days` cannot go
negative)."""
import atexit
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
from ckube_harness import BIN, Server, run_unittests  # noqa: E402
from free_port import free_port  # noqa: E402

SDK = "/usr/lib/google-cloud-sdk/bin"
SSR = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
UNAUTHORIZED = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                b'"message":"Unauthorized","reason":"Unauthorized","code":401}')
ADMIN = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}
ANONYMOUS = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
ALICE = {"username": "alice", "uid": "uid-alice",
         "groups": ["dev", "ops", "system:authenticated"]}

_base = os.environ.get("CKUBE_TEST_TMP", "/tmp")
os.makedirs(_base, exist_ok=True)
FIX = tempfile.mkdtemp(prefix="e2e-authn.", dir=_base)
atexit.register(shutil.rmtree, FIX, True)
TOKENS = os.path.join(FIX, "tokens.csv")
FOREIGN_CA = os.path.join(FIX, "foreign-ca.crt")

# Token file: a quoted groups column, an empty token (skipped with a
# warning), a blank line, a CRLF line end, a record without groups and a
# token given twice (the later record wins, with a warning).
TOKEN_FILE = ('tok-alice,alice,uid-alice,"dev,ops"\n'
              ',nobody,uid-none,"x"\n'
              '\n'
              'tok-bob,bob,uid-bob\r\n'
              'tok-dup,first,uid-first,"g1"\n'
              'tok-dup,second,uid-second,"g2,g3"\n')

# A (default: anonymous on) with the token file; B: anonymous off; C: a
# user-supplied client CA; D: plain HTTP.
A = Server("--controller-manager=false", "--token-auth-file", TOKENS)
B = Server("--controller-manager=false", "--anonymous-auth=false", "--token-auth-file", TOKENS)
C = Server("--controller-manager=false", "--client-ca-file", FOREIGN_CA)
D = Server("--controller-manager=false", "--plain-http")
SERVERS = (A, B, C, D)

OPENSSL_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[client]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
[serveronly]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
[ca]
default_ca = ca_default
[ca_default]
database = %(dir)s/index.txt
new_certs_dir = %(dir)s
serial = %(dir)s/serial
default_md = sha256
policy = policy_any
unique_subject = no
[policy_any]
commonName = optional
organizationName = optional
"""


def openssl(*args):
    r = subprocess.run(["openssl", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError("openssl %s: %s" % (" ".join(args), r.stderr))
    return r.stdout


def fix(name):
    return os.path.join(FIX, name)


def make_cert(name, subj, ca_crt, ca_key, ext="client", expired=False):
    """A client key and certificate fix(name).{key,crt} with subject
    `subj`, signed by ca_crt/ca_key; expired: valid only in 2020."""
    key, csr, crt = fix(name + ".key"), fix(name + ".csr"), fix(name + ".crt")
    openssl("req", "-new", "-config", fix("openssl.cnf"), "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr, "-subj", subj)
    if expired:
        openssl("ca", "-batch", "-config", fix("openssl.cnf"), "-cert", ca_crt, "-keyfile", ca_key,
                "-in", csr, "-out", crt, "-startdate", "20200101000000Z", "-enddate",
                "20200201000000Z", "-extensions", ext, "-preserveDN", "-notext")
    else:
        # -set_serial, not -CAcreateserial: nothing is written beside the
        # server's CA
        openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-set_serial",
                str(int.from_bytes(os.urandom(8), "big")), "-days", "1", "-sha256",
                "-extfile", fix("openssl.cnf"), "-extensions", ext, "-out", crt)
    return crt, key


def make_fixtures():
    with open(TOKENS, "w", newline="") as f:
        f.write(TOKEN_FILE)
    with open(fix("openssl.cnf"), "w") as f:
        f.write(OPENSSL_CNF % {"dir": FIX})
    open(fix("index.txt"), "w").close()
    with open(fix("serial"), "w") as f:
        f.write("1000\n")
    # a throwaway CA, and mallory (system:masters!) signed by it
    openssl("req", "-x509", "-config", fix("openssl.cnf"), "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", fix("foreign-ca.key"), "-out",
            FOREIGN_CA, "-subj", "/CN=foreign-ca", "-days", "1", "-extensions", "v3_ca")
    make_cert("mallory", "/CN=mallory/O=system:masters", FOREIGN_CA, fix("foreign-ca.key"))


def setUpModule():
    make_fixtures()
    for s in SERVERS:
        s.start()
    # certificates from A's cluster CA
    ca_crt, ca_key = os.path.join(A.data, "pki", "ca.crt"), os.path.join(A.data, "pki", "ca.key")
    make_cert("jane", "/CN=jane/O=dev/O=qa", ca_crt, ca_key)
    make_cert("jane-expired", "/CN=jane/O=dev/O=qa", ca_crt, ca_key, expired=True)
    make_cert("serveronly", "/CN=svc/O=dev", ca_crt, ca_key, ext="serveronly")
    make_cert("nocn", "/O=dev", ca_crt, ca_key)
    # RBAC: who a request is from is what these tests read back, so
    # anonymous requests may ask (upstream allows SelfSubjectReview to
    # authenticated users only), and alice may do anything
    # (test_rbac_authorization.py tests the denials)
    grant(A, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
              "metadata": {"name": "alice-admin"},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                          "name": "cluster-admin"},
              "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                            "name": "alice"}]}, "clusterrolebindings")
    for s in (A, C):
        grant(s, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                  "metadata": {"name": "whoami-anyone"},
                  "rules": [{"apiGroups": ["authentication.k8s.io"],
                             "resources": ["selfsubjectreviews"], "verbs": ["create"]}]},
              "clusterroles")
        grant(s, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                  "metadata": {"name": "whoami-anyone"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                              "name": "whoami-anyone"},
                  "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                "name": "system:unauthenticated"}]}, "clusterrolebindings")
    # the authorizer sees them through the watch cache, in order of writing
    for s in (A, C):
        for _ in range(100):
            if whoami(s)[0] == 201:
                break
            time.sleep(0.05)


def grant(server, obj, resource):
    st, _, body = call(server, "POST", "/apis/rbac.authorization.k8s.io/v1/" + resource, obj,
                       cert="admin")
    if st != 201:
        raise RuntimeError("creating %s: %d %s" % (resource, st, body))


def tearDownModule():
    errors = []
    for s in SERVERS:
        try:
            s.stop()
        except Exception as e:  # stop the others too
            errors.append(e)
    shutil.rmtree(FIX, ignore_errors=True)
    if errors:
        raise errors[0]


def context(server, cert):
    """A client TLS context trusting server's CA, presenting: "admin" (the
    written kubeconfig's certificate), None (nothing) or the fixture
    certificate of that name."""
    if cert == "admin":
        return server.ssl_context()
    ctx = server.ssl_context(cert=False)
    if cert:
        ctx.load_cert_chain(fix(cert + ".crt"), fix(cert + ".key"))
    return ctx


def connect(server, cert=None):
    if not server.tls:
        return http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    return http.client.HTTPSConnection("127.0.0.1", server.port, timeout=20,
                                       context=context(server, cert))


def send(conn, method, path, body=None, token=None, authorization=None):
    """(status, headers, raw body) of one request on conn."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token is not None:
        headers["Authorization"] = "Bearer " + token
    if authorization is not None:
        headers["Authorization"] = authorization
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()


def call(server, method, path, body=None, cert=None, **kw):
    conn = connect(server, cert)
    try:
        return send(conn, method, path, body, **kw)
    finally:
        conn.close()


def ssr_body():
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def whoami_on(conn, **kw):
    """(status, userInfo or the raw body) of a SelfSubjectReview on conn."""
    st, _, body = send(conn, "POST", SSR, ssr_body(), **kw)
    if st != 201:
        return st, body
    return st, json.loads(body)["status"]["userInfo"]


def whoami(server, cert=None, **kw):
    conn = connect(server, cert)
    try:
        return whoami_on(conn, **kw)
    finally:
        conn.close()


def kubectl(server, kubeconfig, *args, binary="kubectl"):
    home = os.path.join(FIX, "home-" + os.path.basename(binary))
    env = dict(os.environ, HOME=home, KUBECONFIG=kubeconfig)
    r = subprocess.run([binary, *args], env=env, timeout=60, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    return r.returncode, r.stdout, r.stderr


def token_kubeconfig(server, token, name):
    """A copy of server's written kubeconfig whose user has `token:`
    instead of the admin certificate."""
    with open(server.kubeconfig) as f:
        text = f.read()
    new, n = re.subn(r"(- name: ckube-admin\n  user:\n)(    \S.*\n)+",
                     lambda m: m.group(1) + "    token: %s\n" % token, text)
    assert n == 1 and "client-key-data" not in new, text
    path = fix(name)
    with open(path, "w") as f:
        f.write(new)
    os.chmod(path, 0o600)
    return path


def wait_log(server, pattern, timeout=5):
    deadline = time.time() + timeout
    while True:
        log = server.logtail(100000)
        if re.search(pattern, log):
            return log
        if time.time() > deadline:
            raise AssertionError("no %r in the log:\n%s" % (pattern, server.logtail()))
        time.sleep(0.05)


def cm(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"k": "v"}}


class AuthenticationTest(unittest.TestCase):
    def assertUnauthorized(self, resp, what=""):
        st, headers, body = resp
        self.assertEqual(st, 401, what + repr(body))
        self.assertEqual(body.rstrip(b"\n"), UNAUTHORIZED, what)
        self.assertEqual(headers.get("content-type"), "application/json", what)

    # --- the written kubeconfig's admin ------------------------------------

    def test_admin_kubeconfig_whoami(self):
        for binary in ("kubectl", os.path.join(SDK, "kubectl.1.27")):
            rc, out, err = kubectl(A, A.kubeconfig, "auth", "whoami", "-o", "json", binary=binary)
            self.assertEqual(rc, 0, binary + err)
            review = json.loads(out)
            self.assertEqual(review["status"]["userInfo"], ADMIN, binary)
        self.assertEqual(whoami(A, cert="admin"), (201, ADMIN))

    # --- anonymous ---------------------------------------------------------

    def test_anonymous(self):
        self.assertEqual(whoami(A), (201, ANONYMOUS))
        st, _, body = call(A, "GET", "/healthz")
        self.assertEqual((st, body), (200, b"ok"))
        # not a bearer token: no credentials at all, as upstream's
        for authz in ("Basic YWxpY2U6c2VjcmV0", "Bearer", "Negotiate tok-alice"):
            self.assertEqual(whoami(A, authorization=authz), (201, ANONYMOUS), authz)
        # a cluster-CA certificate without a CommonName names nobody:
        # the request goes on to the next authenticators (anonymous)
        self.assertEqual(whoami(A, cert="nocn"), (201, ANONYMOUS))

    def test_anonymous_disabled(self):
        self.assertUnauthorized(call(B, "POST", SSR, ssr_body()), "B " + SSR)
        for path in ("/healthz", "/readyz", "/livez", "/version", "/api", "/api/v1/namespaces"):
            self.assertUnauthorized(call(B, "GET", path), "B " + path)
        self.assertUnauthorized(call(B, "GET", "/healthz", authorization="Basic eDp5"))
        # credentials still work
        self.assertEqual(whoami(B, cert="admin"), (201, ADMIN))
        self.assertEqual(whoami(B, token="tok-alice"), (201, ALICE))
        st, _, body = call(B, "GET", "/healthz", cert="admin")
        self.assertEqual((st, body), (200, b"ok"))
        # and a write without them stores nothing
        self.assertUnauthorized(call(B, "POST", "/api/v1/namespaces/default/configmaps",
                                     cm("anon-write")))
        st, _, _ = call(B, "GET", "/api/v1/namespaces/default/configmaps/anon-write",
                        cert="admin")
        self.assertEqual(st, 404)

    # --- the token file ----------------------------------------------------

    def test_token_file(self):
        self.assertEqual(whoami(A, token="tok-alice"), (201, ALICE))
        # the scheme is case-insensitive; what follows the token is ignored
        self.assertEqual(whoami(A, authorization="bearer tok-alice"), (201, ALICE))
        self.assertEqual(whoami(A, authorization="BEARER tok-alice trailing"), (201, ALICE))
        # no groups column: only system:authenticated
        self.assertEqual(whoami(A, token="tok-bob"),
                         (201, {"username": "bob", "uid": "uid-bob",
                                "groups": ["system:authenticated"]}))
        # a duplicate token is the later record's
        self.assertEqual(whoami(A, token="tok-dup"),
                         (201, {"username": "second", "uid": "uid-second",
                                "groups": ["g2", "g3", "system:authenticated"]}))
        # the token wins over anonymous, and over no client certificate;
        # with the admin certificate, the certificate comes first
        self.assertEqual(whoami(A, cert="admin", token="tok-alice"), (201, ADMIN))
        # upstream's warnings while reading the file
        wait_log(A, re.escape("empty token has been found in token file '%s', record number '2'"
                              % TOKENS))
        wait_log(A, re.escape("duplicate token has been found in token file '%s', "
                              "record number '5'" % TOKENS))

    def test_unknown_token(self):
        for tok in ("nope", "tok-alice2", "TOK-ALICE", "uid-alice", "alice"):
            self.assertUnauthorized(call(A, "POST", SSR, ssr_body(), token=tok), tok)
            self.assertUnauthorized(call(A, "GET", "/healthz", token=tok), tok)
        wait_log(A, r'"Unable to authenticate the request" err="invalid bearer token"')
        # also with anonymous off
        self.assertUnauthorized(call(B, "GET", "/healthz", token="nope"))
        wait_log(B, r'"Unable to authenticate the request" err="invalid bearer token"')
        # an empty token (upstream splits on single spaces: "Bearer  x" has
        # an empty one) is no bearer token: anonymous where allowed
        self.assertEqual(whoami(A, authorization="Bearer  tok-alice"), (201, ANONYMOUS))
        self.assertUnauthorized(call(B, "GET", "/healthz", authorization="Bearer  tok-alice"))

    def test_kubectl_with_token(self):
        kc = token_kubeconfig(A, "tok-alice", "alice.kubeconfig")
        for binary in ("kubectl", os.path.join(SDK, "kubectl.1.27")):
            rc, out, err = kubectl(A, kc, "auth", "whoami", "-o", "json", binary=binary)
            self.assertEqual(rc, 0, binary + err)
            self.assertEqual(json.loads(out)["status"]["userInfo"], ALICE, binary)
        rc, out, err = kubectl(A, kc, "get", "ns")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"(?m)^default\s+Active")
        rc, out, err = kubectl(A, kc, "auth", "whoami")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"Username\s+alice")
        # a wrong token: kubectl reports the 401
        bad = token_kubeconfig(A, "not-a-token", "bad.kubeconfig")
        rc, out, err = kubectl(A, bad, "get", "ns")
        self.assertNotEqual(rc, 0, out)
        self.assertIn("You must be logged in to the server (Unauthorized)", err)

    def test_token_file_with_two_columns_refused(self):
        path = fix("two-columns.csv")
        with open(path, "w") as f:
            f.write('tok-ok,ok,uid-ok\ntok-short,short\n')
        data = fix("two-columns-data")
        r = subprocess.run([BIN, "server", "--data-dir", data, "--listen",
                            "127.0.0.1:%d" % free_port(), "--controller-manager=false",
                            "--token-auth-file", path],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=30)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("token file '%s' must have at least 3 columns (token, user name, "
                      "user uid), found 2" % path, r.stdout)
        self.assertFalse(os.path.exists(os.path.join(data, "kubeconfig")), r.stdout)

    # --- client certificates -----------------------------------------------

    def test_foreign_client_certificate(self):
        # mallory claims system:masters from a CA the server does not trust
        self.assertUnauthorized(call(A, "POST", SSR, ssr_body(), cert="mallory"))
        self.assertUnauthorized(call(A, "GET", "/healthz", cert="mallory"))
        wait_log(A, r'"Unable to authenticate the request" err="[^"\n]*'
                    r'x509: certificate signed by unknown authority')
        self.assertUnauthorized(call(B, "GET", "/healthz", cert="mallory"))
        # a bad certificate plus a valid token: the token's user
        self.assertEqual(whoami(A, cert="mallory", token="tok-alice"), (201, ALICE))
        self.assertEqual(whoami(B, cert="mallory", token="tok-alice"), (201, ALICE))
        # ... per request: the same connection without the token is a 401
        conn = connect(A, "mallory")
        try:
            self.assertEqual(whoami_on(conn, token="tok-alice"), (201, ALICE))
            self.assertUnauthorized(send(conn, "POST", SSR, ssr_body()), "same connection")
            self.assertEqual(whoami_on(conn, token="tok-bob")[1]["username"], "bob")
            self.assertUnauthorized(send(conn, "GET", "/healthz", token="nope"))
        finally:
            conn.close()
        # a bad certificate plus a bad token: 401
        self.assertUnauthorized(call(A, "GET", "/healthz", cert="mallory", token="nope"))

    def test_cluster_ca_client_certificate(self):
        jane = {"username": "jane", "groups": ["dev", "qa", "system:authenticated"]}
        self.assertEqual(whoami(A, cert="jane"), (201, jane))
        self.assertEqual(whoami(B, cert="admin"), (201, ADMIN))  # B's own CA
        # the certificate comes before the token
        self.assertEqual(whoami(A, cert="jane", token="tok-alice"), (201, jane))
        # the certificate is judged once per connection, the request each time
        conn = connect(A, "jane")
        try:
            for _ in range(3):
                self.assertEqual(whoami_on(conn), (201, jane))
        finally:
            conn.close()
        # a different server's CA: B does not trust A's certificates
        self.assertUnauthorized(call(B, "GET", "/healthz", cert="jane"))

    def test_expired_client_certificate(self):
        self.assertUnauthorized(call(A, "POST", SSR, ssr_body(), cert="jane-expired"))
        wait_log(A, r'"Unable to authenticate the request" err="[^"\n]*'
                    r'x509: certificate has expired or is not yet valid')
        # with a valid token too: the token's user
        self.assertEqual(whoami(A, cert="jane-expired", token="tok-alice"), (201, ALICE))

    def test_client_certificate_without_client_auth_usage(self):
        # upstream verifies with ExtKeyUsageClientAuth: a serverAuth-only
        # certificate from the cluster CA does not authenticate
        self.assertUnauthorized(call(A, "POST", SSR, ssr_body(), cert="serveronly"))

    def test_client_ca_file(self):
        mallory = {"username": "mallory", "groups": ["system:masters", "system:authenticated"]}
        self.assertEqual(whoami(C, cert="mallory"), (201, mallory))
        st, _, body = call(C, "POST", "/api/v1/namespaces/default/configmaps", cm("by-mallory"),
                           cert="mallory")
        self.assertEqual(st, 201, body)
        # the cluster CA is trusted too: the written kubeconfig's admin
        self.assertEqual(whoami(C, cert="admin"), (201, ADMIN))
        rc, out, err = kubectl(C, C.kubeconfig, "auth", "whoami", "-o", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["status"]["userInfo"], ADMIN)
        # no certificate: still anonymous
        self.assertEqual(whoami(C), (201, ANONYMOUS))

    # --- plain HTTP --------------------------------------------------------

    def test_plain_http(self):
        unsecured = {"username": "system:unsecured",
                     "groups": ["system:masters", "system:authenticated"]}
        self.assertEqual(whoami(D), (201, unsecured))
        st, _, body = call(D, "GET", "/healthz")
        self.assertEqual((st, body), (200, b"ok"))
        rc, out, err = kubectl(D, D.kubeconfig, "auth", "whoami", "-o", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["status"]["userInfo"], unsecured)

    # --- a 401 stores nothing; the server stays up ---------------------------

    def test_unauthorized_stores_nothing(self):
        path = "/api/v1/namespaces/default/configmaps"
        self.assertUnauthorized(call(A, "POST", path, cm("bad-token"), token="nope"))
        self.assertUnauthorized(call(A, "POST", path, cm("bad-cert"), cert="mallory"))
        self.assertUnauthorized(call(A, "POST", path, cm("expired"), cert="jane-expired"))
        for name in ("bad-token", "bad-cert", "expired"):
            st, _, _ = call(A, "GET", path + "/" + name, cert="admin")
            self.assertEqual(st, 404, name)
        # a delete with a bad token deletes nothing either
        st, _, body = call(A, "POST", path, cm("keep"), cert="admin")
        self.assertEqual(st, 201, body)
        self.assertUnauthorized(call(A, "DELETE", path + "/keep", token="nope"))
        self.assertUnauthorized(call(A, "PUT", path + "/keep", cm("keep"), cert="mallory"))
        st, _, body = call(A, "GET", path + "/keep", cert="admin")
        self.assertEqual(st, 200)
        self.assertEqual(json.loads(body)["metadata"]["name"], "keep")
        # the token user can write (no authorization yet)
        st, _, body = call(A, "POST", path, cm("by-alice"), token="tok-alice")
        self.assertEqual(st, 201, body)

    def test_many_bad_requests(self):
        # keep-alive: 401s interleaved with good requests on one connection
        conn = connect(A)
        try:
            for i in range(200):
                self.assertUnauthorized(send(conn, "GET", "/api/v1/namespaces",
                                             token="bad-%d" % i), str(i))
                if i % 20 == 0:
                    self.assertEqual(whoami_on(conn, token="tok-alice"), (201, ALICE))
        finally:
            conn.close()
        # new connections with a foreign certificate, and with nothing on B
        for i in range(30):
            self.assertUnauthorized(call(A, "GET", "/healthz", cert="mallory"), str(i))
            self.assertUnauthorized(call(B, "GET", "/healthz"), str(i))
        # still serving, everyone still who they are
        self.assertIsNone(A.proc.poll())
        self.assertIsNone(B.proc.poll())
        self.assertEqual(whoami(A, cert="admin"), (201, ADMIN))
        self.assertEqual(whoami(A, token="tok-alice"), (201, ALICE))
        self.assertEqual(whoami(B, token="tok-alice"), (201, ALICE))
        st, _, body = call(A, "GET", "/readyz", cert="admin")
        self.assertEqual((st, body), (200, b"ok"))


if __name__ == "__main__":
    run_unittests()
