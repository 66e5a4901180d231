// GrammarCompiler: the module's entry point for the engine. Parses a request's constraint
// (schema_type "regex", "json" / "json_schema", "ebnf"), compiles it against the tokenizer and
// caches the result by (type, options, text), so that a schema used by many requests is
// compiled once. Thread-safe; compiled grammars are immutable and shared.
//
//   GrammarCompiler compiler(TokenizerInfo::from_tokenizer(tok));
//   auto cg = compiler.compile("json",
//   R"({"type":"object","properties":{"a":{"type":"integer"}}})"); if (!cg.ok()) reject the request
//   with cg.status().message(); GrammarMatcher m(*cg);
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.h"
#include "structured/compiled_grammar.h"
#include "structured/json_schema.h"
#include "structured/tokenizer_info.h"

namespace deepinfer::structured {

class GrammarCompiler {
 public:
  // num_threads: threads for the mask precompute (0 = hardware concurrency, capped at 8).
  explicit GrammarCompiler(std::shared_ptr<const TokenizerInfo> tokenizer,
                           size_t max_cache_entries = 256, int num_threads = 0);

  // Errors name the problem and where (regex position, EBNF line/column, JSON pointer); an
  // unknown schema_type is InvalidArgument.
  Expected<std::shared_ptr<const CompiledGrammar>> compile(std::string_view schema_type,
                                                           std::string_view text);
  Expected<std::shared_ptr<const CompiledGrammar>> compile_json_schema(
      std::string_view schema, const JsonSchemaOptions& options = {});
  Expected<std::shared_ptr<const CompiledGrammar>> compile_regex(std::string_view pattern);
  Expected<std::shared_ptr<const CompiledGrammar>> compile_ebnf(std::string_view text);
  // Not cached.
  Expected<std::shared_ptr<const CompiledGrammar>> compile_grammar(const Grammar& grammar);

  size_t cache_size() const;
  void clear_cache();
  const std::shared_ptr<const TokenizerInfo>& tokenizer() const { return tokenizer_; }

 private:
  template <typename Build>
  Expected<std::shared_ptr<const CompiledGrammar>> cached(const std::string& key, Build&& build);

  std::shared_ptr<const TokenizerInfo> tokenizer_;
  size_t max_entries_;
  std::unique_ptr<ThreadPool> pool_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const CompiledGrammar>> cache_;
  std::deque<std::string> order_;  // insertion order, for eviction
};

}  // namespace deepinfer::structured
