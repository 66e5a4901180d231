// The tiny reference checkpoints committed under tests/data/model (written by
// tests/reference/model/make_goldens.py with torch + HF transformers' own save_pretrained, and an
// independent official-name writer/quantizer): every variant must load, the HF and official
// spellings of one model must give the same config and the same bytes per canonical tensor, and
// the FP8 (32x32 tiles) / FP4 (1x32) weights must dequantize to the FP32 ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "base/numeric_types.h"
#include "derived_checkpoint.h"
#include "io/checkpoint.h"

namespace deepinfer::io {
namespace {

std::string model_dir(const std::string& name, const std::string& variant) {
  const char* d = std::getenv("DEEPINFER_SOURCE_DIR");
  return deepinfer::testing::checkpoint_dir(std::string(d != nullptr ? d : DEEPINFER_TEST_SOURCE_DIR) +
                                            "/tests/data/model/" + name + "/" + variant);
}

float element(const Weight& w, int64_t i) {
  switch (w.data.dtype) {
    case DType::kF32:
      return w.data.ptr<float>()[i];
    case DType::kBF16:
      return bf16_to_float(w.data.ptr<uint16_t>()[i]);
    default:
      ADD_FAILURE() << "not a float weight: " << w.stored_name;
      return 0;
  }
}

float scale_at(const Weight& w, int64_t r, int64_t c) {
  const TensorView& s = *w.scale;
  const int64_t idx = (r / w.block_out) * s.shape[1] + c / w.block_in;
  return s.dtype == DType::kF32 ? s.ptr<float>()[idx] : e8m0_to_float(s.ptr<uint8_t>()[idx]);
}

// Dequantized element (r, c) of an FP8 or FP4 weight.
float dequant(const Weight& w, int64_t r, int64_t c) {
  const int64_t in = w.logical_shape[1];
  if (w.format == WeightFormat::kFp8Block) {
    return fp8_e4m3_to_float(w.data.ptr<uint8_t>()[r * in + c]) * scale_at(w, r, c);
  }
  return fp4_packed_at(w.data.ptr<uint8_t>() + r * (in / 2), c) * scale_at(w, r, c);
}

class CommittedFixtures : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(model_dir(GetParam(), "hf_fp32"))) {
      GTEST_SKIP() << "no committed fixture " << GetParam();
    }
  }
};

TEST_P(CommittedFixtures, AllVariantsLoadAndAgree) {
  auto hf = Checkpoint::open(model_dir(GetParam(), "hf_fp32"));
  auto hf_bf16 = Checkpoint::open(model_dir(GetParam(), "hf_bf16"));
  auto off = Checkpoint::open(model_dir(GetParam(), "official_fp32"));
  auto quant = Checkpoint::open(model_dir(GetParam(), "official_quant"));
  ASSERT_TRUE(hf.ok()) << hf.status().message();
  ASSERT_TRUE(hf_bf16.ok()) << hf_bf16.status().message();
  ASSERT_TRUE(off.ok()) << off.status().message();
  ASSERT_TRUE(quant.ok()) << quant.status().message();
  EXPECT_EQ(hf->name_family(), NameFamily::kSavePretrained);
  EXPECT_EQ(off->name_family(), NameFamily::kOfficial);
  EXPECT_EQ(hf->config().naming, ConfigNaming::kHuggingFace);
  EXPECT_EQ(off->config().naming, ConfigNaming::kOfficial);
  EXPECT_TRUE(hf->config().same_model(off->config()));
  EXPECT_FALSE(hf->mtp_available());
  EXPECT_TRUE(hf->unknown_tensors().empty());
  EXPECT_TRUE(off->unknown_tensors().empty());
  EXPECT_TRUE(quant->unknown_tensors().empty());
  EXPECT_EQ(quant->config().quantization.weight_block_size, (std::array<int, 2>{32, 32}));

  int compared = 0, dequantized = 0;
  for (const auto& t : off->expected()) {
    const Weight* a = hf->find(t.name);
    const Weight* b = off->find(t.name);
    if (a == nullptr || b == nullptr) continue;  // MTP: official names only
    ASSERT_EQ(a->data.dtype, b->data.dtype) << t.name;
    ASSERT_EQ(a->data.nbytes(), b->data.nbytes()) << t.name;
    EXPECT_EQ(std::memcmp(a->data.data, b->data.data, static_cast<size_t>(a->data.nbytes())), 0)
        << t.name << " differs between " << a->stored_name << " and " << b->stored_name;
    ++compared;

    // BF16 save of the same weights rounds them (F32 ones stay exact).
    const Weight* h = hf_bf16->find(t.name);
    ASSERT_NE(h, nullptr) << t.name;
    if (b->data.dtype == DType::kF32 && h->data.numel() > 0) {
      const float ref = element(*b, 0);
      EXPECT_NEAR(element(*h, 0), ref, std::fabs(ref) / 128 + 1e-30) << t.name;
    }
  }
  EXPECT_GT(compared, 100);

  for (const auto& t : quant->expected()) {
    const Weight* q = quant->find(t.name);
    const Weight* ref = off->find(t.name);
    if (q == nullptr || ref == nullptr || q->format == WeightFormat::kPlain) continue;
    const int64_t rows = q->logical_shape[0], cols = q->logical_shape[1];
    for (int64_t r = 0; r < rows; r += 7) {
      for (int64_t c = 0; c < cols; c += 5) {
        const float w = element(*ref, r * cols + c);
        const float s = scale_at(*q, r, c);
        // E4M3 keeps 3 mantissa bits (relative error <= 2^-4, plus the subnormal step);
        // E2M1 is at most one scale unit from the value (grid 0..6 with steps <= 2).
        const float tol =
            q->format == WeightFormat::kFp8Block ? std::fabs(w) / 16 + s * 0x1p-9f : s;
        ASSERT_NEAR(dequant(*q, r, c), w, tol) << t.name << " [" << r << ", " << c << "]";
        ++dequantized;
      }
    }
  }
  EXPECT_GT(dequantized, 1000);
}

INSTANTIATE_TEST_SUITE_P(Tiny, CommittedFixtures, ::testing::Values("v4_tiny_a", "v4_tiny_b"));

}  // namespace
}  // namespace deepinfer::io
