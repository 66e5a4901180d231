// SWA bounded replay (docs/bounded_replay.md): what the decoder side saves and what it costs in
// accuracy, on any DeepSeek-V4.1 checkpoint and backend. Not a test: it never fails on a figure.
//
//   replay_bench --model DIR [--backend opt|ref|cuda] [--threads N]
//                [--prompt-len 2048 | --prompt-ids FILE | --prompt-text FILE]
//                [--keep 140,512,2414] [--tokens 32] [--reps 3] [--chunk 0]
//                [--csv OUT] [--json OUT]
//
// For each keep, in one process and interleaved (off, on, off, on, ...), on fresh sequences:
//   prefill_off_s / prefill_on_s  the fastest of --reps prefills of the whole prompt
//                                 (Model::extend, which ends with the last row's logits on the
//                                 host: a full synchronisation on a GPU), with bounded replay
//                                 off (every layer runs every token) and on (the layers above
//                                 the last KV source run only the last `keep` tokens); speedup =
//                                 the median over the reps of off / on of each (off, on) pair,
//                                 which a shared machine's load disturbs least; the peer is the
//                                 same model and backend, same run. Also the process CPU time of
//                                 each (cpu_off_s, cpu_on_s, cpu_speedup): on a CPU backend the
//                                 work done, which other processes' load does not inflate (with
//                                 --threads 1 it is the prefill's own thread; on a GPU it is the
//                                 host's share only);
//   kl                            KL(p_off || p_on) of the next-token distribution after the
//                                 prompt (FP64 softmax of the last row's logits), with
//                                 max |Δlogit| and whether the argmax agrees;
//   greedy_match / first_diff     each state then decodes --tokens tokens greedily on its own:
//                                 positions where both chose the same token, and the first
//                                 position where they differ (--tokens = never).
// Also printed: the skipped rows, the minimum keep (window + DSpark block) and the exactness
// horizon n_upper·(W − 1) + 1 (model/bounded_replay.h): a keep at or past it gives kl = 0.
//
// The prompt: --prompt-ids (ids separated by spaces, commas or newlines), --prompt-text (encoded
// with the checkpoint's tokenizer.json), or --prompt-len synthetic ids (a fixed pseudo-random
// sequence over the vocabulary: fine for timing and for random-weight checkpoints; use real text
// on a trained model). --chunk N prefills in chunks of N tokens (each chunk's rows before the
// kept suffix skip the upper layers), for prompts too long for one step's activations.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "backend/select.h"
#include "deepinfer/tokenizer.h"
#include "model/bounded_replay.h"
#include "model/model.h"

namespace {

using namespace deepinfer;  // NOLINT: a benchmark's main
using Clock = std::chrono::steady_clock;

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.empty() ? 0.0 : v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

struct Args {
  std::string model, backend = "opt", prompt_ids, prompt_text, csv, json;
  int threads = 0, tokens = 32, reps = 3;
  int64_t prompt_len = 2048, chunk = 0;
  std::vector<int64_t> keeps = {140};
};

struct Row {
  int64_t keep = 0, skipped = 0;
  double off_s = 0, on_s = 0, speedup = 0, kl = 0, max_abs = 0;
  double cpu_off_s = 0, cpu_on_s = 0, cpu_speedup = 0;
  bool top1 = false;
  int greedy_match = 0, first_diff = 0;
};

int usage(const char* why) {
  std::fprintf(stderr,
               "replay_bench: %s\nusage: replay_bench --model DIR [--backend opt|ref|cuda] "
               "[--threads N] [--prompt-len N | --prompt-ids FILE | --prompt-text FILE] "
               "[--keep K1,K2,..] [--tokens N] [--reps R] [--chunk N] [--csv OUT] [--json OUT]\n",
               why);
  return 2;
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(std::stoll(item));
  }
  return out;
}

Expected<std::vector<int32_t>> load_prompt(const Args& a, const model::Model& m) {
  std::vector<int32_t> ids;
  if (!a.prompt_ids.empty()) {
    std::ifstream f(a.prompt_ids);
    if (!f) return not_found("--prompt-ids " + a.prompt_ids + ": cannot open");
    std::stringstream buf;
    buf << f.rdbuf();
    std::string all = buf.str();
    for (char& c : all) c = (c == ',' || c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
    std::stringstream ss(all);
    for (long long v; ss >> v;) ids.push_back(static_cast<int32_t>(v));
  } else if (!a.prompt_text.empty()) {
    std::ifstream f(a.prompt_text);
    if (!f) return not_found("--prompt-text " + a.prompt_text + ": cannot open");
    std::stringstream buf;
    buf << f.rdbuf();
    const std::string text = buf.str();
    DI_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::from_file(a.model + "/tokenizer.json"));
    ids = tok.encode(text);
  } else {
    // A fixed pseudo-random sequence (LCG) over the vocabulary, avoiding the first 16 ids.
    const int64_t V = m.vocab_size();
    uint64_t x = 12345;
    for (int64_t i = 0; i < a.prompt_len; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      ids.push_back(static_cast<int32_t>(16 + (x >> 33) % static_cast<uint64_t>(V - 16)));
    }
  }
  for (int32_t t : ids) {
    if (t < 0 || t >= m.vocab_size()) return out_of_range("prompt id outside the vocabulary");
  }
  if (ids.empty()) return invalid_argument("empty prompt");
  return ids;
}

// One prefill of `ids` (rows before the last `keep` skip the upper layers; keep <= 0: none):
// the wall and process CPU seconds it took, and the last row's logits.
struct Times {
  double wall = 0, cpu = 0;
};
Expected<Times> prefill(model::Model& m, model::SequenceCache& c, const std::vector<int32_t>& ids,
                        int64_t keep, int64_t chunk, std::vector<float>& logits) {
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t from = keep > 0 ? model::upper_kept_from(n, keep) : 0;
  if (chunk <= 0) chunk = n;
  const auto t0 = Clock::now();
  const double c0 = cpu_seconds();
  for (int64_t at = 0; at < n; at += chunk) {
    const int64_t k = std::min(chunk, n - at);
    const bool last = at + k == n;
    DI_ASSIGN_OR_RETURN(auto out, m.extend(c, {ids.data() + at, static_cast<size_t>(k)},
                                           last ? model::LogitsWanted::kLast
                                                : model::LogitsWanted::kNone,
                                           false, model::upper_skip_rows(at, k, from)));
    if (last) logits.assign(out.logits.begin(), out.logits.end());
  }
  return Times{std::chrono::duration<double>(Clock::now() - t0).count(), cpu_seconds() - c0};
}

std::vector<double> log_softmax(const std::vector<float>& l) {
  const double top = *std::max_element(l.begin(), l.end());
  double sum = 0;
  for (float v : l) sum += std::exp(static_cast<double>(v) - top);
  const double lse = top + std::log(sum);
  std::vector<double> out(l.size());
  for (size_t i = 0; i < l.size(); ++i) out[i] = static_cast<double>(l[i]) - lse;
  return out;
}

int32_t argmax(const std::vector<float>& l) {
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

Expected<std::vector<int32_t>> greedy(model::Model& m, model::SequenceCache& c,
                                      std::vector<float> logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(logits));
    if (i + 1 == n) break;
    DI_ASSIGN_OR_RETURN(auto r, m.decode(c, out.back()));
    logits.assign(r.logits.begin(), r.logits.end());
  }
  return out;
}

Expected<Row> measure(model::Model& m, const std::vector<int32_t>& ids, int64_t keep,
                      const Args& a) {
  Row row;
  row.keep = keep;
  row.skipped = model::upper_kept_from(static_cast<int64_t>(ids.size()), keep);
  row.off_s = row.on_s = row.cpu_off_s = row.cpu_on_s = std::numeric_limits<double>::infinity();
  std::vector<float> off_logits, on_logits;
  std::vector<double> ratios, cpu_ratios;
  for (int r = 0; r < std::max(1, a.reps); ++r) {
    model::SequenceCache off = m.new_sequence(), on = m.new_sequence();
    DI_ASSIGN_OR_RETURN(Times t_off, prefill(m, off, ids, 0, a.chunk, off_logits));
    DI_ASSIGN_OR_RETURN(Times t_on, prefill(m, on, ids, keep, a.chunk, on_logits));
    row.off_s = std::min(row.off_s, t_off.wall);
    row.on_s = std::min(row.on_s, t_on.wall);
    row.cpu_off_s = std::min(row.cpu_off_s, t_off.cpu);
    row.cpu_on_s = std::min(row.cpu_on_s, t_on.cpu);
    ratios.push_back(t_off.wall / t_on.wall);
    cpu_ratios.push_back(t_off.cpu / t_on.cpu);
    if (r + 1 < a.reps) continue;
    row.speedup = median(ratios);
    row.cpu_speedup = median(cpu_ratios);
    const std::vector<double> p = log_softmax(off_logits), q = log_softmax(on_logits);
    for (size_t i = 0; i < p.size(); ++i) {
      row.kl += std::exp(p[i]) * (p[i] - q[i]);
      row.max_abs = std::max(row.max_abs, std::fabs(static_cast<double>(off_logits[i]) -
                                                    static_cast<double>(on_logits[i])));
    }
    row.top1 = argmax(off_logits) == argmax(on_logits);
    DI_ASSIGN_OR_RETURN(auto g_off, greedy(m, off, off_logits, a.tokens));
    DI_ASSIGN_OR_RETURN(auto g_on, greedy(m, on, on_logits, a.tokens));
    row.first_diff = a.tokens;
    for (int i = 0; i < a.tokens; ++i) {
      const bool same = g_off[static_cast<size_t>(i)] == g_on[static_cast<size_t>(i)];
      row.greedy_match += same ? 1 : 0;
      if (!same && row.first_diff == a.tokens) row.first_diff = i;
    }
  }
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + k).c_str());
    const std::string v = argv[++i];
    if (k == "--model") a.model = v;
    else if (k == "--backend") a.backend = v;
    else if (k == "--threads") a.threads = std::stoi(v);
    else if (k == "--prompt-len") a.prompt_len = std::stoll(v);
    else if (k == "--prompt-ids") a.prompt_ids = v;
    else if (k == "--prompt-text") a.prompt_text = v;
    else if (k == "--keep") a.keeps = parse_list(v);
    else if (k == "--tokens") a.tokens = std::stoi(v);
    else if (k == "--reps") a.reps = std::stoi(v);
    else if (k == "--chunk") a.chunk = std::stoll(v);
    else if (k == "--csv") a.csv = v;
    else if (k == "--json") a.json = v;
    else return usage(("unknown option " + k).c_str());
  }
  if (a.model.empty()) return usage("--model is required");
  auto ops = backend::make_ops(a.backend, a.threads);
  if (!ops.ok()) return usage(ops.status().message().c_str());
  const auto t_load = Clock::now();
  auto loaded = model::load_model(a.model, **ops);
  if (!loaded.ok()) return usage(loaded.status().message().c_str());
  model::Model& m = **loaded;
  const io::ModelConfig& c = m.config();
  if (Status s = model::bounded_replay_supported(c); !s.ok()) return usage(s.message().c_str());
  auto ids = load_prompt(a, m);
  if (!ids.ok()) return usage(ids.status().message().c_str());
  const int64_t block = m.drafter() == model::DrafterKind::kDSpark ? c.dspark.block_size : 0;
  const int64_t min_keep = model::min_keep_tokens(c, block);
  const int64_t horizon = model::upper_exact_keep(c);
  std::printf("model %s (%zu layers, upper layers from %zu, window %lld), backend %s, loaded in "
              "%.1f s; prompt %zu tokens; minimum keep %lld (window + DSpark block %lld), "
              "exactness horizon %lld\n",
              a.model.c_str(), c.layers.size(), model::first_upper_layer(c),
              static_cast<long long>(c.sliding_window), (*ops)->name(),
              std::chrono::duration<double>(Clock::now() - t_load).count(), ids->size(),
              static_cast<long long>(min_keep), static_cast<long long>(block),
              static_cast<long long>(horizon));
  std::vector<Row> rows;
  for (int64_t keep : a.keeps) {
    auto r = measure(m, *ids, keep, a);
    if (!r.ok()) return usage(r.status().message().c_str());
    rows.push_back(*r);
    std::printf("keep %6lld: skipped %6lld rows; prefill off %.4f s, on %.4f s, speedup %.3fx "
                "(CPU time %.4f / %.4f s, %.3fx); KL %.3e, max|dlogit| %.3e, top-1 %s; greedy "
                "%d/%d equal, first diff %d%s\n",
                static_cast<long long>(r->keep), static_cast<long long>(r->skipped), r->off_s,
                r->on_s, r->speedup, r->cpu_off_s, r->cpu_on_s, r->cpu_speedup, r->kl, r->max_abs, r->top1 ? "agrees" : "differs",
                r->greedy_match, a.tokens, r->first_diff,
                keep < min_keep ? " (below the minimum keep: the engine refuses it)" : "");
  }
  if (!a.csv.empty()) {
    std::ofstream f(a.csv);
    f << "model,backend,prompt_tokens,keep,min_keep,horizon,skipped_rows,prefill_off_s,"
         "prefill_on_s,speedup,cpu_off_s,cpu_on_s,cpu_speedup,kl,max_abs_dlogit,top1_agree,"
         "greedy_tokens,greedy_match,greedy_first_diff\n";
    for (const Row& r : rows) {
      f << a.model << ',' << (*ops)->name() << ',' << ids->size() << ',' << r.keep << ','
        << min_keep << ',' << horizon << ',' << r.skipped << ',' << r.off_s << ',' << r.on_s
        << ',' << r.speedup << ',' << r.cpu_off_s << ',' << r.cpu_on_s << ','
        << r.cpu_speedup << ',' << r.kl << ',' << r.max_abs << ',' << r.top1 << ','
        << a.tokens << ',' << r.greedy_match << ',' << r.first_diff << '\n';
    }
  }
  if (!a.json.empty()) {
    std::ofstream f(a.json);
    f << "{\"model\": \"" << a.model << "\", \"backend\": \"" << (*ops)->name()
      << "\", \"prompt_tokens\": " << ids->size() << ", \"min_keep\": " << min_keep
      << ", \"horizon\": " << horizon << ", \"rows\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      f << (i ? ", " : "") << "{\"keep\": " << r.keep << ", \"skipped_rows\": " << r.skipped
        << ", \"prefill_off_s\": " << r.off_s << ", \"prefill_on_s\": " << r.on_s
        << ", \"speedup\": " << r.speedup << ", \"cpu_off_s\": " << r.cpu_off_s
        << ", \"cpu_on_s\": " << r.cpu_on_s << ", \"cpu_speedup\": " << r.cpu_speedup
        << ", \"kl\": " << r.kl
        << ", \"max_abs_dlogit\": " << r.max_abs << ", \"top1_agree\": "
        << (r.top1 ? "true" : "false") << ", \"greedy_tokens\": " << a.tokens
        << ", \"greedy_match\": " << r.greedy_match << ", \"greedy_first_diff\": " << r.first_diff
        << "}";
    }
    f << "]}\n";
  }
  return 0;
}
