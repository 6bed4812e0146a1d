#include "railyard/topo/hostlist.h"

#include <fmt/format.h>

#include <cstdint>
#include <optional>

#include "railyard/base/strings.h"

namespace railyard::topo {
namespace {

// Bounds longer than this could overflow uint64_t; no real host name needs them.
constexpr size_t kMaxDigits = 18;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// One number or range inside brackets; `width` is the digit count of `lo` as written.
struct Range {
  uint64_t lo = 0;
  uint64_t hi = 0;
  size_t width = 0;
};

// A piece of an item: literal text, or a bracket's list of ranges.
struct Segment {
  std::string text;
  std::vector<Range> ranges;  // empty for literal text
  uint64_t count = 1;
};

std::string Pad(uint64_t value, size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

Result<uint64_t> ParseBound(std::string_view digits, std::string_view expr) {
  if (digits.empty()) {
    return InvalidArgument(
        "hostlist '{}': a range bound is missing (expected a number like "
        "node[1-4])",
        expr);
  }
  for (char c : digits) {
    if (!IsDigit(c)) {
      return InvalidArgument(
          "hostlist '{}': '{}' is not a number (brackets hold numbers and "
          "ranges like [1-4,7])",
          expr, digits);
    }
  }
  if (digits.size() > kMaxDigits) {
    return InvalidArgument("hostlist '{}': number '{}' has more than {} digits", expr, digits,
                           kMaxDigits);
  }
  uint64_t v = 0;
  for (char c : digits) v = v * 10 + static_cast<uint64_t>(c - '0');
  return v;
}

// Parses the inside of one bracket ("01-03,07").
Result<Segment> ParseBracket(std::string_view body, std::string_view expr) {
  Segment seg;
  seg.count = 0;
  if (base::StripAsciiWhitespace(body).empty())
    return InvalidArgument("hostlist '{}': empty brackets '[]'", expr);
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    std::string_view part = base::StripAsciiWhitespace(
        body.substr(start, comma == std::string_view::npos ? body.npos : comma - start));
    if (part.empty()) {
      return InvalidArgument("hostlist '{}': empty entry inside '[{}]'", expr, body);
    }
    size_t dash = part.find('-');
    Range r;
    std::string_view lo = base::StripAsciiWhitespace(part.substr(0, dash));
    RY_ASSIGN_OR_RETURN(r.lo, ParseBound(lo, expr));
    r.width = lo.size();
    r.hi = r.lo;
    if (dash != std::string_view::npos) {
      RY_ASSIGN_OR_RETURN(r.hi,
                          ParseBound(base::StripAsciiWhitespace(part.substr(dash + 1)), expr));
      if (r.hi < r.lo) {
        return InvalidArgument(
            "hostlist '{}': range {} is descending (write the smaller number "
            "first)",
            expr, part);
      }
    }
    uint64_t n = r.hi - r.lo + 1;
    if (n > kMaxHostlistNames || seg.count + n > kMaxHostlistNames) {
      return InvalidArgument("hostlist '{}': expands to more than {} names", expr,
                             kMaxHostlistNames);
    }
    seg.count += n;
    seg.ranges.push_back(r);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return seg;
}

// Appends the names of one item ("rack[1-2]-n[1-4]") to `out`.
Status ExpandItem(std::string_view item, std::string_view expr, std::vector<std::string>& out) {
  std::vector<Segment> segs;
  uint64_t total = 1;
  size_t i = 0;
  while (i < item.size()) {
    if (item[i] == '[') {
      size_t close = item.find(']', i);  // balance was checked by the caller
      RY_ASSIGN_OR_RETURN(Segment seg, ParseBracket(item.substr(i + 1, close - i - 1), expr));
      if (total > kMaxHostlistNames / seg.count) {
        return InvalidArgument("hostlist '{}': expands to more than {} names", expr,
                               kMaxHostlistNames);
      }
      total *= seg.count;
      segs.push_back(std::move(seg));
      i = close + 1;
    } else {
      size_t next = item.find('[', i);
      if (next == std::string_view::npos) next = item.size();
      Segment seg;
      seg.text = std::string(item.substr(i, next - i));
      segs.push_back(std::move(seg));
      i = next;
    }
  }
  if (out.size() + total > kMaxHostlistNames) {
    return InvalidArgument("hostlist '{}': expands to more than {} names", expr, kMaxHostlistNames);
  }
  // An odometer over the brackets: the last bracket turns fastest, so the first varies slowest.
  struct Cursor {
    size_t range = 0;
    uint64_t value = 0;
  };
  std::vector<Cursor> cur(segs.size());
  for (size_t s = 0; s < segs.size(); ++s) {
    if (!segs[s].ranges.empty()) cur[s].value = segs[s].ranges[0].lo;
  }
  for (uint64_t n = 0; n < total; ++n) {
    std::string name;
    for (size_t s = 0; s < segs.size(); ++s) {
      if (segs[s].ranges.empty()) {
        name += segs[s].text;
      } else {
        name += Pad(cur[s].value, segs[s].ranges[cur[s].range].width);
      }
    }
    out.push_back(std::move(name));
    for (size_t s = segs.size(); s-- > 0;) {
      if (segs[s].ranges.empty()) continue;
      Cursor& c = cur[s];
      const auto& ranges = segs[s].ranges;
      if (c.value < ranges[c.range].hi) {
        ++c.value;
        break;
      }
      if (c.range + 1 < ranges.size()) {
        ++c.range;
        c.value = ranges[c.range].lo;
        break;
      }
      c.range = 0;
      c.value = ranges[0].lo;  // wrapped: carry into the bracket before
    }
  }
  return Status::Ok();
}

// The last run of digits of a name, for grouping.
struct Split {
  std::string_view prefix, digits, suffix;
  uint64_t value = 0;
};

std::optional<Split> SplitName(std::string_view name) {
  for (char c : name) {
    if (c == '[' || c == ']' || c == ',' || IsSpace(c)) return std::nullopt;
  }
  size_t end = name.size();
  while (end > 0 && !IsDigit(name[end - 1])) --end;
  if (end == 0) return std::nullopt;
  size_t begin = end;
  while (begin > 0 && IsDigit(name[begin - 1])) --begin;
  if (end - begin > kMaxDigits) return std::nullopt;
  Split s{name.substr(0, begin), name.substr(begin, end - begin), name.substr(end)};
  for (char c : s.digits) s.value = s.value * 10 + static_cast<uint64_t>(c - '0');
  return s;
}

// Writes one group's numbers ("01-03,07"), keeping their order. A run n, n+1, ... joins a
// range only when expanding the range reproduces every member's text exactly.
std::string CompressNumbers(const std::vector<Split>& group) {
  std::string out;
  size_t i = 0;
  while (i < group.size()) {
    const Split& first = group[i];
    size_t width = first.digits.size();
    bool padded = width > 1 && first.digits[0] == '0';
    size_t j = i + 1;
    while (j < group.size() && group[j].value == group[j - 1].value + 1 &&
           group[j].digits == Pad(group[j].value, width) &&
           (!padded || group[j].digits.size() == width)) {
      ++j;
    }
    if (!out.empty()) out += ',';
    out += first.digits;
    if (j - i > 1) {
      out += '-';
      out += group[j - 1].digits;
    }
    i = j;
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view expr) {
  std::string_view text = base::StripAsciiWhitespace(expr);
  if (text.empty()) return InvalidArgument("empty hostlist (expected names like node[01-04])");
  std::vector<std::string> out;
  size_t item_start = 0;
  int depth = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    char c = i < text.size() ? text[i] : ',';
    if (c == '[') {
      if (depth > 0) return InvalidArgument("hostlist '{}': nested '[' at offset {}", expr, i);
      depth = 1;
    } else if (c == ']') {
      if (depth == 0) {
        return InvalidArgument("hostlist '{}': ']' at offset {} has no matching '['", expr, i);
      }
      depth = 0;
    } else if (c == ',' && depth == 0) {
      std::string_view item = base::StripAsciiWhitespace(text.substr(item_start, i - item_start));
      if (item.empty()) {
        return InvalidArgument(
            "hostlist '{}': empty item (two commas in a row, or a comma at "
            "the start or end)",
            expr);
      }
      for (char ch : item) {
        if (IsSpace(ch)) {
          return InvalidArgument("hostlist '{}': item '{}' contains whitespace", expr, item);
        }
      }
      RY_RETURN_IF_ERROR(ExpandItem(item, expr, out));
      item_start = i + 1;
    } else if (i == text.size()) {
      return InvalidArgument("hostlist '{}': '[' is never closed", expr);
    }
  }
  return out;
}

std::string CompressHostlist(const std::vector<std::string>& names) {
  std::string out;
  size_t i = 0;
  while (i < names.size()) {
    if (!out.empty()) out += ',';
    std::optional<Split> first = SplitName(names[i]);
    if (!first) {
      out += names[i++];
      continue;
    }
    std::vector<Split> group = {*first};
    size_t j = i + 1;
    for (; j < names.size(); ++j) {
      std::optional<Split> next = SplitName(names[j]);
      if (!next || next->prefix != first->prefix || next->suffix != first->suffix) break;
      group.push_back(*next);
    }
    if (group.size() == 1) {
      out += names[i];
    } else {
      out += fmt::format("{}[{}]{}", first->prefix, CompressNumbers(group), first->suffix);
    }
    i = j;
  }
  return out;
}

}  // namespace railyard::topo
