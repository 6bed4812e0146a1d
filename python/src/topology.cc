// railyard._core's topology and placement: load a topology file in any supported format,
// export it as `railyard topo export` does, place a gang on it. railyard/topology.py and
// railyard/place.py give them their Python shape.
#include <pybind11/stl.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "binding.h"
#include "railyard/place/placement.h"
#include "railyard/topo/aws_format.h"
#include "railyard/topo/kube_export.h"
#include "railyard/topo/load.h"
#include "railyard/topo/model.h"
#include "railyard/topo/nccl_export.h"
#include "railyard/topo/render.h"
#include "railyard/topo/slurm_format.h"
#include "railyard/topo/yaml_format.h"

namespace railyard::python {
namespace {

using topo::Cluster;

py::list Nodes(const Cluster& c) {
  py::list out;
  for (const topo::Node& n : c.nodes) {
    py::dict d;
    d["name"] = n.name;
    d["address"] = n.address;
    d["gpu_count"] = n.gpu_count;
    d["link_rate_bits"] = n.link_rate_bits;
    d["leaf"] = n.leaf >= 0 ? c.switches[n.leaf].name : std::string();
    out.append(d);
  }
  return out;
}

py::list Switches(const Cluster& c) {
  py::list out;
  for (const topo::Switch& s : c.switches) {
    py::dict d;
    d["name"] = s.name;
    d["level"] = s.level >= 0 && s.level < static_cast<int>(c.levels.size()) ? c.levels[s.level]
                                                                             : std::string();
    d["parent"] = s.parent >= 0 ? py::object(py::str(c.switches[s.parent].name)) : py::none();
    std::vector<std::string> nodes;
    for (int n : s.nodes) nodes.push_back(c.nodes[n].name);
    d["nodes"] = nodes;
    out.append(d);
  }
  return out;
}

// NcclTopologyXml for the node named `node`; an empty `cpu_arch` takes this host's CPU, an
// empty speed or a width of 0 the default link (nccl_export.h).
std::string NcclXml(const Cluster& c, const std::string& node, const std::string& cpu_arch,
                    const std::string& cpu_vendor, int cpu_family, int cpu_model,
                    const std::string& pcie_link_speed, int pcie_link_width) {
  const int n = c.FindNode(node);
  if (n < 0) Raise(NotFound("node '{}' is not in the topology", node));
  topo::NcclExportOptions o;
  if (cpu_arch.empty()) {
    o.cpu = Unwrap(topo::HostNcclCpu());
  } else {
    o.cpu = {.arch = cpu_arch, .vendor = cpu_vendor, .family = cpu_family, .model = cpu_model};
  }
  if (!pcie_link_speed.empty()) o.pcie_link_speed = pcie_link_speed;
  if (pcie_link_width != 0) o.pcie_link_width = pcie_link_width;
  return Unwrap(topo::NcclTopologyXml(c.nodes[n], o));
}

py::dict PlacementDict(const place::Placement& p) {
  py::dict d;
  d["job_id"] = p.job_id;
  d["hosts"] = p.hosts;
  d["leaves"] = p.leaves;
  d["levels"] = p.levels;
  d["explanation"] = p.explanation;
  return d;
}

}  // namespace

void RegisterTopology(py::module_& m) {
  py::class_<Cluster>(m, "Topology")
      .def_static(
          "load", [](const std::string& path) { return Unwrap(topo::LoadTopology(path)); },
          py::arg("path"))
      .def_static(
          "parse",
          [](const std::string& text, const std::string& source) {
            return Unwrap(topo::ParseTopology(text, source));
          },
          py::arg("text"), py::arg("source"))
      .def_readonly("name", &Cluster::name)
      .def_readonly("levels", &Cluster::levels)
      .def_readonly("block_sizes", &Cluster::block_sizes)
      .def_property_readonly("total_gpus", &Cluster::TotalGpus)
      .def("nodes", &Nodes)
      .def("switches", &Switches)
      .def("render", &topo::RenderTree)
      .def("railyard_yaml", &topo::WriteTopologyYaml)
      .def("slurm_conf", &topo::WriteSlurmTopologyConf)
      .def("slurm_yaml", &topo::WriteSlurmTopologyYaml)
      .def("k8s_labels", &topo::KubectlLabelCommands)
      .def("k8s_labels_json",
           [](const Cluster& c) { return topo::NodeLabelsJson(c).dump(2) + "\n"; })
      .def(
          "kueue",
          [](const Cluster& c, const std::string& name, const std::string& api) {
            return Unwrap(topo::KueueTopologyManifest(c, name, Unwrap(topo::ParseKueueApi(api))));
          },
          py::arg("name"), py::arg("api"))
      .def(
          "hostfile", [](const Cluster& c, int slots) { return topo::Hostfile(c, {}, slots); },
          py::arg("slots"))
      .def("nccl_xml", &NcclXml, py::arg("node"), py::arg("cpu_arch"), py::arg("cpu_vendor"),
           py::arg("cpu_family"), py::arg("cpu_model"), py::arg("pcie_link_speed"),
           py::arg("pcie_link_width"));

  // AWS instance topology with the instance id -> host name map (aws_format.h): what
  // `railyard topo export --aws-hosts` does. Returns (topology, skipped instances).
  m.def(
      "import_aws",
      [](const std::string& text, const std::string& source,
         const std::optional<std::map<std::string, std::string>>& hosts,
         const std::string& hosts_source) {
        topo::AwsImportOptions o;
        if (hosts) o.hosts = &*hosts;
        o.hosts_source = hosts_source;
        topo::AwsImport in = Unwrap(topo::ImportAwsInstanceTopology(text, source, o));
        return py::make_tuple(std::move(in.cluster), in.skipped);
      },
      py::arg("text"), py::arg("source"), py::arg("hosts"), py::arg("hosts_source"));
  m.def(
      "parse_aws_host_map",
      [](const std::string& text, const std::string& source) {
        return Unwrap(topo::ParseAwsHostMap(text, source));
      },
      py::arg("text"), py::arg("source"));

  // The Placer keeps a reference to its topology: keep_alive holds the Python object.
  py::class_<place::Placer>(m, "Placer")
      .def(py::init<const Cluster&>(), py::arg("topology"), py::keep_alive<1, 2>())
      .def(
          "set_excluded",
          [](place::Placer& p, const std::vector<std::string>& hosts) {
            ThrowIfError(p.SetExcluded(hosts));
          },
          py::arg("hosts"))
      .def(
          "set_busy",
          [](place::Placer& p, const std::vector<std::string>& hosts) {
            ThrowIfError(p.SetBusy(hosts));
          },
          py::arg("hosts"))
      .def(
          "place",
          [](place::Placer& p, int nodes, int gpus_per_node, std::string required_level,
             std::string preferred_level) {
            return PlacementDict(Unwrap(p.Place({.nodes = nodes,
                                                 .gpus_per_node = gpus_per_node,
                                                 .required_level = std::move(required_level),
                                                 .preferred_level = std::move(preferred_level)})));
          },
          py::arg("nodes"), py::arg("gpus_per_node"), py::arg("required_level"),
          py::arg("preferred_level"))
      .def(
          "release", [](place::Placer& p, int job_id) { ThrowIfError(p.Release(job_id)); },
          py::arg("job_id"))
      .def_property_readonly("free_nodes", &place::Placer::free_nodes)
      .def_property_readonly("live_jobs", &place::Placer::live_jobs);
}

}  // namespace railyard::python
