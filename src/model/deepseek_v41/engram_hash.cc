// Engram hash layout (primes, offsets, numpy multipliers) and the per-position row hash; the
// semantics are in engram_hash.h.
#include "model/deepseek_v41/engram_hash.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string>

#include "model/deepseek_v41/numpy_rng.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

__extension__ typedef unsigned __int128 U128;

uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m) {
  return static_cast<uint64_t>(static_cast<U128>(a) * b % m);
}

uint64_t pow_mod(uint64_t base, uint64_t exp, uint64_t m) {
  uint64_t result = 1;
  base %= m;
  while (exp != 0) {
    if (exp & 1) result = mul_mod(result, base, m);
    base = mul_mod(base, base, m);
    exp >>= 1;
  }
  return result;
}

// The first prime above `start` that is not in `used`.
int64_t next_unused_prime(int64_t start, const std::set<int64_t>& used) {
  int64_t candidate = start + 1;
  while (!is_prime_u64(static_cast<uint64_t>(std::max<int64_t>(candidate, 0))) ||
         used.count(candidate) != 0) {
    ++candidate;
  }
  return candidate;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

bool is_prime_u64(uint64_t n) {
  if (n < 2) return false;
  // Miller-Rabin with the first twelve primes as witnesses is exact below 3.3e24.
  static constexpr uint64_t kWitnesses[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
  for (uint64_t p : kWitnesses) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int r = 0;
  while ((d & 1) == 0) {
    d >>= 1;
    ++r;
  }
  for (uint64_t a : kWitnesses) {
    uint64_t x = pow_mod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < r && composite; ++i) {
      x = mul_mod(x, x, n);
      if (x == n - 1) composite = false;
    }
    if (composite) return false;
  }
  return true;
}

Expected<EngramHashLayout> make_engram_hash_layout(const EngramHashParams& p) {
  if (p.layer_ids.empty()) return invalid_argument("Engram: engram_layer_ids is empty");
  if (p.max_ngram_size < 2) {
    return invalid_argument("Engram: engram_max_ngram_size must be >= 2, got " +
                            std::to_string(p.max_ngram_size));
  }
  if (p.n_heads < 1) {
    return invalid_argument("Engram: engram_n_heads must be >= 1, got " +
                            std::to_string(p.n_heads));
  }
  // The prime search must stay far from int64 overflow; real configs use ~1.6e7.
  if (p.vocab_size < 2 || p.vocab_size > (int64_t{1} << 62)) {
    return invalid_argument("Engram: engram_vocab_size must be in [2, 2^62], got " +
                            std::to_string(p.vocab_size));
  }
  if (p.num_embeddings.size() != p.layer_ids.size()) {
    return invalid_argument("Engram: engram_num_embeddings has " +
                            std::to_string(p.num_embeddings.size()) + " entries " +
                            join(p.num_embeddings) + " for " + std::to_string(p.layer_ids.size()) +
                            " layers " + join(p.layer_ids) + "; give one per layer");
  }
  std::set<int64_t> seen_layers;
  for (int64_t id : p.layer_ids) {
    // 10007 * id seeds numpy, which takes non-negative seeds only.
    if (id < 0 || id > std::numeric_limits<int64_t>::max() / 10007) {
      return invalid_argument("Engram: engram_layer_ids " + join(p.layer_ids) +
                              " has an invalid layer id " + std::to_string(id));
    }
    if (!seen_layers.insert(id).second) {
      return invalid_argument("Engram: engram_layer_ids " + join(p.layer_ids) + " repeats layer " +
                              std::to_string(id));
    }
  }
  if (p.compressed_vocab_size < 1 ||
      p.compressed_vocab_size > std::numeric_limits<int32_t>::max()) {
    return invalid_argument("Engram: engram_compressed_vocab_size must be in [1, 2^31), got " +
                            std::to_string(p.compressed_vocab_size));
  }
  for (size_t i = 0; i < p.compressed_map.size(); ++i) {
    if (p.compressed_map[i] < 0 || p.compressed_map[i] >= p.compressed_vocab_size) {
      return invalid_argument("Engram: the compressed token map sends token " + std::to_string(i) +
                              " to " + std::to_string(p.compressed_map[i]) +
                              ", outside [0, engram_compressed_vocab_size = " +
                              std::to_string(p.compressed_vocab_size) + ")");
    }
  }
  if (p.pad_token_id < 0 || p.pad_token_id >= static_cast<int64_t>(p.compressed_map.size())) {
    return invalid_argument("Engram: engram_pad_token_id " + std::to_string(p.pad_token_id) +
                            " lies outside the tokenizer's " +
                            std::to_string(p.compressed_map.size()) + " token ids");
  }

  EngramHashLayout L;
  L.max_ngram_size = p.max_ngram_size;
  L.n_heads = p.n_heads;
  L.compressed_vocab_size = p.compressed_vocab_size;
  L.layer_ids = p.layer_ids;
  L.compressed_map.assign(p.compressed_map.begin(), p.compressed_map.end());
  L.pad_compressed_id = p.compressed_map[static_cast<size_t>(p.pad_token_id)];

  const int64_t bound =
      std::max<int64_t>(1, std::numeric_limits<int64_t>::max() / p.compressed_vocab_size / 2);
  std::set<int64_t> used;
  for (size_t j = 0; j < p.layer_ids.size(); ++j) {
    std::vector<int64_t> primes;
    for (int64_t n = 2; n <= p.max_ngram_size; ++n) {
      int64_t current = p.vocab_size - 1;
      for (int64_t h = 0; h < p.n_heads; ++h) {
        current = next_unused_prime(current, used);
        used.insert(current);
        primes.push_back(current);
      }
    }
    std::vector<int64_t> offsets(primes.size());
    int64_t total = 0;
    for (size_t k = 0; k < primes.size(); ++k) {
      offsets[k] = total;
      total += primes[k];
    }
    if (total > p.num_embeddings[j]) {
      return invalid_argument("Engram layer " + std::to_string(p.layer_ids[j]) + " needs " +
                              std::to_string(total) +
                              " table rows for its hash buckets, but engram_num_embeddings gives " +
                              std::to_string(p.num_embeddings[j]));
    }
    numpy_rng::Generator gen(static_cast<uint64_t>(10007 * p.layer_ids[j]));
    DI_ASSIGN_OR_RETURN(std::vector<int64_t> mult, gen.integers(0, bound, p.max_ngram_size));
    for (auto& m : mult) m = m * 2 + 1;  // bound keeps 2m + 1 inside int64
    L.primes.push_back(std::move(primes));
    L.offsets.push_back(std::move(offsets));
    L.multipliers.push_back(std::move(mult));
    L.rows.push_back(total);
  }
  return L;
}

void hash_rows(const EngramHashLayout& layout, int64_t layer_index,
               std::span<const int32_t> history, std::span<const int32_t> new_compressed_ids,
               int64_t* out) {
  const int64_t N = layout.max_ngram_size, H = layout.n_heads;
  const auto& primes = layout.primes[static_cast<size_t>(layer_index)];
  const auto& offsets = layout.offsets[static_cast<size_t>(layer_index)];
  const auto& mult = layout.multipliers[static_cast<size_t>(layer_index)];
  const uint64_t pad = static_cast<uint64_t>(static_cast<int64_t>(layout.pad_compressed_id));
  const size_t keep = std::min(history.size(), static_cast<size_t>(N - 1));
  history = history.subspan(history.size() - keep);
  // The compressed id `back` steps before new position i; kEngramDead before the sequence start.
  auto id_at = [&](int64_t i, int64_t back) -> int64_t {
    const int64_t pos = i - back;  // index into new ids; negative reaches into the history
    if (pos >= 0) return new_compressed_ids[static_cast<size_t>(pos)];
    const int64_t hpos = static_cast<int64_t>(keep) + pos;
    return hpos >= 0 ? history[static_cast<size_t>(hpos)] : kEngramDead;
  };
  const int64_t cols = layout.columns();
  for (int64_t i = 0; i < static_cast<int64_t>(new_compressed_ids.size()); ++i) {
    int64_t* row = out + i * cols;
    bool blocked = false;
    uint64_t rolling = 0;
    for (int64_t s = 0; s < N; ++s) {
      const int64_t c = blocked ? kEngramDead : id_at(i, s);
      blocked = blocked || c == kEngramDead;
      const uint64_t tok = blocked ? pad : static_cast<uint64_t>(c);
      const uint64_t product = tok * static_cast<uint64_t>(mult[static_cast<size_t>(s)]);
      rolling = s == 0 ? product : rolling ^ product;
      if (s == 0) continue;
      const int64_t h = static_cast<int64_t>(rolling);
      for (int64_t k = 0; k < H; ++k) {
        const size_t col = static_cast<size_t>((s - 1) * H + k);
        int64_t r = h % primes[col];
        if (r < 0) r += primes[col];  // floor mod, as torch's % on int64
        row[col] = r + offsets[col];
      }
    }
  }
}

void advance_history(const EngramHashLayout& layout, std::vector<int32_t>& history,
                     std::span<const int32_t> new_compressed_ids) {
  history.insert(history.end(), new_compressed_ids.begin(), new_compressed_ids.end());
  const size_t keep = static_cast<size_t>(layout.history_size());
  if (history.size() > keep) {
    history.erase(history.begin(), history.end() - static_cast<std::ptrdiff_t>(keep));
  }
}

}  // namespace deepinfer::model::deepseek_v41
