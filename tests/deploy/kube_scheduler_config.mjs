// A check of KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1), which is no API
// object and so has no schema in kubernetes-models. Written from the Kubernetes sources:
//   staging/src/k8s.io/kube-scheduler/config/v1/types.go (commit 08ced910cf7f, master 2026):
//     the fields and their JSON types;
//   staging/src/k8s.io/component-base/config/v1alpha1/types.go: leaderElection,
//     clientConnection and the debugging fields inlined at the top level;
//   pkg/scheduler/apis/config/validation/validation.go (commit 030880a5dc54):
//     validateExtenders and the top-level rules.
// kube-scheduler decodes its configuration strictly, so an unknown field is an error here too.

const str = { type: "string" };
const bool = { type: "boolean" };
const int = { type: "integer" };
const num = { type: "number" };
// metav1.Duration: a Go duration string.
const duration = { type: "string", pattern: /^-?([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$/ };
const obj = (fields) => ({ type: "object", fields });
const list = (items) => ({ type: "array", items });
const any = { type: "any" };  // runtime.RawExtension: plugin args, checked by each plugin

const pluginSet = obj({ enabled: list(obj({ name: str, weight: int })),
                        disabled: list(obj({ name: str, weight: int })) });
const plugins = obj(Object.fromEntries(
    ["preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
     "reserve", "permit", "preBind", "bind", "postBind", "multiPoint", "placementGenerate",
     "placementScore", "placementFeasible", "podGroupPostFilter"].map((k) => [k, pluginSet])));

const extender = obj({
  urlPrefix: str, filterVerb: str, preemptVerb: str, prioritizeVerb: str, weight: int,
  bindVerb: str, enableHTTPS: bool,
  tlsConfig: obj({ insecure: bool, serverName: str, certFile: str, keyFile: str, caFile: str,
                   certData: str, keyData: str, caData: str }),
  httpTimeout: duration, nodeCacheCapable: bool,
  managedResources: list(obj({ name: str, ignoredByScheduler: bool })),
  ignorable: bool,
});

const schema = obj({
  apiVersion: str, kind: str,
  parallelism: int,
  leaderElection: obj({ leaderElect: bool, leaseDuration: duration, renewDeadline: duration,
                        retryPeriod: duration, resourceLock: str, resourceName: str,
                        resourceNamespace: str }),
  clientConnection: obj({ kubeconfig: str, acceptContentTypes: str, contentType: str, qps: num,
                          burst: int }),
  enableProfiling: bool, enableContentionProfiling: bool,
  percentageOfNodesToScore: int, percentageOfPlacementsToScore: int,
  podInitialBackoffSeconds: int, podMaxBackoffSeconds: int,
  profiles: list(obj({ schedulerName: str, percentageOfNodesToScore: int,
                       percentageOfPlacementsToScore: int, plugins,
                       pluginConfig: list(obj({ name: str, args: any })) })),
  extenders: list(extender),
  delayCacheUntilActive: bool,
});

function typeErrors(value, s, path, errors) {
  if (s.type === "any" || value === null) return;
  const actual = Array.isArray(value) ? "array" : typeof value;
  if (s.type === "integer" ? !Number.isInteger(value) : s.type !== actual) {
    errors.push(`${path}: expected ${s.type}, found ${JSON.stringify(value)}`);
    return;
  }
  if (s.pattern && !s.pattern.test(value)) {
    errors.push(`${path}: '${value}' is not a duration such as 5s or 1m30s`);
  }
  if (s.type === "array") value.forEach((v, i) => typeErrors(v, s.items, `${path}[${i}]`, errors));
  if (s.type === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (!(k in s.fields)) {
        errors.push(`${path}.${k}: unknown field (kube-scheduler decodes strictly)`);
      } else {
        typeErrors(v, s.fields[k], `${path}.${k}`, errors);
      }
    }
  }
}

// k8s.io/apimachinery IsQualifiedName: [prefix/]name, name <= 63 of [-A-Za-z0-9_.] with
// alphanumerics at both ends, prefix a DNS-1123 subdomain.
function isQualifiedName(s) {
  const parts = s.split("/");
  if (parts.length > 2) return false;
  const name = parts[parts.length - 1];
  if (!/^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/.test(name) || name.length > 63) return false;
  if (parts.length === 2) {
    const prefix = parts[0];
    return prefix.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(prefix);
  }
  return true;
}

// pkg/apis/core/v1/helper IsExtendedResourceName: not native (native: no '/', or containing
// "kubernetes.io/"), not "requests."-prefixed, and "requests.<name>" is a qualified name too.
function isExtendedResourceName(s) {
  if (!s.includes("/") || s.includes("kubernetes.io/")) return false;
  return !s.startsWith("requests.") && isQualifiedName(`requests.${s}`);
}

// Errors, each naming the field; [] when `config` is valid.
export function checkKubeSchedulerConfiguration(config) {
  const errors = [];
  typeErrors(config, schema, "", errors);
  if (errors.length) return errors;
  if (config.parallelism !== undefined && config.parallelism <= 0) {
    errors.push(".parallelism: should be an integer value greater than zero");
  }
  const pct = config.percentageOfNodesToScore;
  if (pct !== undefined && (pct < 0 || pct > 100)) {
    errors.push(".percentageOfNodesToScore: not in valid range [0-100]");
  }
  if (config.podInitialBackoffSeconds !== undefined && config.podInitialBackoffSeconds <= 0) {
    errors.push(".podInitialBackoffSeconds: must be greater than 0");
  }
  const le = config.leaderElection;
  if (le && le.leaderElect !== false && le.resourceLock !== undefined && le.resourceLock !== "leases") {
    errors.push('.leaderElection.resourceLock: resourceLock value must be "leases"');
  }
  const names = new Set();
  for (const [i, p] of (config.profiles || []).entries()) {
    const name = p.schedulerName ?? "default-scheduler";
    if (names.has(name)) errors.push(`.profiles[${i}].schedulerName: duplicate '${name}'`);
    names.add(name);
  }
  let binders = 0;
  const managed = new Set();
  for (const [i, e] of (config.extenders || []).entries()) {
    const path = `.extenders[${i}]`;
    if (!e.urlPrefix) errors.push(`${path}.urlPrefix: required`);
    if (e.prioritizeVerb && !(e.weight > 0)) {
      errors.push(`${path}.weight: must have a positive weight applied to it`);
    }
    if (e.bindVerb) ++binders;
    for (const [j, r] of (e.managedResources || []).entries()) {
      const rpath = `${path}.managedResources[${j}].name`;
      if (!r.name || !isQualifiedName(r.name) || !isExtendedResourceName(r.name)) {
        errors.push(`${rpath}: '${r.name}' is an invalid extended resource name`);
      }
      if (managed.has(r.name)) errors.push(`${rpath}: duplicate extender managed resource name`);
      managed.add(r.name);
    }
  }
  if (binders > 1) errors.push(".extenders: only one extender can implement bind");
  return errors;
}
