#include "railyard/base/strings.h"

#include <fmt/format.h>

#include <charconv>

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

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

std::string_view StripAsciiWhitespace(std::string_view s) {
  return StripChars(s, kAsciiWhitespace);
}

std::string Where(std::string_view source, int line) {
  return line > 0 ? fmt::format("{}:{}", source, line) : std::string(source);
}

Status SplitHostPort(std::string_view text, std::string* host, uint16_t* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgument("'{}': expected ADDRESS:PORT, e.g. 198.18.0.2:5201", text);
  }
  std::string_view p = text.substr(colon + 1);
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (p.empty() || ec != std::errc() || ptr != p.data() + p.size() || value > 65535) {
    return InvalidArgument("'{}': port '{}' is not a number from 0 to 65535", text, p);
  }
  *host = std::string(text.substr(0, colon));
  *port = static_cast<uint16_t>(value);
  return Status::Ok();
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
          out += '?';
        } else {
          out += ch;
        }
    }
  }
  return out;
}

}  // namespace railyard::base
