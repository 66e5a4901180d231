// EngramLookup (see engram.h).
#include "model/deepseek_v41/engram.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "base/check.h"
#include "base/clock.h"
#include "base/thread_pool.h"
#include "base/numeric_types.h"
#include "tokenizer/compressed_vocab.h"
#include "tokenizer/token_texts.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

// Row `row` of an Engram table, dequantized: FP8 E4M3 x its E8M0 scale per 32 values, or a
// dense float row.
void table_row(const backend::WeightRef& t, int64_t row, float* out) {
  const int64_t K = t.k;
  if (t.format == backend::WeightFormat::kFp8) {
    const std::array<float, 256>& fp8 = fp8_e4m3_table();
    const uint8_t* q = t.weight.ptr<uint8_t>() + row * K;
    for (int64_t c0 = 0; c0 < K; c0 += t.block_k) {
      const float s = backend::weight_scale_at(t, row, c0);
      const int64_t end = std::min<int64_t>(K, c0 + t.block_k);
      for (int64_t c = c0; c < end; ++c) out[c] = fp8[q[c]] * s;
    }
    return;
  }
  for (int64_t c = 0; c < K; ++c) out[c] = backend::weight_at(t, row, c);
}

}  // namespace

Expected<EngramLookup> EngramLookup::create(const io::ModelConfig& c, const std::string& dir) {
  const io::EngramSpec& e = c.engram;
  EngramLookup l;
  l.head_dim_ = e.head_dim;
  const std::filesystem::path tok = std::filesystem::path(dir) / "tokenizer.json";
  std::error_code ec;
  if (!std::filesystem::exists(tok, ec)) {
    return not_found("model " + dir + " has Engram layers (" + io::describe_index_set(e.layer_ids) +
                     ") but no tokenizer.json: the Engram hash runs over compressed token ids "
                     "built from the checkpoint's tokenizer vocabulary; copy the checkpoint's "
                     "tokenizer.json into the model directory");
  }
  DI_ASSIGN_OR_RETURN(const tokenizer::TokenTexts texts,
                      tokenizer::TokenTexts::from_file(tok.string()));
  const tokenizer::CompressedVocab vocab = tokenizer::build_compressed_vocab(texts);
  DI_TRY(tokenizer::check_compressed_vocab_size(vocab, texts, e.compressed_vocab_size)
             .with_context("config " + c.source + ": engram_compressed_vocab_size"));
  EngramHashParams p;
  p.layer_ids.assign(e.layer_ids.begin(), e.layer_ids.end());
  p.num_embeddings = e.num_embeddings;
  p.max_ngram_size = e.max_ngram_size;
  p.n_heads = e.n_heads;
  p.vocab_size = e.vocab_size;
  p.compressed_map = vocab.map;
  p.compressed_vocab_size = vocab.count;
  p.pad_token_id = e.pad_token_id;
  auto layout = make_engram_hash_layout(p);
  if (!layout.ok()) return layout.status().with_context("config " + c.source);
  l.layout_ = std::move(layout).value();
  return l;
}

void EngramLookup::begin_step(backend::Ops& ops, const StepInputs& in) {
  const auto t0 = std::chrono::steady_clock::now();
  ops.synchronize();
  const int64_t M = static_cast<int64_t>(in.token_ids.size());
  ids_.resize(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) ids_[static_cast<size_t>(i)] = compressed_id(in.token_ids[i]);
  stats_.seconds += seconds_since(t0);
}

void EngramLookup::gather_layer(backend::Ops& ops, const StepInputs& in, const EngramWeights& e,
                                int64_t rows, backend::Buffer& out) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t M = static_cast<int64_t>(in.token_ids.size());
  DI_CHECK(rows >= M && static_cast<int64_t>(ids_.size()) == M);
  const int64_t cols = columns(), width = cols * head_dim_;
  const int j = e.index;
  while (staging_.size() <= static_cast<size_t>(j)) staging_.emplace_back(ops);
  const size_t bytes = static_cast<size_t>(rows * width) * sizeof(float);
  auto* staging = static_cast<float*>(staging_[static_cast<size_t>(j)].fit_bytes(bytes));
  rows_.resize(static_cast<size_t>(M * cols));
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    hash_rows(layout_, j, sq.cache->engram_history(),
              std::span<const int32_t>(ids_).subspan(static_cast<size_t>(sq.begin),
                                                     static_cast<size_t>(sq.count)),
              rows_.data() + sq.begin * cols);
  }
  // Each looked-up row is decoded on its own, so the split over threads cannot change a bit.
  auto decode = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* dst_row = staging + r * head_dim_;
      if (ids_[static_cast<size_t>(r / cols)] == kEngramDead) {
        // A DEAD position (an id the tokenizer does not know) leaves its streams unchanged
        // (spec §6.7 item 1: gate 0): zero rows make a zero value, so X + g · 0 = X exactly.
        std::fill(dst_row, dst_row + head_dim_, 0.0f);
        continue;
      }
      const int64_t row = rows_[static_cast<size_t>(r)];
      DI_CHECK(row >= 0 && row < e.table.n);
      table_row(e.table, row, dst_row);
    }
  };
  const int64_t n_rows = M * cols;
  if (n_rows < kParallelRows) {
    decode(0, n_rows);
  } else {
    // A prefill decodes millions of values from rows scattered over a large table (memory
    // latency bound): spread them over a few host threads while the device runs earlier layers.
    if (!pool_) {
      pool_ = std::make_shared<ThreadPool>(
          static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)));
    }
    pool_->parallel_for(n_rows, decode, kParallelRows / 4);
  }
  std::fill(staging + M * width, staging + rows * width, 0.0f);  // padding rows
  ops.upload_async(out.fit_bytes(std::max<size_t>(bytes, 4)), staging, bytes);
  stats_.seconds += seconds_since(t0);
  stats_.bytes += static_cast<int64_t>(bytes);
  ++stats_.layer_gathers;
}

void EngramLookup::push_history(const StepInputs& in) const {
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    sq.cache->push_engram_history(std::span<const int32_t>(ids_).subspan(
        static_cast<size_t>(sq.begin), static_cast<size_t>(sq.count)));
  }
}

}  // namespace deepinfer::model::deepseek_v41
