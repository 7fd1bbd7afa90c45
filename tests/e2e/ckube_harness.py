"""Shared harness for Python end-to-end tests: starts `ckube server` on a
free loopback port with a fresh data dir and always stops it.

The server serves HTTPS (its default); the harness talks to it as the
written kubeconfig's user, the admin client certificate under the data
dir's pki/, trusting the cluster CA there. `connection()`, `socket()` and
`urlopen()` give a test that identity without repeating it; a server
started with --plain-http gets plain ones.

CKUBE_E2E_STORAGE=etcd runs the server on an etcd member of the test's
own (loopback, data under the test's directory, started with the server
and kept across its restarts), unless the test picks a storage itself,
as tests/e2e/lib.sh does for the shell tests."""
import atexit
import http.client
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

from free_port import free_port

# Set when the test fails (run_unittests, or an exception that ends the
# script): cleanup then prints the end of each server's log, which
# removing the test's directory would otherwise take with it (a CI run's
# only trace of why a server stopped answering).
_failed = False
_prev_excepthook = sys.excepthook


def _on_uncaught(kind, value, tb):
    global _failed
    _failed = True
    _prev_excepthook(kind, value, tb)


sys.excepthook = _on_uncaught

SRC = os.environ.get("CKUBE_SRC") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("CKUBE_BIN") or os.path.join(SRC, "build", "ckube")
KUBECTL = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33"


class Server:
    def __init__(self, *flags):
        base = os.environ.get("CKUBE_TEST_TMP", "/tmp")
        os.makedirs(base, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="e2e-py.", dir=base)
        self.data = os.path.join(self.tmp, "data")
        self.flags = flags
        self.proc = None
        self.log = None
        self.port = free_port()  # kept across restarts
        self.tls = "--plain-http" not in flags
        self._ctx = None
        self.etcd = None  # CKUBE_E2E_STORAGE=etcd: the member's process
        self.etcd_url = None
        atexit.register(self.cleanup)

    def _storage_flags(self):
        """The etcd flags under CKUBE_E2E_STORAGE=etcd (starting the member
        the first time), else none."""
        if os.environ.get("CKUBE_E2E_STORAGE") != "etcd" or any(
                f.startswith("--storage") for f in self.flags):
            return []
        if self.etcd is None:
            cp, pp = free_port(), free_port()
            self.etcd_url = "http://127.0.0.1:%d" % cp
            peer = "http://127.0.0.1:%d" % pp
            with open(os.path.join(self.tmp, "etcd.log"), "ab") as log:
                self.etcd = subprocess.Popen(
                    [os.environ.get("CKUBE_ETCD_BIN", "/usr/bin/etcd"), "--name", "e2e",
                     "--data-dir", os.path.join(self.tmp, "etcd"),
                     "--listen-client-urls", self.etcd_url,
                     "--advertise-client-urls", self.etcd_url, "--listen-peer-urls", peer,
                     "--initial-advertise-peer-urls", peer, "--initial-cluster", "e2e=" + peer,
                     "--log-level", "warn"], stdout=log, stderr=subprocess.STDOUT)
            deadline = time.time() + 20
            while True:
                try:
                    urllib.request.urlopen(self.etcd_url + "/health", timeout=1).read()
                    break
                except OSError:
                    if time.time() > deadline or self.etcd.poll() is not None:
                        raise RuntimeError("etcd did not start")
                    time.sleep(0.1)
        return ["--storage", "etcd", "--etcd-servers", self.etcd_url]

    def ssl_context(self, cert=True):
        """A client TLS context trusting the cluster CA, presenting the
        admin certificate (cert=False: no client certificate)."""
        pki = os.path.join(self.data, "pki")
        ctx = ssl.create_default_context(cafile=os.path.join(pki, "ca.crt"))
        if cert:
            ctx.load_cert_chain(os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"))
        return ctx

    def _context(self):
        if self._ctx is None:
            self._ctx = self.ssl_context()
        return self._ctx

    def connection(self, timeout=30):
        """An http.client connection to the server, as the admin."""
        if not self.tls:
            return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                           context=self._context())

    def socket(self, timeout=20, rcvbuf=None, linger0=False):
        """A connected stream to the server (TLS-wrapped, as the admin, once
        the handshake is done), for tests that write HTTP by hand. rcvbuf:
        SO_RCVBUF set before connecting; linger0: close() resets."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if linger0:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.settimeout(timeout)
        s.connect(("127.0.0.1", self.port))
        if not self.tls:
            return s
        return self._context().wrap_socket(s, server_hostname="127.0.0.1")

    def urlopen(self, path, timeout=10, **kw):
        """urllib's urlopen of a path on the server, as the admin."""
        url = path if "://" in path else self.url + path
        return urllib.request.urlopen(url, timeout=timeout,
                                      context=self._context() if self.tls else None, **kw)

    def start(self):
        kc = os.path.join(self.data, "kubeconfig")
        if os.path.exists(kc):
            os.unlink(kc)
        if self.log:  # a restart: the previous run's handle
            self.log.close()
        self.log = open(os.path.join(self.tmp, "server.log"), "ab")
        self.proc = subprocess.Popen(
            [BIN, "server", "--data-dir", self.data,
             "--listen", "127.0.0.1:%d" % self.port, *self._storage_flags(), *self.flags],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited early:\n" + self.logtail())
            if os.path.exists(kc):
                with open(kc) as f:
                    url = re.search(r"server: (\S+)", f.read())
                if url:
                    try:
                        self.url = url.group(1)
                        self.urlopen("/readyz", timeout=1).read()
                        self.port = int(self.url.rsplit(":", 1)[1])
                        self.kubeconfig = kc
                        return self
                    except OSError:
                        pass
            time.sleep(0.05)
        raise RuntimeError("server not ready:\n" + self.logtail())

    def stop(self):
        """SIGTERM; the server must exit 0 (sanitizer findings fail it,
        its controller-manager child's too), and that child must not have
        ended (and been restarted) during the run."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            rc = self.proc.wait(timeout=30)
            self.proc = None
            if rc != 0:
                raise RuntimeError("server exited %d:\n%s" % (rc, self.logtail()))
            if re.search(r"controller-manager \(process \d+\) ended with",
                         self.logtail(100000)):
                raise RuntimeError("the controller-manager child ended during the run:\n"
                                   + self.logtail())

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def logtail(self, n=60):
        try:
            with open(os.path.join(self.tmp, "server.log"), "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.etcd and self.etcd.poll() is None:
            self.etcd.kill()
            self.etcd.wait()
        if self.log:
            self.log.close()
        if _failed:
            sys.stderr.write("---- the test failed: the last 150 lines of %s/server.log ----\n%s\n"
                             "---- end of server.log ----\n" % (self.tmp, self.logtail(150)))
        if not os.environ.get("KEEP_TMP"):  # as lib.sh: KEEP_TMP=1 keeps it
            shutil.rmtree(self.tmp, ignore_errors=True)

    def kubectl(self, *args, stdin=None, binary=KUBECTL, kubeconfig=None, timeout=60):
        """(returncode, stdout, stderr) of `binary` (kubectl 1.33 unless
        another is given) run with this server's admin kubeconfig, or
        `kubeconfig`, and a HOME of its own under the server's directory
        for each binary (kubectl keeps its discovery cache there)."""
        home = os.path.join(self.tmp, "home" if binary == KUBECTL
                            else "home-" + os.path.basename(binary))
        os.makedirs(home, exist_ok=True)
        env = dict(os.environ, HOME=home, KUBECONFIG=kubeconfig or self.kubeconfig)
        r = subprocess.run([binary, *args], env=env, timeout=timeout, input=stdin,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return r.returncode, r.stdout, r.stderr

    def client(self):
        """An ApiClient of the official Python client for this server."""
        from kubernetes import client, config
        cfg = client.Configuration()
        config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg)
        return client.ApiClient(cfg)


def run_unittests():
    """Runs the calling module's unittest cases verbosely, prints a
    summary line and exits 1 if any failed or errored (ctest reads the
    exit status)."""
    import unittest
    result = unittest.main(module="__main__", exit=False, verbosity=2).result
    failed = len(result.failures) + len(result.errors)
    print("%d passed, %d failed" % (result.testsRun - failed, failed))
    global _failed
    _failed = bool(failed) or not result.wasSuccessful()
    sys.exit(1 if failed or not result.wasSuccessful() else 0)
