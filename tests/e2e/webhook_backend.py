"""A deliberately varied admission webhook for the end-to-end tests: an
HTTPS server (a CA and a serving certificate of its own, made with the
openssl command) on a loopback port, in a thread of the test, whose
answer depends on the request path:

  /allow       allowed
  /deny        denied with a Status (message "no thanks", code 403)
  /deny-bare   denied with no Status at all
  /mutate      allowed with a JSON Patch adding the label mutated=yes
  /mutate-b    allowed with a JSON Patch adding the label second=SEEN,
               SEEN being the value of label "mutated" it saw ("none")
  /warn        allowed, with a warning and an audit annotation
  /garbage     200 with a body that is not JSON
  /wrong-uid   an AdmissionReview answering another uid
  /bad-patch   a patch that does not apply (removes a missing path)
  /slow        answers after 3 seconds
  /status500   500 without a Status
  /scale-to-5  allowed with a JSON Patch setting spec.replicas to 5

ConversionReviews (apiextensions.k8s.io/v1 or v1beta1) are answered by
path too, converting conv.example.com Widgets between v1 (spec.size)
and v2 (spec.dims.size):

  /convert            converted, with the label converted-by=hook added
                      and a try at changing metadata.uid's neighbours
                      (a generation of 99) that the server must undo
  /convert-fail       result Failure, message "cannot convert this"
  /convert-garbage    200 with a body that is not JSON
  /convert-wrong-uid  a ConversionReview answering another uid
  /convert-rename     each object renamed
  /convert-none       no convertedObjects at all
  /convert-bad-label  a label value the API refuses

It records every AdmissionReview request it got (`reviews`), and counts
TLS connections (`connections`) so tests can see them reused."""
import base64
import http.server
import json
import os
import socket
import ssl
import subprocess
import threading
import time


def make_certs(d, names):
    """A CA and a serving certificate for `names` (IP addresses and DNS
    names) under d; returns (ca_pem_bytes, cert_path, key_path)."""
    os.makedirs(d, exist_ok=True)
    ca_key, ca_crt = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    key, csr, crt = (os.path.join(d, n) for n in ("hook.key", "hook.csr", "hook.crt"))
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", ca_key, "-out", ca_crt, "-days", "2", "-subj", "/CN=webhook-test-ca")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", key, "-out", csr, "-subj", "/CN=webhook")
    san = ",".join(("IP:" if n[0].isdigit() else "DNS:") + n for n in names)
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\n" % san)
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key,
        "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
    with open(ca_crt, "rb") as f:
        return f.read(), crt, key


def _patch(ops):
    return base64.b64encode(json.dumps(ops).encode()).decode()


class Backend:
    def __init__(self, d, names=("127.0.0.1", "hook.default.svc")):
        self.ca_pem, crt, key = make_certs(d, list(names))
        self.ca_bundle = base64.b64encode(self.ca_pem).decode()
        self.reviews = []
        self.connections = 0
        self.lock = threading.Lock()
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                with backend.lock:
                    backend.connections += 1

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                review = json.loads(self.rfile.read(n))
                with backend.lock:
                    backend.reviews.append((self.path, review))
                path = self.path.split("?")[0]
                if review.get("kind") == "ConversionReview":
                    return self._convert(path, review)
                req = review["request"]
                resp = {"uid": req["uid"], "allowed": True}
                labels = ((req.get("object") or {}).get("metadata") or {}).get("labels")
                if path == "/deny":
                    resp = {"uid": req["uid"], "allowed": False,
                            "status": {"message": "no thanks", "code": 403, "reason": "Forbidden"}}
                elif path == "/deny-bare":
                    resp = {"uid": req["uid"], "allowed": False}
                elif path == "/mutate":
                    ops = [{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]
                    if labels is None:
                        ops = [{"op": "add", "path": "/metadata/labels",
                                "value": {"mutated": "yes"}}]
                    resp.update(patchType="JSONPatch", patch=_patch(ops))
                elif path == "/mutate-b":
                    seen = (labels or {}).get("mutated", "none")
                    ops = [{"op": "add", "path": "/metadata/labels/second", "value": seen}]
                    resp.update(patchType="JSONPatch", patch=_patch(ops))
                elif path == "/warn":
                    resp.update(warnings=["careful with that"],
                                auditAnnotations={"checked": "yes"})
                elif path == "/garbage":
                    return self._send(200, b"this is not json")
                elif path == "/wrong-uid":
                    resp["uid"] = "not-the-uid"
                elif path == "/bad-patch":
                    resp.update(patchType="JSONPatch", patch=_patch(
                        [{"op": "remove", "path": "/spec/nothing/here"}]))
                elif path == "/slow":
                    time.sleep(3)
                elif path == "/status500":
                    return self._send(500, b"oops")
                elif path == "/scale-to-5":
                    ops = [{"op": "replace", "path": "/spec/replicas", "value": 5}]
                    resp.update(patchType="JSONPatch", patch=_patch(ops))
                body = json.dumps({"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                                   "response": resp}).encode()
                self._send(200, body)

            def _convert(self, path, review):
                req = review["request"]
                want = req["desiredAPIVersion"]
                out = []
                for o in req["objects"]:
                    o = json.loads(json.dumps(o))
                    spec = o.setdefault("spec", {})
                    if want.endswith("/v2") and "size" in spec:
                        spec["dims"] = {"size": spec.pop("size")}
                    elif want.endswith("/v1") and "dims" in spec:
                        spec["size"] = spec.pop("dims").get("size")
                    o["apiVersion"] = want
                    meta = o.setdefault("metadata", {})
                    meta.setdefault("labels", {})["converted-by"] = "hook"
                    meta["generation"] = 99
                    if path == "/convert-rename":
                        meta["name"] = meta.get("name", "") + "-renamed"
                    if path == "/convert-bad-label":
                        meta["labels"]["bad"] = "not ok!"
                    out.append(o)
                resp = {"uid": req["uid"], "result": {"status": "Success"},
                        "convertedObjects": out}
                if path == "/convert-fail":
                    resp = {"uid": req["uid"], "result": {"status": "Failure",
                                                          "message": "cannot convert this"}}
                elif path == "/convert-garbage":
                    return self._send(200, b"this is not json")
                elif path == "/convert-wrong-uid":
                    resp["uid"] = "not-the-uid"
                elif path == "/convert-none":
                    del resp["convertedObjects"]
                body = json.dumps({"apiVersion": review["apiVersion"], "kind": "ConversionReview",
                                   "response": resp}).encode()
                self._send(200, body)

            def _send(self, code, body):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a client that refused our certificate (a test's point)

        self.httpd = Server(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def url(self, path):
        return "https://127.0.0.1:%d%s" % (self.port, path)

    def paths(self):
        with self.lock:
            return [p.split("?")[0] for p, _ in self.reviews]

    def conversions(self):
        """The ConversionReview requests received so far, in order."""
        with self.lock:
            return [r["request"] for _, r in self.reviews if r.get("kind") == "ConversionReview"]


def closed_port():
    """A loopback port nothing listens on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
