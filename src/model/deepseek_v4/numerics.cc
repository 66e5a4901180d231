// Model-side numeric helpers (see numerics.h).
#include "model/deepseek_v4/numerics.h"

#include <cmath>

#include "backend/quant.h"
#include "base/check.h"

namespace deepinfer::model::deepseek_v4 {

Numerics Numerics::from_config(const io::ModelConfig& c) {
  Numerics n;
  n.official = c.quantization.quantized;
  n.act_block = c.quantization.weight_block_size[1];
  n.eps = static_cast<float>(c.rms_norm_eps);
  return n;
}

void head_rms_norm(backend::Ops& ops, const Numerics& num, backend::Mat q, int64_t d) {
  if (!num.official) {
    ops.rms_norm(q, nullptr, num.eps, d, q);
    return;
  }
  using backend::bf16_round;
  for (int64_t m = 0; m < q.rows; ++m) {
    for (int64_t c0 = 0; c0 < q.cols; c0 += d) {
      float* x = q.row(m) + c0;
      float ss = 0.0f;
      for (int64_t c = 0; c < d; ++c) ss += bf16_round(x[c] * x[c]);
      const float ms = bf16_round(ss / static_cast<float>(d));
      const float r = bf16_round(1.0f / std::sqrt(bf16_round(ms + num.eps)));
      for (int64_t c = 0; c < d; ++c) x[c] = bf16_round(x[c] * r);
    }
  }
}

void hadamard(backend::Ops& ops, backend::Mat x, int64_t n) {
  DI_CHECK(n > 0 && (n & (n - 1)) == 0 && x.cols % n == 0);
  if (n == 128) {
    ops.hadamard128(x);
    return;
  }
  const float s = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t m = 0; m < x.rows; ++m) {
    for (int64_t c0 = 0; c0 < x.cols; c0 += n) {
      float* v = x.row(m) + c0;
      for (int64_t h = 1; h < n; h *= 2) {  // butterflies give Sylvester order
        for (int64_t i = 0; i < n; i += 2 * h) {
          for (int64_t j = i; j < i + h; ++j) {
            const float a = v[j], b = v[j + h];
            v[j] = a + b;
            v[j + h] = a - b;
          }
        }
      }
      for (int64_t i = 0; i < n; ++i) v[i] *= s;
    }
  }
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

RopeTables RopeTables::from_config(const io::ModelConfig& c) {
  return {freqs_for(c.main_rope, c.rope_head_dim), freqs_for(c.compress_rope, c.rope_head_dim)};
}

}  // namespace deepinfer::model::deepseek_v4
