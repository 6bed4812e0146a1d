#include "railyard/validate/probe_settings.h"

#include <charconv>
#include <string>
#include <string_view>

#include "railyard/base/units.h"
#include "railyard/comm/bench.h"

namespace railyard::validate {
namespace {

// The parameter's text; INTERNAL when absent (DefaultSettings fills every declared one, so
// only a caller that built settings by hand can miss one).
Result<std::string_view> ParamText(const CheckSettings& s, std::string_view name) {
  auto it = s.params.find(name);
  if (it == s.params.end()) return Internal("check settings lack the parameter '{}'", name);
  return std::string_view(it->second);
}

Result<int> IntParam(const CheckSettings& s, std::string_view name, int min, int max) {
  RY_ASSIGN_OR_RETURN(std::string_view text, ParamText(s, name));
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max) {
    return InvalidArgument("parameter {}: '{}' is not a whole number from {} to {}", name, text,
                           min, max);
  }
  return v;
}

Result<uint64_t> BytesParam(const CheckSettings& s, std::string_view name) {
  RY_ASSIGN_OR_RETURN(std::string_view text, ParamText(s, name));
  Result<uint64_t> v = base::ParseBytes(text);
  if (!v.ok() || *v == 0) {
    return InvalidArgument("parameter {}: '{}' is not a size above 0 (e.g. 64MiB)", name, text);
  }
  return *v;
}

std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = text.find_first_not_of(" \t", i);
    if (start == text.npos) break;
    size_t end = text.find_first_of(" \t", start);
    out.emplace_back(text.substr(start, end == text.npos ? text.npos : end - start));
    i = end == text.npos ? text.size() : end;
  }
  return out;
}

}  // namespace

Result<StorageProbeOptions> StorageProbeOptionsFrom(const CheckSettings& settings) {
  StorageProbeOptions o;
  RY_ASSIGN_OR_RETURN(o.bytes_per_file, BytesParam(settings, "size"));
  RY_ASSIGN_OR_RETURN(o.block_bytes, BytesParam(settings, "block"));
  RY_ASSIGN_OR_RETURN(o.files, IntParam(settings, "files", 1, 1024));
  return o;
}

Result<int> MetadataItemsFrom(const CheckSettings& settings) {
  return IntParam(settings, "items", 1, 1'000'000);
}

Result<AllreduceSweepParams> AllreduceParamsFrom(const CheckSettings& settings) {
  AllreduceSweepParams p;
  RY_ASSIGN_OR_RETURN(std::string_view sizes, ParamText(settings, "sizes"));
  Result<std::vector<uint64_t>> parsed = comm::ParseSizes(sizes);
  if (!parsed.ok()) return parsed.status().WithContext("parameter sizes");
  p.sizes = std::move(*parsed);
  RY_ASSIGN_OR_RETURN(p.warmup, IntParam(settings, "warmup", 0, 100));
  RY_ASSIGN_OR_RETURN(p.iters, IntParam(settings, "iters", 1, 1000));
  return p;
}

Result<NcclTestsOptions> NcclTestsOptionsFrom(const CheckSettings& settings) {
  NcclTestsOptions o;
  RY_ASSIGN_OR_RETURN(std::string_view binary, ParamText(settings, "binary"));
  RY_ASSIGN_OR_RETURN(std::string_view args, ParamText(settings, "args"));
  RY_ASSIGN_OR_RETURN(std::string_view launcher, ParamText(settings, "launcher"));
  o.binary = std::string(binary);
  o.args = Words(args);
  o.launcher = Words(launcher);
  return o;
}

}  // namespace railyard::validate
