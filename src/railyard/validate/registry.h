// The check registry: every check Railyard can run, by id.
//
// Filled by an explicit call, not by static initialisers (which drop checks linked from a
// static library): RegisterBuiltinChecks adds the shipped ones, one line each in
// checks/builtin.cc; a test registers its own. Ids are listed sorted (`--list-checks`), and a
// lookup of an unknown id names the nearest known one.
//
//   CheckRegistry registry;
//   RY_RETURN_IF_ERROR(RegisterBuiltinChecks(registry));
//   RY_ASSIGN_OR_RETURN(const Check* c, registry.Lookup("node.memlock"));
//
// Thread-safety: Register is not thread-safe; the const methods are, once filling is done.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/validate/check.h"

namespace railyard::validate {

class CheckRegistry {
 public:
  // Takes ownership. ALREADY_EXISTS when the id is taken; INVALID_ARGUMENT when the id is not
  // "<category>.<name>" with the check's own category, or a default threshold does not parse.
  Status Register(std::unique_ptr<Check> check);

  // Null when absent.
  const Check* Find(std::string_view id) const;
  // NOT_FOUND "unknown check 'node.memlok' (did you mean 'node.memlock'?)" when absent.
  Result<const Check*> Lookup(std::string_view id) const;
  // The registered id closest to `id` by edit distance, or "" when none is close (more than
  // a third of the characters differ).
  std::string Nearest(std::string_view id) const;
  // Every id, sorted.
  std::vector<std::string> Ids() const;
  size_t size() const { return checks_.size(); }

 private:
  std::map<std::string, std::unique_ptr<Check>, std::less<>> checks_;
};

// The name in `names` closest to `name` by edit distance, or "" when none is close (more
// than a third of the characters differ). For "did you mean" hints.
std::string NearestName(std::string_view name, const std::vector<std::string>& names);

// Registers every check Railyard ships. Errors as Register (only on a bug).
Status RegisterBuiltinChecks(CheckRegistry& registry);

}  // namespace railyard::validate
