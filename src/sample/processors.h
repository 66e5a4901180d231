// Logits processors: each edits one request's logits row (fp32, length = vocab) in place and
// marks a removed token by setting its logit to -inf, like vLLM's masked_fill. Keeping them
// as separate, pure row functions lets each be tested against a hand-computed example; the
// Sampler (sampler.h) runs them in vLLM v1's order (vllm/v1/sample/sampler.py):
//
//   token bitmask (structured output; vLLM applies it before the sampler)
//   -> min_tokens (mask EOS/stop ids) -> allowed_token_ids -> logit_bias
//   -> penalties (repetition, frequency, presence)
//   -> [greedy: argmax here, lowest id on ties]
//   -> temperature -> min_p -> top_k -> top_p -> draw (inverse CDF, sample_inverse_cdf)
//
// Note the order min_p -> top_k -> top_p: vLLM v1 runs min_p as an "argmax-invariant logits
// processor" right after temperature, before top-k/top-p (v0 ran it last). It matters only
// for top_p, whose mass is measured after min_p removed the tail.
//
// Ties are resolved by token id wherever an order is needed, so every function here is a
// deterministic function of its inputs (the same row always gives the same result).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <vector>

#include "base/status.h"
#include "sample/token_counts.h"

namespace deepinfer::sample {

// Structured output: `bitmask` packs one bit per token, bit (i % 32) of word i / 32 set =
// token i allowed (xgrammar's layout). Needs at least ceil(vocab / 32) words.
Status apply_token_bitmask(std::span<float> logits, std::span<const int32_t> bitmask);

// Sets the listed ids to -inf (min_tokens: EOS and stop ids before the minimum length).
// Ids outside the row are ignored (a stop id beyond a smaller test vocabulary is harmless).
void mask_tokens(std::span<float> logits, std::span<const int32_t> ids);

// allowed_token_ids: every token not listed set to -inf (repeats allowed), through a bitmask
// built in `words` and apply_token_bitmask. InvalidArgument (nothing changed) if an id does not
// fit the row.
Status apply_allowed_tokens(std::span<float> logits, std::span<const int32_t> ids,
                            std::vector<int32_t>& words);

// logit_bias: x += bias for each listed token (-inf stays -inf). InvalidArgument (nothing
// changed) if an id does not fit the row.
Status apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& bias);

// vLLM's penalties, in its order: repetition (tokens in prompt or output: x > 0 -> x / r,
// else x * r), then frequency (x -= f * output count), then presence (x -= p if the token
// occurs in the output). OutOfRange if a counted id does not fit the row.
Status apply_penalties(std::span<float> logits, const TokenCounts& counts, float repetition_penalty,
                       float presence_penalty, float frequency_penalty);

// x /= t, for t > 0.
void apply_temperature(std::span<float> logits, float temperature);

// Removes tokens with probability < min_p x (top probability), computed as
// x < max + log(min_p) so no exponentials are needed. min_p = 0 does nothing.
void apply_min_p(std::span<float> logits, float min_p);

// Keeps the tokens whose logit is >= the k-th largest logit (ties at the k-th value are all
// kept, as vLLM's sort-and-compare does). k <= 0 or k >= number of finite logits: no-op.
void apply_top_k(std::span<float> logits, int32_t k, std::vector<float>& scratch);

// Scratch buffers reused across calls so the hot path does not allocate.
struct TopPScratch {
  std::vector<float> weights;
  std::vector<int32_t> candidates;
  std::vector<double> histogram;
};

// Nucleus: order the finite tokens by (probability descending, id ascending); keep a token
// iff the probability mass strictly before it is < top_p. The top token is always kept.
// Probabilities are those of the finite entries (renormalised after earlier filters), as in
// vLLM. top_p >= 1 does nothing.
// The masses are counted in fixed point (top_p_mass): a token's weight w = exp(x - max) in
// [0, 1] counts as floor(w * 2^36), so the mass before a token is an exact integer, whatever
// order it is added in, and a GPU can find the cut by a radix select over the row instead of
// sorting it (kernels/cuda/sample/sample.cu). Against the real numbers the cut moves only where
// the mass before a token is within ~2e-6 of top_p x the total at V4's 129,280 ids.
void apply_top_p(std::span<float> logits, float top_p, TopPScratch& scratch);

// top_p's fixed-point masses (above; the GPU sampler mirrors both). 36 bits: rows of up to
// 2^28 ids cannot overflow the 64-bit total.
inline constexpr int kTopPMassBits = 36;
inline uint64_t top_p_mass(float w) {
  return static_cast<uint64_t>(w * static_cast<float>(uint64_t{1} << kTopPMassBits));
}
// ceil(top_p x total), the product in double: a token is kept iff the mass before it is below.
inline uint64_t top_p_threshold(float top_p, uint64_t total) {
  const double t = static_cast<double>(top_p) * static_cast<double>(total);
  const auto floor_t = static_cast<uint64_t>(t);
  return static_cast<double>(floor_t) < t ? floor_t + 1 : floor_t;
}

// Index of the largest logit, the lowest id among equals; -1 if no logit is finite-or-+inf
// (all -inf). NaN entries are never chosen.
int32_t argmax_lowest_id(std::span<const float> logits);

// Every probability mass is summed in one fixed association: ids in blocks of kMassBlock,
// each block summed in double in id order, the block sums added in block order. Fixed, so a
// result never depends on vector width or threads; blocked, so the serial dependency chain is
// vocab / 64 long instead of vocab, and a GPU block scan can reproduce it bit for bit.
inline constexpr size_t kMassBlock = 64;

// Sum of weight(i) for i in [0, n) in that association; block sums stored if asked. Four
// blocks run interleaved (four independent chains, each still in id order), so the values
// are those of one block at a time while the additions overlap in the pipeline.
template <typename WeightOf>
double blocked_sum(size_t n, WeightOf weight, std::vector<double>* block_sums = nullptr) {
  const size_t num_blocks = (n + kMassBlock - 1) / kMassBlock;
  if (block_sums != nullptr) block_sums->resize(num_blocks);
  double total = 0.0;
  size_t b = 0;
  for (; (b + 4) * kMassBlock <= n; b += 4) {
    const size_t i0 = b * kMassBlock;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    for (size_t j = 0; j < kMassBlock; ++j) {
      s0 += weight(i0 + j);
      s1 += weight(i0 + j + kMassBlock);
      s2 += weight(i0 + j + 2 * kMassBlock);
      s3 += weight(i0 + j + 3 * kMassBlock);
    }
    if (block_sums != nullptr) {
      (*block_sums)[b] = s0;
      (*block_sums)[b + 1] = s1;
      (*block_sums)[b + 2] = s2;
      (*block_sums)[b + 3] = s3;
    }
    total += s0;
    total += s1;
    total += s2;
    total += s3;
  }
  for (; b < num_blocks; ++b) {
    double sum = 0.0;
    const size_t end = (b + 1) * kMassBlock < n ? (b + 1) * kMassBlock : n;
    for (size_t i = b * kMassBlock; i < end; ++i) sum += weight(i);
    if (block_sums != nullptr) (*block_sums)[b] = sum;
    total += sum;
  }
  return total;
}

// blocked_sum over a vector of weights indexed by token id.
inline double blocked_mass(std::span<const float> w, std::vector<double>* block_sums = nullptr) {
  return blocked_sum(
      w.size(), [w](size_t i) { return static_cast<double>(w[i]); }, block_sums);
}

struct InverseCdfScratch {
  std::vector<int32_t> ids;
  std::vector<float> weights;
  std::vector<double> block_sums;
  std::vector<size_t> block_first;
};

// Draws one token from softmax(logits) over the finite entries by inverse CDF: weights
// w_i = exp_nonpositive(x_i - max); the token is the first id (ascending) whose cumulative
// mass, in the blocked association above, exceeds u x total. u in [0, 1). Returns -1 if no
// entry is finite. The order and the arithmetic are fixed, so the token is an exact function
// of (logits, u). Rows with few survivors take a sparse path with identical results.
int32_t sample_inverse_cdf(std::span<const float> logits, double u, InverseCdfScratch& scratch);

// Largest value of a row that holds no NaN; -inf when empty or all -inf. Reduces monotone
// integer keys of the float bit patterns, because an integer max reduction vectorises and a
// float one does not without -ffast-math. +0 ranks above -0 (they compare equal as floats).
inline float row_max(std::span<const float> row) {
  const auto key = [](int32_t b) { return b ^ ((b >> 31) & 0x7FFFFFFF); };  // an involution
  int32_t best = key(std::bit_cast<int32_t>(-std::numeric_limits<float>::infinity()));
  for (float x : row) {
    const int32_t k = key(std::bit_cast<int32_t>(x));
    best = k > best ? k : best;
  }
  return std::bit_cast<float>(key(best));
}

// exp(x) for x <= 0 (x may be -inf), the probability weight of a logit relative to the row's
// maximum. Our own polynomial (Cody-Waite reduction, the Cephes expf minimax polynomial,
// relative error ~1e-7) rather than std::exp, for two reasons: it is written branch-free so
// weight passes over a 129k vocabulary vectorise, and its result does not depend on the C
// library's version, so a seed reproduces the same token on any machine. Exactly 1 at 0;
// 0 below -87 (float underflow) and at -inf.
inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 split so n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float xc = x < -87.0f ? -87.0f : x;
  const float n = (xc * kLog2e + kRound) - kRound;
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  // 2^n by building the float's exponent field; n >= -126 after the clamp, so it is normal.
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) * (1 << 23));
  return x < -87.0f ? 0.0f : y * scale;
}

}  // namespace deepinfer::sample
