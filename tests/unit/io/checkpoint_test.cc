// Checkpoint: both name families, single vs sharded, plain vs quantized, zero-copy views with
// decoded values, MTP presence, and a message naming the tensor/file/expectation for every
// broken checkpoint. Also the V4-Flash expected-tensor table against spec §4.
#include "io/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "base/numeric_types.h"
#include "fixture_writer.h"
#include "io/inspect_report.h"

namespace deepinfer::io {
namespace {

using ::testing::HasSubstr;
using testing::Layout;
using testing::RawTensor;
using testing::TempDir;
using testing::TinyOptions;

std::string source_dir() {
  const char* d = std::getenv("DEEPINFER_SOURCE_DIR");
  return d != nullptr ? d : DEEPINFER_TEST_SOURCE_DIR;
}

Expected<Checkpoint> write_and_open(const TempDir& dir, const TinyOptions& o) {
  testing::write_tiny_checkpoint(dir.path(), o);
  return Checkpoint::open(dir.path());
}

std::string open_error(const TinyOptions& o) {
  TempDir dir;
  auto ck = write_and_open(dir, o);
  EXPECT_FALSE(ck.ok()) << "opened unexpectedly";
  return ck.ok() ? std::string() : ck.status().message();
}

RawTensor* find(std::vector<RawTensor>& ts, const std::string& name) {
  for (auto& t : ts) {
    if (t.name == name) return &t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return nullptr;
}

void drop(std::vector<RawTensor>& ts, const std::string& name) {
  ts.erase(std::remove_if(ts.begin(), ts.end(), [&](const RawTensor& t) { return t.name == name; }),
           ts.end());
}

struct Case {
  NameFamily names;
  bool quantized;
  Layout layout;
  bool official_config;
};

class CheckpointVariants : public ::testing::TestWithParam<Case> {};

TEST_P(CheckpointVariants, OpensValidatesAndDecodes) {
  const Case c = GetParam();
  TempDir dir;
  TinyOptions o;
  o.names = c.names;
  o.quantized = c.quantized;
  o.layout = c.layout;
  o.official_config = c.official_config;
  o.with_mtp = c.names == NameFamily::kOfficial;  // HF saves have no mtp.*
  auto ck = write_and_open(dir, o);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  EXPECT_EQ(ck->name_family(), c.names);
  EXPECT_EQ(ck->config().num_layers, 5);
  EXPECT_EQ(ck->mtp_available(), o.with_mtp);
  EXPECT_TRUE(ck->unknown_tensors().empty());
  if (!o.with_mtp) {
    ASSERT_EQ(ck->warnings().size(), 1u);
    EXPECT_THAT(ck->warnings()[0], HasSubstr("MTP speculative decoding is unavailable"));
  } else {
    EXPECT_TRUE(ck->warnings().empty()) << ck->warnings()[0];
  }

  // Float tensor: zero-copy view into the mapping with the written values.
  auto embed = ck->get("embed.weight");
  ASSERT_TRUE(embed.ok()) << embed.status().message();
  EXPECT_EQ(embed->format, WeightFormat::kPlain);
  EXPECT_EQ(embed->data.dtype, DType::kBF16);
  EXPECT_EQ(embed->data.shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(embed->stored_name,
            c.names == NameFamily::kOfficial ? "embed.weight" : "model.embed_tokens.weight");
  bool inside = false;
  for (const auto& f : ck->store().files()) {
    const auto* p = static_cast<const uint8_t*>(embed->data.data);
    if (f->path() == embed->file && p >= f->mapping().data() &&
        p + embed->data.nbytes() <= f->mapping().data() + f->mapping().size()) {
      inside = true;
    }
  }
  EXPECT_TRUE(inside);
  const auto* e = embed->data.ptr<uint16_t>();
  EXPECT_EQ(bf16_to_float(e[0]), 1.0f);
  EXPECT_EQ(bf16_to_float(e[1]), -2.5f);
  EXPECT_EQ(bf16_to_float(e[3]), 3.0f);

  const Weight* sink = ck->find("layers.1.attn.attn_sink");
  ASSERT_NE(sink, nullptr);
  EXPECT_EQ(sink->data.dtype, DType::kF32);
  EXPECT_EQ(sink->data.ptr<float>()[1], -2.5f);

  // The attention KV norm is `attn.norm.weight` in save_pretrained names.
  const Weight* kv_norm = ck->find("layers.3.attn.kv_norm.weight");
  ASSERT_NE(kv_norm, nullptr);
  EXPECT_EQ(kv_norm->stored_name, c.names == NameFamily::kOfficial
                                      ? "layers.3.attn.kv_norm.weight"
                                      : "model.layers.3.attn.norm.weight");
  EXPECT_TRUE(ck->has("layers.3.attn.compressor.norm.weight"));
  EXPECT_TRUE(ck->has("layers.3.attn.indexer.compressor.norm.weight"));
  EXPECT_FALSE(ck->has("layers.2.attn.indexer.wq_b.weight"));  // HCA has no indexer
  EXPECT_TRUE(ck->has("layers.0.ffn.gate.tid2eid"));
  EXPECT_TRUE(ck->has("layers.2.ffn.gate.bias"));
  EXPECT_TRUE(ck->has("hc_head_fn"));

  const Weight* wq_a = ck->find("layers.0.attn.wq_a.weight");
  const Weight* w1 = ck->find("layers.4.ffn.experts.7.w1.weight");
  ASSERT_NE(wq_a, nullptr);
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(wq_a->logical_shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(w1->logical_shape, (std::vector<int64_t>{32, 64}));
  if (c.quantized) {
    ASSERT_EQ(wq_a->format, WeightFormat::kFp8Block);
    ASSERT_TRUE(wq_a->scale.has_value());
    EXPECT_EQ(wq_a->scale->shape, (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(wq_a->block_in, 128);
    const auto* q = wq_a->data.ptr<uint8_t>();
    EXPECT_EQ(fp8_e4m3_to_float(q[0]), 1.0f);
    EXPECT_EQ(fp8_e4m3_to_float(q[1]), -2.0f);
    EXPECT_EQ(fp8_e4m3_to_float(q[2]), 448.0f);
    EXPECT_EQ(fp8_e4m3_to_float(q[3]), 0.001953125f);  // 2^-9, smallest subnormal
    EXPECT_EQ(e8m0_to_float(wq_a->scale->ptr<uint8_t>()[0]), 1.0f);
    const Weight* wq_b = ck->find("layers.0.attn.wq_b.weight");
    EXPECT_EQ(wq_b->scale->shape, (std::vector<int64_t>{2, 1}));  // [256, 32] -> ceil tiles

    ASSERT_EQ(w1->format, WeightFormat::kFp4Block);
    EXPECT_EQ(w1->data.dtype, DType::kI8);
    EXPECT_EQ(w1->data.shape, (std::vector<int64_t>{32, 32}));
    EXPECT_EQ(w1->scale->shape, (std::vector<int64_t>{32, 2}));
    EXPECT_EQ(w1->scale->dtype, DType::kF8E8M0);
    const auto* row = w1->data.ptr<uint8_t>();
    EXPECT_EQ(fp4_packed_at(row, 0), -6.0f);  // low nibble of 0x2F
    EXPECT_EQ(fp4_packed_at(row, 1), 1.0f);   // high nibble
    EXPECT_EQ(fp4_packed_at(row, 2), 0.5f);   // 0x91: low 1
    EXPECT_EQ(fp4_packed_at(row, 3), -0.5f);  // high 9
    EXPECT_EQ(e8m0_to_float(w1->scale->ptr<uint8_t>()[1]), 2.0f);
  } else {
    EXPECT_EQ(wq_a->format, WeightFormat::kPlain);
    EXPECT_FALSE(wq_a->scale.has_value());
    EXPECT_EQ(w1->data.shape, (std::vector<int64_t>{32, 64}));
  }
  if (o.with_mtp) {
    EXPECT_TRUE(ck->has("mtp.0.e_proj.weight"));
    EXPECT_TRUE(ck->has("mtp.0.hc_head_base"));
    EXPECT_TRUE(ck->has("mtp.0.ffn.gate.bias"));
  } else {
    auto missing = ck->get("mtp.0.e_proj.weight");
    ASSERT_FALSE(missing.ok());
    EXPECT_THAT(missing.status().message(), HasSubstr("has no MTP block"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, CheckpointVariants,
    ::testing::Values(Case{NameFamily::kOfficial, false, Layout::kSingle, false},
                      Case{NameFamily::kOfficial, true, Layout::kIndexed, true},
                      Case{NameFamily::kOfficial, true, Layout::kSingle, false},
                      Case{NameFamily::kSavePretrained, false, Layout::kSingle, false},
                      Case{NameFamily::kSavePretrained, false, Layout::kIndexed, false},
                      Case{NameFamily::kSavePretrained, true, Layout::kDirectory, true}));

TEST(TensorNames, FamilyMapping) {
  const auto hf = NameFamily::kSavePretrained;
  EXPECT_EQ(to_canonical_name("model.embed_tokens.weight", hf), "embed.weight");
  EXPECT_EQ(to_canonical_name("model.norm.weight", hf), "norm.weight");
  EXPECT_EQ(to_canonical_name("head.weight", hf), "head.weight");
  EXPECT_EQ(to_canonical_name("model.hc_head.hc_fn", hf), "hc_head_fn");
  EXPECT_EQ(to_canonical_name("model.hc_head.hc_scale", hf), "hc_head_scale");
  EXPECT_EQ(to_canonical_name("model.layers.12.attn.norm.weight", hf),
            "layers.12.attn.kv_norm.weight");
  EXPECT_EQ(to_canonical_name("model.layers.12.attn.compressor.norm.weight", hf),
            "layers.12.attn.compressor.norm.weight");
  EXPECT_EQ(to_canonical_name("model.layers.2.attn.indexer.compressor.norm.weight", hf),
            "layers.2.attn.indexer.compressor.norm.weight");
  EXPECT_EQ(to_canonical_name("model.layers.2.attn.wq_a.weight_scale_inv", hf),
            "layers.2.attn.wq_a.scale");
  EXPECT_EQ(to_canonical_name("model.layers.0.ffn.experts.3.w2.weight", hf),
            "layers.0.ffn.experts.3.w2.weight");
  EXPECT_EQ(to_canonical_name("layers.0.attn.norm.weight", NameFamily::kOfficial),
            "layers.0.attn.norm.weight");
  for (const char* c : {"embed.weight", "head.weight", "norm.weight", "hc_head_base",
                        "layers.7.attn.kv_norm.weight", "layers.7.attn.compressor.norm.weight",
                        "mtp.0.attn.kv_norm.weight", "layers.1.attn.wq_b.scale"}) {
    EXPECT_EQ(to_canonical_name(to_stored_name(c, hf), hf), c);
  }
  EXPECT_EQ(detect_name_family({"head.weight", "model.norm.weight"}), hf);
  EXPECT_EQ(detect_name_family({"head.weight", "norm.weight"}), NameFamily::kOfficial);
}

TEST(Checkpoint, MissingTensorNamesItInTheFamilySpelling) {
  TinyOptions o;
  o.names = NameFamily::kSavePretrained;
  o.with_mtp = false;
  o.mutate = [](auto& ts) { drop(ts, "model.layers.3.attn.norm.weight"); };
  const std::string m = open_error(o);
  EXPECT_THAT(m, HasSubstr("lacks 1 tensor(s) that config.json implies (save_pretrained names)"));
  EXPECT_THAT(m, HasSubstr("'model.layers.3.attn.norm.weight' [64]"));
}

TEST(Checkpoint, WrongShapeNamesTensorFileAndExpectation) {
  TinyOptions o;
  o.mutate = [](auto& ts) {
    RawTensor* t = find(ts, "layers.1.attn.wq_a.weight");
    t->shape = {64, 32};  // transposed
  };
  const std::string m = open_error(o);
  EXPECT_THAT(m, HasSubstr("tensor 'layers.1.attn.wq_a.weight' in "));
  EXPECT_THAT(
      m, HasSubstr("model.safetensors: shape [64, 32] as BF16, expected [32, 64] (unquantized)"));
}

TEST(Checkpoint, WrongDtype) {
  TinyOptions o;
  o.mutate = [](auto& ts) {
    RawTensor* t = find(ts, "layers.0.attn_norm.weight");
    t->dtype = "I16";
  };
  EXPECT_THAT(open_error(o), HasSubstr("tensor 'layers.0.attn_norm.weight' in "));
  EXPECT_THAT(open_error(o),
              HasSubstr("dtype I16 [64] is not allowed here; expected BF16/F16/F32"));

  TinyOptions q;  // FP4 outside the routed experts
  q.quantized = true;
  q.mutate = [](auto& ts) {
    RawTensor* t = find(ts, "layers.0.ffn.shared_experts.w1.weight");
    t->dtype = "I8";
  };
  EXPECT_THAT(open_error(q), HasSubstr("dtype I8 [32, 64] is not allowed here; expected "
                                       "BF16/F16/F32, or F8_E4M3 with a .scale"));

  TinyOptions t;
  t.mutate = [](auto& ts) {
    RawTensor* x = find(ts, "layers.1.ffn.gate.tid2eid");
    x->dtype = "F64";
  };
  EXPECT_THAT(open_error(t), HasSubstr("dtype F64, expected I64 or I32"));
}

TEST(Checkpoint, QuantizedScaleProblems) {
  TinyOptions o;
  o.quantized = true;
  o.names = NameFamily::kSavePretrained;
  o.with_mtp = false;
  o.mutate = [](auto& ts) { drop(ts, "model.layers.2.attn.wo_b.scale"); };
  std::string m = open_error(o);
  EXPECT_THAT(
      m, HasSubstr(
             "tensor 'layers.2.attn.wo_b.weight' (stored as 'model.layers.2.attn.wo_b.weight')"));
  EXPECT_THAT(m, HasSubstr("is F8_E4M3 but its scale 'model.layers.2.attn.wo_b.scale' is missing"));

  o.mutate = [](auto& ts) {
    RawTensor* s = find(ts, "model.layers.0.ffn.experts.0.w2.scale");
    s->shape = {64, 2};
    s->bytes.resize(128);
  };
  m = open_error(o);
  EXPECT_THAT(m, HasSubstr("scale 'model.layers.0.ffn.experts.0.w2.scale' of tensor "
                           "'layers.0.ffn.experts.0.w2.weight'"));
  EXPECT_THAT(
      m, HasSubstr(
             "shape [64, 2], expected [64, 1] (FP4 E2M1 packed two per byte, 1x32 E8M0 scales)"));

  o.mutate = [](auto& ts) {
    RawTensor* s = find(ts, "model.layers.0.ffn.experts.0.w2.scale");
    s->dtype = "U8";
  };
  EXPECT_THAT(open_error(o), HasSubstr("dtype U8, expected F8_E8M0"));

  o.mutate = [](auto& ts) {
    RawTensor* w = find(ts, "model.layers.0.ffn.experts.0.w2.weight");
    w->shape = {64, 32};  // unpacked shape with I8 storage
    w->bytes.resize(64 * 32);
  };
  EXPECT_THAT(open_error(o), HasSubstr("shape [64, 32] as I8, expected [64, 16] (FP4 E2M1"));

  TinyOptions plain;  // a BF16 weight with a stray scale
  plain.mutate = [](auto& ts) {
    ts.push_back(RawTensor{"layers.0.attn.wkv.scale", "F8_E8M0", {1, 1}, {127}});
  };
  EXPECT_THAT(open_error(plain), HasSubstr("is BF16 but has a scale 'layers.0.attn.wkv.scale'"));
}

TEST(Checkpoint, Fp8ExpertsAndF32ScalesAreAccepted) {
  TempDir dir;
  TinyOptions o;
  o.quantized = true;
  o.fp8_experts = true;  // V4-Base layout
  o.mutate = [](auto& ts) {
    RawTensor* s = find(ts, "layers.0.attn.wq_a.scale");
    s->dtype = "F32";
    s->bytes = {0, 0, 0x80, 0x3f};  // 1.0f
  };
  auto ck = write_and_open(dir, o);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  EXPECT_EQ(ck->find("layers.3.ffn.experts.1.w3.weight")->format, WeightFormat::kFp8Block);
  EXPECT_EQ(ck->find("layers.0.attn.wq_a.weight")->scale->dtype, DType::kF32);
  ASSERT_EQ(ck->warnings().size(), 1u);  // config says fp4 experts, files hold fp8
  EXPECT_THAT(ck->warnings()[0], HasSubstr("declares FP4 routed experts"));
}

TEST(Checkpoint, PartialMtpIsAnError) {
  TinyOptions o;
  o.mutate = [](auto& ts) { drop(ts, "mtp.0.enorm.weight"); };
  EXPECT_THAT(open_error(o), HasSubstr("incomplete MTP block: it holds 'mtp.0.attn_norm.weight' "
                                       "but lacks 'mtp.0.enorm.weight'"));
}

TEST(Checkpoint, UnknownTensorsAreWarnings) {
  TempDir dir;
  TinyOptions o;
  o.mutate = [](auto& ts) {
    ts.push_back(RawTensor{"vision.patch_embed.weight", "U8", {2}, {1, 2}});
    ts.push_back(RawTensor{"layers.0.ffn.gate.bias_vl", "F32", {1}, {0, 0, 0, 0}});
  };
  auto ck = write_and_open(dir, o);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  EXPECT_EQ(ck->unknown_tensors(),
            (std::vector<std::string>{"layers.0.ffn.gate.bias_vl", "vision.patch_embed.weight"}));
  ASSERT_EQ(ck->warnings().size(), 1u);
  EXPECT_THAT(ck->warnings()[0], HasSubstr("2 stored tensor(s) are not part of the model"));
}

TEST(Checkpoint, TwoNamesForOneWeight) {
  TinyOptions o;
  o.names = NameFamily::kSavePretrained;
  o.with_mtp = false;
  o.mutate = [](auto& ts) {
    RawTensor copy = *find(ts, "model.layers.1.attn.norm.weight");
    copy.name = "model.layers.1.attn.kv_norm.weight";
    ts.push_back(copy);
  };
  EXPECT_THAT(open_error(o), HasSubstr("both name the same weight 'layers.1.attn.kv_norm.weight'"));
}

TEST(Checkpoint, TiedEmbeddingsMayOmitHead) {
  TempDir dir;
  testing::write_tiny_checkpoint(dir.path(), TinyOptions{});
  auto config = nlohmann::json::parse(testing::tiny_config_hf(false).dump());
  config["tie_word_embeddings"] = true;
  testing::write_text(dir.file("config.json"), config.dump());
  TinyOptions o;
  o.mutate = [](auto& ts) { drop(ts, "head.weight"); };
  TempDir dir2;
  testing::write_tiny_checkpoint(dir2.path(), o);
  testing::write_text(dir2.file("config.json"), config.dump());
  auto ck = Checkpoint::open(dir2.path());
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  EXPECT_EQ(ck->find("head.weight")->data.data, ck->find("embed.weight")->data.data);
}

TEST(Checkpoint, UnpaddedHeaderGivesAnAlignmentWarning) {
  TempDir dir;
  testing::write_tiny_checkpoint(dir.path(), TinyOptions{});
  // Rewrite the file with a header of odd length: every view is then misaligned for F32/BF16.
  const std::string path = dir.file("model.safetensors");
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok());
  const MappedFile& m = (*file)->mapping();
  const size_t header_len = static_cast<size_t>(m.data()[0]) |
                            static_cast<size_t>(m.data()[1]) << 8 |
                            static_cast<size_t>(m.data()[2]) << 16;
  std::string header(reinterpret_cast<const char*>(m.data()) + 8, header_len);
  while (!header.empty() && header.back() == ' ') header.pop_back();
  header += ' ';
  if (header.size() % 2 == 0) header += ' ';
  std::vector<uint8_t> bytes = testing::raw_file(header, 0);
  bytes.insert(bytes.end(), m.data() + 8 + header_len, m.data() + m.size());
  file = Expected<std::unique_ptr<SafetensorsFile>>(data_loss("closed"));
  testing::write_file(path, bytes);
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  ASSERT_FALSE(ck->warnings().empty());
  EXPECT_THAT(ck->warnings()[0], HasSubstr("not aligned to their element size"));
}

TEST(Checkpoint, DirectoryErrors) {
  auto none = Checkpoint::open("/nonexistent/model");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("model directory not found: /nonexistent/model"));
  TempDir dir;
  auto no_config = Checkpoint::open(dir.path());
  ASSERT_FALSE(no_config.ok());
  EXPECT_THAT(no_config.status().message(),
              HasSubstr("config not found: " + dir.file("config.json")));
  testing::write_text(dir.file("config.json"), testing::tiny_config_hf(false).dump());
  auto no_tensors = Checkpoint::open(dir.path());
  ASSERT_FALSE(no_tensors.ok());
  EXPECT_THAT(no_tensors.status().message(), HasSubstr("no safetensors files"));
}

TEST(Checkpoint, InspectReport) {
  TempDir dir;
  TinyOptions o;
  o.quantized = true;
  auto ck = write_and_open(dir, o);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  const auto r = inspect_checkpoint(*ck);
  EXPECT_EQ(r["name_family"], "official");
  EXPECT_EQ(r["layer_kinds"]["attention"], "layers 0 SWA, 1,3 CSA(4), 2,4 HCA(8)");
  EXPECT_EQ(r["layer_kinds"]["counts"]["CSA"], 2);
  EXPECT_EQ(r["mtp"]["available"], true);
  // Parameters counted from logical shapes: FP4 experts count two per byte.
  EXPECT_EQ(r["parameters"]["total"], r["parameters_from_config"]["total"]);
  const int64_t experts_per_layer = 8 * 3 * 32 * 64;
  EXPECT_EQ(r["parameters"]["by_group"]["experts"]["params"], 5 * experts_per_layer);
  EXPECT_EQ(r["parameters"]["by_group"]["experts"]["bytes"],
            5 * (experts_per_layer / 2 + experts_per_layer / 32));
  bool fp4 = false;
  for (const auto& d : r["parameters"]["by_dtype"]) fp4 |= d["dtype"] == "FP4_E2M1";
  EXPECT_TRUE(fp4);
  // Tiny KV: CSA layers 1,3: (64+32)/4 each; HCA 2,4: 64/8 each.
  EXPECT_EQ(r["kv_cache"]["elements_per_token"], 2 * 96 / 4.0 + 2 * 64 / 8.0);
  EXPECT_EQ(r["quantization_found"]["experts fp4"], 5 * 8 * 3 + 8 * 3);
}

// spec §4 shapes for the real V4-Flash config.
TEST(ExpectedTensors, V4FlashTableMatchesSpec) {
  auto c = load_model_config(source_dir() + "/tests/data/io/v4_flash_inference_config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const auto table = expected_tensors(*c);
  std::map<std::string, const ExpectedTensor*> by_name;
  for (const auto& t : table) {
    EXPECT_TRUE(by_name.emplace(t.name, &t).second) << "duplicate " << t.name;
  }
  auto shape = [&](const std::string& n) {
    auto it = by_name.find(n);
    return it == by_name.end() ? std::vector<int64_t>{-1} : it->second->shape;
  };
  using S = std::vector<int64_t>;
  EXPECT_EQ(shape("embed.weight"), (S{129280, 4096}));
  EXPECT_EQ(shape("hc_head_fn"), (S{4, 16384}));
  EXPECT_EQ(shape("layers.0.hc_attn_fn"), (S{24, 16384}));
  EXPECT_EQ(shape("layers.5.hc_ffn_scale"), (S{3}));
  EXPECT_EQ(shape("layers.10.attn.wq_a.weight"), (S{1024, 4096}));
  EXPECT_EQ(shape("layers.10.attn.wq_b.weight"), (S{32768, 1024}));
  EXPECT_EQ(shape("layers.10.attn.wkv.weight"), (S{512, 4096}));
  EXPECT_EQ(shape("layers.10.attn.wo_a.weight"), (S{8192, 4096}));
  EXPECT_EQ(fp8_scale_shape(shape("layers.10.attn.wo_a.weight"), 128, 128), (S{64, 32}));
  EXPECT_EQ(fp8_scale_shape(shape("layers.10.attn.wq_b.weight"), 128, 128), (S{256, 8}));
  EXPECT_EQ(shape("layers.10.attn.wo_b.weight"), (S{4096, 8192}));
  EXPECT_EQ(shape("layers.10.attn.attn_sink"), (S{64}));
  EXPECT_EQ(shape("layers.2.attn.compressor.wkv.weight"), (S{1024, 4096}));
  EXPECT_EQ(shape("layers.2.attn.compressor.ape"), (S{4, 1024}));
  EXPECT_EQ(shape("layers.2.attn.indexer.wq_b.weight"), (S{8192, 1024}));
  EXPECT_EQ(shape("layers.2.attn.indexer.weights_proj.weight"), (S{64, 4096}));
  EXPECT_EQ(shape("layers.2.attn.indexer.compressor.wgate.weight"), (S{256, 4096}));
  EXPECT_EQ(shape("layers.2.attn.indexer.compressor.ape"), (S{4, 256}));
  EXPECT_EQ(shape("layers.2.attn.indexer.compressor.norm.weight"), (S{128}));
  EXPECT_EQ(shape("layers.3.attn.compressor.wkv.weight"), (S{512, 4096}));
  EXPECT_EQ(shape("layers.3.attn.compressor.ape"), (S{128, 512}));
  EXPECT_EQ(shape("layers.3.attn.indexer.wq_b.weight"), (S{-1}));    // HCA: no indexer
  EXPECT_EQ(shape("layers.0.attn.compressor.wkv.weight"), (S{-1}));  // SWA: no compressor
  EXPECT_EQ(shape("layers.0.ffn.gate.tid2eid"), (S{129280, 6}));
  EXPECT_EQ(shape("layers.3.ffn.gate.tid2eid"), (S{-1}));
  EXPECT_EQ(shape("layers.3.ffn.gate.bias"), (S{256}));
  EXPECT_EQ(shape("layers.3.ffn.gate.weight"), (S{256, 4096}));
  const S w1 = shape("layers.7.ffn.experts.255.w1.weight");
  EXPECT_EQ(w1, (S{2048, 4096}));
  EXPECT_EQ(fp4_packed_shape(w1), (S{2048, 2048}));
  EXPECT_EQ(fp4_scale_shape(w1, 32), (S{2048, 128}));
  const S w2 = shape("layers.7.ffn.experts.0.w2.weight");
  EXPECT_EQ(fp4_packed_shape(w2), (S{4096, 1024}));
  EXPECT_EQ(fp4_scale_shape(w2, 32), (S{4096, 64}));
  EXPECT_EQ(fp8_scale_shape(shape("layers.7.ffn.shared_experts.w1.weight"), 128, 128), (S{16, 32}));
  EXPECT_EQ(fp8_scale_shape(shape("layers.7.ffn.shared_experts.w2.weight"), 128, 128), (S{32, 16}));
  EXPECT_EQ(shape("mtp.0.e_proj.weight"), (S{4096, 4096}));
  EXPECT_EQ(fp8_scale_shape(shape("mtp.0.h_proj.weight"), 128, 128), (S{32, 32}));
  EXPECT_EQ(shape("mtp.0.ffn.gate.bias"), (S{256}));
  EXPECT_EQ(shape("mtp.0.ffn.gate.tid2eid"), (S{-1}));
  EXPECT_EQ(shape("mtp.0.attn.compressor.wkv.weight"), (S{-1}));
  EXPECT_EQ(shape("mtp.0.hc_head_fn"), (S{4, 16384}));
  EXPECT_EQ(by_name.at("layers.7.ffn.experts.0.w2.weight")->role, TensorRole::kExpertLinear);
  EXPECT_EQ(by_name.at("layers.7.attn.wo_a.weight")->role, TensorRole::kLinear);
  EXPECT_EQ(by_name.at("layers.7.attn.compressor.wgate.weight")->role, TensorRole::kFloat);

  // Model card: 284B parameters (the MTP block comes on top).
  const auto report = inspect_config(*c);
  const int64_t main = report["parameters_from_config"]["main"];
  EXPECT_GT(main, 283'000'000'000);
  EXPECT_LT(main, 285'000'000'000);
}

}  // namespace
}  // namespace deepinfer::io
