// decode_bench's long-context decode (long_context.h).
#include "long_context.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <sstream>

#include "backend/ops.h"

namespace deepinfer::bench {
namespace {

using Clock = std::chrono::steady_clock;
using model::LogitsWanted;
using model::SequenceCache;

// Prefills `seq` with `n` random tokens in chunks of at most kChunk rows. Logits are not asked
// for: only the cache matters here.
Status prefill_in_chunks(model::Model& m, SequenceCache& seq, int64_t n, std::mt19937& rng) {
  constexpr int64_t kChunk = 4096;
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(m.vocab_size() - 1));
  std::vector<int32_t> ids;
  for (int64_t done = 0; done < n;) {
    const int64_t rows = std::min(kChunk, n - done);
    ids.resize(static_cast<size_t>(rows));
    for (auto& x : ids) x = tok(rng);
    auto r = m.extend(seq, ids, LogitsWanted::kNone);
    if (!r.ok()) return r.status();
    done += rows;
  }
  return Status::ok_status();
}

double short_step_ms(std::span<const std::pair<int, double>> steps, int batch) {
  for (const auto& [b, ms] : steps) {
    if (b == batch) return ms;
  }
  return 0;
}

}  // namespace

Expected<double> median_decode_ms(model::Model& m, std::vector<SequenceCache>& seqs, int steps,
                                  std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(m.vocab_size() - 1));
  const size_t B = seqs.size();
  std::vector<int32_t> ids(B), pos(B);
  std::vector<model::SequenceSpan> spans(B);
  model::StepOutputs out;
  std::vector<double> times;
  const int warm = 4;
  for (int s = 0; s < std::max(steps, 1) + warm; ++s) {
    for (size_t b = 0; b < B; ++b) {
      ids[b] = tok(rng);
      pos[b] = static_cast<int32_t>(seqs[b].length());
      spans[b] = {&seqs[b], static_cast<int64_t>(b), 1, LogitsWanted::kLast};
    }
    const model::StepInputs step{ids, pos, spans, false};
    const auto t0 = Clock::now();
    if (Status st = m.forward(step, out); !st.ok()) return st;
    if (s >= warm) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2] * 1e3;
}

std::string run_long_context(model::Model& m, const LongContextOptions& o,
                             const LongContextInputs& in, std::mt19937& rng,
                             std::vector<std::string>& full_rows) {
  const double bw = in.ceilings.copy_gbps * 1e9;
  std::printf(
      "\ndecode at %lld tokens of context (each sequence prefilled alone, chunks <= 4096 rows).\n"
      "floor = weight bytes (as above) + every sequence's KV/compressed-cache pages, both at the "
      "copy bandwidth;\nthe pages held (bytes_in_use) bound what a step reads from above, so the "
      "cache part of this floor may be too high.\n",
      static_cast<long long>(o.tokens));
  std::printf("%-7s %10s %10s %12s %14s %14s %12s %10s %10s\n", "batch", "prefill s", "step ms",
              "tok/s", "weights fl ms", "cache MiB/seq", "floor ms", "floor/ours", "x short");
  std::ostringstream j;
  j << "{\"tokens\": " << o.tokens << ", \"prefill_chunk\": 4096, \"batches\": [";
  bool first = true;
  for (int B : o.batches) {
    if (B < 1) continue;
    const int64_t in_use0 = m.cache_memory().bytes_in_use;
    std::vector<SequenceCache> seqs;
    Status failed;
    const auto t0 = Clock::now();
    try {
      for (int b = 0; b < B && failed.ok(); ++b) {
        seqs.push_back(m.new_sequence());
        failed = prefill_in_chunks(m, seqs.back(), o.tokens, rng);
      }
    } catch (const backend::OutOfMemory& e) {
      failed = Status(StatusCode::kResourceExhausted, e.what());
    }
    const double prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!failed.ok()) {
      std::printf("%-7d skipped: %lld-token caches of %d sequences: %s\n", B,
                  static_cast<long long>(o.tokens), B, failed.message().c_str());
      continue;
    }
    const double cache_per_seq = static_cast<double>(m.cache_memory().bytes_in_use - in_use0) / B;
    auto ms = median_decode_ms(m, seqs, o.steps, rng);
    if (!ms.ok()) {
      std::printf("%-7d decode failed: %s\n", B, ms.status().message().c_str());
      continue;
    }
    const double weights_floor_ms = in.weights.step_bytes(B) / bw * 1e3;
    const double floor_ms = (in.weights.step_bytes(B) + B * cache_per_seq) / bw * 1e3;
    const double short_ms = short_step_ms(in.short_steps, B);
    char vs_short[32] = "-";  // this step over the short-context step at the same batch
    if (short_ms > 0) std::snprintf(vs_short, sizeof vs_short, "%.2fx", *ms / short_ms);
    std::printf("%-7d %10.2f %10.2f %12.1f %14.3f %14.2f %12.3f %10.3f %10s\n", B, prefill_s, *ms,
                B / *ms * 1e3, weights_floor_ms, cache_per_seq / (1 << 20), floor_ms,
                floor_ms / *ms, vs_short);
    const auto full = extrapolate_step(*ms, B, /*logits_to_host=*/true, m.vocab_size(), in.weights,
                                       in.ceilings, in.bench_layers, in.full_layers);
    full_rows.push_back(full_model_row(B, o.tokens, *ms, full));
    j << (first ? "" : ", ") << "{\"batch\": " << B << ", \"prefill_s\": " << prefill_s
      << ", \"step_ms\": " << *ms << ", \"tokens_per_s\": " << B / *ms * 1e3
      << ", \"weights_floor_ms\": " << weights_floor_ms
      << ", \"cache_bytes_per_seq_upper_bound\": " << cache_per_seq
      << ", \"floor_ms\": " << floor_ms << ", \"floor_over_ours\": " << floor_ms / *ms
      << ", \"short_context_step_ms\": " << short_ms
      << ", \"full_model\": " << full_model_json(full) << "}";
    first = false;
  }
  j << "]}";
  return j.str();
}

}  // namespace deepinfer::bench
