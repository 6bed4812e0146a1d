// The validator must refuse what the API server and kube-scheduler refuse: runs
// validate_manifests.mjs on testdata/bad/ and expects exit 1 and one error per planted mistake,
// each naming the file, the object and the field.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { containerArgv, flagValue, runCommand } from "./railyard_run_jobs.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const r = spawnSync(process.execPath,
                    [path.join(here, "validate_manifests.mjs"), path.join(here, "testdata", "bad")],
                    { encoding: "utf8", cwd: here });
const expected = [
  "workload.yaml: document 1 (DaemonSet railyard-system/broken): .spec: must have required property selector",
  "workload.yaml: document 1 (DaemonSet railyard-system/broken): .spec.template.spec.containers.0.ports.0.containerPort: must be integer",
  "workload.yaml: document 2 (ConfigMap broken-script): .data.watch.sh: bash -n:",
  "workload.yaml: document 3 (Topology no-check-yet): no schema for kueue.x-k8s.io/v1beta1 Topology",
  "scheduler-config.yaml: document 1 (KubeSchedulerConfiguration): .extenders[0].httpTimeout: '5 seconds' is not a duration",
  "scheduler-config.yaml: document 1 (KubeSchedulerConfiguration): .extenders[0].managedResource: unknown field",
  // railyard run --k8s: the launcher, a Service to it and Jobs of host agents.
  "train-job.yaml: document 3 (Job agents): .spec.template.spec.containers[0].args: --secret-file /etc/railyard/secret: volume secret mounted at /etc/railyard is not a secret volume",
  "train-job.yaml: document 3 (Job agents): .spec.template.spec.containers[0].args: railyard run agent in a Job needs --host-from-index",
  "train-job.yaml: document 3 (Job agents): .spec.template.spec.restartPolicy: OnFailure: must be Never",
  "train-job.yaml: document 3 (Job agents): .spec.backoffLimitPerIndex: unset",
  "train-job.yaml: document 3 (Job agents): .spec.completions: 4, but the launcher (Job launcher) expects --nodes 2 + --spares 1 = 3 agents",
  "train-job.yaml: document 3 (Job agents): .spec.template.spec.containers[0].resources: nvidia.com/gpu 4 is fewer than the launcher's --nproc-per-host 8",
  "train-job.yaml: document 3 (Job agents): .spec.template.spec.containers[0].args: --launcher launcher:29500: Service launcher port 29500 leads to 29501, but the launcher listens on 29500",
  "train-job.yaml: document 4 (Job more-agents): .spec.completionMode: NonIndexed (default): railyard run agent pods are hosts index-<i>: must be Indexed",
  "train-job.yaml: document 4 (Job more-agents): .spec.parallelism: 2 must equal .spec.completions (3)",
  "train-job.yaml: document 4 (Job more-agents): .spec.template.spec.containers[0].args: --secret-file: Secret other-secret, but the launcher's is job-secret",
  "train-job.yaml: document 4 (Job more-agents): .spec.template.spec.containers[0].args: --launcher elsewhere:29500: no Service elsewhere",
  "train-job.yaml: document 5 (Job launcher-without-id): .spec.template.spec.containers[0].args: --secret-file /run/secret/secret: secret volume secret lists items token, none at secret",
  "train-job.yaml: document 5 (Job launcher-without-id): .spec.template.spec.containers[0].args: railyard run --k8s without --job-id",
];
if (r.status === 77) {
  console.log(r.stdout.trim());
  process.exit(77);
}
const missing = expected.filter((e) => !r.stderr.includes(e));
if (r.status !== 1 || missing.length) {
  console.error(`validate_manifests exited ${r.status}; output:\n${r.stdout}${r.stderr}`);
  for (const m of missing) console.error(`MISSING: ${m}`);
  process.exit(1);
}
// Rules checked once the types are right.
const rules = spawnSync(process.execPath, ["--input-type=module", "-e", `
  import { checkKubeSchedulerConfiguration as check } from ${JSON.stringify(path.join(here, "kube_scheduler_config.mjs"))};
  const errs = check({ apiVersion: "kubescheduler.config.k8s.io/v1", kind: "KubeSchedulerConfiguration",
    extenders: [{ urlPrefix: "http://a", prioritizeVerb: "p", weight: 0, bindVerb: "b",
                  managedResources: [{ name: "gpu" }, { name: "example.com/x" }, { name: "example.com/x" }] },
                { urlPrefix: "http://b", bindVerb: "b" }] });
  console.log(JSON.stringify(errs));`], { encoding: "utf8" });
const errs = JSON.parse(rules.stdout || "[]");
const want = [".extenders[0].weight: must have a positive weight",
              ".extenders[0].managedResources[0].name: 'gpu' is an invalid extended resource name",
              ".extenders[0].managedResources[2].name: duplicate",
              ".extenders: only one extender can implement bind"];
const absent = want.filter((w) => !errs.some((e) => e.startsWith(w)));
if (absent.length) {
  console.error(`rules: got ${JSON.stringify(errs)} ${rules.stderr}`);
  for (const a of absent) console.error(`MISSING: ${a}`);
  process.exit(1);
}
// A container's command line as the kubelet runs it: $(VAR) from the literal env, $$ as $,
// a value known only at run time kept; a shell's -c script read word by word.
const argv = containerArgv({
  command: ["railyard"], args: ["run", "agent", "--job", "$(JOB)", "--address", "$(POD_IP)",
                                "--launcher=$$(x):1"],
  env: [{ name: "JOB", value: "j-1" }, { name: "POD_IP", valueFrom: { fieldRef: {} } }] });
const agent = runCommand(argv);
const shell = runCommand(containerArgv({ command: ["/bin/sh", "-c"],
  args: ["exec /usr/bin/railyard run --k8s --nodes 2 --listen 1.2.3.4:5; echo -- after"] }));
const argvWant = [[agent?.role, "agent"], [flagValue(agent?.flags ?? [], "--job"), "j-1"],
                  [flagValue(agent?.flags ?? [], "--address"), "$(POD_IP)"],
                  [flagValue(agent?.flags ?? [], "--launcher"), "$(x):1"],
                  [shell?.role, "launcher"], [flagValue(shell?.flags ?? [], "--nodes"), "2"]];
const wrong = argvWant.filter(([got, want]) => got !== want);
if (wrong.length) {
  console.error(`command lines: got ${JSON.stringify(argvWant)} from ${JSON.stringify(argv)}`);
  process.exit(1);
}
console.log(`validate_manifests_selftest: ${expected.length} planted manifest errors and ${want.length} rule errors reported`);
