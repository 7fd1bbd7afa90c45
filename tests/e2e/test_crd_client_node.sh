#!/usr/bin/env bash
# test_crd_client_node.sh - an informer of the official JavaScript client
# (@kubernetes/client-node 1.4.0, installed with npm into a scratch dir
# under $CKUBE_TEST_TMP) on a custom resource (tests/e2e/manifests/crd/
# foo-crd.yaml), over HTTPS with the kubeconfig exactly as the server
# wrote it (its CA verifies the server; without it the server is refused):
#
#   makeInformer over CustomObjectsApi.listNamespacedCustomObject lists the
#   existing object (one add), then sees add, update and delete of another
#   one made through CustomObjectsApi; it stays connected for over 30 s
#   without duplicate events; then the server restarts on the same port
#   while objects change (the informer reconnects the documented way, by
#   calling start() again from its error handler) and the informer catches
#   up: the changed object is an update, the deleted one a delete, a new
#   one an add, and no object is ever added twice.
#
# If npm cannot install the package (e.g. the registry is unreachable) the
# test FAILS: it must not pass without having run. Bounded: about 45 s
# after the install.
source "$(dirname "$0")/lib.sh"

NODE_DIR=$TMP/node
CRD_DIR=$SRC/tests/e2e/manifests/crd
KHOME=$TMP/home # kubectl's discovery cache
mkdir -p "$NODE_DIR" "$KHOME"
NODE_PID=

k() {
    local out
    out=$(HOME=$KHOME "$KUBECTL" "$@" 2>&1) || fail "[kubectl $*] failed: $out"
    printf '%s\n' "$out"
}
stop_node() {
    if [ -n "$NODE_PID" ]; then
        kill "$NODE_PID" 2>/dev/null || true
        wait "$NODE_PID" 2>/dev/null || true
        NODE_PID=
    fi
}
trap 'rc=$?; set +e; stop_node; (exit $rc); cleanup' EXIT

command -v node >/dev/null || fail "node is not installed"
command -v npm >/dev/null || fail "npm is not installed"

echo "--- npm install @kubernetes/client-node@1.4.0"
printf '{"name":"ckube-e2e-client-node","private":true}\n' >"$NODE_DIR/package.json"
if ! (cd "$NODE_DIR" && timeout 300 npm install --no-audit --no-fund --loglevel=error \
    @kubernetes/client-node@1.4.0 >"$TMP/npm.log" 2>&1); then
    cat "$TMP/npm.log" >&2
    fail "npm install @kubernetes/client-node@1.4.0 failed (is the npm registry reachable?)"
fi
[ -f "$NODE_DIR/node_modules/@kubernetes/client-node/package.json" ] ||
    fail "npm install left no @kubernetes/client-node"

cat >"$NODE_DIR/informer.mjs" <<'EOF'
// Informer on foos.e2e.ckube.io; see test_crd_client_node.sh for the
// scenario. Exits 0 when every check passed. Coordination with the shell:
// this script writes want-restart, the shell restarts the server, changes
// objects and writes restarted.
import fs from 'node:fs';
import * as k8s from '@kubernetes/client-node';

const dir = new URL('.', import.meta.url).pathname;
const [group, version, namespace, plural] = ['e2e.ckube.io', 'v1', 'default', 'foos'];
// The kubeconfig exactly as the server wrote it: https, the cluster CA
// (certificate-authority-data) verifies the serving certificate, the
// admin's client certificate and key authenticate. Loaded once: after the
// restart (same data dir) the same CA and certificates must still work.
const kc = new k8s.KubeConfig();
kc.loadFromFile(process.env.KUBECONFIG);
const cluster = kc.getCurrentCluster();
const user = kc.getCurrentUser();
const api = kc.makeApiClient(k8s.CustomObjectsApi);

const events = []; // [verb, name, replicas, resourceVersion]
const failures = [];
let passed = 0;
const t0 = Date.now();
const log = (...a) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...a);
const check = (cond, msg) => {
    if (cond) {
        passed++;
    } else {
        failures.push(msg);
        log('FAIL:', msg);
    }
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(pred, ms, what) {
    const end = Date.now() + ms;
    while (Date.now() < end) {
        if (pred()) return true;
        await sleep(50);
    }
    check(false, `timed out waiting for ${what}; events: ${JSON.stringify(events)}`);
    return false;
}
const seen = (verb, name, pred = () => true) =>
    events.some((e) => e[0] === verb && e[1] === name && pred(e));
const count = (verb, name) => events.filter((e) => e[0] === verb && e[1] === name).length;
const foo = (name, replicas) => ({
    apiVersion: `${group}/${version}`,
    kind: 'Foo',
    metadata: { name },
    spec: { image: 'nginx', replicas },
});

const informer = k8s.makeInformer(
    kc,
    `/apis/${group}/${version}/namespaces/${namespace}/${plural}`,
    () => api.listNamespacedCustomObject({ group, version, namespace, plural }),
);
const rec = (verb) => (obj) => {
    events.push([verb, obj.metadata.name, obj.spec?.replicas, obj.metadata.resourceVersion]);
    log(verb, obj.metadata.name, obj.spec?.replicas, obj.metadata.resourceVersion);
};
informer.on('add', rec('add'));
informer.on('update', rec('update'));
informer.on('delete', rec('delete'));
let errors = 0;
let connects = 0;
let stopping = false;
informer.on('connect', () => connects++);
// client-node's informer stops on an error; its README restarts it.
informer.on('error', (err) => {
    errors++;
    log('informer error (restarting):', err?.message ?? err, err?.statusCode ?? '');
    if (!stopping) setTimeout(() => informer.start().catch(() => {}), 300);
});

async function main() {
    check(cluster?.server?.startsWith('https://'), `the kubeconfig's server is https: ${cluster?.server}`);
    check(!cluster?.skipTLSVerify, 'the kubeconfig does not skip TLS verification');
    check(!!cluster?.caData, 'the kubeconfig carries the cluster CA');
    check(!!user?.certData && !!user?.keyData, 'the kubeconfig carries a client certificate and key');
    try {
        const res = await kc.makeApiClient(k8s.CoreV1Api).listNamespace();
        check(res.items.length > 0, 'the server-written kubeconfig lists namespaces');
    } catch (e) {
        check(false, `the kubeconfig the server writes does not work with client-node as is: ${e?.message ?? e}`);
    }
    // ... and the CA is what makes it work: without it (the system roots
    // only) the serving certificate is refused.
    const noCA = new k8s.KubeConfig();
    noCA.loadFromOptions({
        clusters: kc.clusters.map((c) => ({ ...c, caData: undefined, caFile: undefined })),
        users: kc.users,
        contexts: kc.contexts,
        currentContext: kc.currentContext,
    });
    try {
        await noCA.makeApiClient(k8s.CoreV1Api).listNamespace();
        check(false, 'without the cluster CA the serving certificate was accepted');
    } catch (e) {
        const msg = `${e?.message ?? e} ${e?.code ?? ''} ${e?.cause?.code ?? ''}`;
        check(/certificate|CERT/i.test(msg), `without the cluster CA: a certificate error, got: ${msg}`);
    }
    await informer.start();
    // the pre-existing objects come from the list
    await until(() => seen('add', 'pre') && seen('add', 'gone'), 5000, 'adds of pre and gone from the list');
    check(informer.list(namespace).length === 2, `cache after the list: ${informer.list(namespace).length}`);

    // add, update, delete of an object made while watching
    await api.createNamespacedCustomObject({ group, version, namespace, plural, body: foo('n1', 1) });
    await until(() => seen('add', 'n1'), 5000, 'add of n1');
    await api.patchNamespacedCustomObject(
        { group, version, namespace, plural, name: 'n1', body: { spec: { replicas: 3 } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await until(() => seen('update', 'n1', (e) => e[2] === 3), 5000, 'update of n1 to 3 replicas');
    check(informer.get('n1', namespace)?.spec?.replicas === 3, 'cache holds n1 with 3 replicas');
    await api.deleteNamespacedCustomObject({ group, version, namespace, plural, name: 'n1' });
    await until(() => seen('delete', 'n1'), 5000, 'delete of n1');
    check(informer.get('n1', namespace) === undefined, 'n1 left the cache');

    // idle past 30 s of watching (a client that re-watches every 30 s
    // must not produce events for unchanged objects)
    const idleUntil = t0 + 33000;
    while (Date.now() < idleUntil) await sleep(200);
    const quiet = events.filter((e) => !['n1'].includes(e[1]) && e[0] !== 'add');
    check(quiet.length === 0, `no events for unchanged objects while idle: ${JSON.stringify(quiet)}`);
    check(errors === 0, `no informer errors before the restart (${errors})`);

    // the shell restarts the server and changes objects meanwhile
    fs.writeFileSync(`${dir}/want-restart`, '');
    await until(() => fs.existsSync(`${dir}/restarted`), 30000, 'the server restart');
    await until(() => seen('update', 'pre', (e) => e[2] === 5), 8000, 'update of pre made during the restart');
    await until(() => seen('delete', 'gone'), 8000, 'delete of gone made during the restart');
    await api.createNamespacedCustomObject({ group, version, namespace, plural, body: foo('n2', 2) });
    await until(() => seen('add', 'n2'), 8000, 'add of n2 after the restart');
    await sleep(500);

    for (const name of ['pre', 'gone', 'n1', 'n2']) {
        check(count('add', name) === 1, `exactly one add of ${name}: ${count('add', name)}`);
    }
    check(count('delete', 'gone') === 1, `exactly one delete of gone: ${count('delete', 'gone')}`);
    check(count('update', 'pre') === 1, `exactly one update of pre: ${count('update', 'pre')}`);
    const names = informer.list(namespace).map((o) => o.metadata.name).sort();
    check(JSON.stringify(names) === '["n2","pre"]', `final cache: ${JSON.stringify(names)}`);
    check(connects >= 2, `the informer reconnected (connects: ${connects})`);
    stopping = true;
    await informer.stop();
}

main()
    .catch((e) => check(false, `exception: ${e?.stack ?? e} ${e?.body ?? ''}`))
    .finally(() => {
        console.log(`${passed} passed, ${failures.length} failed`);
        process.exit(failures.length ? 1 : 0);
    });
EOF

start_server
out=$(k apply -f "$CRD_DIR/foo-crd.yaml")
expect_eq "$out" "customresourcedefinition.apiextensions.k8s.io/foos.e2e.ckube.io created" "apply foo CRD"
k wait --for=condition=Established crd/foos.e2e.ckube.io --timeout=20s >/dev/null
for n in pre gone; do
    printf 'apiVersion: e2e.ckube.io/v1\nkind: Foo\nmetadata:\n  name: %s\nspec:\n  image: nginx\n' "$n" |
        k create -f - >/dev/null
done

echo "--- informer"
(cd "$NODE_DIR" && exec timeout 75 node informer.mjs) >"$TMP/node.out" 2>&1 &
NODE_PID=$!

# the restart the script asks for (bounded)
for _ in $(seq 1 500); do
    [ -e "$NODE_DIR/want-restart" ] && break
    kill -0 "$NODE_PID" 2>/dev/null || break
    sleep 0.1
done
if [ -e "$NODE_DIR/want-restart" ]; then
    stop_server || { FAILED=1; echo "FAIL: unclean server stop" >&2; }
    # changes the informer does not see live
    start_server
    k patch foo pre --type=merge -p '{"spec":{"replicas":5}}' >/dev/null
    k delete foo gone >/dev/null
    touch "$NODE_DIR/restarted"
fi

rc=0
wait "$NODE_PID" || rc=$?
NODE_PID=
cat "$TMP/node.out"
[ $rc -eq 0 ] || fail "the client-node informer checks failed (exit $rc)"
stop_server
[ $FAILED -eq 0 ] || fail "failures above"
echo "test_crd_client_node: passed"
