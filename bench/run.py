#!/usr/bin/python3
"""bench/run.py - ckube's benchmarks, side by side with peers (issue 7).

    /usr/bin/python3 bench/run.py --build build [--full] [--only PHASES]

Starts every server it measures itself (ckube from BUILD/ckube, etcd from
/usr/bin/etcd) on free loopback ports with data dirs under BUILD/bench/,
drives load with BUILD/bench_load (a separate process), and always stops
what it started (try/finally, atexit, signal handlers, and PR_SET_PDEATHSIG
in each child so even a SIGKILL of this script takes the servers down).

Writes BUILD/bench/results.json as
    {"<metric>": {"value", "unit", "peer", "peer_name", "ratio", ...}, ...}
(ratio = ckube's value / the peer's; extra keys: target, met, note, ...),
BUILD/bench/results.md (the table in Markdown, for docs/performance.md),
BUILD/bench/meta.json (machine, load, phase times) and prints a table.

Quick mode (default) uses N = 10,000 objects and short runs (under 5
minutes on 2 cores); --full uses N = 100,000. Benchmarks never fail on a
figure: the exit status is 0 unless the harness itself breaks. Python 3
standard library only.
"""
import argparse
import atexit
import base64
import ctypes
import glob
import http.client
import json
import os
import platform
import resource
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ETCD = "/usr/bin/etcd"

# ------------------------------------------------------------ processes

_children = []  # every Popen we started and have not yet reaped


def _pdeathsig():
    """Runs in the child before exec: die with SIGTERM if we die."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def stop_proc(p, grace=10.0):
    """SIGTERM, wait up to `grace` s, then SIGKILL. Only our own child."""
    if p is None:
        return
    if p.poll() is None:
        try:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
        except ProcessLookupError:
            pass
    if p in _children:
        _children.remove(p)


def stop_all():
    for p in list(_children):
        stop_proc(p, grace=5.0)


def _on_signal(sig, _frame):
    raise KeyboardInterrupt("signal %d" % sig)


def spawn(argv, log_path, env=None):
    log = open(log_path, "ab")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         preexec_fn=_pdeathsig, start_new_session=True, env=env)
    log.close()
    _children.append(p)
    return p


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(port, path, timeout=2.0, tls=None):
    """One GET on a fresh connection; the status code, or None if refused.
    tls: an ssl.SSLContext for an https server."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
            s = tls.wrap_socket(raw, server_hostname="127.0.0.1") if tls else raw
            s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                       % path).encode())
            data = s.recv(64)
            if data.startswith(b"HTTP/1."):
                return int(data[9:12])
    except (OSError, ValueError):
        return None
    return None


def wait_ready(port, path, t0, timeout, proc, tls=None):
    """Polls until GET path is 200; ms from t0 (the exec), or None.
    tls: a function giving the ssl.SSLContext once the server made its
    certificates (None while it has not)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return None
        ctx = tls() if tls else None
        if (ctx or not tls) and http_status(port, path, timeout=1.0, tls=ctx) == 200:
            return (time.monotonic() - t0) * 1000.0
        time.sleep(0.002)
    return None


def proc_mem(pid):
    """(VmRSS, VmHWM) in bytes from /proc/PID/status, or (None, None)."""
    rss = hwm = None
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, hwm


def proc_anon(pid):
    """RssAnon in bytes from /proc/PID/status, or None: the process's own
    memory, without the file-backed pages VmRSS also counts (shared
    libraries; how many of those are mapped depends on the kernel and the
    page cache: a kernel that maps a cached file's large folios whole
    counts all of libcrypto)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def proc_cpu_s(pid):
    """User + system CPU seconds of a process (its threads, not its
    children), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def with_server_cpu(proc, run):
    """Runs run() (a bench_load call) and adds to its result the server's
    CPU time per request it handled: on a machine shared with other
    tenants, throughput moves by 2x between rounds, CPU per request much
    less, so it is the figure to compare a change of the hot path by."""
    before = proc_cpu_s(proc.pid)
    d = run()
    after = proc_cpu_s(proc.pid)
    n = d.get("issued") or d.get("ok") or 0
    if before is not None and after is not None and n:
        d["server_cpu_us_per_op"] = (after - before) * 1e6 / n
    return d


def child_pids(pid):
    """The direct children of PID (the server's controller-manager)."""
    out = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def children_rss(pid):
    """Summed VmRSS of PID's children, or None when it has none."""
    rs = [proc_mem(c)[0] for c in child_pids(pid)]
    rs = [r for r in rs if r is not None]
    return sum(rs) if rs else None


def http_json(method, url, body=None, timeout=30, context=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout, context=context) as r:
        return r.status, r.read()


# ------------------------------------------------------------- servers


class Server:
    """One ckube or etcd process on a free loopback port, data under `tmp`.
    ckube serves plain HTTP (--plain-http) unless tls=True: the plain
    figures stay comparable with earlier runs and with etcd's plain
    listener; the tls phase and the idle RSS run it as users do."""

    def __init__(self, kind, tmp, name, flags=(), data_dir=None, fresh=True, tls=False,
                 binary=None):
        self.kind, self.tmp, self.name = kind, tmp, name
        self.binary = binary or ARGS.ckube
        self.tls = tls and kind == "ckube"
        self.flags = list(flags) + (["--plain-http"] if kind == "ckube" and not self.tls else [])
        self.data_dir = data_dir or os.path.join(tmp, name)
        if fresh and os.path.exists(self.data_dir):
            shutil.rmtree(self.data_dir)
        self.port = self.peer_port = None
        self.proc = None
        self.startup_ms = None

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % ("https" if self.tls else "http", self.port)

    def pki(self, name):
        return os.path.join(self.data_dir, "pki", name)

    def tls_args(self):
        """bench_load's flags: trust the cluster CA, present the admin cert."""
        if not self.tls:
            return []
        return ["--cacert", self.pki("ca.crt"), "--cert", self.pki("admin.crt"),
                "--key", self.pki("admin.key")]

    def ssl_context(self):
        """The admin's client context, or None before the files exist."""
        if not os.path.exists(self.pki("admin.key")):
            return None
        try:
            ctx = ssl.create_default_context(cafile=self.pki("ca.crt"))
            ctx.load_cert_chain(self.pki("admin.crt"), self.pki("admin.key"))
            return ctx
        except (OSError, ssl.SSLError):
            return None  # (being written)

    def start(self, timeout, same_ports=False):
        """same_ports: restart on the ports of the last start (an etcd that
        its clients must find again)."""
        if not (same_ports and self.port):
            self.port, self.peer_port = free_port(), free_port()
        log = os.path.join(self.tmp, self.name + ".log")
        if self.kind == "ckube":
            argv = [self.binary, "server", "--data-dir", self.data_dir,
                    "--listen", "127.0.0.1:%d" % self.port] + self.flags
            ready = "/readyz"
        else:
            peer = self.peer_port
            argv = [ETCD, "--name", "bench", "--data-dir", self.data_dir,
                    "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                    "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
                    "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
                    "--initial-cluster", "bench=http://127.0.0.1:%d" % peer] + self.flags
            ready = "/health"
        t0 = time.monotonic()
        self.proc = spawn(argv, log)
        self.startup_ms = wait_ready(self.port, ready, t0, timeout, self.proc,
                                     self.ssl_context if self.tls else None)
        if self.startup_ms is None:
            tail = ""
            try:
                with open(log, "rb") as f:
                    tail = f.read()[-600:].decode(errors="replace")
            except OSError:
                pass
            self.stop()
            raise RuntimeError("%s did not become ready in %ss; log tail:\n%s"
                               % (self.name, timeout, tail))
        return self

    def rss(self):
        return proc_mem(self.proc.pid)

    def children_rss(self):
        return children_rss(self.proc.pid)

    def stop(self):
        stop_proc(self.proc)
        self.proc = None


# --------------------------------------------------------------- results

RESULTS = {}
META = {"phases": {}, "skipped": {}}
NOTES = []


def put(metric, value, unit, peer=None, peer_name=None, **extra):
    ratio = None
    if isinstance(value, (int, float)) and isinstance(peer, (int, float)) and peer:
        ratio = round(value / peer, 4)
    e = {"value": rnd(value), "unit": unit, "peer": rnd(peer), "peer_name": peer_name,
         "ratio": ratio}
    e.update({k: rnd(v) for k, v in extra.items()})
    RESULTS[metric] = e


def rnd(v):
    if isinstance(v, float):
        return round(v, 4) if abs(v) < 1000 else round(v, 1)
    return v


def skip(metric, unit, reason, **extra):
    print("  skip %s: %s" % (metric, reason), flush=True)
    META["skipped"][metric] = reason
    put(metric, None, unit, note=reason, **extra)


class Phase:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.t0 = time.monotonic()
        print("== %s" % self.name, flush=True)
        return self

    def __exit__(self, et, ev, tb):
        dt = time.monotonic() - self.t0
        META["phases"][self.name] = round(dt, 2)
        if et is not None and not issubclass(et, KeyboardInterrupt):
            # A phase that breaks is reported, not fatal: the run goes on.
            print("  phase %s failed: %s: %s" % (self.name, et.__name__, ev), flush=True)
            META["phases"][self.name + " (failed)"] = "%s: %s" % (et.__name__, ev)
            return True
        print("   (%.1fs)" % dt, flush=True)
        return False


def loadgen(args, timeout):
    """Runs bench_load, bounded by its own --timeout and ours 30 s later;
    its JSON object, or raises with its stderr."""
    argv = [ARGS.bench_load] + [str(a) for a in args] + ["--timeout", str(timeout)]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout + 30, preexec_fn=_pdeathsig)
    out = r.stdout.decode(errors="replace").strip().splitlines()
    if r.returncode != 0 or not out:
        raise RuntimeError("bench_load %s failed (%d): %s" % (
            " ".join(argv[1:5]), r.returncode, r.stderr.decode(errors="replace")[-500:]))
    d = json.loads(out[-1])
    if d.get("errors"):
        print("  note: %d errors; first: %s" % (d["errors"], d.get("first_error", "")[:200]))
    if d.get("timed_out"):
        print("  note: bench_load hit its %ss time limit; figures are partial" % timeout)
    return d


def run_json_tool(argv, timeout, cwd=REPO):
    """Runs a tool that prints one JSON object; (dict, None) or (None, reason)."""
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, cwd=cwd, preexec_fn=_pdeathsig)
    except subprocess.TimeoutExpired:
        return None, "timed out after %ss" % timeout
    except OSError as e:
        return None, str(e)
    lines = [l for l in r.stdout.decode(errors="replace").splitlines() if l.strip()]
    if r.returncode != 0 or not lines:
        return None, "exit %d: %s" % (r.returncode,
                                      r.stderr.decode(errors="replace").strip()[-300:])
    try:
        return json.loads(lines[-1]), None
    except ValueError:
        return None, "no JSON on stdout: %s" % lines[-1][:200]


def cpu_stalls(label):
    """Runs bench_stalls (3 s, a spinning thread per CPU) and keeps its
    figures under STATE["stalls"][label]: how often the machine itself
    took a running thread off its CPU for over 1 ms just before a latency
    phase. Context for the tails, not a metric of ckube."""
    exe = os.path.join(ARGS.build, "bench_stalls")
    if not os.access(exe, os.X_OK):
        return None
    d, why = run_json_tool([exe, "--duration", "3"], 30)
    if d is None:
        print("  note: bench_stalls: %s" % why)
        return None
    STATE.setdefault("stalls", {})[label] = d
    print("  machine: %.1f stalls/s over 1 ms per busy CPU (max %.1f ms) before %s"
          % (d["gaps_over_1ms_per_s"], d["max_gap_ms"], label), flush=True)
    return d


def mib(b):
    return None if b is None else b / 1048576.0


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ----------------------------------------------------------------- phases

CM_OFF = ["--controller-manager=false"]


def phase_idle(tmp):
    """Fresh servers: start-up time empty, idle RSS with and without controllers."""
    runs = 3 if not ARGS.full else 5
    startups, rss_off, anon_off = [], [], []
    for i in range(runs):
        s = Server("ckube", tmp, "idle-nocm-%d" % i, CM_OFF, tls=True).start(30)
        startups.append(s.startup_ms)
        time.sleep(1.0)
        rss_off.append(s.rss()[0])
        anon_off.append(proc_anon(s.proc.pid))
        s.stop()
        shutil.rmtree(s.data_dir, ignore_errors=True)
    s = Server("ckube", tmp, "idle-default", tls=True).start(30)
    startup_default = s.startup_ms
    time.sleep(3.0)  # the controller-manager child starts its informers
    rss_default = s.rss()[0]
    STATE["rss_idle_cm"] = s.children_rss()
    s.stop()
    shutil.rmtree(s.data_dir, ignore_errors=True)
    STATE["rss_idle_nocm"] = median(rss_off)
    if None not in anon_off:
        STATE["rss_idle_anon_nocm"] = median(anon_off)
    STATE["startup_empty"] = median(startups)
    STATE["rss_idle_default"] = rss_default
    STATE["startup_empty_default"] = startup_default
    print("  startup empty (no cm) runs ms: %s" % [round(x, 1) for x in startups])


def etcd_create_round(tmp, r):
    """The write peer: etcd, durable defaults, same disk, same clients and payload."""
    e = Server("etcd", tmp, "etcd-%d" % r).start(60)
    try:
        if r == 0:
            STATE["etcd_startup"] = e.startup_ms
            time.sleep(1.0)
            STATE["etcd_rss_idle"] = e.rss()[0]
        d = with_server_cpu(e.proc, lambda: loadgen(
            ["--mode", "create", "--flavour", "etcd", "--url", e.url, "--namespace", "default",
             "--prefix", "cm", "--conns", 64, "--duration", DUR["create"]], DUR["create"] + 60))
        STATE.setdefault("etcd_create", []).append(d)
        print("  round %d etcd : %6.0f/s p50 %6.2f ms p99 %6.2f ms"
              % (r, d["per_s"], d["p50_ms"], d["p99_ms"]), flush=True)
    finally:
        e.stop()
        shutil.rmtree(e.data_dir, ignore_errors=True)


def ckube_create_round(tmp, r):
    s = Server("ckube", tmp, "create-%d" % r, CM_OFF).start(30)
    try:
        d = with_server_cpu(s.proc, lambda: loadgen(
            ["--mode", "create", "--url", s.url, "--namespace", "default", "--prefix", "cm",
             "--conns", 64, "--duration", DUR["create"]], DUR["create"] + 60))
        STATE.setdefault("ckube_create", []).append(d)
        print("  round %d ckube: %6.0f/s p50 %6.2f ms p99 %6.2f ms"
              % (r, d["per_s"], d["p50_ms"], d["p99_ms"]), flush=True)
    finally:
        s.stop()
        shutil.rmtree(s.data_dir, ignore_errors=True)


def phase_create(tmp):
    """Creates, alternating etcd and ckube rounds so machine noise hits both."""
    have_etcd = os.access(ETCD, os.X_OK)
    if not have_etcd:
        STATE["etcd_skip"] = "%s not found (make bench installs etcd-server)" % ETCD
        print("  skip etcd: %s" % STATE["etcd_skip"])
    for r in range(REPEAT["create"]):
        if have_etcd:
            etcd_create_round(tmp, r)
        ckube_create_round(tmp, r)


INSTR_CREATES = 3000


def callgrind_creates(binary, tmp, name):
    """User-space instructions per durable create of `binary`'s server,
    counted by callgrind: the server runs under valgrind, takes 300
    creates to warm up, its counters are zeroed, then INSTR_CREATES
    creates at 16 connections, and the counters are dumped. Kernel work
    (the socket, fsync, wake-ups) is not counted. None without valgrind."""
    vg, ctl = shutil.which("valgrind"), shutil.which("callgrind_control")
    if not vg or not ctl:
        return None
    data = os.path.join(tmp, name)
    shutil.rmtree(data, ignore_errors=True)
    out = os.path.join(tmp, name + ".callgrind")
    port = free_port()
    argv = [vg, "--tool=callgrind", "--separate-threads=yes", "--callgrind-out-file=" + out,
            binary, "server",
            "--data-dir", data, "--listen", "127.0.0.1:%d" % port, "--plain-http"] + CM_OFF
    proc = spawn(argv, os.path.join(tmp, name + ".log"))
    try:
        if wait_ready(port, "/readyz", time.monotonic(), 120, proc) is None:
            raise RuntimeError("%s under callgrind did not become ready" % name)
        url = "http://127.0.0.1:%d" % port
        loadgen(["--mode", "create", "--url", url, "--namespace", "default", "--prefix", "warm",
                 "--conns", 8, "--count", 300], 120)
        subprocess.run([ctl, "-z", str(proc.pid)], stdout=subprocess.DEVNULL, timeout=60)
        d = loadgen(["--mode", "create", "--url", url, "--namespace", "default", "--prefix", "cm",
                     "--conns", 16, "--count", INSTR_CREATES], 300)
        subprocess.run([ctl, "-d", str(proc.pid)], stdout=subprocess.DEVNULL, timeout=60)
        if d["ok"] != INSTR_CREATES:
            raise RuntimeError("%s: %d of %d creates" % (name, d["ok"], INSTR_CREATES))
        # One file per thread for the dump (out.1-NN). The storage
        # committer's share depends on how many creates share a commit,
        # which moves with the machine's load; the request path's does not.
        total = committer = 0
        for path in glob.glob(out + ".1-*"):
            n, commit = 0, False
            with open(path, errors="replace") as f:
                for line in f:
                    if line.startswith(("summary:", "totals:")) and not n:
                        n = int(line.split()[1])
                    elif "committer_main" in line:  # (fn= or cfn=, named once per file)
                        commit = True
            total += n
            committer += n if commit else 0
        if not total:
            return None
        return {"total": total / INSTR_CREATES, "committer": committer / INSTR_CREATES,
                "request_path": (total - committer) / INSTR_CREATES}
    finally:
        stop_proc(proc)
        shutil.rmtree(data, ignore_errors=True)


def phase_instr(tmp):
    """Instructions per create, this build and (with --compare) the older one."""
    mine = callgrind_creates(ARGS.ckube, tmp, "instr")
    if mine is None:
        STATE["instr_skip"] = "valgrind not found (make bench installs it)"
        print("  skip: %s" % STATE["instr_skip"])
        return
    old = None
    if ARGS.compare:
        old = callgrind_creates(os.path.join(ARGS.compare, "ckube"), tmp, "instr-compare")
    STATE["instr"] = (mine, old)
    for who, d in (("this build", mine), ("compare build", old)):
        if d:
            print("  %s: %.0f instructions per create (request path %.0f, storage committer %.0f)"
                  % (who, d["total"], d["request_path"], d["committer"]), flush=True)


def populate(s, tag=""):
    """N labelled 1 KiB ConfigMaps in namespace bench (100 with bench-match=true);
    its figures in STATE[tag + "populate"], STATE[tag + "json_bytes"]."""
    for ns in ("bench", "bench-watch"):
        http_json("POST", s.url + "/api/v1/namespaces",
                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    d = loadgen(["--mode", "create", "--url", s.url, "--namespace", "bench", "--prefix", "obj",
                 "--conns", 64, "--count", N, "--match-every", max(1, N // 100)],
                TIMEOUT["populate"])
    if d["ok"] != N:
        raise RuntimeError("populate: %d of %d objects created" % (d["ok"], N))
    STATE[tag + "populate"] = d
    print("  populated %d objects at %.0f/s" % (d["ok"], d["per_s"]))
    # the objects' JSON size as served (resourceVersion, uid, managedFields...)
    sizes = []
    for i in (0, 1, N // 2, N - 1):
        _, body = http_json("GET", s.url + "/api/v1/namespaces/bench/configmaps/obj-%d" % i)
        sizes.append(len(body))
    STATE[tag + "json_bytes"] = statistics.mean(sizes)


def wrk_get(url, seconds):
    """wrk -t1 -c64 on url: requests/s, or None."""
    wrk = shutil.which("wrk")
    if not wrk:
        return None
    try:
        r = subprocess.run([wrk, "-t1", "-c64", "-d%ds" % seconds, url], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=seconds + 30,
                           preexec_fn=_pdeathsig)
    except (subprocess.TimeoutExpired, OSError) as e:
        print("  wrk failed: %s" % e)
        return None
    for line in r.stdout.decode(errors="replace").splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    return None


def phase_get(s):
    path = "/api/v1/namespaces/bench/configmaps/obj-1"
    # Closed loop, in rounds alternating with wrk (the same 64 connections,
    # a cross-check of the load generator, not a metric): noise on a shared
    # machine moves single runs by 2x, so the value is the median round.
    for r in range(REPEAT["get"]):
        d = with_server_cpu(s.proc, lambda: loadgen(
            ["--mode", "get", "--url", s.url, "--path", path, "--conns", 64, "--warmup", 1,
             "--duration", DUR["get"]], DUR["get"] + 60))
        STATE.setdefault("get_closed", []).append(d)
        w = wrk_get(s.url + path, DUR["get"])
        if w is not None:
            STATE.setdefault("wrk_get", []).append(w)
        print("  round %d closed loop: %.0f/s p50 %.3f p99 %.3f ms (loadgen cpu %.0f%%); "
              "wrk %s/s" % (r, d["per_s"], d["p50_ms"], d["p99_ms"], d["loadgen_cpu_pct"],
                            "%.0f" % w if w is not None else "-"), flush=True)
    cpu_stalls("get_open")
    # Open loop at 20k/s, in rounds too: a single run's p99 is a tail of a
    # few hundred requests, and moves by 3x with the machine's noise; the
    # value is the median round's (every round is listed).
    for r in range(REPEAT["get"]):
        d = loadgen(["--mode", "get", "--url", s.url, "--path", path, "--conns", 64,
                     "--rate", 20000, "--warmup", 1, "--duration", DUR["get"]], DUR["get"] + 60)
        STATE.setdefault("get_open", []).append(d)
        print("  round %d open loop at 20k/s: %.0f/s p50 %.3f p99 %.3f ms" % (
            r, d["per_s"], d["p50_ms"], d["p99_ms"]), flush=True)
    # context for the 20k figure: the same at a quarter of the rate
    d = loadgen(["--mode", "get", "--url", s.url, "--path", path, "--conns", 64, "--rate", 5000,
                 "--warmup", 1, "--duration", 3], 63)
    STATE["get_open_5k"] = d
    print("  open loop at 5k/s: %.0f/s p50 %.3f p99 %.3f ms" % (d["per_s"], d["p50_ms"],
                                                              d["p99_ms"]))


def phase_list(s):
    path = "/api/v1/namespaces/bench/configmaps"
    d = loadgen(["--mode", "list", "--url", s.url, "--path", path, "--conns", 1,
                 "--repeat", REPEAT["list"]], TIMEOUT["list"])
    STATE["list"] = d
    print("  full list of %d: p50 %.1f ms (min %.1f, max %.1f), %.1f MB"
          % (d["items_max"], d["p50_ms"], d["min_ms"], d["max_ms"], d["bytes_per_list"] / 1e6))
    sel = path + "?labelSelector=bench-match%3Dtrue"
    d = loadgen(["--mode", "list", "--url", s.url, "--path", sel, "--conns", 1, "--repeat", 9],
                TIMEOUT["list"])
    STATE["list_sel"] = d
    # Diagnosis: the same with TCP_QUICKACK on the client, which tells a
    # server-side Nagle/delayed-ACK stall apart from work in the server.
    dq = loadgen(["--mode", "list", "--url", s.url, "--path", sel, "--conns", 1, "--repeat", 9,
                  "--quickack"], TIMEOUT["list"])
    STATE["list_sel_quickack"] = dq
    print("  selector list (%d items): p50 %.2f ms; with client quickack %.2f ms"
          % (d["items_max"], d["p50_ms"], dq["p50_ms"]))

    # Peak RSS growth during 4 concurrent full lists: reset the peak
    # (clear_refs 5) and also sample VmRSS, in case clear_refs is refused.
    pid = s.proc.pid
    time.sleep(0.5)
    base = s.rss()[0]
    hwm_reset = False
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
        hwm_reset = True
    except OSError:
        pass
    peak = [base]
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            r = proc_mem(pid)[0]
            if r and r > peak[0]:
                peak[0] = r
            time.sleep(0.002)

    t = threading.Thread(target=sampler, daemon=True)
    t.start()
    try:
        d = loadgen(["--mode", "list", "--url", s.url, "--path", path, "--conns", 4,
                     "--repeat", 1], TIMEOUT["list"])
    finally:
        stop.set()
        t.join()
    hwm = s.rss()[1] if hwm_reset else None
    top = max(x for x in (peak[0], hwm) if x is not None)
    STATE["list_rss"] = {"base": base, "peak": top, "sampled_peak": peak[0], "hwm": hwm,
                         "lists": d}
    print("  4 concurrent lists: p50 %.1f ms, RSS %.1f -> peak %.1f MiB"
          % (d["p50_ms"], mib(base), mib(top)))


def phase_watch(s, tag="", duration=None, drain=5):
    """1000 watchers, 100 creates/s; into STATE[tag + "watch"]."""
    duration = duration or DUR["watch"]
    cpu_stalls(tag + "watch")
    d = loadgen(["--mode", "watch-fanout", "--url", s.url, "--namespace", "bench-watch",
                 "--prefix", "w", "--watchers", 1000, "--rate", 100, "--duration", duration,
                 "--drain", drain], duration + 120)
    STATE[tag + "watch"] = d
    print("  watch fan-out: %d/%d watchers, received %d of %d; commit->receipt p99 >= %.1f ms, "
          "send->receipt p99 %.1f ms, write p99 %.1f ms"
          % (d["watchers_ok"], d["watchers"], d["received"], d["expected"], d["p99_ms"],
             d["e2e_p99_ms"], d["write_p99_ms"]))


def phase_watch10k(s):
    """10,000 watchers at 10 creates/s: the deliveries per second (and
    bytes) of the 1,000-watcher phase spread over ten times the watchers,
    so what grows is each event's fan-out, not the machine's load. Also
    the server's memory and descriptors per watcher, sampled mid-run."""
    dur = DUR["watch"]
    base = s.rss()[0]
    mid = {}

    def sample():
        time.sleep(dur / 2 + 5)  # connected (about 3 s) and streaming
        mid["rss"] = s.rss()[0]
        try:
            mid["fds"] = len(os.listdir("/proc/%d/fd" % s.proc.pid))
        except OSError:
            pass

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    d = watch10k_load(s.url, dur)
    t.join()
    d["rss_base"], d["rss_mid"], d["fds_mid"] = base, mid.get("rss"), mid.get("fds")
    STATE["watch10k"] = d
    print("  10,000 watchers: %d ok, received %d of %d; commit->receipt p50 %.1f ms, p99 %.1f ms;"
          " server RSS %.1f -> %.1f MiB, %s descriptors"
          % (d["watchers_ok"], d["received"], d["expected"], d["p50_ms"], d["p99_ms"],
             mib(base), mib(mid.get("rss") or base), mid.get("fds")))
    phase_watch10k_floor(s.tmp, dur)


def watch10k_load(url, dur):
    """bench_load's 10,000 watchers at 10 creates/s against url."""
    return loadgen(["--mode", "watch-fanout", "--url", url, "--namespace", "bench-watch",
                    "--prefix", "w10k", "--watchers", 10000, "--rate", 10, "--duration", dur,
                    "--drain", 5], dur + 180)


def phase_watch10k_floor(tmp, dur):
    """The same load against bench_fanout_floor, a server that only
    forwards each POSTed body to every watcher (one send each, threads as
    ckube's loops): the loopback's and the load generator's own share of
    the 10,000-watcher figure, measured right after ckube's run."""
    exe = os.path.join(ARGS.build, "bench_fanout_floor")
    if not os.access(exe, os.X_OK):
        STATE["watch10k_floor_skip"] = "%s not built" % exe
        return
    port = free_port()
    p = spawn([exe, "--port", str(port), "--timeout", str(dur + 240)],
              os.path.join(tmp, "fanout-floor.log"))
    try:
        if wait_ready(port, "/", time.monotonic(), 10, p) is None:
            STATE["watch10k_floor_skip"] = "bench_fanout_floor did not answer"
            return
        d = watch10k_load("http://127.0.0.1:%d" % port, dur)
    finally:
        stop_proc(p)
    STATE["watch10k_floor"] = d
    print("  the same against a do-nothing fan-out server (bench_fanout_floor): received %d of %d;"
          " p50 %.1f ms, p99 %.1f ms" % (d["received"], d["expected"], d["p50_ms"], d["p99_ms"]))


def phase_informers(s):
    exe = os.path.join(ARGS.build, "bench_informer")
    if os.access(exe, os.X_OK):
        d, why = run_json_tool([exe, "--server", s.url, "--namespace", "bench", "--expect", str(N),
                                "--timeout", str(TIMEOUT["informer"])], TIMEOUT["informer"] + 30)
        STATE["informer_c"] = d
        STATE["informer_c_skip"] = why
        print("  bench_informer: %s" % (d if d else why))
    else:
        STATE["informer_c_skip"] = "%s not built" % exe
    js = os.path.join(REPO, "bench", "node", "informer.js")
    node = shutil.which("node")
    if not node or not os.path.exists(js):
        STATE["informer_node_skip"] = ("node not installed" if not node
                                       else "bench/node/informer.js missing")
        return
    modules = None
    setup = os.path.join(REPO, "bench", "node", "setup.sh")
    if os.access(setup, os.X_OK):
        try:
            r = subprocess.run([setup], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=300, cwd=REPO, preexec_fn=_pdeathsig)
            if r.returncode == 0 and r.stdout.strip():
                modules = r.stdout.decode().strip().splitlines()[-1]
            else:
                STATE["informer_node_skip"] = "bench/node/setup.sh failed: %s" % (
                    r.stderr.decode(errors="replace").strip()[-300:])
                return
        except subprocess.TimeoutExpired:
            STATE["informer_node_skip"] = "bench/node/setup.sh timed out"
            return
    argv = [node, js, "--server", s.url, "--namespace", "bench", "--expect", str(N),
            "--timeout", str(TIMEOUT["informer"])]
    if modules:
        argv += ["--modules", modules]
    d, why = run_json_tool(argv, TIMEOUT["informer"] + 30)
    STATE["informer_node"] = d
    STATE["informer_node_skip"] = why
    print("  client-node informer: %s" % (d if d else why))


POPULATED_PARTS = ("get", "list", "watch", "watch10k", "informers")


def want_part(part):
    """Whether --only asks for this part of the populated phase: all of
    them by default and with "populated", else the ones named."""
    only = set(x for x in ARGS.only.split(",") if x)
    return not only or "populated" in only or part in only


def phase_populated(tmp):
    """One data dir with N objects: load, lists, watch, informers on it."""
    s = Server("ckube", tmp, "populated", CM_OFF).start(30)
    STATE["populated_dir"] = s.data_dir
    try:
        with Phase("populate %d objects" % N):
            populate(s)
        if "json_bytes" not in STATE:
            return
        if want_part("get"):
            with Phase("get"):
                phase_get(s)
        if want_part("list"):
            with Phase("list"):
                phase_list(s)
        if want_part("watch"):
            with Phase("watch fan-out"):
                phase_watch(s)
        if (ARGS.full and want_part("watch10k")) or "watch10k" in ARGS.only.split(","):
            with Phase("watch fan-out, 10,000 watchers"):
                phase_watch10k(s)
        if want_part("informers"):
            with Phase("informers"):
                phase_informers(s)
    finally:
        s.stop()


def phase_restart(tmp):
    """Start-up with N objects and RSS per object, on the populated dir."""
    d = STATE.get("populated_dir")
    if not d or "json_bytes" not in STATE:
        return
    starts, rss = [], []
    for i in range(3):
        s = Server("ckube", tmp, "restart-%d" % i, CM_OFF, data_dir=d, fresh=False).start(
            TIMEOUT["startup"])
        starts.append(s.startup_ms)
        time.sleep(1.0)
        rss.append(s.rss()[0])
        s.stop()
    STATE["startup_n"] = median(starts)
    STATE["rss_n_nocm"] = median(rss)
    s = Server("ckube", tmp, "restart-default", [], data_dir=d, fresh=False).start(
        TIMEOUT["startup"])
    STATE["startup_n_default"] = s.startup_ms
    time.sleep(3.0 if not ARGS.full else 6.0)
    STATE["rss_n_default"] = s.rss()[0]
    STATE["rss_n_cm"] = s.children_rss()
    s.stop()
    print("  start-up with %d objects, runs ms: %s; RSS %.1f MiB (no cm), %.1f MiB (default)"
          % (N, [round(x, 1) for x in starts], mib(STATE["rss_n_nocm"]),
             mib(STATE["rss_n_default"])))


# ------------------------------------------------------------ scale phase
#
# `--scale N` (make bench FULL=1 SCALE=1000000): N ConfigMaps created once,
# then the start-ups on that data dir, each build in turn (this build and,
# with --compare DIR, the one in DIR: the old build side by side in one
# run, on the same bytes), twice each, alternating so the machine's drift
# hits both. Off by default: a million objects take about 20 minutes.

def scale_watch_resume(s, rev, ns, count):
    """Watches `ns` from `rev` (the revision the server restarted at) and
    waits for `count` ADDED events: (ms to the last, events, status)."""
    host, port = "127.0.0.1", s.port
    conn = http.client.HTTPConnection(host, port, timeout=60)
    t0 = time.monotonic()
    conn.request("GET", "/api/v1/namespaces/%s/configmaps?watch=1&resourceVersion=%s"
                 % (ns, rev))
    r = conn.getresponse()
    if r.status != 200:
        conn.close()
        return None, 0, r.status
    got = 0
    for line in r:
        ev = json.loads(line)
        if ev.get("type") == "ERROR":
            conn.close()
            return None, got, ev["object"].get("code")
        if ev.get("type") == "ADDED":
            got += 1
            if got == count:
                break
    ms = (time.monotonic() - t0) * 1000
    conn.close()
    return ms, got, 200


def scale_list(s):
    """One full list of everything (all namespaces' ConfigMaps): ms, items,
    bytes, and the RSS it added (VmHWM reset before, as phase_list)."""
    pid = s.proc.pid
    base = s.rss()[0]
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
    except OSError:
        pass
    d = loadgen(["--mode", "list", "--url", s.url, "--path", "/api/v1/configmaps", "--conns", 1,
                 "--repeat", 3], TIMEOUT["list"] * 4)
    hwm = s.rss()[1]
    return d, max(0, (hwm or base) - base)


def scale_rev(s):
    """The server's current revision (a list's resourceVersion)."""
    _, body = http_json("GET", s.url + "/api/v1/namespaces/default/configmaps?limit=1")
    return json.loads(body)["metadata"]["resourceVersion"]


def scale_start(tmp, d, name, binary, rev, k):
    """One start of `binary` on data dir d: start-up ms, steady and peak
    RSS, a full list, and a watch resumed from `rev` (the revision the
    last server stopped at, as a client that watched it would) over k
    objects created after the start."""
    s = Server("ckube", tmp, name, CM_OFF, data_dir=d, fresh=False, binary=binary).start(
        TIMEOUT["startup"] * 4)
    try:
        time.sleep(3.0)
        rss, hwm = s.rss()
        out = {"startup_ms": s.startup_ms, "rss": rss, "peak": hwm}
        ns = "resume-%s" % name
        http_json("POST", s.url + "/api/v1/namespaces",
                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        loadgen(["--mode", "create", "--url", s.url, "--namespace", ns, "--prefix", "r",
                 "--conns", 8, "--count", k], 120)
        out["resume_ms"], out["resume_events"], out["resume_status"] = scale_watch_resume(
            s, rev, ns, k)
        lst, extra = scale_list(s)
        out.update(list_ms=lst["p50_ms"], list_items=lst["items_max"],
                   list_bytes=lst["bytes_per_list"], list_extra_rss=extra)
        out["rev"] = scale_rev(s)  # where the next start's watch resumes
        return out
    finally:
        s.stop()


def phase_scale(tmp):
    n = ARGS.scale
    s = Server("ckube", tmp, "scale", CM_OFF).start(60)
    d = s.data_dir
    try:
        http_json("POST", s.url + "/api/v1/namespaces",
                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}})
        c = loadgen(["--mode", "create", "--url", s.url, "--namespace", "bench", "--prefix", "obj",
                     "--conns", 64, "--count", n, "--match-every", max(1, n // 100)],
                    max(600, n // 1000))
        if c["ok"] != n:
            raise RuntimeError("scale: %d of %d objects created" % (c["ok"], n))
        STATE["scale_create"] = c
        sizes = []
        for i in (0, n // 2, n - 1):
            _, body = http_json("GET", s.url + "/api/v1/namespaces/bench/configmaps/obj-%d" % i)
            sizes.append(len(body))
        STATE["scale_json_bytes"] = statistics.mean(sizes)
        rev = scale_rev(s)
        print("  created %d objects at %.0f/s (p99 %.1f ms); restarting at revision %s"
              % (n, c["per_s"], c["p99_ms"], rev))
    finally:
        s.stop()
    builds = [("new", ARGS.ckube)]
    if ARGS.compare:
        builds.append(("old", os.path.join(ARGS.compare, "ckube")))
    runs = {name: [] for name, _ in builds}
    # Each start adds k objects in its own namespace, and a watch from the
    # revision the server before it stopped at must see them.
    k = 1000
    for r in range(2):
        for name, binary in (builds if r % 2 == 0 else builds[::-1]):
            out = scale_start(tmp, d, "scale-%s-%d" % (name, r), binary, rev, k)
            rev = out["rev"]
            runs[name].append(out)
            print("  %s build, round %d: start-up %.0f ms, RSS %.0f MiB, peak %.0f MiB "
                  "(%.2fx); list of %d in %.0f ms (+%.0f MiB); watch resumed over %d events "
                  "in %s ms (status %s)"
                  % (name, r, out["startup_ms"], mib(out["rss"]), mib(out["peak"]),
                     out["peak"] / out["rss"], out["list_items"], out["list_ms"],
                     mib(out["list_extra_rss"]), out["resume_events"],
                     "%.0f" % out["resume_ms"] if out["resume_ms"] else "-",
                     out["resume_status"]), flush=True)
    STATE["scale_runs"] = runs


def build_scale_results():
    S = STATE
    runs = S.get("scale_runs")
    if not runs:
        return
    n, js = ARGS.scale, S["scale_json_bytes"]
    c = S["scale_create"]
    put("scale_create_per_s", c["per_s"], "creates/s", p99_ms=c["p99_ms"], objects=n)

    def med(name, key):
        xs = [x[key] for x in runs.get(name, []) if x.get(key) is not None]
        return median(xs) if xs else None

    old = "old" in runs
    peer = (lambda key: med("old", key)) if old else (lambda key: None)
    pname = "old build (%s)" % ARGS.compare if old else None
    put("scale_startup_ms", med("new", "startup_ms"), "ms", peer("startup_ms"), pname,
        objects=n)
    ratio = lambda name: (median([x["peak"] / x["rss"] for x in runs[name]])
                          if runs.get(name) else None)
    put("scale_startup_peak_rss_ratio", ratio("new"), "x steady", ratio("old") if old else None,
        pname, peak_mb=mib(med("new", "peak")), steady_mb=mib(med("new", "rss")))
    per_obj = lambda name: (median([x["rss"] / x["list_items"] for x in runs[name]])
                            if runs.get(name) else None)
    put("scale_rss_per_object_bytes", per_obj("new"), "B", per_obj("old") if old else None,
        pname, json_bytes=js, json_ratio=per_obj("new") / js)
    put("scale_list_ms", med("new", "list_ms"), "ms", peer("list_ms"), pname,
        items=med("new", "list_items"), mb=med("new", "list_bytes") / 1e6)
    put("scale_list_extra_rss_mb", mib(med("new", "list_extra_rss")), "MiB",
        mib(peer("list_extra_rss")) if old else None, pname)
    put("scale_watch_resume_ms", med("new", "resume_ms"), "ms", peer("resume_ms"), pname,
        events=1000, statuses=[x["resume_status"] for x in runs["new"]])


def phase_tls(tmp):
    """The same server over HTTPS with the admin's client certificate next to
    plain HTTP, in alternating rounds of the same run: creates/s (a fresh
    SQLite server each round), GET/s (two servers side by side, 100
    objects each), and full TLS handshakes per second (a new connection,
    handshake and GET each; the client keeps no sessions)."""
    conns = 64
    for r in range(REPEAT["create"]):
        for tls in (False, True):
            s = Server("ckube", tmp, "tls-create-%d-%s" % (r, "tls" if tls else "plain"), CM_OFF,
                       tls=tls).start(30)
            try:
                d = with_server_cpu(s.proc, lambda: loadgen(
                    ["--mode", "create", "--url", s.url] + s.tls_args() +
                    ["--namespace", "default", "--prefix", "cm", "--conns", conns,
                     "--duration", DUR["create"]], DUR["create"] + 60))
            finally:
                s.stop()
                shutil.rmtree(s.data_dir, ignore_errors=True)
            STATE.setdefault("tls_create" if tls else "plain_create", []).append(d)
            print("  round %d create %-5s %6.0f/s p50 %6.2f p99 %6.2f ms" % (
                r, "tls" if tls else "plain", d["per_s"], d["p50_ms"], d["p99_ms"]), flush=True)
    servers = {}
    try:
        for tls in (False, True):
            s = Server("ckube", tmp, "tls-get-%s" % ("tls" if tls else "plain"), CM_OFF,
                       tls=tls).start(30)
            servers[tls] = s
            loadgen(["--mode", "create", "--url", s.url] + s.tls_args() +
                    ["--namespace", "default", "--prefix", "obj", "--conns", 8, "--count", 100],
                    60)
        path = "/api/v1/namespaces/default/configmaps/obj-1"
        for r in range(REPEAT["get"]):
            for tls in (False, True):
                s = servers[tls]
                d = with_server_cpu(s.proc, lambda: loadgen(
                    ["--mode", "get", "--url", s.url] + s.tls_args() +
                    ["--path", path, "--conns", conns, "--warmup", 1,
                     "--duration", DUR["get"]], DUR["get"] + 60))
                STATE.setdefault("tls_get" if tls else "plain_get", []).append(d)
                print("  round %d get %-5s %6.0f/s p50 %.3f p99 %.3f ms" % (
                    r, "tls" if tls else "plain", d["per_s"], d["p50_ms"], d["p99_ms"]),
                    flush=True)
        s = servers[True]
        rbac_user_rounds(s, path, conns)
        for r in range(REPEAT["get"]):
            d = with_server_cpu(s.proc, lambda: loadgen(
                ["--mode", "get", "--url", s.url] + s.tls_args() +
                ["--path", path, "--conns", 16, "--new-conn", "--warmup", 1,
                 "--duration", DUR["get"]], DUR["get"] + 60))
            STATE.setdefault("tls_handshake", []).append(d)
            print("  round %d new connections: %6.0f handshakes+GETs/s p50 %.3f p99 %.3f ms"
                  % (r, d["per_s"], d["p50_ms"], d["p99_ms"]), flush=True)
    finally:
        for s in servers.values():
            s.stop()


RBAC_BINDINGS = 1000


def rbac_user_rounds(s, path, conns):
    """GETs over TLS as a user RBAC decides for (not system:masters, whom
    the authorizer lets through first), with RBAC_BINDINGS RoleBindings
    in the cluster: the user's certificate is made with the openssl CLI
    from the cluster CA, and a Role and RoleBinding let it read
    ConfigMaps in default; the other bindings name other users across
    100 namespaces."""
    ctx = s.ssl_context()
    rbac = s.url + "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/"

    def post(ns, kind, body):
        http_json("POST", rbac % ns + kind, body, context=ctx)

    post("default", "roles", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                              "metadata": {"name": "cm-reader"},
                              "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                                         "verbs": ["get", "list", "watch"]}]})

    def binding(i, ns, user):
        return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "rb-%d" % i},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": "cm-reader"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                              "name": user},
                             {"kind": "ServiceAccount", "name": "sa-%d" % i}]}
    # other users' bindings in default and elsewhere (namespaces need not
    # exist for the authorizer; they are created so the objects are valid)
    for n in range(100):
        try:
            http_json("POST", s.url + "/api/v1/namespaces",
                      {"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": "rbac-%d" % n}}, context=ctx)
        except urllib.error.HTTPError:
            pass
    with_threads = [threading.Thread(target=lambda k=k: [
        post("rbac-%d" % (i % 100), "rolebindings", binding(i, "rbac-%d" % (i % 100),
                                                             "user-%d" % i))
        for i in range(k, RBAC_BINDINGS - 1, 8)]) for k in range(8)]
    for t in with_threads:
        t.start()
    for t in with_threads:
        t.join()
    post("default", "rolebindings", binding(RBAC_BINDINGS, "default", "bench-reader"))
    key, csr, crt = (s.pki("bench-reader" + e) for e in (".key", ".csr", ".crt"))
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr,
                    "-subj", "/CN=bench-reader/O=bench"], check=True, capture_output=True,
                   timeout=30)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", s.pki("ca.crt"), "-CAkey",
                    s.pki("ca.key"), "-set_serial", "4242", "-days", "1", "-sha256", "-out",
                    crt], check=True, capture_output=True, timeout=30)
    user = ["--cacert", s.pki("ca.crt"), "--cert", crt, "--key", key]
    for r in range(REPEAT["get"]):
        for who, args in (("admin", s.tls_args()), ("rbac", user)):
            d = with_server_cpu(s.proc, lambda: loadgen(
                ["--mode", "get", "--url", s.url] + args +
                ["--path", path, "--conns", conns, "--warmup", 1,
                 "--duration", DUR["get"]], DUR["get"] + 60))
            if d.get("errors"):
                raise RuntimeError("GETs as %s failed: %s" % (who, d))
            STATE.setdefault("tls_get_" + who, []).append(d)
            print("  round %d get tls as %-5s %6.0f/s p50 %.3f p99 %.3f ms" % (
                r, who, d["per_s"], d["p50_ms"], d["p99_ms"]), flush=True)


def phase_workqueue():
    exe = os.path.join(ARGS.build, "bench_workqueue")
    if not os.access(exe, os.X_OK):
        STATE["wq_skip"] = "%s not built" % exe
        return
    d, why = run_json_tool([exe, "--json"], 120)
    STATE["wq"] = d
    STATE["wq_skip"] = why
    print("  workqueue: %s" % (d if d else why))


def phase_typed():
    """ckube-gen's typed objects next to jansson trees (bench_typed): decode
    and encode per object, bytes held per object."""
    exe = os.path.join(ARGS.build, "bench_typed")
    if not os.access(exe, os.X_OK):
        STATE["typed_skip"] = "%s not built" % exe
        return
    d, why = run_json_tool([exe, "--json"], 120)
    STATE["typed"] = d.get("typed") if d else None
    STATE["typed_skip"] = why
    for o in STATE["typed"] or []:
        print("  typed %-10s %5d B: decode %.2f us (jansson %.2f), encode %.2f us (jansson %.2f), "
              "held %d B (tree %d, text %d)" % (
                  o["object"], o["bytes"], o["typed_decode_us"], o["jansson_decode_us"],
                  o["typed_encode_us"], o["jansson_encode_us"], o["typed_bytes"],
                  o["tree_bytes"], o["text_bytes"]), flush=True)
    if not STATE["typed"]:
        print("  typed: %s" % why)


def phase_webhook(tmp):
    """Creates with one validating admission webhook (libckube's webhook
    server, bench_webhook, allowing everything over HTTPS) next to none,
    in alternating rounds of fresh servers: the price of the call out,
    with the server's connections to the webhook kept alive (a TLS
    handshake per call would show as a collapse of creates/s)."""
    exe = os.path.join(ARGS.build, "bench_webhook")
    if not os.access(exe, os.X_OK):
        STATE["webhook_skip"] = "%s not built" % exe
        return
    sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
    from webhook_backend import make_certs
    certs = os.path.join(tmp, "webhook-certs")
    ca, crt, key = make_certs(certs, ["127.0.0.1"])
    shutil.copy(crt, os.path.join(certs, "tls.crt"))
    shutil.copy(key, os.path.join(certs, "tls.key"))
    hook = subprocess.Popen([exe, certs], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            preexec_fn=_pdeathsig)
    try:
        port = json.loads(hook.stdout.readline())["port"]
        config = {"apiVersion": "admissionregistration.k8s.io/v1",
                  "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "bench"},
                  "webhooks": [{"name": "allow.bench.ckube.io", "sideEffects": "None",
                                "admissionReviewVersions": ["v1"],
                                "clientConfig": {"url": "https://127.0.0.1:%d/validate" % port,
                                                 "caBundle": base64.b64encode(ca).decode()},
                                "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                                           "apiVersions": ["v1"], "resources": ["configmaps"]}]}]}
        for r in range(REPEAT["create"]):
            for with_hook in (False, True):
                s = Server("ckube", tmp, "webhook-%d-%s" % (r, "hook" if with_hook else "none"),
                           CM_OFF).start(30)
                try:
                    if with_hook:
                        st, _ = http_json("POST", s.url + "/apis/admissionregistration.k8s.io/"
                                          "v1/validatingwebhookconfigurations", config)
                        if st != 201:
                            raise RuntimeError("webhook configuration: HTTP %s" % st)
                        time.sleep(0.5)
                    d = with_server_cpu(s.proc, lambda: loadgen(
                        ["--mode", "create", "--url", s.url, "--namespace", "default",
                         "--prefix", "cm", "--conns", 64, "--duration", DUR["create"]],
                        DUR["create"] + 60))
                finally:
                    s.stop()
                    shutil.rmtree(s.data_dir, ignore_errors=True)
                STATE.setdefault("webhook_create" if with_hook else "nohook_create", []).append(d)
                print("  round %d create %-10s %6.0f/s p50 %6.2f p99 %6.2f ms" % (
                    r, "webhook" if with_hook else "no webhook", d["per_s"], d["p50_ms"],
                    d["p99_ms"]), flush=True)
    finally:
        hook.stdin.close()
        try:
            STATE["webhook_reviews"] = json.loads(hook.stdout.readline() or "{}").get("reviews")
        except ValueError:
            pass
        stop_proc(hook)


def phase_aggregation(tmp):
    """GETs proxied through an APIService to an aggregated API server
    (bench_aggregated: HTTPS, one thread, a fixed ~1 KiB object) next to
    direct GETs of a ConfigMap of the same size from the same server, in
    alternating rounds: the price of the proxy hop (authentication,
    authorization, the lookup, a request and answer over a kept-alive TLS
    connection, the answer streamed back)."""
    exe = os.path.join(ARGS.build, "bench_aggregated")
    if not os.access(exe, os.X_OK):
        STATE["aggregation_skip"] = "%s not built" % exe
        return
    sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
    from webhook_backend import make_certs
    certs = os.path.join(tmp, "aggregated-certs")
    ca, crt, key = make_certs(certs, ["127.0.0.1", "agg.default.svc"])
    backend = subprocess.Popen([exe, crt, key], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               preexec_fn=_pdeathsig)
    s = None
    try:
        port = json.loads(backend.stdout.readline())["port"]
        s = Server("ckube", tmp, "aggregation", CM_OFF).start(30)
        for path, obj in (
                ("/api/v1/namespaces/default/services",
                 {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "agg"},
                  "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}}),
                ("/api/v1/namespaces/default/endpoints",
                 {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "agg"},
                  "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                               "ports": [{"name": "https", "port": port}]}]}),
                ("/apis/apiregistration.k8s.io/v1/apiservices",
                 {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                  "metadata": {"name": "v1.bench.ckube.io"},
                  "spec": {"group": "bench.ckube.io", "version": "v1",
                           "service": {"namespace": "default", "name": "agg", "port": 443},
                           "caBundle": base64.b64encode(ca).decode(),
                           "groupPriorityMinimum": 1000, "versionPriority": 15}}),
                ("/api/v1/namespaces/default/configmaps",
                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "obj"},
                  "data": {"data": "x" * 799}})):
            st, _ = http_json("POST", s.url + path, obj)
            if st != 201:
                raise RuntimeError("POST %s: HTTP %s" % (path, st))
        deadline = time.time() + 30
        while True:
            st, body = http_json("GET", s.url + "/apis/apiregistration.k8s.io/v1/apiservices/"
                                 "v1.bench.ckube.io")
            conds = (json.loads(body).get("status") or {}).get("conditions") or []
            if any(c["type"] == "Available" and c["status"] == "True" for c in conds):
                break
            if time.time() > deadline:
                raise RuntimeError("the APIService did not become Available: %s" % conds)
            time.sleep(0.3)
        paths = {"direct": "/api/v1/namespaces/default/configmaps/obj",
                 "proxied": "/apis/bench.ckube.io/v1/namespaces/default/things/t"}
        for r in range(REPEAT["get"]):
            for what in ("direct", "proxied"):
                d = with_server_cpu(s.proc, lambda: loadgen(
                    ["--mode", "get", "--url", s.url, "--path", paths[what], "--conns", 64,
                     "--warmup", 1, "--duration", DUR["get"]], DUR["get"] + 60))
                STATE.setdefault("agg_" + what, []).append(d)
                print("  round %d GET %-8s %7.0f/s p50 %.3f p99 %.3f ms" % (
                    r, what, d["per_s"], d["p50_ms"], d["p99_ms"]), flush=True)
    finally:
        if s:
            s.stop()
        backend.stdin.close()
        stop_proc(backend)


def phase_rbac():
    """The RBAC authorizer's cost per decision with 1,000 RoleBindings and
    50 ClusterRoleBindings (bench_rbac), one thread."""
    exe = os.path.join(ARGS.build, "bench_rbac")
    if not os.access(exe, os.X_OK):
        STATE["rbac_skip"] = "%s not built" % exe
        return
    d, why = run_json_tool([exe, "--json", "1000"], 120)
    STATE["rbac"] = d
    STATE["rbac_skip"] = why
    print("  rbac: %s" % (d if d else why))


# ------------------------------------------- the etcd storage backend (issue 23)
#
# ckube server --storage etcd on one etcd member on the loopback (its data
# under BUILD/bench/run-*/, the same disk as every other phase), next to
# what the issue names as its peers, each in the same run: raw etcd puts
# through the same etcd, the SQLite-backed server with the same objects,
# one server against two on one etcd. ckube serves plain HTTP here, as in
# the create and populated phases (and as etcd's listener): the figures
# compare the storage, not TLS (the tls phase prices TLS).

ES_CONNS = 64


def es_etcd(tmp, name):
    """A fresh single-member etcd, durable defaults (the quota only raised
    so that --full's create rounds never fill it: no effect on speed)."""
    return Server("etcd", tmp, name, ["--quota-backend-bytes", str(8 << 30)]).start(60)


def es_flags(e, prefix, extra=()):
    """A ckube on etcd `e` with its keys under `prefix`, no controllers."""
    return CM_OFF + ["--storage", "etcd", "--etcd-servers", e.url,
                     "--etcd-prefix", prefix] + list(extra)


def etcd_counters(e):
    """etcd's unary gRPC calls by method (grpc_server_handled_total, any
    code; its JSON gateway's calls included) and its WAL fsyncs and
    backend commits, from its /metrics; {} if unreadable."""
    try:
        _, body = http_json("GET", e.url + "/metrics", timeout=10)
    except (OSError, ValueError):
        return {}
    out = {}
    for line in body.decode(errors="replace").splitlines():
        try:
            if line.startswith("grpc_server_handled_total{") and 'grpc_type="unary"' in line:
                m = line.split('grpc_method="', 1)[1].split('"', 1)[0]
                out[m] = out.get(m, 0.0) + float(line.rsplit(None, 1)[1])
            elif line.startswith("etcd_disk_wal_fsync_duration_seconds_count "):
                out["wal_fsync"] = float(line.split()[1])
            elif line.startswith("etcd_disk_backend_commit_duration_seconds_count "):
                out["backend_commit"] = float(line.split()[1])
        except (IndexError, ValueError):
            pass
    return out


def with_etcd(e, run):
    """Runs run() (a bench_load call, or several at once summed) and adds
    what it cost etcd: its CPU time per request and its unary calls, WAL
    fsyncs and backend commits per request (etcd_per_op)."""
    c0, cpu0 = etcd_counters(e), proc_cpu_s(e.proc.pid)
    d = run()
    c1, cpu1 = etcd_counters(e), proc_cpu_s(e.proc.pid)
    n = d.get("issued") or d.get("ok") or 0
    if cpu0 is not None and cpu1 is not None and n:
        d["etcd_cpu_us_per_op"] = (cpu1 - cpu0) * 1e6 / n
    if n and c0 and c1:
        d["etcd_per_op"] = {k: round((v - c0.get(k, 0.0)) / n, 3) for k, v in c1.items()
                            if v != c0.get(k, 0.0)}
    return d


def etcd_count_ms(e, prefix, repeat=9, point=False):
    """(median ms, count) of the Range a server on etcd asks before a
    consistent read or a write (storage_current_rev: count_only, limit 1,
    over its whole prefix), through etcd's JSON gateway, one at a time.
    point: a Range of the one key `prefix` instead (no such key), which
    answers the same header revision: what kube-apiserver asks
    (GetCurrentResourceVersionFromStorage, a non-recursive GetList)."""
    def b64(x):
        return base64.b64encode(x.encode()).decode()
    body = {"key": b64(prefix), "count_only": True, "limit": 1}
    if not point:
        body["range_end"] = b64(prefix[:-1] + chr(ord(prefix[-1]) + 1))
    ts, count = [], None
    for _ in range(repeat):
        t0 = time.monotonic()
        _, out = http_json("POST", e.url + "/v3/kv/range", body)
        ts.append((time.monotonic() - t0) * 1000.0)
        count = int(json.loads(out).get("count", 0))
    return median(ts), count


def es_create_rounds(tmp):
    """Creates on the etcd backend next to raw puts through the same etcd:
    alternating rounds (which goes first alternates too, as the store
    grows), each ckube round a fresh server with a keyspace of its own."""
    e = es_etcd(tmp, "es-etcd-create")
    try:
        for r in range(REPEAT["create"]):
            for what in (("put", "ckube") if r % 2 == 0 else ("ckube", "put")):
                if what == "put":
                    d = with_etcd(e, lambda: loadgen(
                        ["--mode", "create", "--flavour", "etcd", "--url", e.url,
                         "--namespace", "raw-%d" % r, "--prefix", "cm", "--conns", ES_CONNS,
                         "--duration", DUR["create"]], DUR["create"] + 60))
                    STATE.setdefault("es_put", []).append(d)
                    who = "etcd put"
                else:
                    s = Server("ckube", tmp, "es-create-%d" % r,
                               es_flags(e, "/ckube-create-%d" % r)).start(30)
                    try:
                        d = with_server_cpu(s.proc, lambda: with_etcd(e, lambda: loadgen(
                            ["--mode", "create", "--url", s.url, "--namespace", "default",
                             "--prefix", "cm", "--conns", ES_CONNS, "--duration", DUR["create"]],
                            DUR["create"] + 60)))
                    finally:
                        s.stop()
                        shutil.rmtree(s.data_dir, ignore_errors=True)
                    STATE.setdefault("es_create", []).append(d)
                    who = "ckube/etcd"
                print("  round %d %-10s %6.0f/s p50 %6.2f p99 %6.2f ms; server %s us/op; etcd %s "
                      "us/op, per op %s"
                      % (r, who, d["per_s"], d["p50_ms"], d["p99_ms"],
                         "%.0f" % d["server_cpu_us_per_op"] if "server_cpu_us_per_op" in d
                         else "-",
                         "%.0f" % d["etcd_cpu_us_per_op"] if "etcd_cpu_us_per_op" in d else "-",
                         d.get("etcd_per_op")), flush=True)
    finally:
        e.stop()
        shutil.rmtree(e.data_dir, ignore_errors=True)


def es_get_rounds(e, se, s2, sq):
    """GET/s of one object: the etcd-backed server, the two servers on the
    etcd (half the connections each, at once), the SQLite-backed server,
    in alternating rounds."""
    path = "/api/v1/namespaces/bench/configmaps/obj-1"

    # quick mode: shorter rounds than the populated phase's (3 servers a round)
    secs, warm = (DUR["get"], 1) if ARGS.full else (3, 0.5)

    def get(s, conns):
        return loadgen(["--mode", "get", "--url", s.url, "--path", path, "--conns", conns,
                        "--warmup", warm, "--duration", secs], secs + 60)

    def pair():
        out = [None, None]

        def one(i, s):
            try:
                out[i] = get(s, ES_CONNS // 2)
            except Exception as x:  # reported below
                out[i] = x
        cpu0 = [proc_cpu_s(s.proc.pid) for s in (se, s2)]
        ts = [threading.Thread(target=one, args=(i, s)) for i, s in enumerate((se, s2))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        cpu1 = [proc_cpu_s(s.proc.pid) for s in (se, s2)]
        for x in out:
            if not isinstance(x, dict):
                raise RuntimeError("two-server GETs: %s" % x)
        d = {"per_s": sum(x["per_s"] for x in out), "issued": sum(x["issued"] for x in out),
             "servers_per_s": [round(x["per_s"]) for x in out],
             "p50_ms": max(x["p50_ms"] for x in out), "p99_ms": max(x["p99_ms"] for x in out),
             "errors": sum(x["errors"] for x in out)}
        if None not in cpu0 + cpu1 and d["issued"]:
            d["server_cpu_us_per_op"] = (sum(cpu1) - sum(cpu0)) * 1e6 / d["issued"]
        return d

    for r in range(REPEAT["get"]):
        d = with_server_cpu(se.proc, lambda: with_etcd(e, lambda: get(se, ES_CONNS)))
        STATE.setdefault("es_get", []).append(d)
        p = with_etcd(e, pair)
        STATE.setdefault("es_get2", []).append(p)
        q = with_server_cpu(sq.proc, lambda: get(sq, ES_CONNS))
        STATE.setdefault("es_sqlite_get", []).append(q)
        print("  round %d get: etcd-backed %6.0f/s p99 %.2f ms (etcd per GET %s); two servers "
              "%6.0f/s %s; SQLite-backed %6.0f/s p99 %.2f ms"
              % (r, d["per_s"], d["p99_ms"], d.get("etcd_per_op"), p["per_s"],
                 p["servers_per_s"], q["per_s"], q["p99_ms"]), flush=True)


def es_kill_round(tmp, e, kill_etcd):
    """kill -9 durability: KILL_N creates from 32 threads (each waits for
    its answer before the next), SIGKILL of the server (and, with
    kill_etcd, of etcd first) once half are acknowledged, a restart on the
    same data, then the acknowledged names that the list lacks."""
    tag = "both" if kill_etcd else "ckube"
    flags = es_flags(e, "/ckube-kill-" + tag)
    s = Server("ckube", tmp, "es-kill-" + tag, flags).start(30)
    ns = "durability"
    http_json("POST", s.url + "/api/v1/namespaces",
              {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    total, conns = KILL_N[0], 32
    acked, unanswered, refused = [], [], []
    pad = "x" * 900
    stop = threading.Event()

    def worker(t):
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        try:
            for i in range(t, total, conns):
                if stop.is_set():
                    return
                name = "d-%d" % i
                body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": name}, "data": {"pad": pad}})
                try:
                    c.request("POST", "/api/v1/namespaces/%s/configmaps" % ns, body,
                              {"Content-Type": "application/json"})
                    r = c.getresponse()
                    r.read()
                except (OSError, http.client.HTTPException):
                    unanswered.append(name)  # sent, no answer: may or may not exist
                    return
                (acked if r.status == 201 else refused).append((name, r.status))
        finally:
            c.close()

    ts = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(conns)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    end = t0 + 120
    while len(acked) < total // 2 and time.monotonic() < end and any(t.is_alive() for t in ts):
        time.sleep(0.0005)
    at_kill = len(acked)
    secs = time.monotonic() - t0
    if kill_etcd:
        os.kill(e.proc.pid, signal.SIGKILL)
    os.kill(s.proc.pid, signal.SIGKILL)
    stop.set()
    for t in ts:
        t.join(60)
    s.proc.wait(10)
    s.stop()
    if kill_etcd:
        e.proc.wait(10)
        e.stop()
        e.start(60, same_ports=True)
    s = Server("ckube", tmp, "es-kill-%s-restart" % tag, flags, data_dir=s.data_dir,
               fresh=False).start(TIMEOUT["startup"])
    try:
        _, body = http_json("GET", s.url + "/api/v1/namespaces/%s/configmaps" % ns, timeout=120)
        present = set(it["metadata"]["name"] for it in json.loads(body)["items"])
        restart_ms = s.startup_ms
    finally:
        s.stop()
    names = set(n for n, _ in acked)
    d = {"lost": len(names - present), "acked": len(names), "acked_at_kill": at_kill,
         "planned": total, "conns": conns, "acked_per_s_before_kill": at_kill / secs,
         "unanswered": len(unanswered), "unanswered_present": len(set(unanswered) & present),
         "refused": len(refused), "refused_statuses": sorted(set(c for _, c in refused)),
         "present": len(present), "present_not_acked": len(present - names),
         "restart_ms": restart_ms, "lost_names": sorted(names - present)[:10]}
    STATE["es_kill_" + tag] = d
    print("  kill -9 %s: %d acknowledged (%d when killed), %d lost; %d unanswered (%d of them "
          "written), %d refused %s; restart %.0f ms"
          % ("server and etcd" if kill_etcd else "server", d["acked"], at_kill, d["lost"],
             d["unanswered"], d["unanswered_present"], d["refused"], d["refused_statuses"],
             restart_ms), flush=True)


KILL_N = [4000]


def phase_etcdstore(tmp, creates_only=False):
    """The etcd storage backend (issue 23): creates next to raw etcd puts,
    GETs and a full LIST next to the SQLite backend, watch fan-out, two
    servers on one etcd, kill -9 durability."""
    if not os.access(ETCD, os.X_OK):
        STATE["es_skip"] = "%s not found (make bench installs etcd-server)" % ETCD
        print("  skip: %s" % STATE["es_skip"])
        return
    mod = os.path.join(ARGS.build, "ckube-storage-etcd.so")
    if not os.path.exists(mod):
        STATE["es_skip"] = "%s not built" % mod
        print("  skip: %s" % STATE["es_skip"])
        return
    KILL_N[0] = 20000 if ARGS.full else 4000
    with Phase("etcdstore: creates, ckube on etcd and raw etcd puts"):
        es_create_rounds(tmp)
    if creates_only:
        return
    e = es_etcd(tmp, "es-etcd")
    try:
        servers = []
        try:
            se = Server("ckube", tmp, "es-get", es_flags(e, "/ckube-get")).start(30)
            servers.append(se)
            sq = Server("ckube", tmp, "es-sqlite", CM_OFF).start(30)
            servers.append(sq)
            with Phase("etcdstore: populate %d objects, etcd and SQLite" % N):
                t0 = time.monotonic()
                populate(se, "es_")
                STATE["es_populate_s"] = time.monotonic() - t0
                populate(sq, "es_sqlite_")
            if "es_json_bytes" not in STATE or "es_sqlite_json_bytes" not in STATE:
                return
            with Phase("etcdstore: the consistent read's Range"):
                STATE["es_count"] = (etcd_count_ms(e, "/ckube-get/"),
                                     etcd_count_ms(e, "/ckube-empty/"),
                                     etcd_count_ms(e, "/ckube-get/", point=True))
                print("  etcd count_only Range over the server's %d keys: %.2f ms (empty "
                      "prefix %.2f ms; one key %.2f ms)"
                      % (STATE["es_count"][0][1], STATE["es_count"][0][0],
                         STATE["es_count"][1][0], STATE["es_count"][2][0]))
            s2 = Server("ckube", tmp, "es-get-2", es_flags(
                e, "/ckube-get", ["--token-file", os.path.join(se.data_dir, "token")])).start(
                TIMEOUT["startup"])
            servers.append(s2)
            STATE["es_join_startup_ms"] = s2.startup_ms
            print("  second server joined with %d objects in %.0f ms" % (N, s2.startup_ms))
            with Phase("etcdstore: GETs, one server, two servers, SQLite"):
                es_get_rounds(e, se, s2, sq)
            with Phase("etcdstore: full LIST of %d, etcd and SQLite" % N):
                path = "/api/v1/namespaces/bench/configmaps"
                # and at resourceVersion=0 (served as the cache is, no wait for
                # etcd's revision): tells the consistent read's wait from serving
                for tag, s in (("es_list", se), ("es_sqlite_list", sq)):
                    for rv0 in (False, True):
                        d = loadgen(["--mode", "list", "--url", s.url,
                                     "--path", path + ("?resourceVersion=0" if rv0 else ""),
                                     "--conns", 1, "--repeat", REPEAT["list"]], TIMEOUT["list"])
                        STATE[tag + ("_rv0" if rv0 else "")] = d
                        print("  %s%s: full list of %d p50 %.1f ms (min %.1f, max %.1f)"
                              % (tag, " rv=0" if rv0 else "", d["items_max"], d["p50_ms"],
                                 d["min_ms"], d["max_ms"]))
            with Phase("etcdstore: watch fan-out"):
                for tag, s in (("es_", se), ("es_sqlite_", sq)):
                    phase_watch(s, tag, duration=DUR["watch"] if ARGS.full else 5,
                                drain=5 if ARGS.full else 2)
        finally:
            for s in servers:
                s.stop()
        with Phase("etcdstore: kill -9 durability"):
            es_kill_round(tmp, e, False)
            es_kill_round(tmp, e, True)
    finally:
        e.stop()


# ------------------------------------------------------- metrics + table


def med_of(runs, key):
    """Median of runs' key where present, or None."""
    vals = [x[key] for x in runs if x.get(key) is not None]
    return median(vals) if vals else None


def build_results():
    S = STATE
    k = "%dk" % (N // 1000)
    scale_note = None if N == 100000 else (
        "quick mode: %d objects, not 100k (run with --full)" % N)

    ecs, ccs = S.get("etcd_create") or [], S.get("ckube_create") or []
    if ccs:
        def med(runs, key):
            return median([x[key] for x in runs]) if runs else None
        put("create_per_s", med(ccs, "per_s"), "1/s", med(ecs, "per_s"),
            "etcd %s" % etcd_version() if ecs else None,
            p50_ms=med(ccs, "p50_ms"), p99_ms=med(ccs, "p99_ms"),
            peer_p50_ms=med(ecs, "p50_ms"), peer_p99_ms=med(ecs, "p99_ms"),
            rounds=[round(x["per_s"]) for x in ccs], peer_rounds=[round(x["per_s"]) for x in ecs],
            round_ratios=[round(c["per_s"] / e["per_s"], 3) for c, e in zip(ccs, ecs)
                          if e["per_s"]],
            conns=64, seconds_per_round=DUR["create"],
            errors=sum(x["errors"] for x in ccs), peer_errors=sum(x["errors"] for x in ecs),
            note=S.get("etcd_skip") or "64 clients, 1 KiB ConfigMaps, median of alternating "
            "rounds; etcd: plain /v3/kv/put of the same JSON bytes (base64), default durable "
            "settings, data on the same disk")
        cpu, peer_cpu = med_of(ccs, "server_cpu_us_per_op"), med_of(ecs, "server_cpu_us_per_op")
        put("create_server_cpu_us", cpu, "us", peer_cpu, "etcd %s" % etcd_version() if ecs else None,
            rounds=[round(x["server_cpu_us_per_op"], 1) for x in ccs
                    if "server_cpu_us_per_op" in x],
            peer_rounds=[round(x["server_cpu_us_per_op"], 1) for x in ecs
                         if "server_cpu_us_per_op" in x],
            note="the server process's CPU time (user + system) per create in the create "
            "rounds, median round; the peer's per put. Steadier than throughput on a shared "
            "machine: compare hot-path changes by it")
    else:
        skip("create_per_s", "1/s", "create phase did not run")
        skip("create_server_cpu_us", "us", "create phase did not run")

    if S.get("instr"):
        mine, old = S["instr"]
        put("create_user_instructions", mine["total"], "instr", old and old["total"],
            "compare build (%s)" % ARGS.compare if old else None, creates=INSTR_CREATES,
            request_path=mine["request_path"], committer=mine["committer"],
            peer_request_path=old and old["request_path"], peer_committer=old and old["committer"],
            note="user-space instructions per durable create, server under callgrind "
            "(%d creates at 16 connections after 300 to warm up; kernel work not counted; "
            "request_path: all threads but the storage committer's, whose share moves with "
            "how many creates share a commit). "
            "Deterministic to a percent or two where CPU time moves by 2x on this machine: "
            "compare hot-path changes by it, with --compare DIR in the same run" % INSTR_CREATES)
    elif "instr_skip" in S:
        skip("create_user_instructions", "instr", S["instr_skip"])

    def median_round(runs):
        return sorted(runs, key=lambda x: x["per_s"])[(len(runs) - 1) // 2] if runs else None

    for what, label in (("create", "creates"), ("get", "GETs")):
        t, p = median_round(S.get("tls_" + what)), median_round(S.get("plain_" + what))
        if t and p:
            put("tls_%s_per_s" % what, t["per_s"], "1/s", p["per_s"], "ckube over plain HTTP",
                rounds=[round(x["per_s"]) for x in S["tls_" + what]],
                peer_rounds=[round(x["per_s"]) for x in S["plain_" + what]],
                server_cpu_us=t.get("server_cpu_us_per_op"),
                peer_server_cpu_us=p.get("server_cpu_us_per_op"),
                p99_ms=t["p99_ms"], peer_p99_ms=p["p99_ms"],
                note="%s over HTTPS with the admin's client certificate, 64 keep-alive "
                "connections, against the same server with --plain-http in alternating "
                "rounds; median round" % label)
        else:
            skip("tls_%s_per_s" % what, "1/s", "tls phase did not run")
    t, a, p = (median_round(S.get(k)) for k in ("tls_get_rbac", "tls_get_admin", "plain_get"))
    if t and p:
        put("tls_rbac_get_per_s", t["per_s"], "1/s", p["per_s"], "ckube over plain HTTP",
            rounds=[round(x["per_s"]) for x in S["tls_get_rbac"]],
            admin_per_s=a["per_s"] if a else None,
            server_cpu_us=t.get("server_cpu_us_per_op"),
            admin_server_cpu_us=a.get("server_cpu_us_per_op") if a else None,
            p99_ms=t["p99_ms"],
            note="GETs over HTTPS as a user RBAC decides for (a client certificate, one of "
            "%d RoleBindings), against the plain figure; admin_per_s: the same server as "
            "system:masters, in alternating rounds; median round" % RBAC_BINDINGS)
    else:
        skip("tls_rbac_get_per_s", "1/s", "tls phase did not run")
    h = median_round(S.get("tls_handshake"))
    if h:
        put("tls_handshakes_per_s", h["per_s"], "1/s",
            rounds=[round(x["per_s"]) for x in S["tls_handshake"]],
            server_cpu_us=h.get("server_cpu_us_per_op"), p99_ms=h["p99_ms"],
            note="a new connection per GET: TCP connect, full TLS 1.3 handshake with a client "
            "certificate (no resumption), GET, close; 16 at a time; median round")
    else:
        skip("tls_handshakes_per_s", "1/s", "tls phase did not run")

    pg, dg = median_round(S.get("agg_proxied")), median_round(S.get("agg_direct"))
    if pg and dg:
        put("proxied_get_per_s", pg["per_s"], "1/s", dg["per_s"], "direct GETs, same server",
            rounds=[round(x["per_s"]) for x in S["agg_proxied"]],
            peer_rounds=[round(x["per_s"]) for x in S["agg_direct"]],
            p50_ms=pg["p50_ms"], peer_p50_ms=dg["p50_ms"], p99_ms=pg["p99_ms"],
            peer_p99_ms=dg["p99_ms"], server_cpu_us=pg.get("server_cpu_us_per_op"),
            peer_server_cpu_us=dg.get("server_cpu_us_per_op"),
            note="GETs of a ~1 KiB object through an APIService to an aggregated API server "
            "(bench_aggregated, HTTPS, one thread) against GETs of a ConfigMap of that size "
            "from the watch cache, 64 connections, alternating rounds; median round")
    else:
        skip("proxied_get_per_s", "1/s", S.get("aggregation_skip") or
             "aggregation phase did not run")
    w, n = median_round(S.get("webhook_create")), median_round(S.get("nohook_create"))
    if w and n:
        put("webhook_create_per_s", w["per_s"], "1/s", n["per_s"], "ckube without webhooks",
            rounds=[round(x["per_s"]) for x in S["webhook_create"]],
            peer_rounds=[round(x["per_s"]) for x in S["nohook_create"]],
            p50_ms=w["p50_ms"], peer_p50_ms=n["p50_ms"], p99_ms=w["p99_ms"],
            peer_p99_ms=n["p99_ms"], server_cpu_us=w.get("server_cpu_us_per_op"),
            peer_server_cpu_us=n.get("server_cpu_us_per_op"),
            reviews=S.get("webhook_reviews"),
            note="creates with one validating webhook (libckube's webhook server over HTTPS, "
            "kept-alive connections) against the same without, 64 connections, fresh servers "
            "in alternating rounds; median round")
    else:
        skip("webhook_create_per_s", "1/s", S.get("webhook_skip") or "webhook phase did not run")
    gs, go = S.get("get_closed") or [], S.get("get_open")
    if gs:
        g = sorted(gs, key=lambda x: x["per_s"])[(len(gs) - 1) // 2]  # the median round
        put("get_per_s", g["per_s"], "1/s",
            note="closed loop, 64 connections, one object; median of %d rounds" % len(gs),
            rounds=[round(x["per_s"]) for x in gs], loadgen_cpu_pct=g["loadgen_cpu_pct"],
            wrk_per_s=[round(x) for x in S.get("wrk_get") or []],
            errors=sum(x["errors"] for x in gs))
        put("get_server_cpu_us", med_of(gs, "server_cpu_us_per_op"), "us",
            rounds=[round(x["server_cpu_us_per_op"], 2) for x in gs
                    if "server_cpu_us_per_op" in x],
            note="the server process's CPU time per GET in the closed-loop rounds (warm-up "
            "included), median round")
        put("get_p50_ms", g["p50_ms"], "ms", note="closed loop, 64 connections (same round)")
        put("get_p99_ms", g["p99_ms"], "ms", note="closed loop, 64 connections (same round)",
            p999_ms=g["p999_ms"], max_ms=g["max_ms"])
    else:
        for m, u in (("get_per_s", "1/s"), ("get_server_cpu_us", "us"), ("get_p50_ms", "ms"),
                     ("get_p99_ms", "ms")):
            skip(m, u, "get phase did not run")
    if go:
        g5 = S.get("get_open_5k") or {}
        o = sorted(go, key=lambda x: x["p99_ms"])[(len(go) - 1) // 2]  # the median round
        put("get_p99_ms_at_20k", o["p99_ms"], "ms", p50_ms=o["p50_ms"], p999_ms=o["p999_ms"],
            achieved_per_s=o["per_s"], late_scheduled=o["late_scheduled"],
            rounds=[round(x["p99_ms"], 3) for x in go],
            p99_ms_at_5k=g5.get("p99_ms"), p50_ms_at_5k=g5.get("p50_ms"),
            machine_stalls=(S.get("stalls") or {}).get("get_open"),
            note="open loop at 20000/s over 64 connections; latency from the scheduled send "
            "time (no coordinated omission); median p99 of %d rounds" % len(go))
    else:
        skip("get_p99_ms_at_20k", "ms", "get phase did not run")

    lst = S.get("list")
    if lst:
        put("list_%s_ms" % k, lst["p50_ms"], "ms", objects=lst["items_max"], min_ms=lst["min_ms"],
            max_ms=lst["max_ms"], bytes=lst["bytes_per_list"],
            note=scale_note or "median of %d full lists, one connection" % lst["ok"])
    else:
        skip("list_%s_ms" % k, "ms", "list phase did not run")
    ls, lq = S.get("list_sel"), S.get("list_sel_quickack")
    if ls:
        put("list_selector_ms", ls["p50_ms"], "ms", matching=ls["items_max"], objects=N,
            quickack_p50_ms=lq["p50_ms"] if lq else None,
            note="median of 9 lists, labelSelector matching %d of %d; quickack_p50_ms is the "
            "same with TCP_QUICKACK on the client (a gap means a Nagle/delayed-ACK stall)"
            % (ls["items_max"], N))
    else:
        skip("list_selector_ms", "ms", "list phase did not run")
    lr = S.get("list_rss")
    if lr:
        extra = mib(lr["peak"] - lr["base"])
        put("list_extra_rss_mb", extra, "MiB", per_list_mb=extra / 4, base_mb=mib(lr["base"]),
            objects=N, lists_p50_ms=lr["lists"]["p50_ms"],
            note=(scale_note + "; " if scale_note else "") + "peak VmRSS growth during 4 "
            "concurrent full lists (VmHWM after clear_refs, and 2 ms sampling)")
    else:
        skip("list_extra_rss_mb", "MiB", "list phase did not run")

    w = S.get("watch")
    if w:
        put("watch_fanout_p99_ms", w["p99_ms"], "ms", p50_ms=w["p50_ms"], max_ms=w["max_ms"],
            send_to_receipt_p99_ms=w["e2e_p99_ms"], send_to_receipt_p50_ms=w["e2e_p50_ms"],
            write_p99_ms=w["write_p99_ms"], watchers=w["watchers_ok"], received=w["received"],
            expected=w["expected"], writes_per_s=w["writes_per_s"],
            machine_stalls=(S.get("stalls") or {}).get("watch"),
            note="1000 watchers, 100 creates/s; value = receipt - min(write ack, first receipt "
            "of that object by any watcher), a lower bound of commit->receipt; "
            "send_to_receipt is the upper bound (includes the durable write)")
    else:
        skip("watch_fanout_p99_ms", "ms", "watch phase did not run")
    w = S.get("watch10k")
    if w:
        per = ((w["rss_mid"] - w["rss_base"]) / w["watchers_ok"]
               if w.get("rss_mid") and w["watchers_ok"] else None)
        fl = S.get("watch10k_floor") or {}
        fl_ok = fl.get("received") and fl["received"] == fl.get("expected")
        put("watch_fanout_10k_p99_ms", w["p99_ms"], "ms", fl["p99_ms"] if fl_ok else None,
            "do-nothing fan-out server (bench_fanout_floor)" if fl_ok else None,
            p50_ms=w["p50_ms"], max_ms=w["max_ms"], send_to_receipt_p99_ms=w["e2e_p99_ms"],
            write_p99_ms=w["write_p99_ms"], watchers=w["watchers_ok"], received=w["received"],
            expected=w["expected"], writes_per_s=w["writes_per_s"],
            floor_p50_ms=fl.get("p50_ms"), floor_write_p99_ms=fl.get("write_p99_ms"),
            note="10,000 watchers, 10 creates/s (the deliveries/s of the 1,000-watcher row); "
            "the peer is the same load against a server that only forwards each POSTed body "
            "to every watcher: the loopback's and the load generator's share"
            + ("" if fl_ok else " (not measured: %s)"
               % (S.get("watch10k_floor_skip") or "incomplete run")))
        put("watch_bytes_per_watcher", per, "B", fds=w.get("fds_mid"),
            note="server RSS growth with 10,000 watchers streaming, per watcher")

    etcd_rss = S.get("etcd_rss_idle")
    if S.get("rss_idle_default") is not None:
        put("rss_idle_mb", mib(S["rss_idle_default"]), "MiB", mib(etcd_rss),
            "etcd idle" if etcd_rss else None, note="fresh server, default flags "
            "(its controller-manager runs as a child process, measured apart in "
            "rss_idle_cm_mb), the server's VmRSS 3 s after ready")
        if S.get("rss_idle_cm") is not None:
            put("rss_idle_cm_mb", mib(S["rss_idle_cm"]), "MiB",
                note="the default server's controller-manager child (libcurl, informers "
                "for namespaces, all resources' metadata for the GC, Lease), VmRSS 3 s "
                "after the server is ready")
        put("rss_idle_mb_no_cm", mib(S["rss_idle_nocm"]), "MiB", mib(etcd_rss),
            "etcd idle" if etcd_rss else None,
            note="fresh server, --controller-manager=false, VmRSS 1 s after ready (median)")
        if S.get("rss_idle_anon_nocm") is not None:
            put("rss_idle_anon_mb_no_cm", mib(S["rss_idle_anon_nocm"]), "MiB",
                note="the same servers' RssAnon: their own memory, without the shared "
                "libraries' pages, whose count in VmRSS depends on the kernel (6.18 maps "
                "a cached library's large folios whole)")
    else:
        skip("rss_idle_mb", "MiB", "idle phase did not run")
    if S.get("rss_n_nocm") is not None and S.get("rss_idle_nocm") is not None:
        per = (S["rss_n_nocm"] - S["rss_idle_nocm"]) / N
        per_def = None
        if S.get("rss_n_default") is not None and S.get("rss_idle_default") is not None:
            per_def = (S["rss_n_default"] - S["rss_idle_default"]) / N
        per_cm = None
        if S.get("rss_n_cm") is not None and S.get("rss_idle_cm") is not None:
            per_cm = (S["rss_n_cm"] - S["rss_idle_cm"]) / N
        put("rss_per_object_bytes", per, "B", S["json_bytes"], "object JSON bytes",
            objects=N, json_bytes_per_object=S["json_bytes"], with_controllers=per_def,
            controller_manager_child=per_cm,
            note=(scale_note + "; " if scale_note else "") + "(VmRSS with N objects after "
            "restart - idle VmRSS) / N, --controller-manager=false; with_controllers is the "
            "same with default flags (the server process); controller_manager_child is its "
            "child's growth per object; ratio = RSS / JSON size")
    else:
        skip("rss_per_object_bytes", "B", "populated restart did not run")
    if S.get("startup_empty") is not None:
        put("startup_ms_empty", S["startup_empty"], "ms", S.get("etcd_startup"),
            "etcd (empty)" if S.get("etcd_startup") else None,
            default_flags_ms=S.get("startup_empty_default"),
            note="exec to first 200 from /readyz (etcd: /health), fresh data dir, median")
    if S.get("startup_n") is not None:
        put("startup_ms_%s" % k, S["startup_n"], "ms", objects=N,
            default_flags_ms=S.get("startup_n_default"),
            note=(scale_note + "; " if scale_note else "") + "exec to first 200 from /readyz "
            "with N objects, --controller-manager=false, median of 3")
    else:
        skip("startup_ms_%s" % k, "ms", "populated restart did not run")

    ic, inode = S.get("informer_c"), S.get("informer_node")
    m_sync, m_mem = "informer_sync_%s_ms" % k, "informer_bytes_per_object"
    if ic:
        put(m_sync, ic.get("informer_sync_ms"), "ms",
            inode.get("informer_sync_ms") if inode else None,
            "@kubernetes/client-node" if inode else None, objects=ic.get("objects"),
            note=scale_note or S.get("informer_node_skip"))
        put(m_mem, ic.get("informer_bytes_per_object"), "B",
            inode.get("informer_bytes_per_object") if inode else None,
            "@kubernetes/client-node" if inode else None,
            json_bytes_per_object=ic.get("json_bytes_per_object"),
            json_ratio=(ic["informer_bytes_per_object"] / ic["json_bytes_per_object"]
                        if ic.get("informer_bytes_per_object") and ic.get("json_bytes_per_object")
                        else None),
            rss_bytes_per_object=ic.get("informer_rss_bytes_per_object"),
            peer_rss_bytes_per_object=inode.get("informer_rss_bytes_per_object")
            if inode else None, note=S.get("informer_node_skip"))
    else:
        why = S.get("informer_c_skip") or "informer phase did not run"
        print("  skip %s, %s: %s" % (m_sync, m_mem, why))
        META["skipped"][m_sync] = META["skipped"][m_mem] = why
        # the peer's figures are still worth keeping
        put(m_sync, None, "ms", inode.get("informer_sync_ms") if inode else None,
            "@kubernetes/client-node" if inode else None, note=why)
        put(m_mem, None, "B", inode.get("informer_bytes_per_object") if inode else None,
            "@kubernetes/client-node" if inode else None, note=why)

    wq = S.get("wq")
    if wq and wq.get("workqueue_ops_per_s") is not None:
        put("workqueue_ops_per_s", wq["workqueue_ops_per_s"], "1/s",
            **{k2: v for k2, v in wq.items() if k2 != "workqueue_ops_per_s"})
    else:
        skip("workqueue_ops_per_s", "1/s", S.get("wq_skip") or "workqueue phase did not run")

    typed = S.get("typed")
    for o in typed or []:
        n = o["object"]
        put("typed_decode_us_" + n, o["typed_decode_us"], "us", o["jansson_decode_us"],
            "jansson json_loadb", bytes=o["bytes"],
            note="ckube-gen's T_decode (jansson parse, then the struct) per object")
        put("typed_encode_us_" + n, o["typed_encode_us"], "us", o["jansson_encode_us"],
            "jansson json_dumps", bytes=o["bytes"])
        put("typed_bytes_" + n, o["typed_bytes"], "B", o["tree_bytes"], "jansson tree",
            text_bytes=o["text_bytes"],
            note="malloc's bytes held per decoded object; an informer keeps about text_bytes "
            "per cached object plus the struct once a reader asks for the typed view")
    if not typed:
        skip("typed_decode_us_network", "us", S.get("typed_skip") or "typed phase did not run")

    rb = S.get("rbac")
    if rb and rb.get("rbac_allow_ns") is not None:
        put("rbac_authorize_ns", rb["rbac_allow_ns"], "ns",
            **{k2: v for k2, v in rb.items() if k2 != "rbac_allow_ns"})
    else:
        skip("rbac_authorize_ns", "ns", S.get("rbac_skip") or "rbac phase did not run")
    build_etcdstore_results()
    build_scale_results()


def build_etcdstore_results():
    """The etcdstore phase's rows (issue 23)."""
    S = STATE
    k = "%dk" % (N // 1000)
    why = S.get("es_skip") or "etcdstore phase did not run"
    ev = "etcd %s" % etcd_version()

    def mid(runs):  # the median round (by throughput)
        return sorted(runs, key=lambda x: x["per_s"])[(len(runs) - 1) // 2] if runs else None

    cs, ps = S.get("es_create") or [], S.get("es_put") or []
    if cs and ps:
        c, p = mid(cs), mid(ps)
        put("etcd_create_per_s", median([x["per_s"] for x in cs]), "1/s",
            median([x["per_s"] for x in ps]), "%s puts, same etcd" % ev,
            rounds=[round(x["per_s"]) for x in cs], peer_rounds=[round(x["per_s"]) for x in ps],
            round_ratios=[round(a["per_s"] / b["per_s"], 3) for a, b in zip(cs, ps)
                          if b["per_s"]],
            server_cpu_us=med_of(cs, "server_cpu_us_per_op"),
            etcd_cpu_us_per_create=med_of(cs, "etcd_cpu_us_per_op"),
            etcd_cpu_us_per_put=med_of(ps, "etcd_cpu_us_per_op"),
            etcd_calls_per_create=c.get("etcd_per_op"), etcd_calls_per_put=p.get("etcd_per_op"),
            conns=ES_CONNS, seconds_per_round=DUR["create"],
            errors=sum(x["errors"] for x in cs), peer_errors=sum(x["errors"] for x in ps),
            note="64 clients, 1 KiB ConfigMaps, ckube --storage etcd (a fresh server and "
            "keyspace each round) against plain /v3/kv/put of the same JSON bytes through the "
            "same etcd, alternating rounds, median; etcd_calls_*: etcd's unary calls, WAL "
            "fsyncs and backend commits per request in the median round (its /metrics)")
        for q in ("p50", "p99"):
            put("etcd_create_%s_ms" % q, median([x[q + "_ms"] for x in cs]), "ms",
                median([x[q + "_ms"] for x in ps]), "%s puts, same etcd" % ev,
                rounds=[round(x[q + "_ms"], 2) for x in cs],
                peer_rounds=[round(x[q + "_ms"], 2) for x in ps],
                note="create latency in the etcd_create_per_s rounds (closed loop, 64 "
                "clients), median round")
    else:
        for m, u in (("etcd_create_per_s", "1/s"), ("etcd_create_p50_ms", "ms"),
                     ("etcd_create_p99_ms", "ms")):
            skip(m, u, why)

    pe, pq = S.get("es_populate"), S.get("es_sqlite_populate")
    if pe:
        put("etcd_populate_per_s", pe["per_s"], "1/s", pq["per_s"] if pq else None,
            "ckube on SQLite" if pq else None, objects=pe["ok"], seconds=S.get("es_populate_s"),
            peer_seconds=pq["seconds"] if pq else None,
            note="creating the N objects of the rows below, 64 clients (one run)")
    else:
        skip("etcd_populate_per_s", "1/s", why)

    gs, g2, gq = S.get("es_get") or [], S.get("es_get2") or [], S.get("es_sqlite_get") or []
    cnt = S.get("es_count")
    if gs and gq:
        g, q = mid(gs), mid(gq)
        put("etcd_get_per_s", g["per_s"], "1/s", q["per_s"], "ckube on SQLite",
            rounds=[round(x["per_s"]) for x in gs], peer_rounds=[round(x["per_s"]) for x in gq],
            p99_ms=g["p99_ms"], peer_p99_ms=q["p99_ms"],
            server_cpu_us=g.get("server_cpu_us_per_op"),
            peer_server_cpu_us=q.get("server_cpu_us_per_op"),
            etcd_cpu_us_per_get=g.get("etcd_cpu_us_per_op"),
            etcd_calls_per_get=g.get("etcd_per_op"),
            count_range_ms=cnt[0][0] if cnt else None, count_range_keys=cnt[0][1] if cnt else None,
            empty_range_ms=cnt[1][0] if cnt else None,
            point_range_ms=cnt[2][0] if cnt else None, objects=N,
            errors=sum(x["errors"] for x in gs),
            note="closed loop, 64 connections, one object of N, both servers holding the same "
            "N objects, alternating rounds, median round; count_range_ms: etcd's count_only "
            "Range over the server's keys that a consistent read waits for (one per batch of "
            "waiting requests), through etcd's JSON gateway; empty_range_ms the same on an "
            "empty prefix, point_range_ms a Range of one (absent) key, as kube-apiserver asks")
    else:
        skip("etcd_get_per_s", "1/s", why)
    if gs and g2:
        g, p = mid(gs), mid(g2)
        put("etcd_two_servers_get_per_s", p["per_s"], "1/s", g["per_s"], "one server",
            rounds=[round(x["per_s"]) for x in g2], peer_rounds=[round(x["per_s"]) for x in gs],
            servers_per_s=p["servers_per_s"], p99_ms=p["p99_ms"],
            server_cpu_us=p.get("server_cpu_us_per_op"),
            etcd_cpu_us_per_get=p.get("etcd_cpu_us_per_op"),
            etcd_calls_per_get=p.get("etcd_per_op"),
            join_startup_ms=S.get("es_join_startup_ms"), errors=sum(x["errors"] for x in g2),
            note="two servers on one etcd (the second joined with --token-file), 32 "
            "connections to each at once, against 64 to one of them, alternating rounds, "
            "median round; on 2 CPUs shared by etcd, both servers and both load generators; "
            "join_startup_ms: the second server's exec to /readyz with N objects")
    else:
        skip("etcd_two_servers_get_per_s", "1/s", why)

    le, lq = S.get("es_list"), S.get("es_sqlite_list")
    if le:
        put("etcd_list_%s_ms" % k, le["p50_ms"], "ms", lq["p50_ms"] if lq else None,
            "ckube on SQLite" if lq else None, objects=le["items_max"], min_ms=le["min_ms"],
            max_ms=le["max_ms"], bytes=le["bytes_per_list"],
            rv0_ms=(S.get("es_list_rv0") or {}).get("p50_ms"),
            peer_rv0_ms=(S.get("es_sqlite_list_rv0") or {}).get("p50_ms"),
            note="median of %d full lists of namespace bench, one connection, from the watch "
            "cache after the consistent read's wait; rv0_ms: the same with "
            "resourceVersion=0 (no wait)" % le["ok"])
    else:
        skip("etcd_list_%s_ms" % k, "ms", why)

    we, wq = S.get("es_watch"), S.get("es_sqlite_watch")
    if we:
        put("etcd_watch_fanout_p99_ms", we["p99_ms"], "ms", wq["p99_ms"] if wq else None,
            "ckube on SQLite" if wq else None, p50_ms=we["p50_ms"], max_ms=we["max_ms"],
            send_to_receipt_p99_ms=we["e2e_p99_ms"], write_p99_ms=we["write_p99_ms"],
            peer_send_to_receipt_p99_ms=wq["e2e_p99_ms"] if wq else None,
            peer_write_p99_ms=wq["write_p99_ms"] if wq else None,
            watchers=we["watchers_ok"], received=we["received"], expected=we["expected"],
            writes_per_s=we["writes_per_s"], peer_writes_per_s=wq["writes_per_s"] if wq else None,
            seconds=DUR["watch"] if ARGS.full else 5,
            note="as watch_fanout_p99_ms (1000 watchers, 100 creates/s asked, lower bound of "
            "commit->receipt), on the etcd-backed server and the SQLite-backed one; "
            "writes_per_s below 100: the writer's 8 connections could not keep the rate")
    else:
        skip("etcd_watch_fanout_p99_ms", "ms", why)

    for tag, m, what in (("ckube", "etcd_kill9_lost_writes", "the server"),
                         ("both", "etcd_kill9_both_lost_writes", "etcd, then the server")):
        d = S.get("es_kill_" + tag)
        if d:
            put(m, d["lost"], "writes", **{x: y for x, y in d.items() if x != "lost"},
                note="%d creates from 32 threads; SIGKILL of %s once %d were acknowledged; "
                "restart on the same data; value = acknowledged (201) creates missing from the "
                "list after it; unanswered creates may or may not exist" % (
                    d["planned"], what, d["planned"] // 2))
        else:
            skip(m, "writes", why)


def at_100k(fn):
    return lambda e: fn(e) if N == 100000 else None


# metric -> (target text, check(entry) -> True/False/None)
TARGETS = {
    "create_per_s": (">= 2x etcd", lambda e: e["ratio"] >= 2 if e["ratio"] else None),
    "get_per_s": ("> 50000", lambda e: e["value"] > 50000),
    "get_p99_ms_at_20k": ("< 1", lambda e: e["value"] < 1),
    "list_100k_ms": ("< 300", lambda e: e["value"] < 300),
    "list_extra_rss_mb": ("< 64 (16/list) at 100k", at_100k(lambda e: e["value"] < 64)),
    "watch_fanout_p99_ms": ("< 10", lambda e: e["value"] < 10),
    "watch_fanout_10k_p99_ms": ("< 50", lambda e: e["value"] < 50),
    "rss_idle_mb": ("< 8", lambda e: e["value"] < 8),
    "tls_get_per_s": (">= 0.85x plain", lambda e: e["ratio"] >= 0.85 if e["ratio"] else None),
    "tls_rbac_get_per_s": (">= 0.85x plain",
                           lambda e: e["ratio"] >= 0.85 if e["ratio"] else None),
    "tls_create_per_s": (">= 0.85x plain",
                         lambda e: e["ratio"] >= 0.85 if e["ratio"] else None),
    "rss_idle_mb_no_cm": ("< 8", lambda e: e["value"] < 8),
    "rss_per_object_bytes": ("< 1.5x JSON", lambda e: e["ratio"] < 1.5 if e["ratio"] else None),
    "startup_ms_100k": ("< 1000", lambda e: e["value"] < 1000),
    "informer_sync_100k_ms": ("<= 0.2x node", lambda e: e["ratio"] <= 0.2 if e["ratio"] else None),
    "informer_bytes_per_object": (
        "<= 0.2x node, < 1.3x JSON",
        lambda e: (e["ratio"] <= 0.2 if e["ratio"] else True) and
        (e["json_ratio"] < 1.3 if e.get("json_ratio") else True)
        if e["ratio"] or e.get("json_ratio") else None),
    "workqueue_ops_per_s": ("> 5000000", lambda e: e["value"] > 5e6),
    "rbac_authorize_ns": ("< 1000 at 1,000 bindings", lambda e: e["value"] < 1000),
    "etcd_create_per_s": (">= 0.8x etcd puts",
                          lambda e: e["ratio"] >= 0.8 if e["ratio"] else None),
    "etcd_kill9_lost_writes": ("0", lambda e: e["value"] == 0),
    "scale_startup_ms": ("< 2000 at 1M", lambda e: e["value"] < 2000
                         if e.get("objects") == 1000000 else None),
    "scale_startup_peak_rss_ratio": ("<= 1.2", lambda e: e["value"] <= 1.2),
    "etcd_kill9_both_lost_writes": ("0", lambda e: e["value"] == 0),
}
# quick-mode names of the scale-dependent metrics: the target is stated at
# 100k and is not judged at another scale
SCALED = {"list_%s_ms": "< 300 at 100k", "startup_ms_%s": "< 1000 at 100k",
          "informer_sync_%s_ms": "<= 0.2x node"}


def judge():
    k = "%dk" % (N // 1000)
    for m, e in RESULTS.items():
        t = TARGETS.get(m)
        if t is None:
            for pat, text in SCALED.items():
                if m == pat % k and N != 100000:
                    t = (text, None)
                    if pat == "informer_sync_%s_ms":  # a ratio: judge it at any scale
                        t = (text, lambda x: x["ratio"] <= 0.2 if x["ratio"] else None)
        if t is None:
            continue
        e["target"] = t[0]
        met = None
        if e["value"] is not None and t[1] is not None:
            try:
                met = t[1](e)
            except (TypeError, KeyError):
                met = None
        e["met"] = met


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return "%.0f" % v
        if abs(v) >= 10:
            return "%.1f" % v
        return "%.3g" % v
    return str(v)


def table():
    rows = [("metric", "value", "unit", "peer", "peer_name", "ratio", "target", "met")]
    for m, e in RESULTS.items():
        met = e.get("met")
        rows.append((m, fmt(e["value"]), e["unit"], fmt(e["peer"]), e["peer_name"] or "-",
                     fmt(e["ratio"]), e.get("target", "-"),
                     "-" if "target" not in e else ("yes" if met else "NO" if met is False
                                                    else "n/a")))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for i, r in enumerate(rows):
        out.append("  ".join(c.rjust(w[j]) if j in (1, 3, 5) else c.ljust(w[j])
                             for j, c in enumerate(r)).rstrip())
        if i == 0:
            out.append("  ".join("-" * x for x in w))
    return "\n".join(out)


def markdown_table():
    """The table as Markdown, for docs/performance.md."""
    out = ["| metric | value | unit | peer | peer | ratio | target | met |",
           "|---|--:|---|--:|---|--:|---|---|"]
    for m, e in RESULTS.items():
        met = e.get("met")
        out.append("| `%s` | %s | %s | %s | %s | %s | %s | %s |" % (
            m, fmt(e["value"]), e["unit"], fmt(e["peer"]), e["peer_name"] or "-",
            fmt(e["ratio"]), e.get("target", "-"),
            "-" if "target" not in e else ("yes" if met else "no" if met is False else "n/a")))
    return "\n".join(out) + "\n"


def etcd_version():
    try:
        r = subprocess.run([ETCD, "--version"], stdout=subprocess.PIPE, timeout=10)
        for line in r.stdout.decode().splitlines():
            if line.startswith("etcd Version:"):
                return line.split()[-1]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "?"


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()}


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


# -------------------------------------------------------------------- main


def clean_stale_runs(out_dir):
    """Removes run-* data dirs left by a run that was SIGKILLed (its
    servers died with it through PR_SET_PDEATHSIG, its files did not).
    A dir whose owner.pid names a live process is another run's: kept."""
    for name in os.listdir(out_dir):
        d = os.path.join(out_dir, name)
        if not name.startswith("run-") or not os.path.isdir(d):
            continue
        try:
            with open(os.path.join(d, "owner.pid")) as f:
                os.kill(int(f.read().strip()), 0)
            continue  # alive
        except PermissionError:
            continue  # alive, another user's
        except (OSError, ValueError):
            pass
        print("run.py: removing stale %s" % d)
        shutil.rmtree(d, ignore_errors=True)

STATE = {}
ARGS = None
N = 10000
DUR, REPEAT, TIMEOUT = {}, {}, {}


def main():
    global ARGS, N
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="build dir with ckube and bench_load")
    ap.add_argument("--full", action="store_true", help="100k objects, longer runs")
    ap.add_argument("--only", default="", help="comma list of phases: idle,etcd,create,instr,typed,"
                    "populated,restart,tls,workqueue,rbac,webhook,aggregation,etcdstore,scale (default: all; "
                    "scale only with --scale); get,list,watch,"
                    "watch10k (full runs only, unless named),informers run only that part of "
                    "the populated phase; etcdcreate only "
                    "the creates of etcdstore")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs")
    ap.add_argument("--scale", type=int, default=0, metavar="N",
                    help="add the scale phase: N objects created once, then start-up, RSS, "
                    "a full list and a resumed watch on them (make bench SCALE=1000000)")
    ap.add_argument("--compare", default="", metavar="DIR",
                    help="a build dir of an older ckube: the scale phase starts it on the "
                    "same data dir, alternating with this build (side by side in one run)")
    ARGS = ap.parse_args()
    ARGS.build = os.path.abspath(ARGS.build)
    if ARGS.compare:
        ARGS.compare = os.path.abspath(ARGS.compare)
        if not os.access(os.path.join(ARGS.compare, "ckube"), os.X_OK):
            print("run.py: %s/ckube is not built" % ARGS.compare, file=sys.stderr)
            return 2
    ARGS.ckube = os.path.join(ARGS.build, "ckube")
    ARGS.bench_load = os.path.join(ARGS.build, "bench_load")
    for exe in (ARGS.ckube, ARGS.bench_load):
        if not os.access(exe, os.X_OK):
            print("run.py: %s is not built (cmake --build %s)" % (exe, ARGS.build),
                  file=sys.stderr)
            return 2
    N = 100000 if ARGS.full else 10000
    DUR.update(create=15 if ARGS.full else 5, get=8 if ARGS.full else 4,
               watch=30 if ARGS.full else 10)
    # Rounds: single rounds on this shared VM move by 2x; the full run has
    # the time for more of them, so its medians are steadier.
    REPEAT.update(list=5, create=5 if ARGS.full else 3, get=5 if ARGS.full else 3)
    TIMEOUT.update(populate=600 if ARGS.full else 120, list=300 if ARGS.full else 60,
                   informer=600 if ARGS.full else 120, startup=60 if ARGS.full else 30)
    only = set(x for x in ARGS.only.split(",") if x)

    # 1000 watchers + the server's own descriptors: raise the soft limit
    # for us and every child (they inherit it).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    atexit.register(stop_all)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)

    out_dir = os.path.join(ARGS.build, "bench")
    os.makedirs(out_dir, exist_ok=True)
    clean_stale_runs(out_dir)
    tmp = tempfile.mkdtemp(prefix="run-", dir=out_dir)
    with open(os.path.join(tmp, "owner.pid"), "w") as f:
        f.write("%d\n" % os.getpid())
    META.update(mode="full" if ARGS.full else "quick", objects=N, machine=machine(),
                loadavg_start=loadavg(), started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                tmp=tmp)
    print("ckube bench (%s): %d objects, %s, %d CPUs, load %s; data under %s"
          % (META["mode"], N, META["machine"]["cpu"], META["machine"]["cpus"],
             META["loadavg_start"], tmp), flush=True)
    t_all = time.monotonic()

    def want(p):
        return not only or p in only

    try:
        if want("idle"):
            with Phase("idle servers, empty start-up"):
                phase_idle(tmp)
        if want("create"):
            with Phase("create, ckube and etcd"):
                phase_create(tmp)
        if want("instr"):
            with Phase("instructions per create (callgrind)"):
                phase_instr(tmp)
        if want("populated") or any(p in only for p in POPULATED_PARTS):
            with Phase("populated server"):
                phase_populated(tmp)
        if want("restart"):
            with Phase("restart with %d objects" % N):
                phase_restart(tmp)
        if want("tls"):
            with Phase("TLS next to plain HTTP"):
                phase_tls(tmp)
        if want("workqueue"):
            with Phase("workqueue"):
                phase_workqueue()
        if want("rbac"):
            with Phase("RBAC authorizer"):
                phase_rbac()
        if want("typed"):
            with Phase("typed objects (ckube-gen)"):
                phase_typed()
        if want("webhook"):
            with Phase("admission webhook next to none"):
                phase_webhook(tmp)
        if want("aggregation"):
            with Phase("GETs through an APIService next to direct ones"):
                phase_aggregation(tmp)
        if ARGS.scale and want("scale"):
            with Phase("scale: %d objects" % ARGS.scale):
                phase_scale(tmp)
        if want("etcdstore") or "etcdcreate" in only:
            with Phase("etcd storage backend"):
                phase_etcdstore(tmp, creates_only=not want("etcdstore"))
    except KeyboardInterrupt as e:
        print("run.py: interrupted (%s); stopping servers" % e, file=sys.stderr)
        stop_all()
        if not ARGS.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        return 130
    finally:
        stop_all()

    if not ARGS.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    build_results()
    judge()
    META["loadavg_end"] = loadavg()
    META["total_s"] = round(time.monotonic() - t_all, 1)
    META["machine_stalls"] = STATE.get("stalls")
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(RESULTS, f, indent=1)
        f.write("\n")
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(markdown_table())
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(META, f, indent=1)
        f.write("\n")
    print()
    print(table())
    print()
    print("phases (s): " + ", ".join("%s %s" % (k, v) for k, v in META["phases"].items()))
    print("load average: start %s, end %s; total %.0f s; results in %s"
          % (META["loadavg_start"], META["loadavg_end"], META["total_s"],
             os.path.join(out_dir, "results.json")))
    for label, d in (STATE.get("stalls") or {}).items():
        print("machine before %s: %.1f stalls/s over 1 ms, %.1f over 3 ms, per busy CPU "
              "(max %.1f ms): a quiet machine shows none"
              % (label, d["gaps_over_1ms_per_s"], d["gaps_over_3ms_per_s"], d["max_gap_ms"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
