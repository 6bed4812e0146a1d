// An NCCL topology file (NCCL_TOPO_FILE) for one node, from what the cluster model knows.
//
//   RY_ASSIGN_OR_RETURN(std::string xml, NcclTopologyXml(cluster.nodes[i]));
//   RY_RETURN_IF_ERROR(base::WriteFileAtomic("/run/railyard/nccl-topo.xml", xml));
//   // then NCCL_TOPO_FILE=/run/railyard/nccl-topo.xml in the ranks' environment
//
// Output, one <cpu> per NUMA node, devices sorted by PCI bus id under their NUMA node's CPU:
//
//   <system version="1">
//     <cpu numaid="0" affinity="00000000,0000ffff">
//       <pci busid="0000:17:00.0" class="0x030200">
//         <gpu dev="0"/>
//       </pci>
//       <pci busid="0000:18:00.0" class="0x020700">
//         <nic>
//           <net name="mlx5_0" speed="400000"/>
//         </nic>
//       </pci>
//     </cpu>
//   </system>
//
// NCCL accepts a partial file and fills every missing attribute of the devices it uses from
// sysfs, NVML, cpuid and its network plugin, so this writes only what the model knows and
// leaves the rest out rather than guess; a guessed value would override the real one:
//   cpu   numaid; affinity (the NUMA node's CPUs as a sysfs cpumap, 32-bit hex groups, most
//         significant first) when the model lists them and the mask fits NCCL's 255-character
//         attribute limit (CPU ids below 896). Omitted: arch, vendor, familyid, modelid (the
//         model does not record the CPU; NCCL reads uname and cpuid).
//   pci   busid (lowercase, 4-digit domain, as sysfs spells it) and class (0x030200 3D
//         controller for GPUs, 0x020700 InfiniBand for RDMA NICs, 0x020000 Ethernet for
//         others; NCCL only reads the 0x03/0x02 prefix). Omitted: link_speed and link_width
//         (NCCL reads max_link_speed/width from sysfs only when they are absent; an empty
//         value would pin its PCIe Gen3 fallback), vendor/device ids.
//   gpu   dev (Gpu::index, the NVML index). Omitted: sm, rank and gdr (NCCL sets rank for the
//         GPUs a process uses and computes gdr itself), nvlink (the model has no link counts).
//   net   name and speed (Mb/s, from Nic::rate_bits) when known. Omitted: dev (NCCL numbers
//         its network devices itself and overwrites it), port, guid, latency, maxconn, gdr,
//         coll (all from the network plugin).
// Devices whose NUMA node or PCI bus id is unknown are left out so that NCCL places them from
// sysfs. Several NICs on one PCI function (multi-port cards) share one <pci><nic>.
// The text has no XML declaration and no comments (NCCL's small parser rejects "<?xml"),
// uses spaces for indentation, and escapes &<>"' in attribute values (NCCL itself does not
// unescape, so such names would not match its devices anyway).
//
// Thread-safety: pure function.
#pragma once

#include <string>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::topo {

// The file's text, ending in a newline. Errors (INVALID_ARGUMENT, naming the node and the
// device): nothing to write (no NUMA nodes and no device with both a NUMA node and a PCI bus
// id); a PCI bus id that is not domain:bus:device.function hex ("0000:17:00.0"); two GPUs,
// or a GPU and a NIC, on one PCI bus id.
Result<std::string> NcclTopologyXml(const Node& node);

}  // namespace railyard::topo
