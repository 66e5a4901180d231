// The checkpoint readers' limits (src/io/io_limits.h, docs/limits.md): an input just over each
// limit gives an error naming the limit, the value found and the fix; one at the limit still
// parses. Oversized files are sparse (resize_file), so nothing large is written or read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "fixture_writer.h"
#include "io/io_limits.h"
#include "io/json_fields.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/tensor_store.h"

namespace deepinfer::io {
namespace {

using ::testing::HasSubstr;
using testing::raw_file;
using testing::TempDir;

std::string deep_array(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// A header of `n` empty U8 tensors.
std::string empty_tensors_header(size_t n, const std::string& prefix = "t") {
  std::string h = "{";
  for (size_t i = 0; i < n; ++i) {
    if (i) h += ",";
    h += '"';
    h += prefix;
    h += std::to_string(i);
    h += R"(":{"dtype":"U8","shape":[0],"data_offsets":[0,0]})";
  }
  return h + "}";
}

Status parse_header(const std::string& header, const SafetensorsLimits& limits = {}) {
  const auto bytes = raw_file(header, 8);
  return parse_safetensors(bytes.data(), bytes.size(), "x.safetensors", limits).status();
}

TEST(IoLimits, SafetensorsHeaderLength) {
  std::vector<uint8_t> bytes(16, 0);
  const uint64_t len = kMaxSafetensorsHeaderBytes + 1;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(len >> (8 * i));
  Status s = parse_safetensors(bytes.data(), bytes.size(), "x.safetensors").status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("x.safetensors: header length 100,000,001 bytes exceeds the "
                                     "limit of 100,000,000 (kMaxSafetensorsHeaderBytes in "
                                     "src/io/io_limits.h)"));
}

TEST(IoLimits, SafetensorsTensorCount) {
  SafetensorsLimits limits;
  limits.max_tensors = 3;  // the default (kMaxTensorsPerFile) works the same, at 1,048,576
  EXPECT_TRUE(parse_header(empty_tensors_header(3), limits).ok());
  Status s = parse_header(empty_tensors_header(4), limits);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("x.safetensors: 4 tensors exceeds the limit of 3 "
                                     "(kMaxTensorsPerFile in src/io/io_limits.h); split"));
  // __metadata__ is not a tensor.
  std::string with_meta = empty_tensors_header(3);
  with_meta.insert(1, R"("__metadata__":{"format":"pt"},)");
  EXPECT_TRUE(parse_header(with_meta, limits).ok());
}

TEST(IoLimits, SafetensorsNameLength) {
  // empty_tensors_header appends the index: the names are "n...n0".
  EXPECT_TRUE(
      parse_header(empty_tensors_header(1, std::string(kMaxTensorNameBytes - 1, 'n'))).ok());
  Status s = parse_header(empty_tensors_header(1, std::string(kMaxTensorNameBytes, 'n')));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("a name of 1,025 bytes exceeds the limit of 1,024 "
                                     "(kMaxTensorNameBytes in src/io/io_limits.h)"));
}

TEST(IoLimits, SafetensorsRank) {
  auto header = [](size_t rank) {
    std::string shape;
    for (size_t i = 0; i < rank; ++i) shape += i ? ",1" : "1";
    return R"({"t":{"dtype":"U8","shape":[)" + shape + R"(],"data_offsets":[0,1]}})";
  };
  EXPECT_TRUE(parse_header(header(kMaxTensorRank)).ok());
  Status s = parse_header(header(kMaxTensorRank + 1));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("tensor 't': a shape of rank 9 exceeds the limit of 8 "
                                     "(kMaxTensorRank in src/io/io_limits.h)"));
}

TEST(IoLimits, SafetensorsHeaderDepth) {
  const std::string ok =
      R"({"__metadata__":{"a":"b"},"x":)" + deep_array(kMaxCheckpointJsonDepth - 1) + "}";
  // At the limit the depth check passes (the entry is then rejected for its shape, not depth).
  EXPECT_THAT(parse_header(ok).message(), ::testing::Not(HasSubstr("nesting")));
  Status s = parse_header(R"({"x":)" + deep_array(100000) + "}");
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("x.safetensors: header: JSON nesting depth 100,001 exceeds "
                                     "the limit of 64 (kMaxCheckpointJsonDepth in "
                                     "src/io/io_limits.h)"));
}

TEST(IoLimits, IndexFileSize) {
  TempDir dir;
  testing::write_text(dir.file(kSafetensorsIndexName), "{}");
  std::filesystem::resize_file(dir.file(kSafetensorsIndexName), kMaxIndexBytes + 1);  // sparse
  auto store = TensorStore::open(dir.path());
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(),
              HasSubstr("a file of 268,435,457 bytes exceeds the limit of 268,435,456 "
                        "(kMaxIndexBytes in src/io/io_limits.h)"));
}

TEST(IoLimits, IndexDepth) {
  TempDir dir;
  testing::write_text(dir.file(kSafetensorsIndexName),
                      R"({"weight_map":{}, "x":)" + deep_array(100000) + "}");
  auto store = TensorStore::open(dir.path());
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(),
              HasSubstr("JSON nesting depth 100,001 exceeds the limit of 64"));
}

TEST(IoLimits, IndexShardCount) {
  TempDir dir;
  auto index_with = [&](size_t shards) {
    nlohmann::json map = nlohmann::json::object();
    for (size_t i = 0; i < shards; ++i) {
      std::string tensor = "t", shard = "s";  // appended: GCC 12 -Wrestrict misfires on "t" + ...
      tensor += std::to_string(i);
      shard += std::to_string(i);
      map[tensor] = shard;
    }
    testing::write_text(dir.file(kSafetensorsIndexName),
                        nlohmann::json{{"weight_map", map}}.dump());
    return TensorStore::open(dir.path()).status();
  };
  Status over = index_with(kMaxShards + 1);
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(over.message(), HasSubstr("16,385 shard files exceeds the limit of 16,384 "
                                        "(kMaxShards in src/io/io_limits.h); merge"));
  // At the limit the index is read and the (absent) shards are looked for.
  Status at = index_with(kMaxShards);
  EXPECT_EQ(at.code(), StatusCode::kNotFound) << at.message();
}

TEST(IoLimits, ConfigFileSizeAndDepth) {
  TempDir dir;
  const std::string path = dir.file("config.json");
  testing::write_text(path, R"({"model_type": "deepseek_v4"})");
  auto text = read_config_json(path);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, R"({"model_type": "deepseek_v4"})");
  std::filesystem::resize_file(path, kMaxConfigBytes + 1);  // sparse
  auto big = read_config_json(path);
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(),
              HasSubstr("config.json: a file of 16,777,217 bytes exceeds the limit of "
                        "16,777,216 (kMaxConfigBytes in src/io/io_limits.h)"));
  testing::write_text(path, R"({"model_type": )" + deep_array(100000) + "}");
  auto deep = read_config_json(path);
  ASSERT_FALSE(deep.ok());
  EXPECT_THAT(deep.status().message(),
              HasSubstr("config.json: JSON nesting depth 100,001 exceeds the limit of 64"));
  EXPECT_TRUE(check_checkpoint_json(deep_array(kMaxCheckpointJsonDepth), "c").ok());
  // What the loader runs: the same limits before any parsing.
  auto via_loader = load_model_config(path);
  ASSERT_FALSE(via_loader.ok());
  EXPECT_THAT(via_loader.status().message(), HasSubstr("JSON nesting depth 100,001 exceeds"));
  std::filesystem::resize_file(path, kMaxConfigBytes + 1);
  via_loader = load_model_config(dir.path());
  ASSERT_FALSE(via_loader.ok());
  EXPECT_THAT(via_loader.status().message(), HasSubstr("(kMaxConfigBytes in src/io/io_limits.h)"));
  auto parsed = parse_model_config(R"({"model_type": )" + deep_array(100000) + "}", "config.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("exceeds the limit of 64"));
}

// A deep value (within the depth limit) in a field must not be dumped whole in the error
// message (json_brief summarises it).
TEST(IoLimits, DeepFieldValueInConfigIsSummarised) {
  auto c = parse_model_config(
      R"({"model_type": "deepseek_v4", "vocab_size": )" + deep_array(60) + "}", "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("vocab_size"));
  EXPECT_THAT(c.status().message(), HasSubstr("[...] (nested more than 16 levels)"));
  EXPECT_EQ(json_brief(nlohmann::json::parse(deep_array(16))), deep_array(16));
}

}  // namespace
}  // namespace deepinfer::io
