// Scalar quoting shared by every YAML writer in topo/ (Railyard topology YAML, Slurm
// topology.yaml, the Kueue manifests).
//
// A plain YAML scalar is typed by the reader, and YAML 1.1 readers (PyYAML, go-yaml v2 and so
// sigs.k8s.io/yaml under kubectl) retype far more than YAML 1.2 ones: `001` and `0x1F` are
// integers, `1e3` and `0000:18:00.0` (base-60, 1080.0) are numbers, `yes`, `on`, `n` are
// booleans, `~` is null. A switch named 001 or a PCI bus id written plain comes back as a
// number. So a string is written plain only when no YAML 1.1 or 1.2 resolver can read it as
// anything but a string: it starts with a letter, '_' or '/', holds only letters, digits and
// "-_./", and is none of the boolean or null words. Everything else is double-quoted, which
// every reader returns as the same string. Quoting more than strictly needed is harmless;
// quoting less is the bug this exists to prevent.
//
//   out << YAML::Key << "name" << YAML::Value;
//   EmitYamlString(out, sw.name);                       // yaml-cpp emitters
//   text += "name: " + YamlScalar(name) + "\n";         // hand-written YAML
//
// Thread-safety: pure functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

namespace railyard::topo::internal {

// True when `s` must be quoted to stay a string (see above). "" needs quotes.
bool YamlNeedsQuotes(std::string_view s);

// `s` as a YAML scalar: plain when that is safe, else double-quoted with '"', '\\' and
// control characters escaped (bytes >= 0x80 are copied, so UTF-8 stays readable).
std::string YamlScalar(std::string_view s);

// Emits `s` as a string value on a yaml-cpp emitter, double-quoted when YamlNeedsQuotes.
void EmitYamlString(YAML::Emitter& out, std::string_view s);

}  // namespace railyard::topo::internal
