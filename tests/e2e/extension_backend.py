"""A small aggregated API server for the end-to-end tests of API
aggregation: HTTPS (a certificate of its own for ext.default.svc and
127.0.0.1) serving metrics.example.com/v1 "counts" (namespaced, read
only: get, list, watch), as an extension API server behind kube-apiserver
would, trusting a request only when it comes from the front proxy: a
client certificate signed by the requestheader CA that the API server
publishes in kube-system/extension-apiserver-authentication, with one of
its allowed names. Then the user is the X-Remote-User header (groups
X-Remote-Group), which each Count reports in `seenBy`.

Requests it got are kept (`requests`: method, path, user, groups, the
headers) for the tests' assertions."""
import http.server
import json
import os
import socket
import ssl
import threading
import time

from webhook_backend import make_certs

GROUP, VERSION = "metrics.example.com", "v1"
NAMES = ["configmaps", "secrets", "pods"]


class Backend:
    def __init__(self, d, requestheader_ca_pem, allowed_names):
        self.ca_pem, crt, key = make_certs(d, ["127.0.0.1", "ext.default.svc"])
        self.requests = []
        # what /openapi/v3 answers: None (404), bytes (as they are), or an
        # object (JSON); /openapi/v3/apis/... answers self.openapi_doc
        self.openapi_index = None
        self.openapi_doc = {"openapi": "3.0.0", "info": {"title": "ext", "version": "v1"},
                            "paths": {}, "components": {"schemas": {}}}
        self.conns = set()  # open connections, cut by stop() as a process exit does
        self.lock = threading.Lock()
        backend = self
        ca_file = os.path.join(d, "requestheader-ca.crt")
        with open(ca_file, "w") as f:
            f.write(requestheader_ca_pem)

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                with backend.lock:
                    backend.conns.add(self.connection)

            def finish(self):
                with backend.lock:
                    backend.conns.discard(self.connection)
                super().finish()

            def _send(self, code, body, ctype="application/json"):
                data = json.dumps(body).encode() if not isinstance(body, bytes) else body
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _user(self):
                """The proxy's word for the user, if the proxy is trusted."""
                cert = self.connection.getpeercert()
                if not cert:
                    return None
                cn = dict(x[0] for x in cert["subject"]).get("commonName")
                if allowed_names and cn not in allowed_names:
                    return None
                return (self.headers.get("X-Remote-User"),
                        self.headers.get_all("X-Remote-Group") or [])

            def do_GET(self):
                who = self._user()
                path, _, query = self.path.partition("?")
                with backend.lock:
                    backend.requests.append({"method": "GET", "path": path, "query": query,
                                             "user": who, "headers": dict(self.headers)})
                if who is None or not who[0]:
                    return self._send(401, {"kind": "Status", "apiVersion": "v1",
                                            "status": "Failure", "reason": "Unauthorized",
                                            "message": "Unauthorized", "code": 401})
                if path == "/openapi/v3":
                    index = backend.openapi_index
                    if index is None:
                        return self._send(404, {"kind": "Status", "apiVersion": "v1",
                                                "status": "Failure", "reason": "NotFound",
                                                "code": 404, "message": "not found"})
                    if isinstance(index, bytes):
                        return self._send(200, index)
                    return self._send(200, index)
                if path == "/openapi/v3/apis/%s/%s" % (GROUP, VERSION):
                    return self._send(200, backend.openapi_doc)
                base = "/apis/%s/%s" % (GROUP, VERSION)
                if path == base:
                    return self._send(200, {
                        "kind": "APIResourceList", "apiVersion": "v1",
                        "groupVersion": "%s/%s" % (GROUP, VERSION),
                        "resources": [{"name": "counts", "singularName": "count",
                                       "namespaced": True, "kind": "Count",
                                       "verbs": ["get", "list", "watch"],
                                       "shortNames": ["cnt"]}]})
                parts = path[len(base):].strip("/").split("/")
                if len(parts) >= 3 and parts[0] == "namespaces" and parts[2] == "counts":
                    ns = parts[1]
                    if "watch=1" in query or "watch=true" in query:
                        return self._watch(ns, who)
                    if len(parts) == 4:
                        if parts[3] not in NAMES:
                            return self._send(404, {
                                "kind": "Status", "apiVersion": "v1", "status": "Failure",
                                "reason": "NotFound", "code": 404,
                                "message": 'counts.%s "%s" not found' % (GROUP, parts[3])})
                        return self._send(200, self._count(ns, parts[3], who))
                    items = [self._count(ns, n, who) for n in NAMES]
                    if "as=Table" in (self.headers.get("Accept") or ""):
                        return self._send(200, {
                            "kind": "Table", "apiVersion": "meta.k8s.io/v1",
                            "metadata": {"resourceVersion": "1"},
                            "columnDefinitions": [
                                {"name": "Name", "type": "string", "format": "name",
                                 "description": "the counted resource", "priority": 0},
                                {"name": "Objects", "type": "integer", "format": "",
                                 "description": "how many", "priority": 0}],
                            "rows": [{"cells": [i["metadata"]["name"], i["objects"]],
                                      "object": {"kind": "PartialObjectMetadata",
                                                 "apiVersion": "meta.k8s.io/v1",
                                                 "metadata": i["metadata"]}}
                                     for i in items]},
                            "application/json;as=Table;v=v1;g=meta.k8s.io")
                    return self._send(200, {"kind": "CountList",
                                            "apiVersion": "%s/%s" % (GROUP, VERSION),
                                            "metadata": {"resourceVersion": "1"},
                                            "items": items})
                return self._send(404, {"kind": "Status", "apiVersion": "v1",
                                        "status": "Failure", "reason": "NotFound", "code": 404,
                                        "message": "the server could not find the requested "
                                                   "resource"})

            def _count(self, ns, name, who):
                return {"kind": "Count", "apiVersion": "%s/%s" % (GROUP, VERSION),
                        "metadata": {"name": name, "namespace": ns,
                                     "creationTimestamp": "2026-11-28T00:00:00Z",
                                     "resourceVersion": "1"},
                        "objects": len(name), "seenBy": {"user": who[0], "groups": who[1]}}

            def _watch(self, ns, who):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for n in NAMES:
                    line = json.dumps({"type": "ADDED", "object": self._count(ns, n, who)}) + "\n"
                    data = line.encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                    time.sleep(0.05)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass

        self.httpd = Server(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.load_verify_locations(ca_file)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
