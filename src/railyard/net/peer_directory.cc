#include "railyard/net/peer_directory.h"

#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "railyard/base/files.h"

namespace railyard::net {

std::vector<int> MissingRanks(std::span<const std::string> keys_by_rank,
                              const std::vector<std::string>& missing) {
  std::vector<int> ranks;
  for (size_t r = 0; r < keys_by_rank.size(); ++r) {
    if (std::find(missing.begin(), missing.end(), keys_by_rank[r]) != missing.end()) {
      ranks.push_back(static_cast<int>(r));
    }
  }
  return ranks;
}

std::string LocalHostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

std::string LocalBootId() {
  static const std::string id =
      base::ReadTrimmedFile("/proc/sys/kernel/random/boot_id").value_or("");
  return id;
}

Result<std::vector<PeerInfo>> ExchangePeerInfo(Store& store, const std::string& prefix, int rank,
                                               int size, PeerInfo self, const std::string& host,
                                               base::Deadline deadline) {
  self.rank = rank;
  self.pid = static_cast<int>(::getpid());
  self.host = host.empty() ? LocalHostName() : host;
  self.boot_id = LocalBootId();
  nlohmann::json j = {
      {"host", self.host}, {"pid", self.pid}, {"address", self.address}, {"boot_id", self.boot_id}};
  RY_RETURN_IF_ERROR(store.Set(fmt::format("{}/peer/{}", prefix, rank), j.dump(), deadline));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(fmt::format("{}/peer/{}", prefix, r));
  std::vector<std::string> missing_keys;
  Status waited = store.Wait(keys, deadline, &missing_keys);
  if (!waited.ok()) {
    std::vector<int> missing = MissingRanks(keys, missing_keys);
    std::string who = missing.empty() ? std::string()
                                      : fmt::format(
                                            "rank{} {} never published (not started, or cannot "
                                            "reach the store); ",
                                            missing.size() == 1 ? "" : "s", DescribeRanks(missing));
    return Status(waited.code(),
                  fmt::format("rank {} waiting for all {} ranks to publish their addresses: "
                              "{}{}",
                              rank, size, who, waited.message()));
  }
  std::vector<PeerInfo> all(size);
  for (int r = 0; r < size; ++r) {
    RY_ASSIGN_OR_RETURN(std::string text, store.Get(keys[r], deadline));
    nlohmann::json pj = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!pj.is_object() || !pj.contains("host") || !pj["host"].is_string() || !pj.contains("pid") ||
        !pj["pid"].is_number_integer() || !pj.contains("address") || !pj["address"].is_string()) {
      return DataLoss("{}: key '{}' does not hold a peer record (host, pid, address): '{}'",
                      store.Describe(), keys[r], text.substr(0, 200));
    }
    all[r].rank = r;
    all[r].host = pj["host"].get<std::string>();
    all[r].pid = pj["pid"].get<int>();
    all[r].address = pj["address"].get<std::string>();
    // Optional: a record without it (or with a non-string) just leaves the kernel unknown.
    if (pj.contains("boot_id") && pj["boot_id"].is_string()) {
      all[r].boot_id = pj["boot_id"].get<std::string>();
    }
  }
  return all;
}

}  // namespace railyard::net
