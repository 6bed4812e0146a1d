#include "railyard/base/strings.h"

#include <fmt/format.h>

namespace railyard::base {

std::string_view StripLeadingChars(std::string_view s, std::string_view chars) {
  size_t first = s.find_first_not_of(chars);
  return first == std::string_view::npos ? std::string_view() : s.substr(first);
}

std::string_view StripTrailingChars(std::string_view s, std::string_view chars) {
  size_t last = s.find_last_not_of(chars);
  return last == std::string_view::npos ? std::string_view() : s.substr(0, last + 1);
}

std::string_view StripChars(std::string_view s, std::string_view chars) {
  return StripTrailingChars(StripLeadingChars(s, chars), chars);
}

std::string_view StripLeadingAsciiWhitespace(std::string_view s) {
  return StripLeadingChars(s, kAsciiWhitespace);
}

std::string_view StripTrailingAsciiWhitespace(std::string_view s) {
  return StripTrailingChars(s, kAsciiWhitespace);
}

std::string_view StripAsciiWhitespace(std::string_view s) {
  return StripChars(s, kAsciiWhitespace);
}

std::string Where(std::string_view source, int line) {
  return line > 0 ? fmt::format("{}:{}", source, line) : std::string(source);
}

}  // namespace railyard::base
