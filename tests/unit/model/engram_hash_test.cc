// V4.1 Engram hashing against the reference (tests/reference/engram/make_engram_vectors.py):
// numpy's SeedSequence / PCG64 / Generator.integers bit for bit, the hash layout of the released
// config and of small ones, rows of id sequences (DEAD positions included), prefill == chunked
// prefill == decode, and raw V4 token ids through the real compressed map.
#include "model/deepseek_v41/engram_hash.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "model/deepseek_v41/numpy_rng.h"
#include "tokenizer/compressed_vocab.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

using json = nlohmann::json;
__extension__ typedef unsigned __int128 U128;

std::string source_dir() {
  const char* s = std::getenv("DEEPINFER_SOURCE_DIR");
  return s ? s : ".";
}

json load(const std::string& name) {
  std::ifstream in(source_dir() + "/tests/data/engram/" + name);
  if (!in) throw std::runtime_error("cannot open tests/data/engram/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// Big integers are strings in the goldens (JSON readers disagree above 2^53).
uint64_t u64(const json& j) { return std::stoull(j.get<std::string>()); }
int64_t i64(const json& j) { return std::stoll(j.get<std::string>()); }

TEST(NumpyRng, SeedSequenceAndPcg64MatchNumpy) {
  const json data = load("numpy_rng.json");
  for (const auto& c : data["seed_sequences"]) {
    SCOPED_TRACE("seed " + c["seed"].get<std::string>());
    const numpy_rng::SeedSequence ss(u64(c["seed"]));
    for (int i = 0; i < 4; ++i) EXPECT_EQ(ss.pool()[i], c["pool"][i].get<uint32_t>());
    EXPECT_EQ(ss.generate_state_u32(6), c["state_u32"].get<std::vector<uint32_t>>());
    const auto s64 = ss.generate_state_u64(4);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(s64[static_cast<size_t>(i)], u64(c["state_u64"][i]));
    numpy_rng::Pcg64 pcg(ss);
    uint64_t st[2], inc[2];
    pcg.state(st, inc);
    // numpy prints the 128-bit state in decimal; compare through a decimal rendering of ours.
    auto dec = [](uint64_t hi, uint64_t lo) {
      U128 v = (static_cast<U128>(hi) << 64) | lo;
      std::string s;
      do {
        s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
        v /= 10;
      } while (v != 0);
      return s;
    };
    EXPECT_EQ(dec(st[0], st[1]), c["pcg_state"].get<std::string>());
    EXPECT_EQ(dec(inc[0], inc[1]), c["pcg_inc"].get<std::string>());
    for (const auto& r : c["raw"]) EXPECT_EQ(pcg.next_uint64(), u64(r));
  }
}

TEST(NumpyRng, IntegersMatchNumpy) {
  const json data = load("numpy_rng.json");
  for (const auto& g : data["generators"]) {
    numpy_rng::Generator gen(u64(g["seed"]));
    int k = 0;
    for (const auto& call : g["calls"]) {
      SCOPED_TRACE("default_rng(" + g["seed"].get<std::string>() + "), call " +
                   std::to_string(k++) + ": integers(" + call["low"].get<std::string>() + ", " +
                   call["high"].get<std::string>() + ")");
      auto got = gen.integers(i64(call["low"]), i64(call["high"]), call["size"].get<int64_t>());
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      ASSERT_EQ(got->size(), call["values"].size());
      for (size_t i = 0; i < got->size(); ++i) EXPECT_EQ((*got)[i], i64(call["values"][i])) << i;
    }
  }
  numpy_rng::Generator gen(1);
  EXPECT_EQ(gen.integers(5, 5, 1).status().code(), StatusCode::kInvalidArgument);
}

std::vector<int64_t> i64s(const json& j) {
  std::vector<int64_t> v;
  for (const auto& x : j) v.push_back(x.is_string() ? i64(x) : x.get<int64_t>());
  return v;
}

// An identity map of V_c ids: the layout does not depend on the map's contents.
EngramHashParams params_of(const json& c, const std::vector<int32_t>& identity) {
  EngramHashParams p;
  p.layer_ids = i64s(c["layer_ids"]);
  p.num_embeddings = i64s(c["num_embeddings"]);
  p.max_ngram_size = c["max_ngram_size"].get<int64_t>();
  p.n_heads = c["n_heads"].get<int64_t>();
  p.vocab_size = c["vocab_size"].get<int64_t>();
  p.compressed_vocab_size = c["compressed_vocab_size"].get<int64_t>();
  p.compressed_map = identity;
  p.pad_token_id = 0;
  return p;
}

std::vector<int32_t> identity_map(int64_t n) {
  std::vector<int32_t> m(static_cast<size_t>(std::min<int64_t>(n, 200000)));
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<int32_t>(i);
  return m;
}

TEST(EngramHash, LayoutsMatchReference) {
  const json data = load("layouts.json");
  for (const auto& c : data["configs"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto ids = identity_map(c["compressed_vocab_size"].get<int64_t>());
    auto L = make_engram_hash_layout(params_of(c, ids));
    ASSERT_TRUE(L.ok()) << L.status().to_string();
    ASSERT_EQ(L->num_layers(), static_cast<int64_t>(c["layer_ids"].size()));
    for (size_t j = 0; j < c["layer_ids"].size(); ++j) {
      EXPECT_EQ(L->primes[j], i64s(c["primes"][j])) << "layer " << j;
      EXPECT_EQ(L->offsets[j], i64s(c["offsets"][j])) << "layer " << j;
      EXPECT_EQ(L->multipliers[j], i64s(c["multipliers"][j])) << "layer " << j;
      EXPECT_EQ(L->rows[j], c["rows"][j].get<int64_t>()) << "layer " << j;
    }
    EXPECT_EQ(L->columns(), (L->max_ngram_size - 1) * L->n_heads);
  }
  for (const auto& c : data["failing"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto ids = identity_map(c["compressed_vocab_size"].get<int64_t>());
    auto L = make_engram_hash_layout(params_of(c, ids));
    ASSERT_FALSE(L.ok());
    EXPECT_EQ(L.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(L.status().message().find(c["error"].get<std::string>()), std::string::npos)
        << L.status().message();
  }
}

TEST(EngramHash, BadMapOrPadIsAnError) {
  const json c = load("layouts.json")["configs"][1];  // tiny
  auto ids = identity_map(c["compressed_vocab_size"].get<int64_t>());
  EngramHashParams p = params_of(c, ids);
  p.pad_token_id = static_cast<int64_t>(ids.size());
  EXPECT_NE(make_engram_hash_layout(p).status().message().find("engram_pad_token_id"),
            std::string::npos);
  ids[3] = 37;  // == V_c
  p = params_of(c, ids);
  EXPECT_NE(make_engram_hash_layout(p).status().message().find("token 3"), std::string::npos);
}

// Rows of one whole sequence, and the same rows from chunks with the look-back carried over.
void check_case(const EngramHashLayout& L, const std::vector<int32_t>& seq, const json& want_rows,
                const std::string& what) {
  const int64_t cols = L.columns();
  const size_t T = seq.size();
  for (int64_t j = 0; j < L.num_layers(); ++j) {
    std::vector<int64_t> full(T * static_cast<size_t>(cols));
    hash_rows(L, j, {}, seq, full.data());
    for (size_t t = 0; t < T; ++t) {
      for (int64_t k = 0; k < cols; ++k) {
        EXPECT_EQ(full[t * static_cast<size_t>(cols) + static_cast<size_t>(k)],
                  want_rows[static_cast<size_t>(j)][t][static_cast<size_t>(k)].get<int64_t>())
            << what << ": layer " << j << " position " << t << " column " << k;
      }
    }
    for (int64_t r : full) EXPECT_TRUE(r >= 0 && r < L.rows[static_cast<size_t>(j)]);
    // Chunked prefill (every split point) and token-by-token decode give the same rows.
    for (size_t chunk = 1; chunk <= T; ++chunk) {
      std::vector<int32_t> history;
      std::vector<int64_t> got(T * static_cast<size_t>(cols));
      for (size_t begin = 0; begin < T; begin += chunk) {
        const size_t n = std::min(chunk, T - begin);
        const std::span<const int32_t> part(seq.data() + begin, n);
        hash_rows(L, j, history, part, got.data() + begin * static_cast<size_t>(cols));
        advance_history(L, history, part);
        EXPECT_LE(static_cast<int64_t>(history.size()), L.history_size());
      }
      EXPECT_EQ(got, full) << what << ": layer " << j << ", chunks of " << chunk;
    }
  }
}

TEST(EngramHash, RowsMatchReference) {
  const json layouts = load("layouts.json");
  const json data = load("hash_rows.json");
  int n = 0;
  for (const auto& c : data["cases"]) {
    const std::string name = c["config"].get<std::string>();
    json cfg;
    for (const auto& x : layouts["configs"]) {
      if (x["name"] == name) cfg = x;
    }
    ASSERT_FALSE(cfg.is_null()) << name;
    auto ids = identity_map(cfg["compressed_vocab_size"].get<int64_t>());
    EngramHashParams p = params_of(cfg, ids);
    p.pad_token_id = c["pad"].get<int64_t>();  // identity map: the pad's compressed id
    auto L = make_engram_hash_layout(p);
    ASSERT_TRUE(L.ok()) << L.status().to_string();
    ASSERT_EQ(L->pad_compressed_id, c["pad"].get<int32_t>());
    check_case(*L, c["compressed"].get<std::vector<int32_t>>(), c["rows"],
               name + " case " + std::to_string(n++));
  }
}

TEST(EngramHash, HistoryLongerThanNeededIsTrimmed) {
  const json cfg = load("layouts.json")["configs"][1];
  auto ids = identity_map(cfg["compressed_vocab_size"].get<int64_t>());
  auto L = make_engram_hash_layout(params_of(cfg, ids)).value();
  const std::vector<int32_t> seq = {1, 2, 3, 4, 5, 6};
  std::vector<int64_t> a(2 * static_cast<size_t>(L.columns())),
      b(2 * static_cast<size_t>(L.columns()));
  hash_rows(L, 0, std::span<const int32_t>(seq.data(), 4),
            std::span<const int32_t>(seq.data() + 4, 2), a.data());
  hash_rows(L, 0, std::span<const int32_t>(seq.data() + 2, 2),
            std::span<const int32_t>(seq.data() + 4, 2), b.data());
  EXPECT_EQ(a, b);
}

TEST(EngramHash, V4TokensThroughTheRealMap) {
  const json v4 = load("hash_rows.json")["v4_raw"];
  // The package's copy, shared/tokenizers/deepseek_v4/tokenizer.json minified (the same JSON without whitespace).
  const std::string path = source_dir() + "/python/deepinfer/data/deepseek_v4/tokenizer.json";
  auto texts = tokenizer::TokenTexts::from_file(path);
  if (!texts.ok()) GTEST_SKIP() << "no V4 tokenizer: " << texts.status().to_string();
  const tokenizer::CompressedVocab vocab = tokenizer::build_compressed_vocab(*texts);
  ASSERT_TRUE(tokenizer::check_compressed_vocab_size(vocab, *texts, 99092).ok());
  const json cfg = load("layouts.json")["configs"][0];  // released
  ASSERT_EQ(cfg["name"], "released");
  EngramHashParams p = params_of(cfg, vocab.map);
  p.pad_token_id = v4["pad_token_id"].get<int64_t>();
  auto L = make_engram_hash_layout(p);
  ASSERT_TRUE(L.ok()) << L.status().to_string();
  EXPECT_EQ(L->pad_compressed_id, v4["pad"].get<int32_t>());
  std::vector<int32_t> seq;
  const int64_t dead = v4["dead_token_id"].get<int64_t>();
  for (size_t i = 0; i < v4["token_ids"].size(); ++i) {
    const int64_t id = v4["token_ids"][i].get<int64_t>();
    EXPECT_EQ(L->compressed_id(id), v4["compressed"][i].get<int32_t>()) << "token " << id;
    seq.push_back(id == dead ? kEngramDead : L->compressed_id(id));
  }
  check_case(*L, seq, v4["rows"], "V4 tokens");
}

TEST(EngramHash, Primes) {
  int count = 0;
  for (uint64_t n = 0; n < 10000; ++n) count += is_prime_u64(n);
  EXPECT_EQ(count, 1229);
  EXPECT_TRUE(is_prime_u64(18446744073709551557ull));  // the largest 64-bit prime
  EXPECT_FALSE(is_prime_u64(3215031751ull));           // a strong pseudoprime to 2, 3, 5, 7
}

}  // namespace
}  // namespace deepinfer::model::deepseek_v41
