// Model-side numeric helpers (see numerics.h).
#include "model/layers/numerics.h"

#include <cmath>

#include "backend/quant.h"
#include "base/check.h"

namespace deepinfer::model {

Numerics Numerics::from_config(const io::ModelConfig& c) {
  Numerics n;
  n.official = c.quantization.quantized;
  n.act_block = c.quantization.weight_block_size[1];
  n.eps = static_cast<float>(c.rms_norm_eps);
  n.v41 = c.family == io::ModelFamily::kDeepseekV41;
  return n;
}

namespace {
std::vector<float> freqs_for(const io::RopeSpec& r, int rope_dim) {
  if (!r.yarn) return backend::make_rope_freqs(static_cast<float>(r.theta), rope_dim, nullptr);
  backend::YarnParams y;
  y.factor = static_cast<float>(r.factor);
  y.original_len = r.original_max_position;
  y.beta_fast = static_cast<float>(r.beta_fast);
  y.beta_slow = static_cast<float>(r.beta_slow);
  return backend::make_rope_freqs(static_cast<float>(r.theta), rope_dim, &y);
}
}  // namespace

RopeTables RopeTables::from_config(const io::ModelConfig& c, backend::Ops& ops) {
  const std::vector<float> main = freqs_for(c.main_rope, c.rope_head_dim);
  const std::vector<float> compress = freqs_for(c.compress_rope, c.rope_head_dim);
  RopeTables t;
  t.main_buf_ = backend::upload_floats(ops, main);
  t.compress_buf_ = backend::upload_floats(ops, compress);
  t.main = {t.main_buf_.as<const float>(), main.size()};
  t.compress = {t.compress_buf_.as<const float>(), compress.size()};
  return t;
}

}  // namespace deepinfer::model
