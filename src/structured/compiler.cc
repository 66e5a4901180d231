// GrammarCompiler: front-end dispatch and the compiled-grammar cache; see compiler.h.
#include "structured/compiler.h"

#include <algorithm>
#include <thread>

#include "structured/ebnf.h"
#include "structured/regex.h"

namespace deepinfer::structured {

namespace {
int pick_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(n, 1, 8);
}
}  // namespace

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenizerInfo> tokenizer,
                                 size_t max_cache_entries, int num_threads)
    : tokenizer_(std::move(tokenizer)),
      max_entries_(max_cache_entries),
      pool_(std::make_unique<ThreadPool>(pick_threads(num_threads))) {}

template <typename Build>
Expected<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::cached(const std::string& key,
                                                                         Build&& build) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  // Compile outside the lock: a slow schema must not block other requests. Two threads may
  // compile the same key at once; the first to finish wins.
  auto grammar = build();
  if (!grammar.ok()) return grammar.status();
  auto compiled = CompiledGrammar::compile(grammar.value(), tokenizer_, pool_.get());
  if (!compiled.ok()) return compiled.status();
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = cache_.emplace(key, compiled.value());
  if (inserted) {
    order_.push_back(key);
    while (cache_.size() > max_entries_ && !order_.empty()) {
      cache_.erase(order_.front());
      order_.pop_front();
    }
  }
  return it->second;
}

Expected<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile(
    std::string_view schema_type, std::string_view text) {
  if (schema_type == "json" || schema_type == "json_schema") return compile_json_schema(text);
  if (schema_type == "regex") return compile_regex(text);
  if (schema_type == "ebnf") return compile_ebnf(text);
  return invalid_argument("unknown schema_type '" + std::string(schema_type) +
                          "': expected \"json\" (or \"json_schema\"), \"regex\" or \"ebnf\"");
}

Expected<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile_json_schema(
    std::string_view schema, const JsonSchemaOptions& o) {
  std::string key = "json\x1f" + std::to_string(o.any_whitespace) + "\x1f" + o.item_separator +
                    "\x1f" + o.key_separator + "\x1f" + std::to_string(o.strict) + "\x1f" +
                    std::to_string(o.max_bounded_repeat) + "\x1f" + std::string(schema);
  return cached(key, [&] { return grammar_from_json_schema(schema, o); });
}

Expected<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile_regex(
    std::string_view pattern) {
  return cached("regex\x1f" + std::string(pattern), [&] { return grammar_from_regex(pattern); });
}

Expected<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile_ebnf(
    std::string_view text) {
  return cached("ebnf\x1f" + std::string(text), [&] { return grammar_from_ebnf(text); });
}

Expected<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile_grammar(
    const Grammar& grammar) {
  return CompiledGrammar::compile(grammar, tokenizer_, pool_.get());
}

size_t GrammarCompiler::cache_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

void GrammarCompiler::clear_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  cache_.clear();
  order_.clear();
}

}  // namespace deepinfer::structured
