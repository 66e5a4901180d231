// `deepinfer perplexity --model DIR (--text FILE | --tokens FILE.bin) [--window 513]
// [--max-windows N] [--json] [--backend opt|ref|cuda]`: validation perplexity, top-1 accuracy and
// MTP draft quality of a DeepSeek-V4 checkpoint, measured by our CPU model.
//
// The windows reproduce tools/train/train_default_model.py's validation exactly, so the numbers
// compare with the training log: the token stream (documents as BOS ids EOS, concatenated) is cut
// into chunks of window + 1 tokens (T + 2 there); a chunk's first `window` tokens are prefilled as
// a fresh sequence with all-row logits; positions 0 .. window-2 are scored (T = window - 1 targets:
// the last row's logits only serve the speculation check below). MTP (spec §2.8): row p = main
// streams at p + embedding of token p+1, predicting token p+2, scored against the real token
// (training's mtp_acc) and against the main model's own greedy choice at p+1 (what a greedy
// one-token speculative decoder would accept). --text tokenizes like tools/train/prepare_data.py:
// documents split at lines holding only U+001E, whitespace-stripped, empty ones dropped.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "commands.h"
#include "deepinfer/model_session.h"
#include "deepinfer/tokenizer.h"

namespace deepinfer::cli {
namespace {

namespace fs = std::filesystem;

struct PerplexityArgs {
  std::string model_dir;
  std::string text_file;
  std::string tokens_file;
  int window = 513;
  int max_windows = 0;  // 0: every whole window
  bool json_output = false;
  std::string backend;  // "" = DEEPINFER_ACCELERATOR (ModelSession::create)
};

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "deepinfer perplexity: error: %s\n", message.c_str());
  return code;
}

Expected<std::string> read_bytes(const std::string& path, const char* what) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return not_found(std::string(what) + " '" + path + "' does not exist or is not a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(std::string(what) + " '" + path + "' cannot be opened");
  std::string bytes;
  in.seekg(0, std::ios::end);
  bytes.resize(static_cast<size_t>(in.tellg()));
  in.seekg(0, std::ios::beg);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    return data_loss(std::string(what) + " '" + path + "' could not be read");
  }
  return bytes;
}

// uint16 little-endian ids, the format of data/default_model/tokens/*.bin.
Expected<std::vector<int32_t>> load_token_file(const std::string& path) {
  DI_ASSIGN_OR_RETURN(std::string bytes, read_bytes(path, "--tokens file"));
  if (bytes.size() % 2 != 0) {
    return data_loss("--tokens file '" + path + "' has " + std::to_string(bytes.size()) +
                     " bytes, not a whole number of uint16 token ids");
  }
  std::vector<int32_t> ids(bytes.size() / 2);
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto lo = static_cast<unsigned char>(bytes[2 * i]);
    const auto hi = static_cast<unsigned char>(bytes[2 * i + 1]);
    ids[i] = static_cast<int32_t>(lo | (hi << 8));
  }
  return ids;
}

// Documents separated by "\n\x1e\n" (prepare_data.py's DOC_SEP line), each encoded as BOS ids EOS.
Expected<std::vector<int32_t>> tokenize_text(const std::string& path, const std::string& model_dir,
                                             int32_t bos, int32_t eos, int64_t& documents) {
  DI_ASSIGN_OR_RETURN(std::string text, read_bytes(path, "--text file"));
  const fs::path tok_path = fs::path(model_dir) / "tokenizer.json";
  if (!fs::exists(tok_path)) {
    return not_found("model directory '" + model_dir +
                     "' has no tokenizer.json, so --text cannot be tokenized; pass pre-tokenized "
                     "ids with --tokens FILE.bin instead");
  }
  DI_ASSIGN_OR_RETURN(auto tok, Tokenizer::from_file(tok_path.string()));
  const std::string sep = "\n\x1e\n";
  const char* ws = " \t\n\r\f\v";
  std::vector<int32_t> ids;
  documents = 0;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(sep, at);
    if (end == std::string::npos) end = text.size();
    std::string doc = text.substr(at, end - at);
    doc.erase(0, doc.find_first_not_of(ws));
    const size_t last = doc.find_last_not_of(ws);
    doc.erase(last == std::string::npos ? 0 : last + 1);
    if (!doc.empty()) {
      ids.push_back(bos);
      const std::vector<int32_t> doc_ids = tok.encode(doc);
      ids.insert(ids.end(), doc_ids.begin(), doc_ids.end());
      ids.push_back(eos);
      ++documents;
    }
    at = end + sep.size();
  }
  if (documents == 0) return invalid_argument("--text file '" + path + "' holds no text");
  return ids;
}

int run(const PerplexityArgs& args) {
  if (args.text_file.empty() == args.tokens_file.empty()) {
    return fail(2, "give exactly one of --text FILE or --tokens FILE.bin");
  }
  if (args.window < 3) return fail(2, "--window must be >= 3 (MTP scores token p+2)");
  if (args.max_windows < 0) return fail(2, "--max-windows must be >= 0 (0: all)");

  auto session = ModelSession::create(args.backend);
  if (!session.ok()) return fail(2, session.status().message());
  ModelSession& m = **session;

  // Cheap input checks before the model load.
  Expected<std::vector<int32_t>> pre = std::vector<int32_t>{};
  if (!args.tokens_file.empty()) {
    pre = load_token_file(args.tokens_file);
    if (!pre.ok()) return fail(1, pre.status().message());
  } else if (auto t = read_bytes(args.text_file, "--text file"); !t.ok()) {
    return fail(1, t.status().message());
  }

  if (Status s = m.load(args.model_dir); !s.ok()) return fail(1, s.message());
  const int64_t V = m.vocab_size();

  int64_t documents = -1;
  std::vector<int32_t> ids;
  if (!args.tokens_file.empty()) {
    ids = std::move(*pre);
  } else {
    const std::vector<int64_t> eos = m.eos_token_ids();
    auto t = tokenize_text(args.text_file, args.model_dir, static_cast<int32_t>(m.bos_token_id()),
                           static_cast<int32_t>(eos.empty() ? 1 : eos[0]), documents);
    if (!t.ok()) return fail(1, t.status().message());
    ids = std::move(*t);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= V) {
      return fail(1, "token " + std::to_string(i) + " has id " + std::to_string(ids[i]) +
                         ", outside the model's vocabulary [0, " + std::to_string(V) +
                         "): tokens from another tokenizer?");
    }
  }

  const int64_t chunk = static_cast<int64_t>(args.window) + 1;
  int64_t n = ids.empty() ? 0 : (static_cast<int64_t>(ids.size()) - 1) / chunk;
  if (args.max_windows > 0) n = std::min<int64_t>(n, args.max_windows);
  if (n == 0) {
    return fail(1, "the input has " + std::to_string(ids.size()) + " tokens; one window needs " +
                       std::to_string(chunk + 1) + " (--window " + std::to_string(args.window) +
                       " + 2); give more text or a smaller --window");
  }
  const bool with_mtp = m.has_mtp();
  if (!with_mtp) {
    std::fprintf(stderr, "deepinfer perplexity: note: %s has no MTP block; MTP metrics skipped\n",
                 args.model_dir.c_str());
  }

  PerplexityTotals t;
  const auto t0 = std::chrono::steady_clock::now();
  const std::span<const int32_t> all(ids);
  for (int64_t w = 0; w < n; ++w) {
    const auto c = all.subspan(static_cast<size_t>(w * chunk), static_cast<size_t>(chunk));
    if (Status s = m.score_window(c, with_mtp, t); !s.ok()) return fail(1, s.message());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const double N = static_cast<double>(t.scored);
  const double nll = t.nll / N;
  nlohmann::json j;
  j["model"] = args.model_dir;
  j["semantics"] = m.official_semantics() ? "official" : "hf";
  j["input_tokens"] = ids.size();
  if (documents >= 0) j["documents"] = documents;
  j["window"] = args.window;
  j["windows"] = n;
  j["scored_tokens"] = t.scored;
  j["nll"] = nll;
  j["perplexity"] = std::exp(nll);
  j["top1_accuracy"] = static_cast<double>(t.correct) / N;
  if (with_mtp) {
    j["mtp_nll"] = t.mtp_nll / N;
    j["mtp_perplexity"] = std::exp(t.mtp_nll / N);
    j["mtp_top1_accuracy"] = static_cast<double>(t.mtp_correct) / N;
    j["mtp_greedy_acceptance"] = static_cast<double>(t.mtp_accepted) / N;
  } else {
    j["mtp"] = nullptr;
  }
  j["seconds"] = secs;
  j["tokens_per_s"] = secs > 0 ? static_cast<double>(n * args.window) / secs : 0.0;

  if (args.json_output) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s (%s semantics): %lld windows x %d tokens, %lld scored\n",
                args.model_dir.c_str(), m.official_semantics() ? "official" : "hf",
                static_cast<long long>(n), args.window, static_cast<long long>(t.scored));
    std::printf("nll %.4f nats/token  perplexity %.3f  top-1 accuracy %.4f\n", nll, std::exp(nll),
                static_cast<double>(t.correct) / N);
    if (with_mtp) {
      std::printf("mtp nll %.4f  mtp top-1 accuracy %.4f  greedy draft acceptance %.4f\n",
                  t.mtp_nll / N, static_cast<double>(t.mtp_correct) / N,
                  static_cast<double>(t.mtp_accepted) / N);
    }
    std::printf("%.1f s (%.1f tokens/s)\n", secs,
                secs > 0 ? static_cast<double>(n * args.window) / secs : 0.0);
  }
  std::fflush(stdout);  // also when run inside the Python extension
  return 0;
}

}  // namespace

void register_perplexity_command(CLI::App& app, CommandAction& action) {
  auto args = std::make_shared<PerplexityArgs>();
  CLI::App* cmd = app.add_subcommand("perplexity",
                                     "Validation perplexity, top-1 accuracy and MTP draft "
                                     "acceptance of a DeepSeek-V4 model (CPU)");
  cmd->add_option("--model", args->model_dir, "model directory (config.json + safetensors)")
      ->required();
  auto* text = cmd->add_option("--text", args->text_file,
                               "text file; documents separated by a line holding only U+001E "
                               "(tools/train/prepare_data.py), each scored as BOS ids EOS");
  auto* tokens =
      cmd->add_option("--tokens", args->tokens_file,
                      "uint16 little-endian token ids (data/default_model/tokens/*.bin)");
  text->excludes(tokens);
  cmd->add_option("--window", args->window,
                  "tokens fed per window (default 513 = training's T + 1); windows are "
                  "window + 1 tokens apart, as in train_default_model.py");
  cmd->add_option("--max-windows", args->max_windows, "score at most N windows (default: all)");
  cmd->add_flag("--json", args->json_output, "print one JSON object");
  cmd->add_option("--backend", args->backend, "opt, ref or cuda (default: DEEPINFER_ACCELERATOR)");
  cmd->callback([args, &action] { action = [args] { return run(*args); }; });
}

}  // namespace deepinfer::cli
