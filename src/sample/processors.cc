// Logits processors (see processors.h for the order and the tie rules).
//
// Invariant the callers keep: rows hold finite values or -inf, never NaN or +inf (the
// Sampler rejects such input). Processors that could overflow (penalties, temperature)
// clamp to the largest float so the invariant survives extreme but valid parameters.
#include "sample/processors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace deepinfer::sample {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kMaxFloat = std::numeric_limits<float>::max();

float clamp_overflow(float x) { return x > kMaxFloat ? kMaxFloat : x; }

// Largest finite logit; -inf when none (rows hold no NaN or +inf).
float finite_max(std::span<const float> logits) { return row_max(logits); }

// Histogram bucket of a weight in [0, 1]: the float's exponent and top 4 mantissa bits, so
// bucket order is value order (positive floats compare like their bit patterns).
constexpr int kTopPBuckets = 2048;  // bit_cast(1.0f) >> 19 == 2032 is the largest bucket
inline int weight_bucket(float w) { return static_cast<int>(std::bit_cast<uint32_t>(w) >> 19); }

// Up to this k, top-k selects with a heap in one pass instead of copying the row.
constexpr int32_t kSmallTopK = 256;

}  // namespace

Status apply_token_bitmask(std::span<float> logits, std::span<const int32_t> bitmask) {
  const size_t needed = (logits.size() + 31) / 32;
  if (bitmask.size() < needed) {
    return invalid_argument("token bitmask has " + std::to_string(bitmask.size()) +
                            " 32-bit words but the vocabulary of " + std::to_string(logits.size()) +
                            " tokens needs " + std::to_string(needed));
  }
  for (size_t w = 0; w < needed; ++w) {
    const uint32_t word = static_cast<uint32_t>(bitmask[w]);
    if (word == 0xFFFFFFFFu) continue;
    const size_t end = std::min(logits.size(), (w + 1) * 32);
    for (size_t i = w * 32; i < end; ++i) {
      if (((word >> (i & 31)) & 1u) == 0) logits[i] = kNegInf;
    }
  }
  return Status::ok_status();
}

void mask_tokens(std::span<float> logits, std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] = kNegInf;
  }
}

namespace {
Status outside_row(const char* what, int32_t token, size_t vocab) {
  return invalid_argument(std::string(what) + " names token " + std::to_string(token) +
                          ", outside the vocabulary of " + std::to_string(vocab));
}
bool in_row(int32_t token, size_t vocab) {
  return token >= 0 && static_cast<size_t>(token) < vocab;
}
}  // namespace

Status apply_allowed_tokens(std::span<float> logits, std::span<const int32_t> ids,
                            std::vector<int32_t>& words) {
  words.assign((logits.size() + 31) / 32, 0);
  for (const int32_t id : ids) {
    if (!in_row(id, logits.size())) return outside_row("allowed_token_ids", id, logits.size());
    words[static_cast<size_t>(id) / 32] |= static_cast<int32_t>(1u << (id % 32));
  }
  return apply_token_bitmask(logits, words);
}

Status apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& bias) {
  // Checked whole first, so a bad id changes nothing (std::map: the largest id is last).
  if (!bias.empty() && !in_row(bias.begin()->first, logits.size())) {
    return outside_row("logit_bias", bias.begin()->first, logits.size());
  }
  if (!bias.empty() && !in_row(bias.rbegin()->first, logits.size())) {
    return outside_row("logit_bias", bias.rbegin()->first, logits.size());
  }
  for (const auto& [token, b] : bias) logits[static_cast<size_t>(token)] += b;
  return {};
}

Status apply_penalties(std::span<float> logits, const TokenCounts& counts, float repetition_penalty,
                       float presence_penalty, float frequency_penalty) {
  for (const TokenCounts::Entry& e : counts.entries()) {
    if (e.token < 0 || static_cast<size_t>(e.token) >= logits.size()) {
      return out_of_range("token id " + std::to_string(e.token) +
                          " in the request's history is outside the vocabulary of " +
                          std::to_string(logits.size()) + " tokens");
    }
    float x = logits[e.token];
    if (repetition_penalty != 1.0f && (e.in_prompt || e.output_count > 0)) {
      x = x > 0.0f ? x / repetition_penalty : x * repetition_penalty;
    }
    if (e.output_count > 0) {
      x -= frequency_penalty * static_cast<float>(e.output_count);
      x -= presence_penalty;
    }
    logits[e.token] = clamp_overflow(x);
  }
  return Status::ok_status();
}

void apply_temperature(std::span<float> logits, float temperature) {
  if (temperature == 1.0f) return;
  for (float& x : logits) x = clamp_overflow(x / temperature);
}

void apply_min_p(std::span<float> logits, float min_p) {
  if (!(min_p > 0.0f)) return;
  const float m = finite_max(logits);
  if (m == kNegInf) return;
  // p_i >= min_p * p_max  <=>  x_i - max >= log(min_p); in double so the edge is sharp.
  const double cut = static_cast<double>(m) + std::log(static_cast<double>(min_p));
  for (float& x : logits) {
    if (static_cast<double>(x) < cut) x = kNegInf;
  }
}

void apply_top_k(std::span<float> logits, int32_t k, std::vector<float>& scratch) {
  if (k <= 0) return;
  size_t num_finite = 0;
  for (float x : logits) num_finite += x != kNegInf ? 1 : 0;
  if (num_finite <= static_cast<size_t>(k)) return;
  // The k-th largest value. Small k (the usual case): one pass keeping a min-heap of the k
  // largest, where almost every entry is rejected by one compare with the heap's top.
  // Large k: copy and nth_element.
  float kth = 0.0f;
  scratch.clear();
  const auto greater = std::greater<float>();
  if (k <= kSmallTopK) {
    for (float x : logits) {
      if (x == kNegInf) continue;
      if (scratch.size() < static_cast<size_t>(k)) {
        scratch.push_back(x);
        std::push_heap(scratch.begin(), scratch.end(), greater);
      } else if (x > scratch.front()) {
        std::pop_heap(scratch.begin(), scratch.end(), greater);
        scratch.back() = x;
        std::push_heap(scratch.begin(), scratch.end(), greater);
      }
    }
    kth = scratch.front();
  } else {
    for (float x : logits) {
      if (x != kNegInf) scratch.push_back(x);
    }
    std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end(), greater);
    kth = scratch[k - 1];
  }
  for (float& x : logits) {
    if (x < kth) x = kNegInf;
  }
}

void apply_top_p(std::span<float> logits, float top_p, TopPScratch& s) {
  if (!(top_p < 1.0f)) return;
  const float m = finite_max(logits);
  if (m == kNegInf) return;

  // Weights (a branch-free pass that vectorises; -inf gives exactly 0), and the total mass in
  // fixed point (an exact integer sum: processors.h).
  s.weights.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) s.weights[i] = exp_nonpositive(logits[i] - m);
  uint64_t total = 0;
  for (const float w : s.weights) total += top_p_mass(w);
  const uint64_t threshold = top_p_threshold(top_p, total);
  size_t num_finite = 0;
  for (float x : logits) num_finite += x != kNegInf ? 1 : 0;
  // Mass histogram by weight bucket, four interleaved copies so the additions do not all
  // wait on one another. It only picks which tokens to sort; the cut below is exact.
  s.histogram.assign(4 * kTopPBuckets, 0.0);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float w = s.weights[i];
    if (w > 0.0f) s.histogram[(i & 3) * kTopPBuckets + weight_bucket(w)] += w;
  }
  for (int b = 0; b < kTopPBuckets; ++b) {
    s.histogram[b] += s.histogram[kTopPBuckets + b] + s.histogram[2 * kTopPBuckets + b] +
                      s.histogram[3 * kTopPBuckets + b];
  }
  // Only tokens in buckets that reach the threshold's mass can be kept; sort just those (the
  // histogram's double sums only estimate which: the cut below is exact, and retried over
  // every token when they fell short).
  const double estimate = std::ldexp(static_cast<double>(threshold), -kTopPMassBits);
  int first_bucket = 0;
  double acc = 0.0;
  for (int b = kTopPBuckets - 1; b >= 0; --b) {
    acc += s.histogram[b];
    if (acc >= estimate) {
      first_bucket = b;
      break;
    }
  }
  const auto by_weight_then_id = [&](int32_t a, int32_t b) {
    return s.weights[a] != s.weights[b] ? s.weights[a] > s.weights[b] : a < b;
  };
  const auto collect = [&](int min_bucket) {
    // The smallest weight in bucket min_bucket; bucket 0 takes every finite token.
    const float min_w = std::bit_cast<float>(static_cast<uint32_t>(min_bucket) << 19);
    s.candidates.clear();
    for (size_t i = 0; i < logits.size(); ++i) {
      if (s.weights[i] >= min_w && (min_bucket > 0 || logits[i] != kNegInf)) {
        s.candidates.push_back(static_cast<int32_t>(i));
      }
    }
    std::sort(s.candidates.begin(), s.candidates.end(), by_weight_then_id);
  };
  // Keeps the canonical prefix whose preceding mass is < threshold; returns its length and
  // whether the mass of all candidates reached the threshold.
  const auto cut = [&](size_t& kept) {
    uint64_t before = 0;
    kept = 0;
    for (int32_t id : s.candidates) {
      if (before >= threshold) return true;
      ++kept;
      before += top_p_mass(s.weights[id]);
    }
    return before >= threshold;
  };

  collect(first_bucket);
  size_t kept = 0;
  if (!cut(kept) && s.candidates.size() < num_finite) {
    // Rounding made the bucket estimate fall short: the next token would be kept too, so
    // redo the cut over every finite token (rare; exactness over speed).
    collect(0);
    cut(kept);
  }
  if (kept == 0) kept = 1;  // top_p > 0 always keeps the top token
  // Keep exactly the canonical prefix: weight above the last kept one, or equal with an id
  // not above it. Branch-free so the pass vectorises (-inf entries have weight 0 and stay).
  // (int32 ids: SSE2 has no 64-bit compare, and a vocabulary fits in 31 bits.)
  const int32_t last = s.candidates[kept - 1];
  const float last_w = s.weights[last];
  const int32_t n = static_cast<int32_t>(logits.size());
  float* x = logits.data();
  const float* wts = s.weights.data();
  for (int32_t i = 0; i < n; ++i) {
    const float w = wts[i];
    const bool keep = (w > last_w) | ((w == last_w) & (i <= last));
    x[i] = keep ? x[i] : kNegInf;
  }
}

int32_t argmax_lowest_id(std::span<const float> logits) {
  const float m = row_max(logits);
  if (m == kNegInf) return -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == m) return static_cast<int32_t>(i);  // the first, so the lowest id
  }
  return -1;
}

int32_t sample_inverse_cdf(std::span<const float> logits, double u, InverseCdfScratch& s) {
  const float m = row_max(logits);
  if (m == kNegInf) return -1;
  size_t num_finite = 0;
  for (float x : logits) num_finite += x != kNegInf ? 1 : 0;

  // The walk: find the first block whose cumulative mass exceeds u x total, then the first
  // id inside it whose cumulative mass does. cumulative(id) = (sum of the earlier blocks'
  // sums, in block order) + (in-block sum up to id, in id order); the block's last id gives
  // exactly the block's cumulative, so the inner walk always ends inside the block.
  s.block_sums.clear();
  s.block_first.clear();
  if (num_finite * 8 >= logits.size()) {
    // Dense: a weight for every id (vectorised; -inf gives exactly 0).
    s.ids.clear();
    s.weights.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) s.weights[i] = exp_nonpositive(logits[i] - m);
    const double total = blocked_mass(s.weights, &s.block_sums);
    const double target = u * total;
    double before = 0.0;
    for (size_t b = 0; b < s.block_sums.size(); ++b) {
      const double after = before + s.block_sums[b];
      if (after > target) {
        const size_t end = std::min(logits.size(), (b + 1) * kMassBlock);
        double partial = 0.0;
        for (size_t i = b * kMassBlock; i < end; ++i) {
          partial += s.weights[i];
          if (s.weights[i] > 0.0f && before + partial > target) return static_cast<int32_t>(i);
        }
      }
      before = after;
    }
    // Only when u x total rounds up to total: the draw belongs to the last positive weight.
    for (size_t i = logits.size(); i-- > 0;) {
      if (s.weights[i] > 0.0f) return static_cast<int32_t>(i);
    }
    return -1;
  }

  // Sparse (after top-k/top-p/min-p): the same arithmetic over the survivors only. Zero
  // weights and empty blocks add exactly 0.0, so this gives the dense walk's token.
  s.ids.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != kNegInf) s.ids.push_back(static_cast<int32_t>(i));
  }
  s.weights.resize(s.ids.size());
  for (size_t k = 0; k < s.ids.size(); ++k) s.weights[k] = exp_nonpositive(logits[s.ids[k]] - m);
  double total = 0.0;
  for (size_t k = 0; k < s.ids.size();) {
    const size_t block = static_cast<size_t>(s.ids[k]) / kMassBlock;
    double sum = 0.0;
    s.block_first.push_back(k);
    for (; k < s.ids.size() && static_cast<size_t>(s.ids[k]) / kMassBlock == block; ++k) {
      sum += s.weights[k];
    }
    s.block_sums.push_back(sum);
    total += sum;
  }
  s.block_first.push_back(s.ids.size());
  const double target = u * total;
  double before = 0.0;
  for (size_t b = 0; b < s.block_sums.size(); ++b) {
    const double after = before + s.block_sums[b];
    if (after > target) {
      double partial = 0.0;
      for (size_t k = s.block_first[b]; k < s.block_first[b + 1]; ++k) {
        partial += s.weights[k];
        if (s.weights[k] > 0.0f && before + partial > target) return s.ids[k];
      }
    }
    before = after;
  }
  for (size_t k = s.ids.size(); k-- > 0;) {
    if (s.weights[k] > 0.0f) return s.ids[k];
  }
  return -1;
}

}  // namespace deepinfer::sample
