// structured_compile_bench: compile time of pathological regexes, GBNF grammars and JSON
// Schemas (docs/fuzzing.md, "Compile time"): front end, automaton and mask precompute,
// against the structured fuzz targets' 275-token vocabulary (tests/fuzz/structured_driver.h)
// or, with --tokenizer, a real one; one thread, best of --runs. Inputs the limits refuse are
// timed too: a refusal must be fast.
//
//   structured_compile_bench [--runs 3] [--filter SUBSTRING] [--tsv] [--tokenizer tokenizer.json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/ebnf.h"
#include "structured/json_schema.h"
#include "structured/regex.h"
#include "tokenizer/tokenizer.h"

using namespace deepinfer;
using namespace deepinfer::structured;

namespace {

// The fuzz targets' vocabulary (tests/fuzz/structured_driver.h, kept in step by hand).
std::shared_ptr<const TokenizerInfo> vocabulary() {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"{\"", "\":", "\",\"", "\"}", "true", "null", "false", "12", "-0.", "ab",
                        "abc", "  ", "\\n", "\\u00", "\xc3\xa9", "\xe4\xbd\xa0", "\xc3"}) {
    toks.push_back(t);
  }
  toks.push_back("</s>");
  toks.push_back("<special>");
  const int32_t eos = static_cast<int32_t>(toks.size()) - 2;
  return TokenizerInfo::from_vocab(std::move(toks), {eos + 1}, {eos});
}

struct Case {
  const char* kind;  // regex, gbnf, json
  std::string text;
  std::string label;  // shown instead of text when set
};

std::vector<Case> cases() {
  std::vector<Case> c;
  auto re = [&](std::string t, std::string label = "") {
    c.push_back({"regex", std::move(t), std::move(label)});
  };
  re(".{10000}");
  re("[^\"]{0,10000}");
  re("\\d{10000}");
  re("(ab|cd){0,5000}");
  for (int n : {100, 200, 233, 400, 1000, 10000}) re("[9a]+\\d{" + std::to_string(n) + "}");
  re("[)a9.\x87"
     "fA((]+\\d{233}",
     "[)a9.\\x87fA((]+\\d{233} (fuzz input 1)");
  re("a-\xa2z]{23+\\d{233}}", "a-\\xa2z]{23+\\d{233}} (fuzz input 2)");
  for (int k : {10, 14, 16, 18, 20}) re("(a|b)*a(a|b){" + std::to_string(k) + "}");
  re("[a-z]*[a-m]{1000}");
  re(".*.{0,2000}");
  re("(.{0,100}){100}");
  re("(a{99}){10000}");
  re("(a{199}){10000}");
  {
    std::string lit;  // the printable ASCII characters that are not regex syntax: 80 classes
    for (int b = 33; b < 127; ++b) {
      if (b == '\\' || b == '-' || std::strchr("^$.|?*+()[]{}", b)) continue;
      lit += static_cast<char>(b);
    }
    char label[64];
    std::snprintf(label, sizeof label, "(<%zu distinct bytes>){10000}", lit.size());
    re("(" + lit + "){10000}", label);
  }
  // Chains of rules: each refers to the next; nullable from the end (fixpoints run longest).
  for (int rules : {1000, 9999}) {
    std::string g = "root ::= r1\n";
    char line[96];
    for (int i = 1; i + 1 < rules; ++i) {
      std::snprintf(line, sizeof line, "r%d ::= \"x\" r%d | \"\"\n", i, i + 1);
      g += line;
    }
    std::snprintf(line, sizeof line, "r%d ::= \"y\"?\n", rules - 1);
    g += line;
    std::snprintf(line, sizeof line, "chain of %d nullable rules", rules);
    c.push_back({"gbnf", g, line});
  }
  {
    // The same chain defined in the other order: each rule refers to the one defined before it.
    std::string g = "root ::= r9998\nr1 ::= \"y\"?\n";
    char line[96];
    for (int i = 2; i < 9999; ++i) {
      std::snprintf(line, sizeof line, "r%d ::= \"x\" r%d | \"\"\n", i, i - 1);
      g += line;
    }
    c.push_back({"gbnf", g, "chain of 9999 nullable rules, reversed"});
  }
  // Rules that only refer to the next: nullable (and FIRST) known at the end, one rule further
  // per pass of a fixpoint over the rules in order. 50,000 is over the limit of 10,000 rules:
  // the front end reads them all first.
  for (int rules : {9999, 50000}) {
    std::string g = "root ::= r1\n";
    char line[64];
    for (int i = 1; i + 1 < rules; ++i) {
      std::snprintf(line, sizeof line, "r%d ::= r%d\n", i, i + 1);
      g += line;
    }
    std::snprintf(line, sizeof line, "r%d ::= \"a\"?\n", rules - 1);
    g += line;
    std::snprintf(line, sizeof line, "chain of %d rules", rules);
    c.push_back({"gbnf", g, line});
  }
  c.push_back({"gbnf", "root ::= [^\"]{0,10000}", ""});
  c.push_back({"gbnf", "root ::= (\"a\" | \"b\")* \"a\" [ab]{16}", ""});
  c.push_back(
      {"gbnf", "root ::= x{0,100}\nx ::= [a-z]{0,100}", "root ::= x{0,100}; x ::= [a-z]{0,100}"});
  c.push_back({"json", R"({"type":"string","maxLength":100})", ""});
  c.push_back({"json", R"({"type":"string","maxLength":512})", ""});
  c.push_back(
      {"json", R"({"type":"array","maxItems":512,"items":{"type":"string","maxLength":512}})", ""});
  c.push_back({"json", R"({"type":"string","pattern":"^[9a]+\\d{233}$"})", ""});
  return c;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 3;
  std::string filter;
  bool tsv = false;
  std::string tokenizer_path;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) {
      filter = argv[++i];
    } else if (!std::strcmp(argv[i], "--tsv")) {
      tsv = true;
    } else if (!std::strcmp(argv[i], "--tokenizer") && i + 1 < argc) {
      tokenizer_path = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: structured_compile_bench [--runs N] [--filter S] [--tsv] "
                   "[--tokenizer tokenizer.json]\n");
      return 2;
    }
  }
  std::shared_ptr<const TokenizerInfo> vocab;
  if (tokenizer_path.empty()) {
    vocab = vocabulary();
  } else {
    auto tok = tokenizer::Tokenizer::from_file(tokenizer_path);
    if (!tok.ok()) {
      std::fprintf(stderr, "structured_compile_bench: error: %s\n",
                   tok.status().to_string().c_str());
      return 1;
    }
    vocab = TokenizerInfo::from_tokenizer(tok.value());
  }
  if (tsv) {
    std::printf(
        "kind\tinput\ttotal_ms\tautomaton_ms\tmasks_ms\tstates\ttoken_sets\tsubset_work\t"
        "result\n");
  } else {
    std::printf("%-5s %-46s %9s %9s %9s %8s %8s %9s  %s\n", "kind", "input", "total_ms",
                "automaton", "masks", "states", "sets", "work", "result");
  }
  for (const Case& c : cases()) {
    const std::string label = c.label.empty() ? c.text : c.label;
    if (!filter.empty() && label.find(filter) == std::string::npos) continue;
    double best = 1e300, best_aut = 0, best_masks = 0;
    int32_t states = 0;
    int64_t work = 0;
    int32_t token_sets = 0;
    std::string result;
    for (int r = 0; r < runs; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      Expected<Grammar> g = internal_error("unknown kind");
      if (!std::strcmp(c.kind, "regex")) g = grammar_from_regex(c.text);
      if (!std::strcmp(c.kind, "gbnf")) g = grammar_from_ebnf(c.text);
      if (!std::strcmp(c.kind, "json")) g = grammar_from_json_schema(c.text);
      double aut = 0, masks = 0;
      if (!g.ok()) {
        result = "front-end error: " + g.status().message();
      } else {
        auto cg = CompiledGrammar::compile(*g, vocab);
        if (cg.ok()) {
          aut = (*cg)->stats().automaton_ms;
          masks = (*cg)->stats().masks_ms;
          states = (*cg)->stats().num_states;
          work = (*cg)->automaton().subset_work;
          token_sets = (*cg)->stats().num_token_sets;
          result = "ok";
        } else {
          result = "refused: " + cg.status().message().substr(0, 60);
        }
      }
      const double total = ms_since(t0);
      if (total < best) {
        best = total;
        best_aut = aut;
        best_masks = masks;
      }
    }
    if (tsv) {
      std::printf("%s\t%s\t%.1f\t%.1f\t%.1f\t%d\t%d\t%lld\t%s\n", c.kind, label.c_str(), best,
                  best_aut, best_masks, states, token_sets, static_cast<long long>(work),
                  result.c_str());
    } else {
      std::printf("%-5s %-46s %9.1f %9.1f %9.1f %8d %8d %9lld  %s\n", c.kind, label.c_str(), best,
                  best_aut, best_masks, states, token_sets, static_cast<long long>(work),
                  result.c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}
