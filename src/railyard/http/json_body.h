// Parsing a request body from the network into nlohmann::json without letting the input
// choose how deep the program recurses.
//
// nlohmann::json parses iteratively, but copying, comparing and dumping a value recurse
// once per nesting level, so a 2 MB body of a million '[' crashes the process on its first
// copy or dump. ParseJsonBody first scans the bytes once (a counter of open brackets outside
// strings, no allocation) and refuses anything deeper than `max_depth` before the parser
// sees it. 64 levels are far more than the Pod and Node schemas use and leave room for
// annotations holding structured values.
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "railyard/base/status.h"

namespace railyard::http {

inline constexpr int kDefaultMaxJsonDepth = 64;

// Depth of the deepest array/object in `text` (0 for a scalar), counting brackets outside
// string literals; stops counting and returns max_depth + 1 as soon as that is exceeded.
// Malformed text gets some number; the parser rejects it afterwards.
int JsonNestingDepth(std::string_view text, int max_depth);

// The body as JSON. RESOURCE_EXHAUSTED ("nested deeper than N levels") when it nests deeper
// than `max_depth`; INVALID_ARGUMENT ("not valid JSON: ...") when it does not parse.
Result<nlohmann::json> ParseJsonBody(std::string_view body, int max_depth = kDefaultMaxJsonDepth);

// Serialises without throwing: invalid UTF-8 in strings is replaced, never an exception.
std::string DumpJson(const nlohmann::json& value);

}  // namespace railyard::http
