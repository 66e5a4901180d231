#include "fixture_writer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "base/numeric_types.h"
#include "io/expected_tensors.h"
#include "io/model_config.h"
#include "tensor/dtype.h"

namespace deepinfer::io::testing {

using nlohmann::json;
namespace fs = std::filesystem;

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  const fs::path p =
      fs::temp_directory_path() /
      ("deepinfer_io_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(p);
  fs::create_directories(p);
  path_ = p.string();
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

json tiny_config_hf(bool quantized) {
  json c = {
      {"architectures", {"DeepseekV4ForCausalLM"}},
      {"model_type", "deepseek_v4"},
      {"vocab_size", 512},
      {"hidden_size", 64},
      {"num_hidden_layers", 5},
      {"num_attention_heads", 4},
      {"num_key_value_heads", 1},
      {"head_dim", 64},
      {"partial_rotary_factor", 0.25},
      {"q_lora_rank", 32},
      {"o_groups", 2},
      {"o_lora_rank", 32},
      {"moe_intermediate_size", 32},
      {"n_routed_experts", 8},
      {"n_shared_experts", 1},
      {"num_experts_per_tok", 2},
      {"scoring_func", "sqrtsoftplus"},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", 1.5},
      {"swiglu_limit", 10.0},
      {"sliding_window", 8},
      {"layer_types",
       {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
        "compressed_sparse_attention", "heavily_compressed_attention"}},
      {"compress_rates", {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 8}}},
      {"mlp_layer_types", {"hash_moe", "hash_moe", "moe", "moe", "moe"}},
      {"rope_theta", 10000.0},
      {"compress_rope_theta", 160000.0},
      {"rope_parameters",
       {{"main",
         {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}}},
        {"compress",
         {{"rope_type", "yarn"},
          {"rope_theta", 160000.0},
          {"factor", 16.0},
          {"original_max_position_embeddings", 65536},
          {"beta_fast", 32.0},
          {"beta_slow", 1.0},
          {"attention_factor", 1.0},
          {"partial_rotary_factor", 0.25}}}}},
      {"index_n_heads", 4},
      {"index_head_dim", 32},
      {"index_topk", 4},
      {"hc_mult", 4},
      {"hc_sinkhorn_iters", 20},
      {"hc_eps", 1e-6},
      {"rms_norm_eps", 1e-6},
      {"max_position_embeddings", 1048576},
      {"num_nextn_predict_layers", 1},
      {"bos_token_id", 0},
      {"eos_token_id", 1},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
  };
  if (quantized) {
    c["quantization_config"] = {{"quant_method", "fp8"},
                                {"fmt", "e4m3"},
                                {"scale_fmt", "ue8m0"},
                                {"weight_block_size", {128, 128}}};
    c["expert_dtype"] = "fp4";
  }
  return c;
}

json tiny_config_official(bool quantized) {
  json c = {
      {"vocab_size", 512},
      {"dim", 64},
      {"moe_inter_dim", 32},
      {"n_layers", 5},
      {"n_hash_layers", 2},
      {"n_mtp_layers", 1},
      {"n_heads", 4},
      {"norm_eps", 1e-6},
      {"n_routed_experts", 8},
      {"n_shared_experts", 1},
      {"n_activated_experts", 2},
      {"score_func", "sqrtsoftplus"},
      {"route_scale", 1.5},
      {"swiglu_limit", 10.0},
      {"q_lora_rank", 32},
      {"head_dim", 64},
      {"rope_head_dim", 16},
      {"o_groups", 2},
      {"o_lora_rank", 32},
      {"window_size", 8},
      {"compress_ratios", {0, 4, 8, 4, 8, 0}},
      {"compress_rope_theta", 160000.0},
      {"original_seq_len", 65536},
      {"rope_theta", 10000.0},
      {"rope_factor", 16},
      {"beta_fast", 32},
      {"beta_slow", 1},
      {"index_n_heads", 4},
      {"index_head_dim", 32},
      {"index_topk", 4},
      {"hc_mult", 4},
      {"hc_sinkhorn_iters", 20},
      {"hc_eps", 1e-6},
      {"dtype", quantized ? "fp8" : "bf16"},
  };
  if (quantized) {
    c["scale_fmt"] = "ue8m0";
    c["expert_dtype"] = "fp4";
  }
  return c;
}

std::string stored(const std::string& canonical, NameFamily family) {
  return to_stored_name(canonical, family);
}

namespace {

constexpr float kFloatHead[] = {1.0f, -2.5f, 0.5f, 3.0f};
constexpr uint8_t kFp8Head[] = {0x38, 0xC0, 0x7E, 0x01};
constexpr uint8_t kFp4Head[] = {0x2F, 0x91};
constexpr uint8_t kScaleHead[] = {127, 128};

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

RawTensor float_tensor(const std::string& name, const std::string& dtype,
                       const std::vector<int64_t>& shape, int seed) {
  RawTensor t{name, dtype, shape, {}};
  const int64_t n = numel(shape);
  for (int64_t k = 0; k < n; ++k) {
    const float v =
        k < 4 ? kFloatHead[k] : static_cast<float>((k * 37 + seed * 11) % 17 - 8) / 16.0f;
    if (dtype == "F32") {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      for (int i = 0; i < 4; ++i) t.bytes.push_back(static_cast<uint8_t>(bits >> (8 * i)));
    } else {
      const uint16_t h = float_to_bf16(v);
      t.bytes.push_back(static_cast<uint8_t>(h & 0xff));
      t.bytes.push_back(static_cast<uint8_t>(h >> 8));
    }
  }
  return t;
}

RawTensor byte_tensor(const std::string& name, const std::string& dtype,
                      const std::vector<int64_t>& shape, const uint8_t* head, size_t head_len,
                      int seed) {
  RawTensor t{name, dtype, shape, {}};
  const int64_t n = numel(shape);
  for (int64_t k = 0; k < n; ++k) {
    uint8_t b;
    if (static_cast<size_t>(k) < head_len) {
      b = head[k];
    } else if (dtype == "F8_E8M0") {
      b = static_cast<uint8_t>(120 + (k + seed) % 8);
    } else {
      b = static_cast<uint8_t>((k * 29 + seed) % 256);
      if (dtype == "F8_E4M3" && (b & 0x7f) == 0x7f) b = 0;  // no NaNs
    }
    t.bytes.push_back(b);
  }
  return t;
}

RawTensor index_tensor(const std::string& name, const std::vector<int64_t>& shape,
                       int64_t n_experts) {
  RawTensor t{name, "I64", shape, {}};
  const int64_t n = numel(shape);
  for (int64_t k = 0; k < n; ++k) {
    const auto v = static_cast<uint64_t>(k % n_experts);
    for (int i = 0; i < 8; ++i) t.bytes.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  return t;
}

}  // namespace

void write_tiny_checkpoint(const std::string& dir, const TinyOptions& o) {
  fs::create_directories(dir);
  const json config =
      o.official_config ? tiny_config_official(o.quantized) : tiny_config_hf(o.quantized);
  write_text(dir + "/config.json", config.dump(2));
  auto parsed = parse_model_config(config.dump(), "tiny config");
  if (!parsed.ok()) throw std::runtime_error(parsed.status().message());

  std::vector<RawTensor> tensors;
  int seed = 0;
  auto name_of = [&](const std::string& canonical) { return to_stored_name(canonical, o.names); };
  for (const auto& t : expected_tensors(*parsed)) {
    if (t.mtp && !o.with_mtp) continue;
    ++seed;
    const std::string name = name_of(t.name);
    const bool dot_weight = t.name.size() > 7 && t.name.substr(t.name.size() - 7) == ".weight";
    switch (t.role) {
      case TensorRole::kFloat:
        tensors.push_back(float_tensor(name, dot_weight ? "BF16" : "F32", t.shape, seed));
        break;
      case TensorRole::kIndexTable:
        tensors.push_back(index_tensor(name, t.shape, parsed->n_routed_experts));
        break;
      case TensorRole::kEngramTable:  // V4 fixtures have none
        tensors.push_back(float_tensor(name, "BF16", t.shape, seed));
        break;
      case TensorRole::kLinear:
      case TensorRole::kExpertLinear: {
        const bool expert = t.role == TensorRole::kExpertLinear;
        if (!o.quantized) {
          tensors.push_back(float_tensor(name, "BF16", t.shape, seed));
        } else if (expert && !o.fp8_experts) {
          tensors.push_back(byte_tensor(name, "I8", fp4_packed_shape(t.shape), kFp4Head, 2, seed));
          tensors.push_back(byte_tensor(name_of(scale_name_for(t.name)), "F8_E8M0",
                                        fp4_scale_shape(t.shape, 32), kScaleHead, 2, seed));
        } else {
          tensors.push_back(byte_tensor(name, "F8_E4M3", t.shape, kFp8Head, 4, seed));
          tensors.push_back(byte_tensor(name_of(scale_name_for(t.name)), "F8_E8M0",
                                        fp8_scale_shape(t.shape, 128, 128), kScaleHead, 2, seed));
        }
        break;
      }
    }
  }

  if (o.mutate) o.mutate(tensors);
  if (o.layout == Layout::kSingle) {
    write_safetensors(dir + "/model.safetensors", tensors);
    return;
  }
  const int n = o.shards;
  std::vector<std::vector<RawTensor>> shards(static_cast<size_t>(n));
  json weight_map = json::object();
  for (size_t i = 0; i < tensors.size(); ++i) {
    // Keep a weight and its scale together (they are adjacent), like real shards do.
    const size_t shard = (i * static_cast<size_t>(n)) / tensors.size();
    shards[shard].push_back(tensors[i]);
  }
  for (int s = 0; s < n; ++s) {
    char file[64];
    std::snprintf(file, sizeof(file), "model-%05d-of-%05d.safetensors", s + 1, n);
    write_safetensors(dir + "/" + file, shards[static_cast<size_t>(s)]);
    for (const auto& t : shards[static_cast<size_t>(s)]) weight_map[t.name] = file;
  }
  if (o.layout == Layout::kIndexed) {
    write_text(dir + "/model.safetensors.index.json",
               json({{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}).dump(2));
  }
}

}  // namespace deepinfer::io::testing
