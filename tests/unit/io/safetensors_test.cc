// MappedFile and the safetensors header parser: every malformed-input case gives a Status whose
// message names the file and the tensor; valid files give zero-copy views; random corruption
// never crashes.
#include "io/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "base/numeric_types.h"
#include "fixture_writer.h"
#include "io/mapped_file.h"

namespace deepinfer::io {
namespace {

using ::testing::HasSubstr;
using testing::raw_file;
using testing::RawTensor;
using testing::safetensors_bytes;
using testing::TempDir;

RawTensor bf16_tensor(const std::string& name, std::vector<int64_t> shape,
                      std::vector<float> values) {
  RawTensor t{name, "BF16", std::move(shape), {}};
  for (float v : values) {
    const uint16_t h = float_to_bf16(v);
    t.bytes.push_back(static_cast<uint8_t>(h & 0xff));
    t.bytes.push_back(static_cast<uint8_t>(h >> 8));
  }
  return t;
}

Status parse(const std::vector<uint8_t>& bytes, const std::string& label = "x.safetensors") {
  return parse_safetensors(bytes.data(), bytes.size(), label).status();
}

Status parse_header(const std::string& header, size_t data_bytes = 16) {
  const auto bytes = raw_file(header, data_bytes);
  return parse(bytes);
}

TEST(MappedFile, MissingFileIsNotFound) {
  auto f = MappedFile::open("/nonexistent/dir/file.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(f.status().message(), HasSubstr("/nonexistent/dir/file.safetensors"));
}

TEST(MappedFile, DirectoryIsRejected) {
  TempDir dir;
  auto f = MappedFile::open(dir.path());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(), HasSubstr("is a directory"));
  EXPECT_THAT(f.status().message(), HasSubstr(dir.path()));
}

TEST(MappedFile, UnreadableFileIsReported) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  TempDir dir;
  testing::write_text(dir.file("locked"), "abc");
  ::chmod(dir.file("locked").c_str(), 0);
  auto f = MappedFile::open(dir.file("locked"));
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("cannot open"));
}

TEST(MappedFile, MapsContentsAndEmptyFiles) {
  TempDir dir;
  testing::write_text(dir.file("a"), "hello");
  auto f = MappedFile::open(dir.file("a"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->size(), 5u);
  EXPECT_EQ(std::memcmp(f->data(), "hello", 5), 0);
  MappedFile moved = std::move(f).value();
  EXPECT_EQ(moved.size(), 5u);
  testing::write_text(dir.file("empty"), "");
  auto e = MappedFile::open(dir.file("empty"));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->size(), 0u);
}

TEST(Safetensors, ShorterThanEightBytes) {
  Status s = parse({1, 2, 3}, "short.safetensors");
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("short.safetensors"));
  EXPECT_THAT(s.message(), HasSubstr("shorter than the 8-byte"));
}

TEST(Safetensors, HeaderLengthLargerThanFile) {
  std::vector<uint8_t> bytes = raw_file("{}", 0);
  bytes[0] = 200;  // claims 200 header bytes, file has 2
  Status s = parse(bytes);
  EXPECT_THAT(s.message(),
              HasSubstr("header length 200 is larger than the rest of the file (2 bytes)"));
}

TEST(Safetensors, AbsurdHeaderLength) {
  std::vector<uint8_t> bytes(16, 0);
  bytes[7] = 0x10;  // 2^60
  Status s = parse(bytes, "huge.safetensors");
  EXPECT_THAT(s.message(), HasSubstr("huge.safetensors"));
  EXPECT_THAT(s.message(), HasSubstr("absurd"));
}

TEST(Safetensors, HeaderNotJson) {
  Status s = parse_header("{\"a\": [1, 2");
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("x.safetensors: header is not valid JSON"));
}

TEST(Safetensors, HeaderNotObject) {
  EXPECT_THAT(parse_header("[1, 2, 3]").message(),
              HasSubstr("header must be a JSON object, found [1,2,3]"));
}

TEST(Safetensors, EntryMissingFields) {
  Status s = parse_header(R"({"w": {"shape": [2], "data_offsets": [0, 4]}})");
  EXPECT_THAT(s.message(), HasSubstr("x.safetensors: tensor 'w': missing 'dtype'"));
  s = parse_header(R"({"w": {"dtype": "BF16", "data_offsets": [0, 4]}})");
  EXPECT_THAT(s.message(), HasSubstr("tensor 'w': missing 'shape'"));
  s = parse_header(R"({"w": {"dtype": "BF16", "shape": [2]}})");
  EXPECT_THAT(s.message(), HasSubstr("tensor 'w': missing 'data_offsets'"));
  s = parse_header(R"({"w": 5})");
  EXPECT_THAT(s.message(), HasSubstr("tensor 'w': header entry must be an object"));
}

TEST(Safetensors, UnknownDtype) {
  Status s = parse_header(R"({"w": {"dtype": "F4_X", "shape": [2], "data_offsets": [0, 2]}})");
  EXPECT_THAT(s.message(), HasSubstr("tensor 'w': unknown dtype \"F4_X\""));
  EXPECT_THAT(s.message(), HasSubstr("F8_E4M3"));  // lists the known ones
  s = parse_header(R"({"w": {"dtype": 3, "shape": [2], "data_offsets": [0, 2]}})");
  EXPECT_THAT(s.message(), HasSubstr("'dtype' must be a string"));
}

TEST(Safetensors, BadShapes) {
  EXPECT_THAT(
      parse_header(R"({"w": {"dtype": "U8", "shape": [-2], "data_offsets": [0, 2]}})").message(),
      HasSubstr("tensor 'w': 'shape' has a negative dimension: [-2]"));
  EXPECT_THAT(
      parse_header(R"({"w": {"dtype": "U8", "shape": [1.5], "data_offsets": [0, 2]}})").message(),
      HasSubstr("'shape' must hold non-negative integers"));
  EXPECT_THAT(
      parse_header(R"({"w": {"dtype": "U8", "shape": "2", "data_offsets": [0, 2]}})").message(),
      HasSubstr("'shape' must be an array"));
  EXPECT_THAT(
      parse_header(
          R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 2]}})")
          .message(),
      HasSubstr("too large"));
}

TEST(Safetensors, BadOffsets) {
  EXPECT_THAT(
      parse_header(R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [4, 2]}})").message(),
      HasSubstr("tensor 'w': data_offsets end 2 is before begin 4"));
  EXPECT_THAT(parse_header(R"({"w": {"dtype": "U8", "shape": [40], "data_offsets": [0, 40]}})", 16)
                  .message(),
              HasSubstr("run past the end of the data section (16 bytes)"));
  EXPECT_THAT(
      parse_header(R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [0]}})").message(),
      HasSubstr("'data_offsets' must be [begin, end]"));
  EXPECT_THAT(
      parse_header(R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [-1, 1]}})").message(),
      HasSubstr("'data_offsets' must be [begin, end]"));
}

TEST(Safetensors, ByteSizeMustMatchShape) {
  Status s = parse_header(R"({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 10]}})");
  EXPECT_THAT(s.message(),
              HasSubstr("tensor 'w': byte size 10 does not match shape [2, 3] x BF16 (12 bytes)"));
}

TEST(Safetensors, OverlappingTensors) {
  Status s = parse_header(
      R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
          "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}})");
  EXPECT_THAT(s.message(), HasSubstr("tensors 'a' [0, 8) and 'b' [4, 12) overlap"));
}

TEST(Safetensors, MetadataMustBeStrings) {
  EXPECT_TRUE(parse_header(R"({"__metadata__": {"format": "pt"}})").ok());
  EXPECT_THAT(parse_header(R"({"__metadata__": {"format": 1}})").message(),
              HasSubstr("'__metadata__' value for 'format' must be a string"));
}

TEST(Safetensors, ValidFileGivesZeroCopyViews) {
  TempDir dir;
  RawTensor f32{"scale", "F32", {2}, {}};
  for (float v : {0.25f, -8.0f}) {
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    f32.bytes.insert(f32.bytes.end(), b, b + 4);
  }
  RawTensor empty{"empty", "I64", {0, 3}, {}};
  testing::write_file(
      dir.file("m.safetensors"),
      safetensors_bytes({bf16_tensor("w", {2, 2}, {1.0f, -2.5f, 0.5f, 3.0f}), empty, f32},
                        nlohmann::json{{"format", "pt"}}));
  auto file = SafetensorsFile::open(dir.file("m.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status().message();
  const SafetensorsFile& st = **file;
  EXPECT_EQ(st.entries().size(), 3u);
  EXPECT_EQ(st.metadata().at("format"), "pt");
  const SafetensorsEntry* w = st.find("w");
  ASSERT_NE(w, nullptr);
  const TensorView v = st.view(*w);
  EXPECT_EQ(v.dtype, DType::kBF16);
  EXPECT_EQ(v.shape, (std::vector<int64_t>{2, 2}));
  const uint8_t* base = st.mapping().data();
  const auto* p = static_cast<const uint8_t*>(v.data);
  EXPECT_GE(p, base);
  EXPECT_LE(p + v.nbytes(), base + st.mapping().size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 8, 0u);  // header padded to 8
  EXPECT_EQ(bf16_to_float(v.ptr<uint16_t>()[1]), -2.5f);
  EXPECT_EQ(bf16_to_float(v.ptr<uint16_t>()[3]), 3.0f);
  const TensorView s = st.view(*st.find("scale"));
  EXPECT_EQ(s.ptr<float>()[1], -8.0f);
  EXPECT_EQ(st.view(*st.find("empty")).numel(), 0);
  EXPECT_EQ(st.find("nope"), nullptr);
}

TEST(Safetensors, OpenNamesTheFileOnError) {
  TempDir dir;
  testing::write_file(dir.file("bad.safetensors"), raw_file("not json", 0));
  auto file = SafetensorsFile::open(dir.file("bad.safetensors"));
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr(dir.file("bad.safetensors")));
}

// Random byte flips, truncations and header-length edits of a valid file: every result is
// either OK (then every view lies inside the buffer) or a clean error. Fixed seed.
TEST(Safetensors, FuzzedFilesNeverCrash) {
  RawTensor i8{"q", "I8", {4, 4}, std::vector<uint8_t>(16, 0x2F)};
  RawTensor sc{"q.scale", "F8_E8M0", {4, 1}, {127, 128, 127, 128}};
  const std::vector<uint8_t> valid =
      safetensors_bytes({bf16_tensor("a.weight", {2, 3}, {1, 2, 3, 4, 5, 6}), i8, sc});
  ASSERT_TRUE(parse(valid).ok());
  std::mt19937 rng(1234);
  int ok = 0, errors = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> bytes = valid;
    const int mode = iter % 4;
    if (mode == 0 || mode == 3) {
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    }
    if (mode == 1) bytes.resize(rng() % bytes.size());
    if (mode == 2) bytes[rng() % 8] = static_cast<uint8_t>(rng());
    if (mode == 3) {  // flip inside the JSON header text
      const size_t header_end = std::min<size_t>(bytes.size(), 8 + valid[0]);
      bytes[8 + rng() % (header_end - 8)] = "0123456789,:[]{}\"-e."[rng() % 20];
    }
    auto parsed = parse_safetensors(bytes.data(), bytes.size(), "fuzz.safetensors");
    if (parsed.ok()) {
      ++ok;
      for (const auto& e : parsed->entries) {
        ASSERT_LE(parsed->data_offset + e.end, bytes.size());
      }
    } else {
      ++errors;
      EXPECT_THAT(parsed.status().message(), HasSubstr("fuzz.safetensors"));
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(ok, 0);
}

}  // namespace
}  // namespace deepinfer::io
