// Checks of the pods that run `railyard run` under Kubernetes (deploy/kubernetes/train-job.yaml,
// docs/launch.md "railyard run"), which the API schemas cannot see:
//   - a `railyard run agent` pod with --host-from-index belongs to an Indexed Job (it is host
//     index-$JOB_COMPLETION_INDEX), whose parallelism equals its completions (the launcher waits
//     for all N+S agents at once), with restartPolicy Never and backoffLimitPerIndex (one failed
//     pod must not fail the Job: Kubernetes would delete every other pod, spares included);
//   - --secret-file names a file of a mounted Secret volume, in agents and launchers alike;
//   - a `railyard run --k8s` launcher has --job-id, --listen and --nodes, and some Indexed Job of
//     agents runs with that job id: completions == --nodes + --spares, the same Secret, at least
//     --nproc-per-host GPUs, and a --launcher address that reaches --listen (its IP, or a Service
//     whose port leads to the launcher's port and whose selector picks the launcher's pod).
// $(VAR) in command and args is expanded from the container's literal env values, as the kubelet
// does; a value known only at run time ($(POD_IP)) stays as written and is not compared.
//
//   const runs = [];
//   errors.push(...checkRunPods(obj, runs));        // per object, with its field paths
//   for (const e of checkRunJobs(runs, objects)) ...  // once every file is read

const shells = new Set(["sh", "bash", "/bin/sh", "/bin/bash"]);

// The container's argv with $(VAR) expanded; a shell's -c script is split on blanks.
export function containerArgv(c) {
  const env = new Map();
  for (const e of c.env ?? []) if (typeof e.value === "string") env.set(e.name, e.value);
  const expand = (s) => String(s).replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g,
      (m, name) => (m === "$$" ? "$" : env.has(name) ? env.get(name) : m));
  let argv = [...(c.command ?? []), ...(c.args ?? [])].map(expand);
  const dashC = argv.indexOf("-c");
  if (shells.has(argv[0]) && dashC >= 0 && argv.length > dashC + 1) {
    argv = argv[dashC + 1].split(/[\s;]+/).map((t) => t.replace(/^["']|["']$/g, ""));
  }
  return argv.filter((t) => t !== "");
}

// "agent" for `railyard run agent`, "launcher" for `railyard run --k8s`, else null; and the
// flags: the words after `run` up to `--` (the training command follows it).
export function runCommand(argv) {
  for (let i = 0; i + 1 < argv.length; ++i) {
    if (!/(^|\/)railyard$/.test(argv[i]) || argv[i + 1] !== "run") continue;
    const rest = argv.slice(i + 2);
    const end = rest.indexOf("--");
    const flags = end >= 0 ? rest.slice(0, end) : rest;
    if (flags[0] === "agent") return { role: "agent", flags: flags.slice(1) };
    if (flags.includes("--k8s")) return { role: "launcher", flags };
    return null;
  }
  return null;
}

// The value of --name (as `--name V` or `--name=V`); undefined when absent.
export function flagValue(flags, name) {
  for (let i = 0; i < flags.length; ++i) {
    if (flags[i] === name) return flags[i + 1];
    if (flags[i].startsWith(name + "=")) return flags[i].slice(name.length + 1);
  }
  return undefined;
}

const known = (v) => typeof v === "string" && !v.includes("$(");

function splitHostPort(s) {
  const m = /^(.*):([0-9]+)$/.exec(s ?? "");
  return m ? { host: m[1], port: Number(m[2]) } : null;
}

// The Secret and key a file path comes from, or an error naming the mount.
function secretFile(pod, c, file) {
  const mounts = (c.volumeMounts ?? []).filter((m) => m.subPath
      ? file === m.mountPath : file.startsWith(m.mountPath.replace(/\/$/, "") + "/"));
  mounts.sort((a, b) => b.mountPath.length - a.mountPath.length);
  const m = mounts[0];
  if (!m) return { error: `no volumeMount of container ${c.name} holds it` };
  const key = m.subPath ?? file.slice(m.mountPath.replace(/\/$/, "").length + 1);
  const v = (pod.volumes ?? []).find((x) => x.name === m.name);
  if (!v?.secret) {
    return { error: `volume ${m.name} mounted at ${m.mountPath} is not a secret volume` };
  }
  const items = v.secret.items;
  if (items && !items.some((it) => it.path === key)) {
    return { error: `secret volume ${m.name} lists items ${items.map((it) => it.path).join(", ")}` +
                    `, none at ${key}` };
  }
  const item = items?.find((it) => it.path === key);
  return { secretName: v.secret.secretName, key: item ? item.key : key };
}

function gpuLimit(c) {
  const r = c.resources ?? {};
  const g = r.limits?.["nvidia.com/gpu"] ?? r.requests?.["nvidia.com/gpu"];
  return g === undefined ? undefined : Number(g);
}

// Checks one object's `railyard run` containers; records each for checkRunJobs in `runs`.
export function checkRunPods(obj, runs, where = {}) {
  const errors = [];
  const pod = obj.spec?.template?.spec ?? (obj.kind === "Pod" ? obj.spec : undefined);
  if (!pod) return errors;
  const podPath = obj.kind === "Pod" ? ".spec" : ".spec.template.spec";
  for (const [k, c] of (pod.containers ?? []).entries()) {
    const run = runCommand(containerArgv(c));
    if (!run) continue;
    const at = `${podPath}.containers[${k}]`;
    const { role, flags } = run;
    const rec = { ...where, obj, role, container: c, pod, at };
    const file = flagValue(flags, "--secret-file");
    if (file === undefined) {
      const fromEnv = (c.env ?? []).some((e) => e.name === "RAILYARD_JOB_SECRET" &&
                                                e.valueFrom?.secretKeyRef);
      if (!fromEnv) {
        errors.push(`${at}.args: railyard run ${role === "agent" ? "agent " : ""}without ` +
                    `--secret-file: the job secret must come from a Secret`);
      }
    } else if (known(file)) {
      const s = secretFile(pod, c, file);
      if (s.error) errors.push(`${at}.args: --secret-file ${file}: ${s.error}`);
      else rec.secret = s;
    }
    if (role === "agent") {
      rec.job = flagValue(flags, "--job");
      rec.launcher = flagValue(flags, "--launcher");
      rec.gpus = gpuLimit(c);
      if (rec.job === undefined || rec.launcher === undefined) {
        errors.push(`${at}.args: railyard run agent needs --launcher ADDR:PORT and --job ID`);
      }
      const fromIndex = flags.includes("--host-from-index");
      if (obj.kind !== "Job") {
        if (fromIndex) {
          errors.push(`${at}.args: --host-from-index needs a pod of an Indexed Job ` +
                      `(JOB_COMPLETION_INDEX), not a ${obj.kind}`);
        }
      } else {
        const spec = obj.spec;
        if (spec.completionMode !== "Indexed") {
          errors.push(`.spec.completionMode: ${spec.completionMode ?? "NonIndexed (default)"}: ` +
                      `railyard run agent pods are hosts index-<i>: must be Indexed`);
        }
        if (!fromIndex) {
          errors.push(`${at}.args: railyard run agent in a Job needs --host-from-index ` +
                      `(the launcher expects index-0 .. index-<N+S-1>)`);
        }
        const parallelism = spec.parallelism ?? 1;
        if (parallelism !== spec.completions) {
          errors.push(`.spec.parallelism: ${parallelism} must equal .spec.completions ` +
                      `(${spec.completions}): the launcher waits for all N+S agents at once`);
        }
        if (pod.restartPolicy !== "Never") {
          errors.push(`${podPath}.restartPolicy: ${pod.restartPolicy ?? "Always (default)"}: ` +
                      `must be Never: the launcher restarts the job, on a spare, not Kubernetes`);
        }
        if (spec.backoffLimitPerIndex === undefined) {
          errors.push(`.spec.backoffLimitPerIndex: unset: one failed agent pod would fail the ` +
                      `Job, and Kubernetes would delete every other pod, spares included`);
        }
        rec.completions = spec.completions;
      }
    } else {
      rec.jobId = flagValue(flags, "--job-id");
      rec.listen = flagValue(flags, "--listen");
      rec.nodes = Number(flagValue(flags, "--nodes"));
      rec.spares = Number(flagValue(flags, "--spares") ?? 0);
      rec.nproc = Number(flagValue(flags, "--nproc-per-host") ?? 1);
      if (rec.jobId === undefined) {
        errors.push(`${at}.args: railyard run --k8s without --job-id: the agents' --job must ` +
                    `be known before the launcher starts`);
      }
      if (rec.listen === undefined) {
        errors.push(`${at}.args: railyard run --k8s without --listen ADDR:PORT ` +
                    `(what the agents dial)`);
      }
      if (!(rec.nodes >= 1)) {
        errors.push(`${at}.args: railyard run --k8s needs --nodes N (1 or more)`);
      }
    }
    runs.push(rec);
  }
  return errors;
}

// The Service a --launcher host names ("svc", "svc.ns", "svc.ns.svc.cluster.local").
function serviceOf(host, namespace, objects) {
  const [name, ns] = host.split(".");
  return objects.find((o) => o.kind === "Service" && o.metadata?.name === name &&
                             (o.metadata?.namespace ?? namespace) === (ns ?? namespace));
}

// Checks the launchers against the agents' Jobs; returns { where, message } per error, where
// is the record of the object to name.
export function checkRunJobs(runs, objects) {
  const errors = [];
  const add = (rec, message) => errors.push({ where: rec, message });
  for (const l of runs.filter((r) => r.role === "launcher" && known(r.jobId))) {
    const agents = runs.filter((r) => r.role === "agent" && r.job === l.jobId);
    if (agents.length === 0) {
      add(l, `${l.at}.args: --job-id ${l.jobId}: no railyard run agent pods with --job ${l.jobId}`);
      continue;
    }
    const ns = l.obj.metadata?.namespace;
    const listen = splitHostPort(l.listen);
    for (const a of agents) {
      if (a.completions !== undefined && a.completions !== l.nodes + l.spares) {
        add(a, `.spec.completions: ${a.completions}, but the launcher (${l.obj.kind} ` +
               `${l.obj.metadata?.name}) expects --nodes ${l.nodes} + --spares ${l.spares} = ${l.nodes + l.spares} agents`);
      }
      if (l.secret && a.secret && l.secret.secretName !== a.secret.secretName) {
        add(a, `${a.at}.args: --secret-file: Secret ${a.secret.secretName}, but the ` +
               `launcher's is ${l.secret.secretName}: the job secret must be the same`);
      }
      if (a.gpus !== undefined && l.nproc > a.gpus) {
        add(a, `${a.at}.resources: nvidia.com/gpu ${a.gpus} is fewer than the launcher's ` +
               `--nproc-per-host ${l.nproc}`);
      }
      const dial = splitHostPort(a.launcher);
      if (!known(a.launcher) || !listen) continue;
      if (!dial) {
        add(a, `${a.at}.args: --launcher ${a.launcher}: expected ADDR:PORT`);
        continue;
      }
      if (/^[0-9.]+$/.test(dial.host)) {
        if (dial.port !== listen.port || (known(listen.host) && listen.host !== "0.0.0.0" &&
                                          listen.host !== dial.host)) {
          add(a, `${a.at}.args: --launcher ${a.launcher} is not the launcher's ` +
                 `--listen ${l.listen}`);
        }
        continue;
      }
      const svc = serviceOf(dial.host, a.obj.metadata?.namespace, objects);
      if (!svc) {
        add(a, `${a.at}.args: --launcher ${a.launcher}: no Service ` +
               `${dial.host.split(".")[0]} in the manifests leads to the launcher ` +
               `(${l.obj.kind} ${l.obj.metadata?.name})`);
        continue;
      }
      const svcName = `Service ${svc.metadata.name}`;
      const p = (svc.spec?.ports ?? []).find((x) => x.port === dial.port);
      if (!p) {
        add(a, `${a.at}.args: --launcher ${a.launcher}: ${svcName} has no port ${dial.port}`);
        continue;
      }
      let target = p.targetPort ?? p.port;
      if (typeof target === "string") {
        target = (l.container.ports ?? []).find((x) => x.name === target)?.containerPort ?? target;
      }
      if (target !== listen.port) {
        add(a, `${a.at}.args: --launcher ${a.launcher}: ${svcName} port ${dial.port} leads ` +
               `to ${target}, but the launcher listens on ${listen.port}`);
      }
      const labels = l.obj.spec?.template?.metadata?.labels ?? l.obj.metadata?.labels ?? {};
      const selector = svc.spec?.selector ?? {};
      const ok = Object.keys(selector).length > 0 &&
                 Object.entries(selector).every(([k, v]) => labels[k] === v) &&
                 (svc.metadata?.namespace ?? ns) === ns;
      if (!ok) {
        add(a, `${a.at}.args: --launcher ${a.launcher}: ${svcName}'s selector does not ` +
               `pick the launcher's pod (${l.obj.kind} ${l.obj.metadata?.name})`);
      }
    }
  }
  return errors;
}
