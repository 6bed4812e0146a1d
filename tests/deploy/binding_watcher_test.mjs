// The binding watcher of deploy/kubernetes/extender.yaml, run as shipped (the script is taken
// from the manifest's ConfigMap) against the real `railyard serve --extender` with a bearer
// token, with a stand-in `kubectl` that prints what the real one would for the script's
// jsonpath (the pods come from a file the test rewrites). Checks: bindings appear, the last pod
// of a gang leaving a node unbinds it and not before, a finished pod counts as gone, an
// extender restart is repaired by the resync, and a watcher restart unbinds pods deleted while
// it was down. No real cluster or container image is involved.
//
//   node tests/deploy/binding_watcher_test.mjs RAILYARD_BINARY
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const railyard = process.argv[2];
let parseAllDocuments;
try {
  ({ parseAllDocuments } = await import("yaml"));
} catch (e) {
  console.log(`SKIPPED: npm packages of tests/deploy/ not installed (run scripts/bootstrap)`);
  process.exit(77);
}
if (!railyard || !fs.existsSync(railyard)) {
  console.error(`usage: binding_watcher_test.mjs RAILYARD_BINARY (got '${railyard}')`);
  process.exit(2);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ry-watcher-"));
const children = [];
function cleanup() {
  for (const c of children) {
    try { process.kill(-c.pid, "SIGKILL"); } catch {}
  }
  fs.rmSync(dir, { recursive: true, force: true });
}
function fail(message) {
  console.error(`FAIL: ${message}`);
  for (const f of ["serve.log", "watch.log", "kubectl.log"]) {
    const p = path.join(dir, f);
    if (fs.existsSync(p)) console.error(`--- ${f}\n${fs.readFileSync(p, "utf8")}`);
  }
  cleanup();
  process.exit(1);
}

// The script, exactly as the manifest ships it.
const manifest = fs.readFileSync(path.join(here, "..", "..", "deploy", "kubernetes", "extender.yaml"), "utf8");
const configMap = parseAllDocuments(manifest).map((d) => d.toJS())
    .find((o) => o?.kind === "ConfigMap" && o.data?.["watch.sh"]);
if (!configMap) fail("extender.yaml has no ConfigMap with watch.sh");
fs.writeFileSync(path.join(dir, "watch.sh"), configMap.data["watch.sh"]);

// Stand-in kubectl: logs its arguments; a list prints pods.txt; a watch prints pods.txt as
// ADDED events and then blocks until the script's `timeout` ends it, as a quiet watch does.
fs.mkdirSync(path.join(dir, "bin"));
fs.writeFileSync(path.join(dir, "bin", "kubectl"), `#!/bin/bash
echo "$*" >> "${dir}/kubectl.log"
if [[ " $* " == *" --watch "* ]]; then
  while IFS= read -r line; do echo "ADDED|$line"; done < "${dir}/pods.txt"
  exec sleep 30
fi
cat "${dir}/pods.txt"
`, { mode: 0o755 });
const setPods = (lines) => fs.writeFileSync(path.join(dir, "pods.txt"), lines.map((l) => l + "\n").join(""));
fs.writeFileSync(path.join(dir, "token"), "s3cret-token\n");
fs.mkdirSync(path.join(dir, "state"));
const topology = path.join(dir, "topology.yaml");
fs.writeFileSync(topology, `version: 1
name: t
levels: [spine, leaf]
switches:
  - {name: spine0, level: spine}
  - {name: leaf0, level: leaf, parent: spine0}
  - {name: leaf1, level: leaf, parent: spine0}
nodes:
  - {name: node0, switch: leaf0}
  - {name: node1, switch: leaf0}
  - {name: node2, switch: leaf1}
`);

function start(cmd, args, log, env = {}) {
  const out = fs.openSync(path.join(dir, log), "a");
  const child = spawn(cmd, args, { detached: true, stdio: ["ignore", out, out],
                                   env: { ...process.env, ...env } });
  children.push(child);
  return child;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, predicate, ms = 20000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await predicate()) return;
    await sleep(50);
  }
  fail(`timed out after ${ms} ms waiting for ${what}`);
}

let port = 0;
async function startExtender() {
  const log = path.join(dir, "serve.log");
  const before = fs.existsSync(log) ? fs.readFileSync(log, "utf8").length : 0;
  const child = start(railyard, ["serve", "--extender", "--topology", topology, "--listen",
                                 `127.0.0.1:${port}`, "--token-file", path.join(dir, "token")],
                      "serve.log");
  await until("the extender to listen", () =>
    /listening on 127\.0\.0\.1:(\d+)/.test(fs.readFileSync(log, "utf8").slice(before)));
  port = Number(/listening on 127\.0\.0\.1:(\d+)/.exec(fs.readFileSync(log, "utf8").slice(before))[1]);
  return child;
}
async function boundPairs() {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return Number(/^railyard_extender_bound_pods (\d+)$/m.exec(text)?.[1]);
  } catch {
    return -1;
  }
}
const lists = () => (fs.existsSync(path.join(dir, "kubectl.log"))
  ? fs.readFileSync(path.join(dir, "kubectl.log"), "utf8").split("\n").filter((l) => l && !l.includes("--watch")).length : 0);
// Waits until the watcher has listed twice more: every change before this call is then seen.
async function twoResyncs() {
  const n = lists();
  await until("two more resyncs", () => lists() >= n + 2);
}
function startWatcher() {
  return start("bash", [path.join(dir, "watch.sh")], "watch.log", {
    PATH: `${path.join(dir, "bin")}:${process.env.PATH}`, EXTENDER_PORT: String(port),
    RESYNC_SECONDS: "1", STATE_DIR: path.join(dir, "state"), TOKEN_FILE: path.join(dir, "token"),
    GROUP_LABEL: "railyard.io/group" });
}

try {
  // a and b of job1 on node0, c of job2 on node2 (bound, not yet running), d not bound.
  setPods(["ml/a|job1|node0|Running", "ml/b|job1|node0|Running", "ml/c|job2|node2|Pending",
           "ml/d|job3||Pending"]);
  let extender = await startExtender();
  let watcher = startWatcher();
  await until("2 bound pairs", async () => (await boundPairs()) === 2);
  await until("the watch to start", () =>
    fs.readFileSync(path.join(dir, "kubectl.log"), "utf8").includes("--watch"));
  const args = fs.readFileSync(path.join(dir, "kubectl.log"), "utf8");
  for (const want of ["get pods -A -l railyard.io/group", "{.metadata.labels.railyard\\.io/group}",
                      "--watch --output-watch-events", "{.object.spec.nodeName}"]) {
    if (!args.includes(want)) fail(`kubectl was not called with '${want}':\n${args}`);
  }
  // job1's pod on node0 makes node1 (same leaf) score 10 for job1.
  const pod = { metadata: { name: "p", labels: { "railyard.io/group": "job1" } } };
  const prio = await (await fetch(`http://127.0.0.1:${port}/prioritize`, {
    method: "POST", body: JSON.stringify({ Pod: pod, Nodes: null, NodeNames: ["node1", "node2"] }) })).json();
  if (prio[0].Score !== 10 || prio[1].Score !== 5) fail(`scores ${JSON.stringify(prio)}`);

  setPods(["ml/b|job1|node0|Running", "ml/c|job2|node2|Pending"]);  // a deleted, b remains
  await twoResyncs();
  if ((await boundPairs()) !== 2) fail(`a gone but b still on node0: ${await boundPairs()} pairs`);
  setPods(["ml/c|job2|node2|Succeeded"]);  // b deleted, c finished
  await until("0 bound pairs", async () => (await boundPairs()) === 0);

  // The extender restarts with nothing: the next resync rebuilds it.
  setPods(["ml/x|job9|node1|Running"]);
  await until("1 bound pair", async () => (await boundPairs()) === 1);
  process.kill(-extender.pid, "SIGKILL");
  await new Promise((r) => extender.once("exit", r));
  extender = await startExtender();
  await until("1 bound pair after the extender restarted", async () => (await boundPairs()) === 1);

  // The watcher restarts after x was deleted meanwhile: its saved state unbinds x.
  process.kill(-watcher.pid, "SIGKILL");
  await new Promise((r) => watcher.once("exit", r));
  setPods([]);
  watcher = startWatcher();
  await until("x unbound after the watcher restarted", async () => (await boundPairs()) === 0);
  if (/401|403/.test(fs.readFileSync(path.join(dir, "watch.log"), "utf8"))) {
    fail("the watcher's posts were refused");
  }
  console.log("binding_watcher_test: bind, last-pod unbind, finished pod, extender restart, " +
              "watcher restart: all as expected");
  cleanup();
} catch (e) {
  fail(e.stack ?? String(e));
}
