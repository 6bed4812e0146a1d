// An NCCL topology file (NCCL_TOPO_FILE) for one node, from what the cluster model knows.
//
//   RY_ASSIGN_OR_RETURN(std::string xml, NcclTopologyXml(cluster.nodes[i], options));
//   RY_RETURN_IF_ERROR(base::WriteFileAtomic("/run/railyard/nccl-topo.xml", xml));
//   // then NCCL_TOPO_FILE=/run/railyard/nccl-topo.xml in the ranks' environment
//
// The file has the form of the topology files the clouds publish for their GPU VMs (Azure's
// ND-series, AWS's p4d): one <cpu> per NUMA node, GPUs and NICs as bare <pci> leaves, and a
// PCI switch drawn as a made-up bridge (<pci class="0x060400">, bus ids ffff:ff:01.0 up) that
// holds what sits behind it. NCCL fills in the <gpu> and <nic><net/></nic> elements itself, by
// bus id, from NVML and its network plugin, so GPU indices, compute capability, ranks,
// GPUDirect support, NVLinks and the plugin's NIC names and speeds all come from the running
// machine. What NCCL does not fill in for such a file is written:
//   system  version="1".
//   cpu     numaid; arch, and on x86_64 vendor, familyid and modelid (NcclExportOptions::cpu:
//           ncclTopoAddCpu needs arch, and vendor/familyid/modelid on Intel; NCCL fills them
//           only for a CPU it reaches through a device it detects itself, so a socket holding
//           only NICs would lack them, and a CPU filled in some ranks and not in others is kept
//           twice when NCCL fuses the ranks' topologies); affinity (the NUMA node's CPUs as a
//           sysfs cpumap, 32-bit hex groups, most significant first) when the model lists them
//           and it fits NCCL's attribute limit (253 characters: CPU ids below 896); otherwise
//           NCCL reads /sys/devices/system/node/nodeN/cpumap.
//   pci     busid (lowercase, 4-digit domain, as sysfs spells it, which NCCL compares as
//           text), class (0x030200 for GPUs, 0x020700 for RDMA NICs, 0x020000 for other NICs,
//           0x060400 for bridges), link_speed and link_width (ncclTopoAddPci needs both on
//           every <pci>; NCCL reads them from sysfs only for devices it detects itself, never
//           for a made-up bridge). The model has no PCIe link data: NcclExportOptions says
//           what to write.
// Placement under each CPU follows Node::gpu_nic_paths, so that NCCL computes the same path
// class for every GPU-NIC pair the model states (NCCL's ncclTopoSetPaths: a hop between a
// device and a bridge is PIX, between two bridges PXB, through the CPU PHB, between CPUs SYS):
//   PIX       GPU and NIC are children of one bridge (one PCI switch);
//   PXB       GPU and NIC are each behind a bridge, and those bridges under one common bridge;
//   PHB/NODE  no common bridge: through the CPU (NCCL has no NODE class, it says PHB);
//   SYS       GPU and NIC on different NUMA nodes, so under different <cpu>s.
// GPUs and NICs linked by PIX pairs share a switch; switches linked by PXB pairs share a
// common bridge; a device in no PIX or PXB pair sits directly under its CPU. With no
// gpu_nic_paths every GPU-NIC pair of a socket is PHB, so GPUDirect RDMA stays off: give the
// paths (`railyard discover` records them) for a node with PCIe switches.
// Devices whose NUMA node or PCI bus id is unknown are left out, so that NCCL places them
// from sysfs. Several NICs on one PCI function (multi-port cards) share one <pci>.
// The text has no XML declaration and no comments, uses single spaces between attributes and
// spaces for indentation (NCCL's parser stops at a tab or at a newline inside a tag), and
// escapes &<>"' in attribute values.
//
// Thread-safety: NcclTopologyXml(node, options) is a pure function; HostNcclCpu reads this
// machine's CPU identity.
#pragma once

#include <string>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::topo {

// The CPU as NCCL names it when it detects a topology itself (uname and cpuid).
struct NcclCpu {
  std::string arch;    // "x86_64", "arm64" or "ppc64"
  std::string vendor;  // x86_64: cpuid's vendor string ("GenuineIntel", "AuthenticAMD", ...)
  int family = -1;     // x86_64: cpuid family + (extended family << 4), as NCCL computes it
  int model = -1;      // x86_64: cpuid model + (extended model << 4)
};

struct NcclExportOptions {
  NcclCpu cpu;  // required
  // Written on every <pci>. NCCL's bandwidth for a PCI link is width * speed; the default
  // (PCIe Gen5 x16) is the fastest that NCCL 2.18 and later name, so a bridge or device of
  // unknown speed does not become the narrowest link of a path. One of NCCL's names:
  // "2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe",
  // "64.0 GT/s PCIe" (or the kernel 5.6 spellings "8 GT/s", "16 GT/s", ...).
  std::string pcie_link_speed = "32.0 GT/s PCIe";
  int pcie_link_width = 16;  // 1, 2, 4, 8, 12, 16 or 32
};

// The checks NcclTopologyXml applies to its options, for callers that take them from a user
// (INVALID_ARGUMENT saying what NCCL expects): an arch NCCL knows, and on x86_64 vendor,
// family and model; a link speed from NCCL's names and a PCIe width.
Status CheckNcclCpu(const NcclCpu& cpu);
Status CheckPcieLink(std::string_view speed, int width);

// This machine's CPU the way NCCL's own detection writes it: arch from uname, and on x86_64
// vendor, family and model from cpuid. Use it when the file is written on the node it is for
// (or on one with the same CPU). Errors: UNAVAILABLE when uname fails or the architecture is
// none of NCCL's three.
Result<NcclCpu> HostNcclCpu();

// The file's text, ending in a newline. Errors (INVALID_ARGUMENT, naming the node and the
// device or pair): options.cpu without an arch NCCL knows, or an x86_64 CPU without vendor,
// family and model; a link speed NCCL does not know or a link width that is no PCIe width;
// nothing to write (no NUMA nodes and no device with both a NUMA node and a PCI bus id); a PCI
// bus id that is not domain:bus:device.function hex ("0000:17:00.0"); two GPUs, or a GPU and
// a NIC, on one PCI bus id; a gpu_nic_paths entry whose class does not fit the devices' NUMA
// nodes (SYS on one node, any other class across two) or that contradicts the others (the
// PIX and PXB pairs put the two under one switch or bridge that the entry's class rules out).
Result<std::string> NcclTopologyXml(const Node& node, const NcclExportOptions& options);

// NcclTopologyXml with options.cpu = HostNcclCpu() and the default PCIe link.
Result<std::string> NcclTopologyXml(const Node& node);

}  // namespace railyard::topo
