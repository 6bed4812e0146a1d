#include "railyard/http/json_body.h"

namespace railyard::http {

int JsonNestingDepth(std::string_view text, int max_depth) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > max_depth) return max_depth + 1;
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

Result<nlohmann::json> ParseJsonBody(std::string_view body, int max_depth) {
  if (JsonNestingDepth(body, max_depth) > max_depth) {
    return ResourceExhausted("request body nests deeper than {} levels of arrays and objects",
                             max_depth);
  }
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    // A parse_error names the byte offset and what was expected there; an out_of_range a
    // number that does not fit.
    return InvalidArgument("request body is not valid JSON: {}", e.what());
  }
  return value;
}

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace railyard::http
