#include "railyard/net/store/tcp_store_codec.h"

namespace railyard::net::store_wire {
namespace {

void PutU32(std::string& out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out += static_cast<char>(v >> (8 * i));
}
uint64_t GetBig(std::string_view in, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = v << 8 | static_cast<uint8_t>(in[i]);
  return v;
}

}  // namespace

std::string EncodeFrame(const Message& m) {
  std::string body;
  body += static_cast<char>(m.op);
  auto num = static_cast<uint64_t>(m.num);
  PutU32(body, static_cast<uint32_t>(num >> 32));
  PutU32(body, static_cast<uint32_t>(num));
  PutU32(body, static_cast<uint32_t>(m.fields.size()));
  for (const auto& f : m.fields) {
    PutU32(body, static_cast<uint32_t>(f.size()));
    body += f;
  }
  std::string frame;
  PutU32(frame, static_cast<uint32_t>(body.size()));
  return frame + body;
}

uint32_t FrameBodyLength(std::string_view header) {
  return static_cast<uint32_t>(GetBig(header, kFrameHeaderBytes));
}

Result<Message> DecodeBody(std::string_view body) {
  if (body.size() < 13) return DataLoss("frame of {} bytes is shorter than a header", body.size());
  Message m;
  m.op = static_cast<uint8_t>(body[0]);
  m.num = static_cast<int64_t>(GetBig(body.substr(1), 8));
  uint64_t count = GetBig(body.substr(9), 4);
  body.remove_prefix(13);
  if (count > body.size() / 4) {
    return DataLoss("frame claims {} fields in {} bytes", count, body.size());
  }
  m.fields.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    if (body.size() < 4) return DataLoss("field {} is cut off", i);
    uint64_t len = GetBig(body, 4);
    body.remove_prefix(4);
    if (len > body.size()) {
      return DataLoss("field {} claims {} bytes, {} remain", i, len, body.size());
    }
    m.fields.emplace_back(body.substr(0, len));
    body.remove_prefix(len);
  }
  if (!body.empty()) return DataLoss("{} stray bytes after the last field", body.size());
  return m;
}

// A request the server can act on: known op, the right number of fields, sizes in limits.
Status ValidateRequest(const Message& m) {
  size_t want = 0;
  switch (m.op) {
    case kSet:
      want = 2;
      break;
    case kGet:
    case kAdd:
      want = 1;
      break;
    case kCas:
      want = 3;
      break;
    case kWait:
      if (m.fields.size() > kMaxWaitKeys) return DataLoss("Wait for {} keys", m.fields.size());
      want = m.fields.size();
      break;
    default:
      return DataLoss("unknown operation {}", m.op);
  }
  if (m.fields.size() != want) {
    return DataLoss("operation {} with {} fields, expected {}", m.op, m.fields.size(), want);
  }
  for (size_t i = 0; i < m.fields.size(); ++i) {
    bool is_key = i == 0 || m.op == kWait;
    size_t limit = is_key ? kMaxStoreKeyBytes : kMaxStoreValueBytes;
    if (m.fields[i].size() > limit) {
      return DataLoss("field {} of operation {} has {} bytes, the limit is {}", i, m.op,
                      m.fields[i].size(), limit);
    }
  }
  return Status::Ok();
}

}  // namespace railyard::net::store_wire
