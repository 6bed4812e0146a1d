// `railyard topo show|export` and `railyard discover`: read a topology in any supported
// format, print it, convert it for Slurm, Kubernetes/Kueue and NCCL; describe this node.
#include <fmt/format.h>

#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "railyard/base/files.h"
#include "railyard/cli/cli_common.h"
#include "railyard/topo/aws_format.h"
#include "railyard/topo/discover.h"
#include "railyard/topo/kube_export.h"
#include "railyard/topo/load.h"
#include "railyard/topo/nccl_export.h"
#include "railyard/topo/render.h"
#include "railyard/topo/slurm_format.h"
#include "railyard/topo/yaml_format.h"

namespace railyard::cli {
namespace {

constexpr const char* kFormats =
    "railyard-yaml, slurm-conf, slurm-yaml, k8s-labels, k8s-labels-json, kueue, nccl-xml, "
    "hostfile";

// A whole number in `text`, or nullopt.
std::optional<int> WholeNumber(std::string_view text) {
  int v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

std::vector<std::string_view> SplitCommas(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

// --nccl-cpu ARCH[,VENDOR,FAMILY,MODEL]: the CPU written into the NCCL topology file. NCCL
// reads vendor, family and model from the file on x86_64 only, and needs them there.
Result<topo::NcclCpu> ParseNcclCpu(const std::string& text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(
        "--nccl-cpu '{}': {}; expected ARCH (arm64, ppc64) or x86_64,VENDOR,FAMILY,MODEL as "
        "cpuid gives them, e.g. x86_64,GenuineIntel,6,143",
        text, why);
  };
  std::vector<std::string_view> f = SplitCommas(text);
  topo::NcclCpu cpu;
  cpu.arch = std::string(f[0]);
  if (cpu.arch != "x86_64" && cpu.arch != "arm64" && cpu.arch != "ppc64") {
    return bad(fmt::format("arch '{}' is not one of NCCL's (x86_64, arm64, ppc64)", cpu.arch));
  }
  if (cpu.arch != "x86_64") {
    if (f.size() != 1) return bad("vendor, family and model apply to x86_64 only");
    return cpu;
  }
  if (f.size() != 4) return bad("x86_64 needs vendor, family and model");
  cpu.vendor = std::string(f[1]);
  auto family = WholeNumber(f[2]);
  auto model = WholeNumber(f[3]);
  if (cpu.vendor.empty()) return bad("the vendor is empty");
  if (!family || *family < 0) return bad(fmt::format("family '{}' is no whole number", f[2]));
  if (!model || *model < 0) return bad(fmt::format("model '{}' is no whole number", f[3]));
  cpu.family = *family;
  cpu.model = *model;
  return cpu;
}

// --nccl-cpu and --pcie-link into the export options; the CPU defaults to this machine's.
Result<topo::NcclExportOptions> NcclOptions(const std::string& cpu, const std::string& link) {
  topo::NcclExportOptions o;
  if (cpu.empty()) {
    auto host = topo::HostNcclCpu();
    if (!host.ok()) return host.status().WithContext("--nccl-cpu not given, this host's CPU");
    o.cpu = *host;
  } else {
    RY_ASSIGN_OR_RETURN(o.cpu, ParseNcclCpu(cpu));
    if (Status st = topo::CheckNcclCpu(o.cpu); !st.ok()) {
      return st.WithContext(fmt::format("--nccl-cpu '{}'", cpu));
    }
  }
  if (link.empty()) return o;
  size_t comma = link.rfind(',');
  auto width = comma == std::string::npos ? std::nullopt : WholeNumber(link.substr(comma + 1));
  const bool pcie_width = width && (*width == 1 || *width == 2 || *width == 4 || *width == 8 ||
                                    *width == 12 || *width == 16 || *width == 32);
  if (!pcie_width || comma == 0) {
    return InvalidArgument(
        "--pcie-link '{}': expected SPEED,WIDTH with NCCL's speed name and a PCIe width (1, 2, "
        "4, 8, 12, 16 or 32), e.g. \"32.0 GT/s PCIe,16\"",
        link);
  }
  o.pcie_link_speed = link.substr(0, comma);
  o.pcie_link_width = *width;
  if (Status st = topo::CheckPcieLink(o.pcie_link_speed, o.pcie_link_width); !st.ok()) {
    return st.WithContext(fmt::format("--pcie-link '{}'", link));
  }
  return o;
}

Result<std::string> Export(const topo::Cluster& c, const std::string& format,
                           const std::string& node, int slots, const std::string& name,
                           const std::string& kueue_api, const std::string& nccl_cpu,
                           const std::string& pcie_link) {
  if (format != "nccl-xml" && !(nccl_cpu.empty() && pcie_link.empty())) {
    return InvalidArgument("--nccl-cpu and --pcie-link apply to --format nccl-xml only");
  }
  if (format == "railyard-yaml") return topo::WriteTopologyYaml(c);
  if (format == "slurm-conf") return topo::WriteSlurmTopologyConf(c);
  if (format == "slurm-yaml") return topo::WriteSlurmTopologyYaml(c);
  if (format == "k8s-labels") return topo::KubectlLabelCommands(c);
  if (format == "k8s-labels-json") return topo::NodeLabelsJson(c).dump(2) + "\n";
  if (format == "kueue") {
    RY_ASSIGN_OR_RETURN(topo::KueueApi api, topo::ParseKueueApi(kueue_api));
    return topo::KueueTopologyManifest(c, name, api);
  }
  if (format == "hostfile") return topo::Hostfile(c, {}, slots);
  if (format == "nccl-xml") {
    if (node.empty())
      return InvalidArgument("--format nccl-xml needs --node NAME (one node's file)");
    int n = c.FindNode(node);
    if (n < 0) return NotFound("--node '{}' is not in the topology", node);
    RY_ASSIGN_OR_RETURN(topo::NcclExportOptions options, NcclOptions(nccl_cpu, pcie_link));
    return topo::NcclTopologyXml(c.nodes[n], options);
  }
  return InvalidArgument("--format '{}': expected one of {}", format, kFormats);
}

// Formats that do not name nodes, so AWS instance ids in them harm nothing.
bool NamesNodes(const std::string& format) { return format != "kueue"; }

// Loads `path`; AWS instance topology goes through the host map (see topo/aws_format.h), and
// the instances it skips are reported on stderr. `need_hosts`: refuse AWS input without a map,
// since the output would name nodes by instance id, which no scheduler knows.
Result<topo::Cluster> LoadForCli(const std::string& path, const std::string& aws_hosts,
                                 bool need_hosts) {
  auto text = base::ReadFile(path);
  bool aws = text.ok() && topo::DetectTopologyFormat(*text) == topo::TopologyFormat::kAwsJson;
  if (!aws) {
    if (!aws_hosts.empty()) {
      return InvalidArgument("--aws-hosts applies to AWS instance topology JSON; {} is not that",
                             path);
    }
    return topo::LoadTopology(path);
  }
  std::map<std::string, std::string> hosts;
  topo::AwsImportOptions options;
  if (!aws_hosts.empty()) {
    RY_ASSIGN_OR_RETURN(std::string hosts_text, base::ReadFile(aws_hosts));
    RY_ASSIGN_OR_RETURN(hosts, topo::ParseAwsHostMap(hosts_text, aws_hosts));
    options.hosts = &hosts;
    options.hosts_source = aws_hosts;
  }
  RY_ASSIGN_OR_RETURN(topo::AwsImport in, topo::ImportAwsInstanceTopology(*text, path, options));
  for (const std::string& s : in.skipped) {
    fmt::print(stderr,
               "railyard: {}: skipped instance {} (not running, or a type without instance "
               "topology)\n",
               path, s);
  }
  if (need_hosts && aws_hosts.empty()) {
    return InvalidArgument(
        "{} is AWS instance topology, whose nodes are instance ids ('{}', ...); Slurm and "
        "Kubernetes know them by host name: pass --aws-hosts FILE with '<instance-id> "
        "<host-name>' lines, e.g. the output of aws ec2 describe-instances --query "
        "'Reservations[].Instances[].[InstanceId,PrivateDnsName]' --output text",
        path, in.cluster.nodes.empty() ? std::string() : in.cluster.nodes[0].name);
  }
  return std::move(in.cluster);
}

}  // namespace

void RegisterTopoCommand(CLI::App& app, Action* action) {
  CLI::App* topo = app.add_subcommand(
      "topo", "Cluster topology: show it, or export it for Slurm, Kubernetes/Kueue and NCCL");
  topo->require_subcommand(1);
  topo->footer(
      "Topology files: Railyard YAML, Slurm topology.conf (tree or block) or topology.yaml, AWS\n"
      "DescribeInstanceTopology JSON, or a virtual cluster's file; the format is detected from\n"
      "the content.\n"
      "Examples:\n"
      "  railyard topo show --topology examples/topology-2su-rail.yaml\n"
      "  railyard topo export --topology topology.conf --format kueue > kueue-topology.yaml\n"
      "  railyard topo export --topology aws.json --aws-hosts hosts.txt --format slurm-conf\n"
      "Docs: docs/topology.md\n");

  struct ShowFlags {
    std::string topology;
    std::string aws_hosts;
  };
  auto sf = std::make_shared<ShowFlags>();
  CLI::App* show = topo->add_subcommand("show", "Print the tree readably");
  show->add_option("--topology", sf->topology, "topology file (any supported format)")->required();
  show->add_option("--aws-hosts", sf->aws_hosts,
                   "AWS input: file of '<instance-id> <host-name>' lines naming the nodes");
  show->footer(
      "Example:\n  railyard topo show --topology /run/railyard/vcluster-ry-topology.yaml\n");
  show->callback([sf, action] {
    *action = [sf]() -> Outcome {
      auto c = LoadForCli(sf->topology, sf->aws_hosts, /*need_hosts=*/false);
      if (!c.ok()) return c.status();
      fmt::print("{}", topo::RenderTree(*c));
      return Status::Ok();
    };
  });

  struct ExportFlags {
    std::string topology;
    std::string format;
    std::string node;
    std::string out;
    std::string name = "railyard";
    std::string kueue_api = "v1beta2";
    std::string aws_hosts;
    std::string nccl_cpu;
    std::string pcie_link;
    int slots = 0;
  };
  auto ef = std::make_shared<ExportFlags>();
  CLI::App* ex = topo->add_subcommand("export", "Convert a topology for another system");
  ex->add_option("--topology", ef->topology, "topology file (any supported format)")->required();
  ex->add_option("--format", ef->format, std::string("one of: ") + kFormats)->required();
  ex->add_option("--node", ef->node, "the node, for nccl-xml");
  ex->add_option("--name", ef->name, "name of the Kueue Topology object")->capture_default_str();
  ex->add_option("--kueue-api", ef->kueue_api,
                 "Kueue API version of the Topology: v1alpha1 (Kueue 0.9-0.13), v1beta1 (0.14 "
                 "and later), v1beta2 (0.15 and later)")
      ->capture_default_str();
  ex->add_option("--aws-hosts", ef->aws_hosts,
                 "AWS input: file of '<instance-id> <host-name>' lines; required for every "
                 "format that names nodes, and every instance must be in it");
  ex->add_option("--nccl-cpu", ef->nccl_cpu,
                 "nccl-xml: the nodes' CPU as NCCL names it, ARCH or x86_64,VENDOR,FAMILY,MODEL "
                 "(cpuid's; e.g. x86_64,GenuineIntel,6,143). Default: this host's CPU, which is "
                 "wrong when exporting elsewhere than on such a node (a login node)")
      ->type_name("ARCH[,VENDOR,FAMILY,MODEL]");
  ex->add_option("--pcie-link", ef->pcie_link,
                 "nccl-xml: link_speed and link_width written on every <pci>, as NCCL names "
                 "them (default \"32.0 GT/s PCIe,16\", PCIe Gen5 x16)")
      ->type_name("SPEED,WIDTH");
  ex->add_option("--slots", ef->slots, "slots per node in a hostfile (default: GPUs per node)");
  ex->add_option("--out", ef->out, "write here (atomically) instead of stdout");
  ex->footer(
      "Formats:\n"
      "  railyard-yaml    Railyard topology YAML (current version)\n"
      "  slurm-conf       Slurm topology.conf (tree form, or block form for block topologies)\n"
      "  slurm-yaml       Slurm topology.yaml\n"
      "  k8s-labels       kubectl label commands: railyard.io/<level>=<switch> per node\n"
      "  k8s-labels-json  the same labels as JSON {node: {label: value}}\n"
      "  kueue            Kueue Topology (+ ResourceFlavor) over those labels (--kueue-api)\n"
      "  nccl-xml         NCCL_TOPO_FILE XML for one node (--node)\n"
      "  hostfile         OpenMPI hostfile in tree order\n"
      "Example:\n  railyard topo export --topology cluster.yaml --format nccl-xml --node gpu001 "
      "\\\n"
      "    --nccl-cpu x86_64,GenuineIntel,6,143 --pcie-link \"32.0 GT/s PCIe,16\"\n");
  ex->callback([ef, action] {
    *action = [ef]() -> Outcome {
      auto c = LoadForCli(ef->topology, ef->aws_hosts, NamesNodes(ef->format));
      if (!c.ok()) return c.status();
      auto text = Export(*c, ef->format, ef->node, ef->slots, ef->name, ef->kueue_api, ef->nccl_cpu,
                         ef->pcie_link);
      if (!text.ok()) return text.status();
      if (ef->out.empty()) {
        fmt::print("{}", *text);
        return Status::Ok();
      }
      return base::WriteFileAtomic(ef->out, *text);
    };
  });
}

void RegisterDiscoverCommand(CLI::App& app, Action* action) {
  struct Flags {
    std::string sysfs = "/sys";
    bool no_fabric = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* d =
      app.add_subcommand("discover",
                         "Describe this node as JSON: NUMA and CPUs, GPUs, NICs, GPU-NIC paths, "
                         "libfabric providers");
  d->add_option("--sysfs", f->sysfs, "sysfs root (for testing against a copy)")
      ->capture_default_str();
  d->add_flag("--no-fabric", f->no_fabric, "skip the libfabric provider probe");
  d->footer(
      "Uses hwloc, sysfs, libfabric's fi_getinfo and NVML (loaded at run time when present);\n"
      "what is missing is skipped and listed under \"notes\".\n"
      "Example:\n  railyard discover > $(hostname).json\nDocs: docs/topology.md\n");
  d->callback([f, action] {
    *action = [f]() -> Outcome {
      topo::DiscoverOptions o;
      o.sysfs_root = f->sysfs;
      o.use_libfabric = !f->no_fabric;
      auto r = topo::DiscoverNode(o);
      if (!r.ok()) return r.status();
      fmt::print("{}\n", topo::DiscoveryToJson(*r).dump(2));
      return Status::Ok();
    };
  });
}

}  // namespace railyard::cli
