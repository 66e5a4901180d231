// `deepinfer tokenize --tokenizer PATH [--json] [--no-special]`: text on stdin -> ids on stdout
// (space-separated with a final newline, or a JSON array with --json).
// `deepinfer detokenize --tokenizer PATH [--skip-special]`: ids on stdin (a JSON array, or
// numbers separated by whitespace and/or commas) -> text on stdout.
// PATH is a tokenizer.json or a model directory that contains one.
#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "deepinfer/tokenizer.h"

namespace deepinfer::cli {
namespace {

struct TokenizeArgs {
  std::string tokenizer_path;
  bool json_output = false;
  bool no_special = false;
  bool skip_special = false;
};

std::string read_stdin() {
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) text.append(buf, n);
  return text;
}

int fail(const char* cmd, const std::string& message) {
  std::fprintf(stderr, "deepinfer %s: error: %s\n", cmd, message.c_str());
  return 1;
}

int run_tokenize(const TokenizeArgs& args) {
  auto tok = Tokenizer::from_file(args.tokenizer_path);
  if (!tok.ok()) return fail("tokenize", tok.status().message());
  const std::string text = read_stdin();
  const std::vector<int32_t> ids = tok->encode(text, /*allow_special=*/!args.no_special);
  std::string out;
  out.reserve(ids.size() * 7 + 2);
  if (args.json_output) out += '[';
  for (size_t k = 0; k < ids.size(); ++k) {
    if (k) out += args.json_output ? ", " : " ";
    out += std::to_string(ids[k]);
  }
  if (args.json_output) out += ']';
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

// Parses "[1, 2, 3]" or "1 2 3" or "1,2,3" (any mix of whitespace and commas; brackets only
// around the whole list). Errors name the offending value.
bool parse_ids(const std::string& text, int32_t vocab_size, std::vector<int32_t>& ids,
               std::string& error) {
  size_t i = 0, n = text.size();
  auto skip_separators = [&] {
    while (i < n && (std::isspace(static_cast<unsigned char>(text[i])) || text[i] == ',')) ++i;
  };
  skip_separators();
  bool bracket = i < n && text[i] == '[';
  if (bracket) ++i;
  bool closed = false;
  while (true) {
    skip_separators();
    if (i >= n) break;
    if (bracket && text[i] == ']') {
      closed = true;
      ++i;
      skip_separators();
      if (i < n) {
        error = "unexpected text after the closing ']': '" + text.substr(i, 20) + "'";
        return false;
      }
      break;
    }
    size_t start = i;
    while (i < n && !std::isspace(static_cast<unsigned char>(text[i])) && text[i] != ',' &&
           text[i] != ']')
      ++i;
    std::string value = text.substr(start, i - start);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || end != value.c_str() + value.size() || errno == ERANGE) {
      error = "'" + value + "' is not a token id (expected an integer)";
      return false;
    }
    if (v < 0 || v >= vocab_size) {
      error = "token id " + value + " is out of range (the vocabulary has ids 0.." +
              std::to_string(vocab_size - 1) + ")";
      return false;
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  if (bracket && !closed) {
    error = "the JSON array is not closed (missing ']')";
    return false;
  }
  return true;
}

int run_detokenize(const TokenizeArgs& args) {
  auto tok = Tokenizer::from_file(args.tokenizer_path);
  if (!tok.ok()) return fail("detokenize", tok.status().message());
  std::vector<int32_t> ids;
  std::string error;
  if (!parse_ids(read_stdin(), tok->vocab_size(), ids, error)) return fail("detokenize", error);
  for (int32_t id : ids) {
    if (!tok->id_to_token(id))
      return fail("detokenize", "token id " + std::to_string(id) + " is not in the vocabulary");
  }
  const std::string text = tok->decode(ids, args.skip_special);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

void register_tokenize_commands(CLI::App& app, CommandAction& action) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* tok = app.add_subcommand("tokenize", "Encode text from stdin into token ids");
  tok->add_option("--tokenizer", args->tokenizer_path,
                  "tokenizer.json, or a model directory containing one")
      ->required();
  tok->add_flag("--json", args->json_output, "print a JSON array instead of space-separated ids");
  tok->add_flag("--no-special", args->no_special, "treat special tokens in the text as plain text");
  tok->callback([args, &action] { action = [args] { return run_tokenize(*args); }; });

  CLI::App* detok = app.add_subcommand("detokenize", "Decode token ids from stdin into text");
  detok
      ->add_option("--tokenizer", args->tokenizer_path,
                   "tokenizer.json, or a model directory containing one")
      ->required();
  detok->add_flag("--skip-special", args->skip_special, "drop special tokens from the output");
  detok->callback([args, &action] { action = [args] { return run_detokenize(*args); }; });
}

}  // namespace deepinfer::cli
