#include "railyard/net/store/tcp_store_codec.h"

#include <gtest/gtest.h>

#include <string>

namespace railyard::net::store_wire {
namespace {

TEST(TcpStoreCodecTest, FrameRoundTripsEveryField) {
  Message m{kCas, -42, {"key", "", std::string(1000, 'v')}};
  std::string frame = EncodeFrame(m);
  ASSERT_EQ(FrameBodyLength(frame), frame.size() - kFrameHeaderBytes);
  Result<Message> back = DecodeBody(std::string_view(frame).substr(kFrameHeaderBytes));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->op, kCas);
  EXPECT_EQ(back->num, -42);
  EXPECT_EQ(back->fields, m.fields);
}

TEST(TcpStoreCodecTest, LyingLengthsAreDataLossNotReads) {
  std::string body = EncodeFrame(Message{kSet, 0, {"k", "v"}}).substr(kFrameHeaderBytes);
  EXPECT_EQ(DecodeBody(body.substr(0, 5)).status().code(), StatusCode::kDataLoss);
  std::string many_fields = body;
  many_fields[12] = 0x7f;  // the field count's low byte: far more fields than bytes
  EXPECT_EQ(DecodeBody(many_fields).status().code(), StatusCode::kDataLoss);
  std::string long_field = body;
  long_field[16] = 0x7f;  // the first field's length: more bytes than remain
  EXPECT_EQ(DecodeBody(long_field).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeBody(body + "x").status().code(), StatusCode::kDataLoss);
}

TEST(TcpStoreCodecTest, ValidateRequestChecksOpFieldsAndLimits) {
  EXPECT_TRUE(ValidateRequest(Message{kSet, 0, {"k", "v"}}).ok());
  EXPECT_TRUE(ValidateRequest(Message{kWait, 0, {"a", "b", "c"}}).ok());
  EXPECT_EQ(ValidateRequest(Message{kGet, 0, {"k", "extra"}}).code(), StatusCode::kDataLoss);
  EXPECT_EQ(ValidateRequest(Message{99, 0, {}}).code(), StatusCode::kDataLoss);
  std::string long_key(kMaxStoreKeyBytes + 1, 'k');
  Status s = ValidateRequest(Message{kGet, 0, {long_key}});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("limit"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace railyard::net::store_wire
