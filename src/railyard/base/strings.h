// Small string helpers shared by every parser and writer: whitespace stripping, "source:line"
// text, "host:port" splitting and XML escaping.
//
// Modelled on Abseil's absl/strings/ascii.h: the strip functions take and return views into
// the caller's string (nothing is copied, so the result lives only as long as the input).
//
//   std::string_view item = StripAsciiWhitespace(line.substr(0, comma));
//   std::string_view value = StripChars(header_value, " \t");   // HTTP's optional whitespace
//   return InvalidArgument("{}: unknown switch '{}'", Where(source, line), name);
//
// Thread-safety: pure functions, no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"

namespace railyard::base {

// The characters std::isspace accepts in the "C" locale: space, \t, \n, \v, \f, \r.
inline constexpr std::string_view kAsciiWhitespace = " \t\n\v\f\r";

// `s` without leading and/or trailing characters that occur in `chars`.
std::string_view StripLeadingChars(std::string_view s, std::string_view chars);
std::string_view StripTrailingChars(std::string_view s, std::string_view chars);
std::string_view StripChars(std::string_view s, std::string_view chars);

// `s` without leading and/or trailing ASCII whitespace (kAsciiWhitespace).
std::string_view StripLeadingAsciiWhitespace(std::string_view s);
std::string_view StripTrailingAsciiWhitespace(std::string_view s);
std::string_view StripAsciiWhitespace(std::string_view s);

// The lines of `text` without their '\n', as views into it: "a\nb\n" and "a\nb" both give
// {"a", "b"}; an empty line in the middle is kept, so index + 1 is the line number.
std::vector<std::string_view> SplitLines(std::string_view text);

// "source:line" for error messages, or just "source" when the line is unknown (line <= 0).
std::string Where(std::string_view source, int line);

// "198.18.0.2:5201" -> host and port, split at the last colon. The host must not be empty
// and is not looked up; the port is a decimal from 0 to 65535 (callers that connect reject
// 0 themselves). INVALID_ARGUMENT quoting `text` otherwise; outputs untouched on error.
Status SplitHostPort(std::string_view text, std::string* host, uint16_t* port);

// `text` with &, <, >, " and ' as entities, and control characters other than tab, newline
// and carriage return (which XML 1.0 forbids even as entities) as '?'. For attribute values
// and element text alike (JUnit and HTML reports, NCCL's topology file).
std::string XmlEscape(std::string_view text);

}  // namespace railyard::base
