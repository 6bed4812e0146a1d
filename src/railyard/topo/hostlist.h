// Slurm hostlist expressions: "node[01-32]", "rack[1-2]-n[1-4],login1".
//
// ExpandHostlist turns an expression into the names it stands for; CompressHostlist writes
// names back as a short expression. Slurm's conventions hold: items are separated by commas
// outside brackets; a bracket holds a comma list of numbers and ascending ranges; a range is
// zero-padded to the width of its first number ("[08-10]" -> 08, 09, 10); several brackets in
// one item form the cartesian product, the first bracket varying slowest.
//
//   RY_ASSIGN_OR_RETURN(std::vector<std::string> names, ExpandHostlist("node[001-016]"));
//   std::string expr = CompressHostlist(names);  // "node[001-016]"
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"

namespace railyard::topo {

// The most names one expression may produce. A typo like "n[1-100000000]" would otherwise
// allocate gigabytes before anything could report it.
inline constexpr size_t kMaxHostlistNames = 1'000'000;

// Expands `expr` in order. Whitespace around items is ignored. INVALID_ARGUMENT, quoting the
// expression, for: an empty expression or item ("a,,b", "node[]", "n[1,]"), unbalanced or
// nested brackets, a bound that is not a decimal number, a descending range ("range 5-2 is
// descending"), whitespace inside an item, and more than kMaxHostlistNames names.
Result<std::vector<std::string>> ExpandHostlist(std::string_view expr);

// The inverse: adjacent names that differ only in their last run of digits share one
// bracket ("node01,node02,node03,node07" -> "node[01-03,07]"); consecutive numbers become
// ranges when the padding allows. The order of `names` is kept exactly, so
// ExpandHostlist(CompressHostlist(x)) == x for every non-empty x whose names contain no
// '[', ']', ',' or whitespace (such names are written unchanged and do not round-trip).
// Returns "" for an empty list.
std::string CompressHostlist(const std::vector<std::string>& names);

}  // namespace railyard::topo
