// V4.1 Engram hashing: which table rows a position reads (spec §6.1 Engram, §6.7 item 2).
//
// Layout, per Engram layer j (engram_layer_ids order), built once from the config:
//   primes[j]       (N-1)·H primes in (n, head) order, n = 2..N. For every (layer, n) the search
//                   starts again at engram_vocab_size - 1 and goes up: the first prime above the
//                   current value that no earlier (layer, n, head) took, so primes are distinct
//                   across layers. (§6.7 says "downwards"; the reference code goes up, and
//                   so the released config's layers get exactly engram_num_embeddings rows:
//                   384006168 and 384016682.)
//   offsets[j]      the exclusive prefix sum of primes[j]; rows[j] = their total, which must not
//                   exceed engram_num_embeddings[j].
//   multipliers[j]  N odd int64: 2·numpy.random.default_rng(10007·layer_id).integers(0, B, N) + 1
//                   with B = max(1, (INT64_MAX / V_c) / 2), V_c the compressed vocabulary size.
//
// Hash of position t: s = 0..N-1 steps back, c_s = the compressed id of token t-s, where the
// first step that reaches before the sequence start or a DEAD token (an image token, padding:
// kEngramDead) and every longer step use the pad token's compressed id instead. p_s = c_s ·
// mult[s] (int64, wrapping); h = p_0; for n = 2..N: h ^= p_{n-1}, and for each head the row is
// floor_mod(h, prime[n][head]) + offset[n][head] (torch's `%`: non-negative for a positive
// prime even when h is negative). Documents do not stop n-grams (the reference passes no
// sequence ids); a DEAD position's own rows are computed from pads only (its gate is 0).
//
// Per step, a sequence keeps its last N-1 compressed ids (kEngramDead included); hash_rows
// takes them as `history` and gives prefill, chunked prefill and decode the same rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace deepinfer::model::deepseek_v41 {

// A compressed id that marks a DEAD position (image token or padding).
inline constexpr int32_t kEngramDead = -1;

struct EngramHashParams {
  std::vector<int64_t> layer_ids;       // engram_layer_ids
  std::vector<int64_t> num_embeddings;  // engram_num_embeddings, one per layer
  int64_t max_ngram_size = 0;           // engram_max_ngram_size (N >= 2)
  int64_t n_heads = 0;                  // engram_n_heads
  int64_t vocab_size = 0;               // engram_vocab_size: where the prime search starts
  // Token id -> compressed id (tokenizer::CompressedVocab::map) and the number of compressed ids
  // (engram_compressed_vocab_size, already checked against the map's own count by the caller).
  std::span<const int32_t> compressed_map;
  int64_t compressed_vocab_size = 0;
  int64_t pad_token_id = 0;  // engram_pad_token_id (a raw token id)
};

struct EngramHashLayout {
  int64_t max_ngram_size = 0, n_heads = 0, compressed_vocab_size = 0;
  std::vector<int64_t> layer_ids;
  std::vector<std::vector<int64_t>> primes;       // [layer][(n-2)·H + head]
  std::vector<std::vector<int64_t>> offsets;      // [layer][(n-2)·H + head]
  std::vector<std::vector<int64_t>> multipliers;  // [layer][s], s = 0..N-1
  std::vector<int64_t> rows;                      // [layer]: table rows the hashes address
  std::vector<int32_t> compressed_map;            // token id -> compressed id
  int32_t pad_compressed_id = 0;

  int64_t num_layers() const { return static_cast<int64_t>(layer_ids.size()); }
  // Rows looked up per position and layer: (N-1)·H.
  int64_t columns() const { return (max_ngram_size - 1) * n_heads; }
  int64_t history_size() const { return max_ngram_size - 1; }
  // The compressed id of a raw token id; kEngramDead for ids outside the map.
  int32_t compressed_id(int64_t token_id) const {
    return token_id >= 0 && token_id < static_cast<int64_t>(compressed_map.size())
               ? compressed_map[static_cast<size_t>(token_id)]
               : kEngramDead;
  }
};

// Checks the parameters and builds the layout. InvalidArgument names the field: no layers,
// N < 2, H < 1, engram_vocab_size < 2, repeated or negative layer ids, a num_embeddings count
// that does not match the layers, a layer whose primes need more rows than its table has (both
// numbers), a pad token outside the map, a map value outside [0, V_c).
Expected<EngramHashLayout> make_engram_hash_layout(const EngramHashParams& params);

// The rows of new_compressed_ids.size() consecutive positions of one sequence for Engram layer
// `layer_index` (an index into layout.layer_ids). `history` holds the compressed ids of the
// positions just before them, oldest first (up to N-1 of them; fewer at the sequence start;
// extra older entries are ignored). kEngramDead marks DEAD positions in either span.
// out: [new_compressed_ids.size(), columns()] row-major.
void hash_rows(const EngramHashLayout& layout, int64_t layer_index,
               std::span<const int32_t> history, std::span<const int32_t> new_compressed_ids,
               int64_t* out);

// Appends new_compressed_ids to a sequence's look-back and keeps the last N-1.
void advance_history(const EngramHashLayout& layout, std::vector<int32_t>& history,
                     std::span<const int32_t> new_compressed_ids);

// Deterministic primality for any non-negative 64-bit value (exposed for tests).
bool is_prime_u64(uint64_t n);

}  // namespace deepinfer::model::deepseek_v41
