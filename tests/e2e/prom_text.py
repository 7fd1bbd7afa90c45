"""The Prometheus text exposition (version 0.0.4) a server's /metrics
answers, read for the e2e tests: every sample line checked for its
syntax, labels unescaped no further than the tests need."""
import re

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def parse(text):
    """{(name, frozenset of (label, value)): value}; asserts each line is
    a comment (# HELP, # TYPE), empty, or a well-formed sample."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        m = SAMPLE.match(line)
        assert m, "malformed line: %r" % line
        labels = {}
        if m.group(3):
            pos = 0
            body = m.group(3)
            while pos < len(body):
                lm = LABEL.match(body, pos)
                assert lm, "malformed labels: %r" % line
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(4))
    return out


def scrape(server):
    """parse() of `server`'s /metrics (a ckube_harness.Server)."""
    conn = server.connection(timeout=30)
    try:
        conn.request("GET", "/metrics", headers={"Accept": "text/plain"})
        r = conn.getresponse()
        body = r.read()
        assert r.status == 200, body
        assert r.getheader("Content-Type") == CONTENT_TYPE, r.getheader("Content-Type")
    finally:
        conn.close()
    return parse(body.decode())


def sample(metrics, name, /, **labels):
    """The value of the sample with exactly these labels (0 when absent)."""
    return metrics.get((name, frozenset(labels.items())), 0.0)
