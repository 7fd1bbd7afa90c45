// informer.js - the peer of bench/bench_informer.c: how fast the informer of
// @kubernetes/client-node syncs, and how much memory its cache takes per
// object (a benchmark program, not a test).
//
//   node bench/node/informer.js --server URL --namespace NS --expect N
//        [--resource configmaps] [--timeout 120] [--modules DIR]
//
// Same CLI and JSON keys as bench_informer. It does what a user of the
// library does: a KubeConfig with one inline cluster (plain http, which
// client-node only allows with skipTLSVerify set), makeInformer over
// listNamespacedConfigMap with an 'add' handler (counting), start (which
// resolves once the list is in the cache and the watch is open), then waits
// until the cache holds at least N objects. It prints ONE JSON line:
//
//   {"informer_sync_ms", "informer_bytes_per_object",
//    "informer_rss_bytes_per_object", "json_bytes_per_object", "objects",
//    "heap_bytes", "rss_bytes"}
//
// Memory: with --expose-gc (the script re-runs itself with it when
// missing), global.gc() twice before creating the KubeConfig and after
// sync; heap = process.memoryUsage().heapUsed + .external (external
// already includes arrayBuffers, so adding that too would count Buffers
// twice). The module is imported before the first measurement (loading
// the library is not the cache's cost), as bench_informer initialises
// libcurl first. RSS = VmRSS growth (process.memoryUsage().rss).
//
// The library is loaded from DIR/node_modules, where DIR is --modules,
// else $CKUBE_BENCH_NODE_DIR, else <repo>/build/bench/node (what
// bench/node/setup.sh installs and prints).
//
// Exit status: 0 with the JSON line; 1 with a message on stderr on a bad
// argument, an error from the library, or a timeout.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

function die(msg) {
    process.stderr.write(`informer.js: ${msg}\n`);
    process.exit(1);
}

function usage() {
    return (
        'usage: informer.js --server URL --namespace NS --expect N\n' +
        '                   [--resource configmaps] [--timeout SECONDS (120)] [--modules DIR]\n'
    );
}

function parseArgs(argv) {
    const a = { resource: 'configmaps', timeout: 120, expect: -1 };
    const names = {
        '--server': 'server',
        '--namespace': 'namespace',
        '--expect': 'expect',
        '--resource': 'resource',
        '--timeout': 'timeout',
        '--modules': 'modules',
    };
    for (let i = 0; i < argv.length; i++) {
        let [flag, value] = argv[i].split(/=(.*)/s, 2);
        if (flag === '--help' || flag === '-h') {
            process.stdout.write(usage());
            process.exit(0);
        }
        const key = names[flag];
        if (!key) die(`unknown argument "${argv[i]}"\n${usage()}`);
        if (value === undefined) {
            if (i + 1 >= argv.length) die(`${flag} needs a value`);
            value = argv[++i];
        }
        a[key] = value;
    }
    a.expect = Number(a.expect);
    a.timeout = Number(a.timeout);
    if (!a.server || !a.namespace || !Number.isInteger(a.expect) || a.expect < 0)
        die(`--server, --namespace and --expect N (N >= 0) are required\n${usage()}`);
    if (!(a.timeout > 0)) die('bad --timeout');
    if (a.resource !== 'configmaps')
        die(`--resource ${a.resource}: only configmaps is supported by the node peer`);
    return a;
}

// Re-runs this script under `node --expose-gc` when gc is not exposed, and
// exits with its status.
function ensureGc() {
    if (typeof global.gc === 'function') return;
    const r = spawnSync(
        process.execPath,
        ['--expose-gc', ...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)],
        { stdio: 'inherit' },
    );
    process.exit(r.status === null ? 1 : r.status);
}

async function loadClient(dir) {
    const pkg = join(dir, 'node_modules', '@kubernetes', 'client-node', 'package.json');
    if (!existsSync(pkg))
        die(`@kubernetes/client-node is not installed under ${dir} (run bench/node/setup.sh)`);
    const require = createRequire(join(dir, 'package.json'));
    return import(pathToFileURL(require.resolve('@kubernetes/client-node')).href);
}

function gcTwice() {
    global.gc();
    global.gc();
}

function memory() {
    const m = process.memoryUsage();
    return { heap: m.heapUsed + m.external, rss: m.rss };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
    ensureGc();
    const a = parseArgs(process.argv.slice(2));
    const dir = resolve(
        a.modules || process.env.CKUBE_BENCH_NODE_DIR || join(here, '..', '..', 'build', 'bench', 'node'),
    );
    const k8s = await loadClient(dir);

    gcTwice();
    const m0 = memory();
    const t0 = performance.now();
    const deadline = t0 + a.timeout * 1000;

    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
        clusters: [{ name: 'bench', server: a.server, skipTLSVerify: true }],
        users: [{ name: 'bench' }],
        contexts: [{ name: 'bench', cluster: 'bench', user: 'bench' }],
        currentContext: 'bench',
    });
    const api = kc.makeApiClient(k8s.CoreV1Api);
    const path = `/api/v1/namespaces/${encodeURIComponent(a.namespace)}/configmaps`;
    const informer = k8s.makeInformer(kc, path, () =>
        api.listNamespacedConfigMap({ namespace: a.namespace }),
    );
    let adds = 0;
    let lastError = null;
    informer.on('add', () => {
        adds++;
    });
    informer.on('error', (err) => {
        lastError = err;
    });
    const started = informer.start().then(
        () => true,
        (err) => {
            lastError = err;
            return false;
        },
    );
    let synced = false;
    const timeout = sleep(a.timeout * 1000).then(() => false);
    synced = await Promise.race([started, timeout]);
    // client-node does not retry a failed list: after an 'error' before
    // sync it never syncs, so give up at once instead of at the deadline.
    while (
        synced &&
        !lastError &&
        informer.list(a.namespace).length < a.expect &&
        performance.now() < deadline
    )
        await sleep(1);
    const syncMs = performance.now() - t0;
    const n = informer.list(a.namespace).length;
    if (!synced || n < a.expect) {
        const why = lastError ? `: last error: ${lastError.message || lastError}` : '';
        process.stderr.write(
            `informer.js: not synced after ${syncMs.toFixed(0)} ms (timeout ${a.timeout} s): ` +
                `${n} of ${a.expect} objects in the cache, ${adds} adds handled${why}\n`,
        );
        process.exit(1);
    }

    gcTwice();
    const m1 = memory();
    const heap = m1.heap - m0.heap;
    const rss = m1.rss - m0.rss;
    let jsonBytes = 0;
    const objs = informer.list(a.namespace);
    for (const o of objs) jsonBytes += Buffer.byteLength(JSON.stringify(o));
    const per = (x) => (n ? x / n : 0);
    const r1 = (x) => Math.round(x * 10) / 10;
    process.stdout.write(
        JSON.stringify({
            informer_sync_ms: r1(syncMs),
            informer_bytes_per_object: r1(per(heap)),
            informer_rss_bytes_per_object: r1(per(rss)),
            json_bytes_per_object: r1(per(jsonBytes)),
            objects: n,
            heap_bytes: heap,
            rss_bytes: rss,
        }) + '\n',
    );
    await informer.stop();
    process.exit(0);
}

main().catch((err) => die(err && err.stack ? err.stack : String(err)));
