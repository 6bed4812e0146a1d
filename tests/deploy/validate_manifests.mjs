// Validates every Kubernetes manifest under a folder (default: deploy/) offline:
//   - API objects against the Kubernetes OpenAPI schemas that the npm package kubernetes-models
//     carries (version pinned in package.json / package-lock.json; its schemas are Kubernetes
//     1.33's), e.g. new DaemonSet(obj).validate() from kubernetes-models/apps/v1;
//   - KubeSchedulerConfiguration, which is no API object, against kube_scheduler_config.mjs;
//   - shell scripts held in a ConfigMap (data keys ending in .sh) with `bash -n`;
//   - that the scheduler configuration's extender urlPrefix is where the extender listens;
//   - the pods of `railyard run --k8s` and its Indexed Job of agents, against each other
//     (railyard_run_jobs.mjs: Indexed, N+S, the job id, the secret's mount, the launcher's port).
// An object of a kind with no check (a Kueue object, say) is an error, so that a manifest added
// later cannot go unchecked.
//
//   node tests/deploy/validate_manifests.mjs [FOLDER]
// Exit 0 when every object is valid; otherwise 1, one line per error naming the file, the
// object (document number, kind, namespace/name) and the field.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { checkKubeSchedulerConfiguration } from "./kube_scheduler_config.mjs";
import { checkRunJobs, checkRunPods } from "./railyard_run_jobs.mjs";

// Test-only npm packages, installed by scripts/bootstrap (npm ci in tests/deploy/). Without them
// the test is skipped (exit 77, ctest's SKIP_RETURN_CODE), never passed.
let parseAllDocuments;
try {
  ({ parseAllDocuments } = await import("yaml"));
  await import("kubernetes-models/v1");
} catch (e) {
  console.log(`SKIPPED: the npm packages of tests/deploy/package.json are not installed ` +
              `(run scripts/bootstrap): ${e.message.split("\n")[0]}`);
  process.exit(77);
}

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(process.argv[2] ?? path.join(here, "..", "..", "deploy"));

// Folders under deploy/ that hold Railyard's own files, not Kubernetes objects: validation
// plans (docs/formats.md), which the validate tests parse with Railyard's own reader.
const notKubernetes = new Set([path.join(root, "plans")]);

function manifests(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!notKubernetes.has(p)) out.push(...manifests(p));
    }
    else if (/\.ya?ml$/.test(entry.name)) out.push(p);
  }
  return out.sort();
}

// The kubernetes-models module for an apiVersion: "v1" -> kubernetes-models/v1,
// "apps/v1" -> kubernetes-models/apps/v1.
async function modelClass(apiVersion, kind) {
  let mod;
  try {
    mod = await import(`kubernetes-models/${apiVersion}`);
  } catch {
    return null;
  }
  return typeof mod[kind] === "function" ? mod[kind] : null;
}

function describe(obj, index) {
  const meta = obj?.metadata ?? {};
  const name = meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
  return `document ${index + 1} (${obj?.kind ?? "no kind"}${name ? " " + name : ""})`;
}

async function checkObject(obj, errors, listens, urls, runs, where) {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) {
    errors.push("not a mapping");
    return;
  }
  const { apiVersion, kind } = obj;
  if (typeof apiVersion !== "string" || typeof kind !== "string") {
    errors.push(".apiVersion/.kind: both are required strings");
    return;
  }
  if (apiVersion === "kubescheduler.config.k8s.io/v1" && kind === "KubeSchedulerConfiguration") {
    errors.push(...checkKubeSchedulerConfiguration(obj));
    for (const e of obj.extenders ?? []) urls.push(e.urlPrefix);
    return;
  }
  const Model = await modelClass(apiVersion, kind);
  if (Model === null) {
    errors.push(`no schema for ${apiVersion} ${kind}: add a check to tests/deploy/`);
    return;
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    for (const d of e.errors ?? e.details ?? [{ instancePath: "", message: e.message }]) {
      const where = (d.instancePath || "").replaceAll("/", ".") || ".";
      const extra = d.params?.allowedValues ? ` (${d.params.allowedValues.join(", ")})` : "";
      errors.push(`${where}: ${d.message}${extra}`);
    }
  }
  if (kind === "ConfigMap") {
    for (const [key, text] of Object.entries(obj.data ?? {})) {
      if (!key.endsWith(".sh")) continue;
      const r = spawnSync("bash", ["-n"], { input: text, encoding: "utf8" });
      if (r.status !== 0) errors.push(`.data.${key}: bash -n: ${r.stderr.trim()}`);
    }
  }
  errors.push(...checkRunPods(obj, runs, where));
  // Where an extender container listens: "serve --extender ... --listen ADDRESS:PORT".
  const pod = obj.spec?.template?.spec;
  for (const c of pod?.containers ?? []) {
    const args = c.args ?? [];
    const i = args.indexOf("--listen");
    if (args.includes("--extender") && i >= 0) listens.push({ listen: args[i + 1], hostNetwork: !!pod.hostNetwork });
  }
}

let failures = 0;
const listens = [];
const urls = [];
const runs = [];     // railyard run containers, for checkRunJobs
const all = [];      // every object, for the Services a launcher address names
const files = manifests(root);
if (files.length === 0) {
  console.error(`validate_manifests: no .yaml files under ${root}`);
  process.exit(1);
}
let objects = 0;
for (const file of files) {
  const rel = path.relative(process.cwd(), file);
  const docs = parseAllDocuments(fs.readFileSync(file, "utf8"), { prettyErrors: true });
  for (const [index, doc] of docs.entries()) {
    if (doc.errors.length) {
      for (const e of doc.errors) console.error(`${rel}: document ${index + 1}: YAML: ${e.message}`);
      ++failures;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null || obj === undefined) continue;  // an empty document
    ++objects;
    all.push(obj);
    const errors = [];
    await checkObject(obj, errors, listens, urls, runs, { rel, index });
    for (const e of errors) console.error(`${rel}: ${describe(obj, index)}: ${e}`);
    failures += errors.length;
  }
}
// kube-scheduler runs on the host network (kubeadm): the extender it calls must listen on that
// host's address and port, i.e. a hostNetwork pod listening where urlPrefix points.
for (const url of urls) {
  const m = /^https?:\/\/([^/]+?)\/?$/.exec(url ?? "");
  const target = m ? m[1] : null;
  const match = listens.find((l) => l.hostNetwork && (l.listen === target ||
      (l.listen?.startsWith("0.0.0.0:") && target?.endsWith(":" + l.listen.split(":")[1]))));
  if (listens.length && !match) {
    console.error(`${root}: extender urlPrefix ${url} matches no host-network extender ` +
                  `(listening on ${listens.map((l) => l.listen).join(", ")})`);
    ++failures;
  }
}
for (const { where, message } of checkRunJobs(runs, all)) {
  console.error(`${where.rel}: ${describe(where.obj, where.index)}: ${message}`);
  ++failures;
}
if (failures) {
  console.error(`validate_manifests: ${failures} error(s) in ${files.length} file(s)`);
  process.exit(1);
}
console.log(`validate_manifests: ${objects} objects in ${files.length} files under ${root} are valid`);
