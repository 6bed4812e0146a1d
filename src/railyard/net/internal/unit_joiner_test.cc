#include "railyard/net/internal/unit_joiner.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace railyard::net {
namespace {

struct Piece {
  size_t offset;
  std::string bytes;
  bool operator==(const Piece&) const = default;
};

// Splits "abcdefghij" (10 bytes, granule 4) at every pair of cut points: the consumer always
// sees whole 4-byte units at their offsets, then the 2-byte tail at the flush, and the bytes
// joined back in offset order are the message.
TEST(UnitJoiner, EverySplitGivesWholeUnitsAndTheTail) {
  const std::string message = "abcdefghij";
  for (size_t cut1 = 0; cut1 <= message.size(); ++cut1) {
    for (size_t cut2 = cut1; cut2 <= message.size(); ++cut2) {
      std::vector<Piece> pieces;
      ConsumingReceiver::Consumer consume = [&](size_t offset, const char* data, size_t n) {
        pieces.push_back({offset, std::string(data, n)});
      };
      UnitJoiner joiner;
      const size_t cuts[] = {0, cut1, cut2, message.size()};
      for (int i = 0; i < 3; ++i) {
        joiner.Feed(consume, 4, cuts[i], message.data() + cuts[i], cuts[i + 1] - cuts[i]);
      }
      joiner.Flush(consume, message.size());
      std::string joined(message.size(), '?');
      for (const Piece& r : pieces) {
        if (r.offset + r.bytes.size() < message.size()) {
          EXPECT_EQ(r.bytes.size() % 4, 0u) << "cuts " << cut1 << "," << cut2;
          EXPECT_EQ(r.offset % 4, 0u) << "cuts " << cut1 << "," << cut2;
        }
        joined.replace(r.offset, r.bytes.size(), r.bytes);
      }
      EXPECT_EQ(joined, message) << "cuts " << cut1 << "," << cut2;
      ASSERT_FALSE(pieces.empty());
      EXPECT_EQ(pieces.back(), (Piece{8, "ij"})) << "cuts " << cut1 << "," << cut2;
    }
  }
}

TEST(UnitJoiner, ResetDropsAHeldPart) {
  std::vector<Piece> pieces;
  ConsumingReceiver::Consumer consume = [&](size_t offset, const char* data, size_t n) {
    pieces.push_back({offset, std::string(data, n)});
  };
  UnitJoiner joiner;
  joiner.Feed(consume, 8, 0, "abc", 3);
  EXPECT_TRUE(pieces.empty());
  joiner.Reset();
  joiner.Flush(consume, 3);
  EXPECT_TRUE(pieces.empty());
}

}  // namespace
}  // namespace railyard::net
