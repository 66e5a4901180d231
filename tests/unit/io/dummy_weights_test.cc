// Load format "dummy" at the io level (io/dummy_weights.h, tensor/random_fill.h): a directory
// with config.json alone gives every tensor the config implies, in the layout a checkpoint
// ships, and the fills give finite values only (no NaN / Inf FP8, E8M0 or BF16 code), the same
// bits for the same seed, with the distributions they promise.
#include "io/dummy_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "config_only_dir.h"
#include "io/checkpoint.h"
#include "tensor/random_fill.h"

namespace deepinfer::io {
namespace {

namespace fs = std::filesystem;
using deepinfer::testing::ConfigOnlyDir;

std::string fixture(const std::string& model) {
  return std::string(DEEPINFER_TEST_SOURCE_DIR) + "/tests/data/model/" + model;
}

// A temporary directory holding only config.json (and tokenizer.json when asked) copied from
// a committed tiny checkpoint: no safetensors to read.
std::vector<uint8_t> fill_bytes(const TensorView& layout, const RandomFill& f) {
  EXPECT_EQ(f.elem_bytes, dtype_size(layout.dtype));
  std::vector<uint8_t> b(static_cast<size_t>(layout.nbytes()));
  fill_random_host(b.data(), layout.numel(), f);
  return b;
}

// "" when every element of `bytes` (dtype `t`) is a finite value, else what is not.
std::string non_finite(DType t, const std::vector<uint8_t>& bytes) {
  for (size_t i = 0; i < bytes.size(); i += static_cast<size_t>(dtype_size(t))) {
    switch (t) {
      case DType::kF8E4M3:  // S.1111.111 is NaN; this format has no Inf
        if ((bytes[i] & 0x7f) == 0x7f) return "FP8 NaN code at byte " + std::to_string(i);
        break;
      case DType::kF8E8M0:  // 0xff is NaN
        if (bytes[i] == 0xff) return "E8M0 NaN code at byte " + std::to_string(i);
        break;
      case DType::kBF16: {
        uint16_t v;
        std::memcpy(&v, &bytes[i], 2);
        if ((v & 0x7f80) == 0x7f80) return "BF16 NaN/Inf at byte " + std::to_string(i);
        break;
      }
      case DType::kF32: {
        float v;
        std::memcpy(&v, &bytes[i], 4);
        if (!std::isfinite(v)) return "F32 NaN/Inf at byte " + std::to_string(i);
        break;
      }
      default:  // I8 (packed FP4 E2M1: all 16 codes finite), I64 ids: checked elsewhere
        break;
    }
  }
  return "";
}

TEST(DummyCheckpoint, EveryTensorTheConfigImpliesInTheShippedLayout) {
  for (const std::string model :
       {"v4_tiny_a/official_quant", "v4_tiny_a/official_fp32", "v41_tiny_a/official_quant"}) {
    SCOPED_TRACE(model);
    const ConfigOnlyDir dir(fixture(model));
    auto ck = Checkpoint::open(dir.path(), LoadOptions{LoadFormat::kDummy, 0});
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    const ModelConfig& c = ck->config();
    EXPECT_FALSE(ck->mtp_available());
    size_t bound = 0;
    for (const ExpectedTensor& t : ck->expected()) {
      const Weight* w = ck->find(t.name);
      if (t.mtp || t.optional) {
        EXPECT_EQ(w, nullptr) << t.name;
        continue;
      }
      ASSERT_NE(w, nullptr) << t.name;
      ++bound;
      EXPECT_TRUE(w->generated()) << t.name;
      EXPECT_EQ(w->data.data, nullptr) << t.name;
      EXPECT_EQ(w->logical_shape, t.shape) << t.name;
      const bool linear = t.role == TensorRole::kLinear || t.role == TensorRole::kExpertLinear;
      if (!c.quantization.quantized || !linear) {
        if (t.role != TensorRole::kEngramTable) {
          EXPECT_EQ(w->format, WeightFormat::kPlain) << t.name;
        }
        continue;
      }
      if (t.role == TensorRole::kExpertLinear &&
          c.quantization.expert_format == ExpertFormat::kFp4) {
        EXPECT_EQ(w->format, WeightFormat::kFp4Block) << t.name;
        EXPECT_EQ(w->data.dtype, DType::kI8);
        EXPECT_EQ(w->data.shape, fp4_packed_shape(t.shape));
        EXPECT_EQ(w->scale->shape, fp4_scale_shape(t.shape, c.quantization.expert_block_size));
      } else {
        const auto& bs = c.quantization.weight_block_size;
        EXPECT_EQ(w->format, WeightFormat::kFp8Block) << t.name;
        EXPECT_EQ(w->data.dtype, DType::kF8E4M3);
        EXPECT_EQ(w->scale->shape, fp8_scale_shape(t.shape, bs[0], bs[1]));
      }
      EXPECT_EQ(w->scale->dtype, DType::kF8E8M0);
    }
    EXPECT_GT(bound, 0u);
    // What DeepSeek ships F32 stays F32 (the mHC fn is read as FP32 by the ops).
    const Weight* fn = ck->find("layers.0.hc_attn_fn");
    ASSERT_NE(fn, nullptr);
    EXPECT_EQ(fn->data.dtype, DType::kF32);
    EXPECT_EQ(ck->find("layers.0.attn_norm.weight")->data.dtype, DType::kBF16);
  }
}

TEST(DummyCheckpoint, FillsGiveOnlyFiniteCodes) {
  for (const std::string model : {"v4_tiny_a/official_quant", "v4_tiny_a/official_fp32",
                                  "v41_tiny_a/official_quant", "v41_tiny_a/official_bf16"}) {
    SCOPED_TRACE(model);
    const ConfigOnlyDir dir(fixture(model));
    auto ck = Checkpoint::dummy(dir.path(), 3);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    for (const ExpectedTensor& t : ck->expected()) {
      const Weight* w = ck->find(t.name);
      if (w == nullptr) continue;
      const std::vector<uint8_t> data = fill_bytes(w->data, *w->data_fill);
      EXPECT_EQ(non_finite(w->data.dtype, data), "") << t.name;
      if (w->data.dtype == DType::kF8E4M3) {  // exponents 6..8: |x| in [0.5, 3.75]
        for (uint8_t b : data) {
          const int e = (b >> 3) & 0xf;
          ASSERT_TRUE(e >= 6 && e <= 8) << t.name << " code " << int(b);
        }
      }
      if (w->scale) {
        ASSERT_TRUE(w->scale_fill.has_value()) << t.name;
        EXPECT_EQ(non_finite(w->scale->dtype, fill_bytes(*w->scale, *w->scale_fill)), "") << t.name;
      }
      if (t.role == TensorRole::kIndexTable) {  // k distinct experts per token, in range
        ASSERT_EQ(w->data.dtype, DType::kI64);
        const int64_t k = t.shape[1];
        const auto* ids = reinterpret_cast<const int64_t*>(data.data());
        for (int64_t r = 0; r < t.shape[0]; ++r) {
          std::set<int64_t> row(ids + r * k, ids + (r + 1) * k);
          EXPECT_EQ(static_cast<int64_t>(row.size()), k) << t.name << " row " << r;
          EXPECT_GE(*row.begin(), 0);
          EXPECT_LT(*row.rbegin(), ck->config().n_routed_experts);
        }
      }
    }
  }
}

TEST(DummyCheckpoint, ScalesFollowTheInputWidth) {
  const ConfigOnlyDir dir(fixture("v4_tiny_a/official_quant"));
  auto ck = Checkpoint::dummy(dir.path(), 0);
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  // FP8 wq_b [320, 32]: 2^-round(log2 sqrt 32) = 2^-2 (ties to even, as make_synthetic_v4.py).
  const Weight* wq_b = ck->find("layers.0.attn.wq_b.weight");
  ASSERT_NE(wq_b, nullptr);
  EXPECT_EQ(wq_b->scale_fill->constant, 127u - 2u);
  // FP4 expert w1 [32, 64]: 2^-round(log2(3 sqrt 64)) = 2^-5.
  const Weight* w1 = ck->find("layers.0.ffn.experts.0.w1.weight");
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w1->scale_fill->constant, 127u - 5u);
}

TEST(DummyCheckpoint, SameSeedSameBitsOtherSeedOtherBits) {
  const ConfigOnlyDir dir(fixture("v4_tiny_a/official_quant"));
  auto a = Checkpoint::dummy(dir.path(), 1);
  auto b = Checkpoint::dummy(dir.path(), 1);
  auto c = Checkpoint::dummy(dir.path(), 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (const std::string name :
       {"embed.weight", "layers.1.attn.wq_a.weight", "layers.0.ffn.experts.2.w3.weight",
        "layers.0.ffn.gate.tid2eid", "layers.2.hc_ffn_fn"}) {
    SCOPED_TRACE(name);
    const Weight *wa = a->find(name), *wb = b->find(name), *wc = c->find(name);
    ASSERT_TRUE(wa && wb && wc);
    EXPECT_EQ(fill_bytes(wa->data, *wa->data_fill), fill_bytes(wb->data, *wb->data_fill));
    EXPECT_NE(fill_bytes(wa->data, *wa->data_fill), fill_bytes(wc->data, *wc->data_fill));
  }
  // Two tensors of the same shape under one seed differ too (the tensor index is in the key).
  const Weight* w1 = a->find("layers.0.ffn.experts.0.w1.weight");
  const Weight* w3 = a->find("layers.0.ffn.experts.0.w3.weight");
  EXPECT_NE(fill_bytes(w1->data, *w1->data_fill), fill_bytes(w3->data, *w3->data_fill));
}

TEST(RandomFill, NormalHasItsMeanAndStd) {
  constexpr int64_t kN = 1 << 16;
  for (DType t : {DType::kF32, DType::kBF16}) {
    const RandomFill f = normal_fill(random_fill_key(5, 9, 0), t, 1.0f, 0.1f);
    std::vector<uint8_t> b(static_cast<size_t>(kN * dtype_size(t)));
    fill_random_host(b.data(), kN, f);
    double sum = 0, sq = 0, lo = 1e9, hi = -1e9;
    for (int64_t i = 0; i < kN; ++i) {
      float v;
      if (t == DType::kF32) {
        std::memcpy(&v, &b[static_cast<size_t>(i) * 4], 4);
      } else {
        uint32_t u = 0;
        std::memcpy(&u, &b[static_cast<size_t>(i) * 2], 2);
        u <<= 16;
        std::memcpy(&v, &u, 4);
      }
      sum += v;
      sq += static_cast<double>(v) * v;
      lo = std::min<double>(lo, v);
      hi = std::max<double>(hi, v);
    }
    const double mean = sum / kN, sd = std::sqrt(sq / kN - mean * mean);
    EXPECT_NEAR(mean, 1.0, 0.002) << dtype_name(t);
    EXPECT_NEAR(sd, 0.1, 0.002) << dtype_name(t);
    // Four-uniform sum: bounded at sqrt(12) / 2 = 3.46 standard deviations.
    EXPECT_GE(lo, 1.0 - 0.36);
    EXPECT_LE(hi, 1.0 + 0.36);
  }
}

TEST(LoadFormat, ParsesTheTwoNamesAndNamesTheOptionOtherwise) {
  EXPECT_EQ(*parse_load_format("auto", "EngineOptions.load_format"), LoadFormat::kAuto);
  EXPECT_EQ(*parse_load_format("dummy", "EngineOptions.load_format"), LoadFormat::kDummy);
  auto bad = parse_load_format("random", "EngineOptions.load_format");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  const std::string m = bad.status().message();
  EXPECT_NE(m.find("EngineOptions.load_format is 'random'"), std::string::npos) << m;
  EXPECT_NE(m.find("'auto'"), std::string::npos) << m;
  EXPECT_NE(m.find("'dummy'"), std::string::npos) << m;
}

TEST(LoadFormat, DummyWithoutConfigJsonSaysWhatItNeeds) {
  const fs::path empty =
      fs::temp_directory_path() / ("deepinfer_dummy_empty_" + std::to_string(::getpid()));
  fs::create_directories(empty);
  auto ck = Checkpoint::dummy(empty.string(), 0);
  fs::remove_all(empty);
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kNotFound);
  EXPECT_NE(ck.status().message().find("config.json"), std::string::npos);
  EXPECT_NE(ck.status().message().find("dummy"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::io
