// Encode throughput of deepinfer::tokenizer, one thread.
//
//   tokenizer_bench --tokenizer PATH --corpus tests/data/tokenizer/corpus.bin [--rounds N] [--json
//   OUT]
//
// Encodes every corpus document one at a time (Tokenizer::encode), `rounds` times, after one
// untimed warm-up round (the per-thread word cache is then warm, as it is in a server; HF
// keeps a word cache too). Also reports the cold first round and the load time of the
// tokenizer.json. Prints MB/s and tokens/s, and writes them as JSON when --json is given.
// bench_vs_hf.py runs this next to HF `tokenizers` on the same corpus.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<std::string> read_corpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  std::vector<std::string> docs;
  if (data.size() < 16 || data.compare(0, 8, "DITKCORP") != 0) {
    if (!data.empty()) docs.push_back(data);  // any other file: one document
    return docs;
  }
  size_t pos = 12;
  auto u32 = [&] {
    uint32_t v;
    std::memcpy(&v, data.data() + pos, 4);
    pos += 4;
    return v;
  };
  uint32_t n = u32();
  for (uint32_t k = 0; k < n; ++k) {
    pos += u32();  // name
    uint32_t len = u32();
    docs.push_back(data.substr(pos, len));
    pos += len;
  }
  return docs;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tok_path, corpus_path, json_out;
  int rounds = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--tokenizer")
      tok_path = next();
    else if (a == "--corpus")
      corpus_path = next();
    else if (a == "--rounds")
      rounds = std::stoi(next());
    else if (a == "--json")
      json_out = next();
    else {
      std::fprintf(stderr, "usage: %s --tokenizer PATH --corpus FILE [--rounds N] [--json OUT]\n",
                   argv[0]);
      return 2;
    }
  }
  if (tok_path.empty() || corpus_path.empty()) {
    std::fprintf(stderr, "usage: %s --tokenizer PATH --corpus FILE [--rounds N] [--json OUT]\n",
                 argv[0]);
    return 2;
  }
  auto t0 = Clock::now();
  auto tok = deepinfer::tokenizer::Tokenizer::from_file(tok_path);
  const double load_s = seconds_since(t0);
  if (!tok.ok()) {
    std::fprintf(stderr, "error: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  auto docs = read_corpus(corpus_path);
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  if (docs.empty()) {
    std::fprintf(stderr, "error: empty corpus %s\n", corpus_path.c_str());
    return 1;
  }

  std::vector<int32_t> ids;
  auto one_round = [&]() {
    size_t tokens = 0;
    for (const auto& d : docs) {
      ids.clear();
      tok->encode_into(d, ids);
      tokens += ids.size();
    }
    return tokens;
  };
  t0 = Clock::now();
  const size_t tokens = one_round();  // cold: empty word cache
  const double cold_s = seconds_since(t0);
  t0 = Clock::now();
  for (int r = 0; r < rounds; ++r) one_round();
  const double warm_s = seconds_since(t0) / rounds;

  const double mb = static_cast<double>(bytes) / 1e6;
  std::printf("deepinfer tokenizer: load %.3f s; %zu docs, %.3f MB, %zu tokens\n", load_s,
              docs.size(), mb, tokens);
  std::printf("  cold round:  %8.2f MB/s  %12.0f tokens/s\n", mb / cold_s, tokens / cold_s);
  std::printf("  warm rounds: %8.2f MB/s  %12.0f tokens/s  (mean of %d)\n", mb / warm_s,
              tokens / warm_s, rounds);
  if (!json_out.empty()) {
    std::ofstream out(json_out);
    out << "{\"impl\": \"deepinfer\", \"load_s\": " << load_s << ", \"docs\": " << docs.size()
        << ", \"bytes\": " << bytes << ", \"tokens\": " << tokens
        << ", \"cold_mb_s\": " << mb / cold_s << ", \"cold_tokens_s\": " << tokens / cold_s
        << ", \"warm_mb_s\": " << mb / warm_s << ", \"warm_tokens_s\": " << tokens / warm_s
        << ", \"rounds\": " << rounds << "}\n";
  }
  return 0;
}
