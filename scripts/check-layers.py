#!/usr/bin/python3
"""check-layers.py [SRC_DIR] - every #include between ckube's modules goes
downward (docs/design.md, "Rooms and the dependency rule").

A module is a folder of src/ (the longest prefix listed in LAYERS). A
file may include headers of its own module, of modules of a lower rank
in its own stack, of src/common (the bottom of both stacks), public
headers (<ckube/...>, "ckube/...") and system headers. Everything else is
reported with the file and line: an upward include, a sibling's header
(two modules of one rank stay apart), or a header from the other stack
(the server links no libckube internals; the library no server module).
Upward notices go through callbacks the lower module offers (as
cacher_set_notify and the request context's hooks do).

Exits 1 when anything is reported, 0 otherwise. Standard library only.
"""
import os
import re
import sys

# (module path under src/, stack, rank): higher ranks sit above lower ones.
LAYERS = [
    ("cmd", "any", 100),
    # The API server, top to bottom.
    ("apiserver/server", "server", 90),
    ("apiserver/endpoints/handlers", "server", 80),
    ("apiserver/endpoints/discovery", "server", 80),
    ("apiserver/endpoints/openapi", "server", 80),
    ("apiserver/endpoints/metrics", "server", 80),
    ("apiserver/endpoints/filters", "server", 72),
    ("apiserver/aggregator", "server", 76),  # API aggregation: the proxy, APIService availability
    ("apiserver/endpoints/request", "server", 70),
    ("apiserver/admission", "server", 65),  # admission webhooks (docs/webhooks.md)
    ("apiserver/fieldmanager", "server", 60),
    ("apiserver/apiextensions", "server", 55),
    ("apiserver/apiextensions/schema", "server", 52),
    ("apiserver/registry/core", "server", 50),
    ("apiserver/registry/apps", "server", 50),
    ("apiserver/registry/coordination", "server", 50),
    ("apiserver/registry/events", "server", 50),
    ("apiserver/registry/rbac", "server", 50),
    ("apiserver/registry/admissionregistration", "server", 50),
    ("apiserver/registry/apiregistration", "server", 50),
    ("apiserver/registry/builtin", "server", 49),
    ("apiserver/registry/authorization", "server", 50),
    ("apiserver/registry/generic", "server", 48),
    ("apiserver/registry/definitions", "server", 47),
    ("apiserver/registry/rest", "server", 45),
    ("apiserver/webhook", "server", 44),  # a webhook's clientConfig and the call to it
    ("apiserver/authorization", "server", 43),
    ("apiserver/authorization/rbac", "server", 42),
    ("apiserver/resolver", "server", 41),  # Service references to endpoint addresses
    ("apiserver/cacher", "server", 40),
    ("apiserver/outbound", "server", 37),  # calls out: webhooks, aggregated APIs
    ("apiserver/httpd", "server", 35),
    ("apiserver/authentication", "server", 36),
    ("apiserver/authentication/serviceaccount", "server", 34),
    ("apiserver/pki", "server", 33),
    ("apiserver/audit", "server", 32),
    ("apiserver/codec", "server", 30),
    ("storage/sqlite", "server", 21),
    ("storage/memory", "server", 21),
    ("storage/etcd", "server", 21),
    ("storage", "server", 20),
    # libckube, top to bottom.
    ("gen", "library", 95),  # ckube-gen, the code generator (docs/ckube-gen.md)
    ("controllers", "library", 90),
    ("apiext", "library", 88),  # a small extension API server (ckube/apiext.h)
    ("webhook", "library", 85),  # the manager's webhook server (ckube/webhook.h)
    ("runtime", "library", 80),
    ("informer", "library", 70),
    ("workqueue", "library", 65),
    ("typed", "library", 62),  # typed objects and the scheme (ckube/typed.h)
    ("client", "library", 60),
    # Both stacks stand on it.
    ("common", "base", 10),
]

# Headers of src/common that one stack alone may use: xalloc.h aborts on
# out of memory, the server's policy; libckube returns errors instead.
STACK_ONLY = {"common/xalloc.h": "server"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(path):
    """The LAYERS entry whose folder holds `path` (relative to src/)."""
    best = None
    for entry in LAYERS:
        prefix = entry[0] + "/"
        if path.startswith(prefix) and (best is None or len(entry[0]) > len(best[0])):
            best = entry
    return best


def allowed(src, dst):
    if src is dst or dst[1] == "base" or src[1] == "any":
        return True
    if src[1] != dst[1]:
        return False
    return dst[2] < src[2]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "src")
    problems = 0
    files = 0
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if not name.endswith((".c", ".h")):
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            src = module_of(rel)
            if src is None:
                print("%s: in no module of check-layers.py's LAYERS" % rel)
                problems += 1
                continue
            files += 1
            with open(full, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = m.group(1)
                    if target.startswith("ckube/") or "/" not in target:
                        continue  # public API; a file of the same folder
                    if target.startswith("proto/"):
                        continue  # generated protobuf-c code (codec's)
                    only = STACK_ONLY.get(target)
                    # common/ is linked into libckube too: only the
                    # stack-only header's own source may include it there
                    in_common = src[1] == "base" and os.path.splitext(rel)[0] != \
                        os.path.splitext(target)[0]
                    if only and (in_common or src[1] not in (only, "any", "base")):
                        print("%s:%d: includes %s, which only the %s stack may use"
                              % (rel, lineno, target, only))
                        problems += 1
                        continue
                    dst = module_of(target)
                    if dst is None:
                        print("%s:%d: includes %s, in no module" % (rel, lineno, target))
                        problems += 1
                    elif not allowed(src, dst):
                        why = ("another stack" if src[1] != dst[1] else
                               "a sibling" if src[2] == dst[2] else "upward")
                        print("%s:%d: %s (%s) includes %s (%s): %s" %
                              (rel, lineno, src[0], src[2], target, dst[0], why))
                        problems += 1
    if problems:
        print("check-layers: %d include(s) break the dependency rule" % problems)
        return 1
    print("check-layers: %d files, every include goes downward" % files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
