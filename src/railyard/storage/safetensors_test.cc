#include "railyard/storage/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <thread>

#include "railyard/base/temp_dir_testing.h"
#include "railyard/storage/checkpoint.h"

namespace railyard::storage {
namespace {

namespace fs = std::filesystem;

// A minimal reader of the published safetensors layout, independent of the exporter:
// u64 little-endian header length, JSON header, packed data.
struct ParsedTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};
struct ParsedFile {
  uint64_t header_len = 0;
  std::string header_text;
  std::vector<std::pair<std::string, ParsedTensor>> tensors;  // in header order
  std::map<std::string, std::string> metadata;
  std::string data;
};

ParsedFile ParseSafetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ParsedFile out;
  EXPECT_GE(bytes.size(), 8u);
  for (int i = 7; i >= 0; --i) {
    out.header_len = (out.header_len << 8) | static_cast<uint8_t>(bytes[i]);
  }
  EXPECT_LE(8 + out.header_len, bytes.size());
  out.header_text = bytes.substr(8, out.header_len);
  out.data = bytes.substr(8 + out.header_len);
  // ordered_json keeps the key order of the file.
  auto header = nlohmann::ordered_json::parse(out.header_text);
  for (auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      for (auto& [k, v] : value.items()) out.metadata[k] = v.get<std::string>();
      continue;
    }
    ParsedTensor t;
    t.dtype = value.at("dtype").get<std::string>();
    t.shape = value.at("shape").get<std::vector<int64_t>>();
    t.begin = value.at("data_offsets")[0].get<uint64_t>();
    t.end = value.at("data_offsets")[1].get<uint64_t>();
    out.tensors.emplace_back(key, t);
  }
  return out;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()); }
  base::ScopedTempDir tmp_{"st-test"};
  std::string dir_ = tmp_.path();
};

TEST_F(SafetensorsTest, ExportRoundTripsThroughAnIndependentParser) {
  // Saved by 3 ranks: a row-split F32 matrix, a column-split BF16 matrix, a replicated I64
  // vector, a U8 scalar and an empty tensor.
  const int world = 3;
  std::vector<float> w(7 * 5);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i);
  std::vector<uint16_t> h(4 * 6);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(0x3f00 + i);
  std::vector<int64_t> ids = {-5, 1LL << 40, 7};
  uint8_t flag = 200;
  InProcessAgreementGroup group(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      WriterOptions o;
      o.dir = dir_ + "/ckpt";
      o.rank = r;
      o.world_size = world;
      o.agreement = group.ForRank(r);
      auto writer = CheckpointWriter::Open(o);
      ASSERT_TRUE(writer.ok());
      int64_t r0 = 7 * r / world, r1 = 7 * (r + 1) / world;
      std::vector<uint16_t> hpart;
      for (int row = 0; row < 4; ++row) {
        for (int c = 2 * r; c < 2 * r + 2; ++c) hpart.push_back(h[row * 6 + c]);
      }
      std::vector<TensorView> views = {
          {"w", DType::kF32, {7, 5}, {r0, 0}, {r1 - r0, 5}, w.data() + r0 * 5},
          {"h", DType::kBF16, {4, 6}, {0, 2 * r}, {4, 2}, hpart.data()},
          {"ids", DType::kI64, {3}, {}, {}, ids.data()},
      };
      if (r == 0) {
        views.push_back({"flag", DType::kU8, {}, {}, {}, &flag});
        views.push_back({"empty", DType::kF32, {0, 4}, {}, {}, nullptr});
      }
      ASSERT_TRUE((*writer)->Save(12, views, {{fmt::format("rank{}", r), "x"}}).ok());
    });
  }
  for (auto& t : threads) t.join();

  auto reader = CheckpointReader::Open(dir_ + "/ckpt", 12);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const std::string out = dir_ + "/model.safetensors";
  ASSERT_TRUE(ExportSafetensors(**reader, out).ok());

  ParsedFile f = ParseSafetensors(out);
  EXPECT_EQ(f.header_len % 8, 0u);
  size_t close = f.header_text.find_last_of('}');
  ASSERT_NE(close, std::string::npos);
  EXPECT_EQ(f.header_text.find_first_not_of(' ', close + 1), std::string::npos);  // space pad
  ASSERT_EQ(f.tensors.size(), 5u);
  // Packed in header order, no gaps, and the data section ends exactly at the last end.
  uint64_t expect_begin = 0;
  for (const auto& [name, t] : f.tensors) {
    EXPECT_EQ(t.begin, expect_begin) << name;
    expect_begin = t.end;
  }
  EXPECT_EQ(expect_begin, f.data.size());
  EXPECT_EQ(8 + f.header_len + expect_begin, fs::file_size(out));

  std::map<std::string, ParsedTensor> by_name(f.tensors.begin(), f.tensors.end());
  EXPECT_EQ(by_name["w"].dtype, "F32");
  EXPECT_EQ(by_name["w"].shape, (std::vector<int64_t>{7, 5}));
  EXPECT_EQ(f.data.substr(by_name["w"].begin, by_name["w"].end - by_name["w"].begin),
            std::string(reinterpret_cast<const char*>(w.data()), w.size() * 4));
  EXPECT_EQ(by_name["h"].dtype, "BF16");
  EXPECT_EQ(f.data.substr(by_name["h"].begin, by_name["h"].end - by_name["h"].begin),
            std::string(reinterpret_cast<const char*>(h.data()), h.size() * 2));
  EXPECT_EQ(by_name["ids"].dtype, "I64");
  int64_t id1 = 0;
  std::memcpy(&id1, f.data.data() + by_name["ids"].begin + 8, 8);
  EXPECT_EQ(id1, 1LL << 40);
  EXPECT_EQ(by_name["flag"].dtype, "U8");
  EXPECT_TRUE(by_name["flag"].shape.empty());
  EXPECT_EQ(static_cast<uint8_t>(f.data[by_name["flag"].begin]), 200);
  EXPECT_EQ(by_name["empty"].end - by_name["empty"].begin, 0u);
  EXPECT_EQ(f.metadata["railyard.step"], "12");
  EXPECT_EQ(f.metadata["railyard.world_size"], "3");
  EXPECT_EQ(f.metadata["rank2"], "x");
}

TEST_F(SafetensorsTest, ExportToAMissingDirectoryNamesThePath) {
  std::vector<float> w(4, 1.0f);
  WriterOptions o;
  o.dir = dir_ + "/ckpt";
  auto writer = CheckpointWriter::Open(o);
  ASSERT_TRUE(writer.ok());
  std::vector<TensorView> views = {{"w", DType::kF32, {4}, {}, {}, w.data()}};
  ASSERT_TRUE((*writer)->Save(1, views).ok());
  auto reader = CheckpointReader::Open(o.dir, 1);
  ASSERT_TRUE(reader.ok());
  Status st = ExportSafetensors(**reader, dir_ + "/no/such/dir/out.safetensors");
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("no/such/dir/out.safetensors"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace railyard::storage
