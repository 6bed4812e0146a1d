// Test support: read YAML text with PyYAML, a YAML 1.1 reader (python3-yaml), and return every
// document as JSON in which strings stay strings and any other scalar becomes
// {"__type": "<python type>", "value": "<str()>"}; a non-string mapping key becomes
// "__key:<type>:<value>". A value that PyYAML retyped is then visible in an ordinary
// comparison: EXPECT_EQ(docs[0]["name"], "001") fails with {"__type": "int", "value": "1"}.
// Test-only: include from *_test.cc files.
#pragma once

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "railyard/base/status.h"
#include "railyard/base/subprocess.h"
#include "railyard/base/temp_dir_testing.h"

namespace railyard::topo::internal {

inline constexpr const char* kPython = "/usr/bin/python3";

// UNAVAILABLE (the caller skips, naming the reason) when python3 or its yaml module is absent.
inline Status PyYamlAvailable() {
  if (::access(kPython, X_OK) != 0) {
    return Unavailable("{} not found (Debian package python3-yaml; scripts/bootstrap)", kPython);
  }
  base::SpawnOptions o{.argv = {kPython, "-c", "import yaml"}};
  auto r = base::RunCommand(o, base::Deadline::After(std::chrono::seconds(30)));
  if (!r.ok()) return r.status();
  if (!r->Succeeded()) {
    return Unavailable("python3 cannot import yaml (Debian package python3-yaml): {}",
                       r->Describe());
  }
  return Status::Ok();
}

// The documents of `text` as PyYAML's safe_load_all reads them (see above).
inline Result<nlohmann::json> ReadWithPyYaml(const std::string& text) {
  static constexpr const char* kScript = R"(
import json, sys, yaml
def walk(x):
    if isinstance(x, dict):
        return {(k if isinstance(k, str) else "__key:%s:%s" % (type(k).__name__, k)): walk(v)
                for k, v in x.items()}
    if isinstance(x, list):
        return [walk(v) for v in x]
    if isinstance(x, str):
        return x
    return {"__type": type(x).__name__, "value": str(x)}
with open(sys.argv[1]) as f:
    print(json.dumps([walk(d) for d in yaml.safe_load_all(f)]))
)";
  base::ScopedTempDir dir("pyyaml");
  if (dir.path().empty()) return Internal("cannot create a temporary directory");
  std::string path = dir.Sub("in.yaml");
  {
    std::ofstream f(path, std::ios::binary);
    f << text;
    if (!f) return Internal("cannot write {}", path);
  }
  base::SpawnOptions o{.argv = {kPython, "-c", kScript, path}};
  auto r = base::RunCommand(o, base::Deadline::After(std::chrono::seconds(60)));
  if (!r.ok()) return r.status();
  if (!r->Succeeded()) return InvalidArgument("PyYAML rejected the text: {}", r->Describe());
  auto doc = nlohmann::json::parse(r->stdout_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Internal("unreadable output from python: {}", r->stdout_text);
  return doc;
}

}  // namespace railyard::topo::internal
