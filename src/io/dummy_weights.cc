// Dummy weights (see dummy_weights.h): the layout and the value distribution of every tensor, in
// one place, and Checkpoint::dummy over them.
#include "io/dummy_weights.h"

#include <cmath>
#include <string>
#include <string_view>

namespace deepinfer::io {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

struct Normal {
  DType dtype;
  float mean, std;
};

// The values of a float tensor, by what it is. The aim (as make_synthetic_v4.py's) is a stack
// whose activations stay O(1) through any number of layers, so that a timed run does the work a
// trained model does: no NaN, no overflow, no routing collapse onto one expert.
Normal float_values(const ExpectedTensor& t) {
  const std::string_view n = t.name;
  // mHC parameters (F32 as shipped): fn small, so the pre/post/comb mixes start near their
  // base and the Sinkhorn iterations see well-conditioned inputs; scale near 1.
  if (ends_with(n, "_fn")) return {DType::kF32, 0.0f, 0.02f};
  if (ends_with(n, "_base")) return {DType::kF32, 0.0f, 0.1f};
  if (ends_with(n, "_scale")) return {DType::kF32, 1.0f, 0.1f};
  // Attention sinks: logits of order one beside the scores' own.
  if (ends_with(n, "attn_sink")) return {DType::kF32, 0.0f, 0.5f};
  // Compressor position biases and router biases: small offsets that leave every expert and
  // every window position reachable.
  if (ends_with(n, ".ape") || ends_with(n, ".bias") || ends_with(n, ".bias_vl")) {
    return {DType::kF32, 0.0f, 0.1f};
  }
  // DSpark's confidence head (F32 as shipped; never bound here: no drafter in a dummy model).
  if (ends_with(n, "confidence_head.proj.weight")) return {DType::kF32, 0.0f, 0.1f};
  // RMSNorm weights, Engram's RMS weights included: 1 +- 0.1, a norm that nearly keeps scale.
  if (ends_with(n, "norm.weight") || ends_with(n, "q_weight") || ends_with(n, "k_weight")) {
    return {DType::kBF16, 1.0f, 0.1f};
  }
  // Embedding rows of unit scale (the first RMSNorm sees O(1) inputs).
  if (n == "embed.weight" || ends_with(n, "markov_head.embed.weight")) {
    return {DType::kBF16, 0.0f, 1.0f};
  }
  // Everything else multiplies an activation (head, router gate, compressor and indexer
  // projections, unquantized linears): N(0, 1/in) entries keep an O(1) input's output O(1).
  const double in = static_cast<double>(t.shape.empty() ? 1 : t.shape.back());
  return {DType::kBF16, 0.0f, static_cast<float>(1.0 / std::sqrt(in))};
}

// E8M0 code of 2^e (bias 127). e = -round(log2(x)) with ties to even, as Python's round() in
// make_synthetic_v4.py.
uint64_t e8m0_of_inverse(double x) {
  return static_cast<uint64_t>(127 - static_cast<int>(std::nearbyint(std::log2(x))));
}

// FP8 codes near 1 (|x| in [0.5, 3.75]) times one block scale 2^-round(log2 sqrt(in)): an
// in-wide dot product of O(1) inputs stays O(1).
void fp8_block(Weight& w, const ExpectedTensor& t, int bo, int bi, uint64_t key) {
  w.data = TensorView::make(DType::kF8E4M3, t.shape, nullptr);
  w.data_fill = fp8_near_one_fill(key);
  w.scale = TensorView::make(DType::kF8E8M0, fp8_scale_shape(t.shape, bo, bi), nullptr);
  w.scale_fill =
      constant_fill(DType::kF8E8M0, e8m0_of_inverse(std::sqrt(static_cast<double>(t.shape[1]))));
  w.format = WeightFormat::kFp8Block;
  w.block_out = bo;
  w.block_in = bi;
}

}  // namespace

Expected<Weight> dummy_weight(const ExpectedTensor& t, int64_t index, const ModelConfig& c,
                              uint64_t seed) {
  const QuantizationSpec& q = c.quantization;
  const uint64_t key = random_fill_key(seed, static_cast<uint64_t>(index), 0);
  Weight w;
  w.logical_shape = t.shape;
  w.stored_name = t.name;
  const bool linear = t.role == TensorRole::kLinear || t.role == TensorRole::kExpertLinear;
  if (t.role == TensorRole::kIndexTable) {
    // tid2eid [V, k]: each token's k distinct experts out of the layer's E (I64 as shipped).
    w.data = TensorView::make(DType::kI64, t.shape, nullptr);
    w.data_fill = distinct_ids_fill(key, DType::kI64, c.n_routed_experts, t.shape[1]);
  } else if (t.role == TensorRole::kEngramTable && q.quantized) {
    // FP8 rows near 1 with unit E8M0 scales per 32 values (make_synthetic_v41.py): looked-up
    // rows of O(1), as the projection after them expects.
    if (t.shape[1] % kEngramScaleBlock != 0) {
      return invalid_argument("load format dummy: tensor '" + t.name + "' row width " +
                              std::to_string(t.shape[1]) + " is not a multiple of " +
                              std::to_string(kEngramScaleBlock) + " (its FP8 scale block)");
    }
    w.data = TensorView::make(DType::kF8E4M3, t.shape, nullptr);
    w.data_fill = fp8_near_one_fill(key);
    w.scale =
        TensorView::make(DType::kF8E8M0, {t.shape[0], t.shape[1] / kEngramScaleBlock}, nullptr);
    w.scale_fill = constant_fill(DType::kF8E8M0, 127);
    w.format = WeightFormat::kFp8Block;
    w.block_in = kEngramScaleBlock;
  } else if (t.role == TensorRole::kEngramTable) {
    w.data = TensorView::make(DType::kBF16, t.shape, nullptr);
    w.data_fill = normal_fill(key, DType::kBF16, 0.0f, 1.0f);
  } else if (t.role == TensorRole::kExpertLinear && q.quantized &&
             q.expert_format == ExpertFormat::kFp4) {
    // Uniform bytes: every E2M1 code is finite (|x| <= 6, mean |x| ~ 2.2), so one scale of
    // 2^-round(log2(3 sqrt(in))) keeps the expert's outputs O(1).
    const int block = q.expert_block_size;
    if (t.shape[1] % block != 0 || t.shape[1] % 2 != 0) {
      return invalid_argument("load format dummy: routed expert '" + t.name + "' input width " +
                              std::to_string(t.shape[1]) +
                              " is not a multiple of the FP4 scale block " + std::to_string(block) +
                              " (quantization_config.expert_block_size)");
    }
    w.data = TensorView::make(DType::kI8, fp4_packed_shape(t.shape), nullptr);
    w.data_fill = byte_fill(key);
    w.scale = TensorView::make(DType::kF8E8M0, fp4_scale_shape(t.shape, block), nullptr);
    w.scale_fill = constant_fill(DType::kF8E8M0,
                                 e8m0_of_inverse(3.0 * std::sqrt(static_cast<double>(t.shape[1]))));
    w.format = WeightFormat::kFp4Block;
    w.block_in = block;
  } else if (linear && q.quantized) {
    fp8_block(w, t, q.weight_block_size[0], q.weight_block_size[1], key);
  } else {
    const Normal v = float_values(t);
    w.data = TensorView::make(v.dtype, t.shape, nullptr);
    w.data_fill = normal_fill(key, v.dtype, v.mean, v.std);
  }
  return w;
}

Expected<Checkpoint> Checkpoint::dummy(const std::string& model_dir, uint64_t seed) {
  Checkpoint ck;
  ck.model_dir_ = model_dir;
  auto config = load_model_config(model_dir);
  if (!config.ok()) {
    return config.status().with_context("load format dummy (it needs config.json only)");
  }
  ck.config_ = std::move(config).value();
  ck.expected_ = expected_tensors(ck.config_);
  for (size_t i = 0; i < ck.expected_.size(); ++i) {
    const ExpectedTensor& t = ck.expected_[i];
    // No drafter (random drafts would never be accepted), and nothing optional (bias_vl is
    // unused by the text path); a tied head is the embedding, below.
    if (t.mtp || t.optional || (t.name == "head.weight" && ck.config_.tie_word_embeddings)) {
      continue;
    }
    DI_ASSIGN_OR_RETURN(Weight w, dummy_weight(t, static_cast<int64_t>(i), ck.config_, seed));
    ck.weights_.emplace(t.name, std::move(w));
  }
  if (ck.config_.tie_word_embeddings) ck.weights_["head.weight"] = ck.weights_.at("embed.weight");
  return ck;
}

}  // namespace deepinfer::io
