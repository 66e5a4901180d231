// structured_bench: compile time and per-token mask time of deepinfer::structured on the real
// tokenizer for five schemas. Masks are timed over whole random generations (tokens sampled
// from the mask, EOS taken when allowed, short tokens preferred half the time so documents
// finish); the sampled token ids are written out so bench_vs_xgrammar.py can replay exactly
// the same sequences through xgrammar.
//
//   structured_bench --tokenizer /work/shared/tokenizers/deepseek_v4/tokenizer.json
//                    --csv out.csv --tokens out_tokens.json [--docs 20] [--max-steps 400]
//                    [--any-whitespace]   (default: compact JSON)  [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "schemas.h"
#include "structured/compiler.h"
#include "structured/matcher.h"
#include "tokenizer/tokenizer.h"

using namespace deepinfer;
using namespace deepinfer::structured;

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  std::string tok_path = "/work/shared/tokenizers/deepseek_v4/tokenizer.json";
  std::string csv_path, tokens_path;
  int docs = 20, max_steps = 400;
  bool dump = false;
  JsonSchemaOptions options;  // compact by default
  int threads = 0;            // compile threads (0 = hardware concurrency)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--tokenizer")
      tok_path = next();
    else if (a == "--csv")
      csv_path = next();
    else if (a == "--tokens")
      tokens_path = next();
    else if (a == "--docs")
      docs = std::stoi(next());
    else if (a == "--max-steps")
      max_steps = std::stoi(next());
    else if (a == "--dump-schemas")
      dump = true;
    else if (a == "--any-whitespace")
      options.any_whitespace = true;
    else if (a == "--threads")
      threads = std::stoi(next());
    else {
      std::fprintf(stderr, "structured_bench: error: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (dump) {
    nlohmann::json out = nlohmann::json::object();
    for (auto& [name, schema] : bench::bench_schemas()) out[name] = schema;
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  auto tok = tokenizer::Tokenizer::from_file(tok_path);
  if (!tok.ok()) {
    std::fprintf(stderr, "structured_bench: error: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto info = TokenizerInfo::from_tokenizer(tok.value());
  double info_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("tokenizer: %s (%d ids), vocabulary trie built in %.1f ms (once per tokenizer)\n",
              tok_path.c_str(), info->vocab_size(), info_ms);
  std::printf("%-12s %10s %10s %8s %8s %10s %10s %10s %7s\n", "schema", "compile_ms", "(masks_ms)",
              "states", "scan", "uncertain", "mask_med_us", "mask_p99_us", "masks");
  FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (csv)
    std::fprintf(csv,
                 "schema,engine,compile_ms,mask_median_us,mask_p99_us,mask_mean_us,num_masks\n");
  nlohmann::json token_log = nlohmann::json::object();
  const int32_t eos = info->eos_ids().empty() ? -1 : info->eos_ids()[0];
  for (auto& [name, schema] : bench::bench_schemas()) {
    // Compile time: median of kCompileRuns fresh compilers (no cache hits); the box may be shared.
    constexpr int kCompileRuns = 5;
    std::vector<double> compile_times;
    Expected<std::shared_ptr<const CompiledGrammar>> cg = internal_error("not compiled");
    for (int r = 0; r < kCompileRuns; ++r) {
      GrammarCompiler compiler(info, /*max_cache_entries=*/16, threads);
      auto c0 = std::chrono::steady_clock::now();
      cg = compiler.compile_json_schema(schema, options);
      compile_times.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count());
      if (!cg.ok()) break;
    }
    const double compile_ms = percentile(compile_times, 0.5);
    if (!cg.ok()) {
      std::fprintf(stderr, "structured_bench: error: schema %s: %s\n", name.c_str(),
                   cg.status().to_string().c_str());
      return 1;
    }
    std::mt19937 rng(1234);
    std::vector<double> times;
    std::vector<uint32_t> mask(info->mask_words());
    nlohmann::json seqs = nlohmann::json::array();
    for (int d = 0; d < docs; ++d) {
      GrammarMatcher m(cg.value());
      std::vector<int32_t> seq;
      for (int step = 0; step < max_steps && !m.is_terminated(); ++step) {
        auto s0 = std::chrono::steady_clock::now();
        m.fill_next_token_bitmask(mask);
        times.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s0)
                .count());
        std::vector<int32_t> ids;
        for (int32_t w = 0; w < static_cast<int32_t>(mask.size()); ++w) {
          for (uint32_t bits = mask[w]; bits; bits &= bits - 1)
            ids.push_back(w * 32 + __builtin_ctz(bits));
        }
        if (ids.empty()) break;
        int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
        if (eos >= 0 && ((mask[eos >> 5] >> (eos & 31)) & 1)) {
          id = eos;
        } else if (rng() % 2 == 0) {
          std::vector<int32_t> shorts;
          for (int32_t x : ids) {
            if (info->bytes(x).size() <= 2) shorts.push_back(x);
          }
          if (!shorts.empty())
            id = shorts[std::uniform_int_distribution<size_t>(0, shorts.size() - 1)(rng)];
        }
        if (!m.accept_token(id)) {
          std::fprintf(stderr, "structured_bench: internal error: masked token %d rejected\n", id);
          return 1;
        }
        seq.push_back(id);
      }
      seqs.push_back(seq);
    }
    token_log[name] = seqs;
    double sum = 0;
    for (double t : times) sum += t;
    const auto& st = cg.value()->stats();
    std::printf("%-12s %10.1f %10.1f %8d %8d %10lld %10.1f %10.1f %7zu\n", name.c_str(), compile_ms,
                st.masks_ms, st.num_states, st.num_scan_states,
                static_cast<long long>(st.num_uncertain), percentile(times, 0.5),
                percentile(times, 0.99), times.size());
    if (csv) {
      std::fprintf(csv, "%s,deepinfer,%.3f,%.3f,%.3f,%.3f,%zu\n", name.c_str(), compile_ms,
                   percentile(times, 0.5), percentile(times, 0.99),
                   sum / static_cast<double>(times.size()), times.size());
    }
  }
  if (csv) std::fclose(csv);
  if (!tokens_path.empty()) std::ofstream(tokens_path) << token_log.dump() << "\n";
  return 0;
}
