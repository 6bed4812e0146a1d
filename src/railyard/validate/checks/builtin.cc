// The checks Railyard ships: adding one is its file under checks/ plus one line here.
#include "railyard/validate/registry.h"

namespace railyard::validate {

std::unique_ptr<Check> NewAllreduceCheck();          // checks/allreduce.cc
std::unique_ptr<Check> NewClockOffsetCheck();        // checks/clock_offset.cc
std::unique_ptr<Check> NewCpuGovernorCheck();        // checks/cpu_governor.cc
std::unique_ptr<Check> NewCpusCheck();               // checks/cpus.cc
std::unique_ptr<Check> NewFabricProvidersCheck();    // checks/fabric_providers.cc
std::unique_ptr<Check> NewFreeSpaceCheck();          // checks/free_space.cc
std::unique_ptr<Check> NewGpuCountCheck();           // checks/gpu_count.cc
std::unique_ptr<Check> NewGpuHealthCheck();          // checks/gpu_health.cc
std::unique_ptr<Check> NewGpuNicAffinityCheck();     // checks/gpu_nic_affinity.cc
std::unique_ptr<Check> NewHugepagesCheck();          // checks/hugepages.cc
std::unique_ptr<Check> NewIbPortsCheck();            // checks/ib_ports.cc
std::unique_ptr<Check> NewLatencyCheck();            // checks/latency.cc
std::unique_ptr<Check> NewMemlockCheck();            // checks/memlock.cc
std::unique_ptr<Check> NewMemoryCheck();             // checks/memory.cc
std::unique_ptr<Check> NewMountsCheck();             // checks/mounts.cc
std::unique_ptr<Check> NewNcclTestsCheck();          // checks/nccl_tests.cc
std::unique_ptr<Check> NewPairBandwidthCheck();      // checks/pair_bandwidth.cc
std::unique_ptr<Check> NewReachabilityCheck();       // checks/reachability.cc
std::unique_ptr<Check> NewStorageMetadataCheck();    // checks/storage_metadata.cc
std::unique_ptr<Check> NewStorageThroughputCheck();  // checks/storage_throughput.cc
std::unique_ptr<Check> NewSwapCheck();               // checks/swap.cc
std::unique_ptr<Check> NewSysctlCheck();             // checks/sysctl.cc

Status RegisterBuiltinChecks(CheckRegistry& registry) {
  for (auto factory : {
           NewAllreduceCheck,
           NewClockOffsetCheck,
           NewCpuGovernorCheck,
           NewCpusCheck,
           NewFabricProvidersCheck,
           NewFreeSpaceCheck,
           NewGpuCountCheck,
           NewGpuHealthCheck,
           NewGpuNicAffinityCheck,
           NewHugepagesCheck,
           NewIbPortsCheck,
           NewLatencyCheck,
           NewMemlockCheck,
           NewMemoryCheck,
           NewMountsCheck,
           NewNcclTestsCheck,
           NewPairBandwidthCheck,
           NewReachabilityCheck,
           NewStorageMetadataCheck,
           NewStorageThroughputCheck,
           NewSwapCheck,
           NewSysctlCheck,
       }) {
    RY_RETURN_IF_ERROR(registry.Register(factory()));
  }
  return Status::Ok();
}

}  // namespace railyard::validate
