// The SAX reader of json_reader.h.
#include "tokenizer/json_reader.h"

#include <filesystem>
#include <fstream>

#include "base/input_limits.h"

namespace deepinfer::tokenizer::detail {
namespace {

using json = nlohmann::json;

// The limits are checked as the SAX events arrive: nothing over a limit is stored, and parsing
// stops at the first one (a callback returning false).
class Handler : public nlohmann::json_sax<json> {
 public:
  Handler(TokenizerJson& out, const TokenizerLimits& limits)
      : out_(out), limits_(limits), dom_(out.root, /*allow_exceptions=*/false) {}

  bool null() override { return capture_ ? bad("null") : dom_.null(); }
  bool boolean(bool v) override { return capture_ ? bad("a boolean") : dom_.boolean(v); }
  bool number_integer(number_integer_t v) override {
    if (skip_ > 0) return true;
    if (capture_ == kVocab) {
      if (!vocab_room()) return false;
      out_.vocab.emplace_back(std::move(pending_key_), v);
      return true;
    }
    return capture_ ? bad("a number") : dom_.number_integer(v);
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (skip_ > 0) return true;
    if (capture_ == kVocab) {
      if (!vocab_room()) return false;
      out_.vocab.emplace_back(
          std::move(pending_key_),
          static_cast<int64_t>(v > (1ull << 62) ? -1 : static_cast<int64_t>(v)));
      return true;
    }
    return capture_ ? bad("a number") : dom_.number_unsigned(v);
  }
  bool number_float(number_float_t v, const string_t& s) override {
    return capture_ ? bad("a number") : dom_.number_float(v, s);
  }
  bool string(string_t& s) override {
    if (skip_ > 0) return true;
    if (capture_ == kMerges) {
      if (depth_ == kCaptureDepth + 1) {  // inside a ["a", "b"] pair
        if (!token_fits(s, "model.merges")) return false;
        if (pair_size_ == 0)
          out_.merges.back().first = std::move(s);
        else if (pair_size_ == 1)
          out_.merges.back().second = std::move(s);
        ++pair_size_;
        return true;
      }
      if (!merge_room()) return false;
      if (s.size() > 2 * limits_.max_token_bytes + 1) {  // "a b": two tokens and a space
        return over("a merge of " + format_count(s.size()) + " bytes in model.merges",
                    2 * limits_.max_token_bytes + 1, "2 x kMaxTokenBytes + 1",
                    "the file is corrupt");
      }
      out_.merges.emplace_back(std::move(s), std::string());
      return true;
    }
    return capture_ ? bad("a string") : dom_.string(s);
  }
  bool binary(binary_t& b) override { return capture_ ? bad("binary") : dom_.binary(b); }
  bool key(string_t& k) override {
    if (skip_ > 0) return true;
    if (capture_ == kVocab) {
      if (!token_fits(k, "model.vocab")) return false;
      pending_key_ = std::move(k);
      return true;
    }
    if (capture_) return bad("an object");
    if (depth_ == 1) model_key_ = (k == "model");
    if (depth_ == 2) field_ = model_key_ && in_model_ ? k : std::string();
    return dom_.key(k);
  }
  bool start_object(std::size_t n) override {
    if (!depth_room()) return false;
    if (capture_) {  // an object inside vocab or merges: skip it, report it
      ++skip_;
      return bad("an object");
    }
    if (depth_ == 2 && in_model_ && field_ == "vocab") {
      capture_ = kVocab;
      out_.has_vocab = true;
      ++depth_;
      return true;
    }
    ++depth_;
    if (depth_ == 2) in_model_ = model_key_;
    return dom_.start_object(n);
  }
  bool end_object() override {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    --depth_;
    if (capture_ == kVocab) {
      capture_ = kNone;
      return dom_.null();
    }
    if (depth_ == 1) in_model_ = false;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) override {
    if (!depth_room()) return false;
    if (capture_ == kMerges && depth_ == kCaptureDepth && skip_ == 0) {
      if (!merge_room()) return false;
      ++depth_;
      pair_size_ = 0;
      out_.merges.emplace_back();
      return true;
    }
    if (capture_) {
      ++skip_;
      return bad("an array");
    }
    if (depth_ == 2 && in_model_ && field_ == "merges") {
      capture_ = kMerges;
      out_.has_merges = true;
      ++depth_;
      return true;
    }
    ++depth_;
    return dom_.start_array(n);
  }
  bool end_array() override {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    --depth_;
    if (capture_ == kMerges) {
      if (depth_ == kCaptureDepth) {  // end of a pair
        if (pair_size_ != 2 || out_.merges.back().second.empty()) {
          out_.merges.back().second.clear();
          out_.merges.back().first = "\x01";  // not a pair of two tokens; load() reports it
        }
        return true;
      }
      capture_ = kNone;
      return dom_.null();
    }
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& tok,
                   const nlohmann::detail::exception& e) override {
    error_ = e.what();
    (void)pos;
    (void)tok;
    return false;
  }
  const std::string& error() const { return error_; }
  const std::string& limit_error() const { return limit_error_; }

 private:
  enum Capture { kNone, kVocab, kMerges };
  static constexpr int kCaptureDepth = 3;  // root(1) > model(2) > vocab / merges (3)
  bool bad(const char* what) {
    if (out_.capture_error.empty()) {
      out_.capture_error = std::string(capture_ == kVocab ? "model.vocab" : "model.merges") +
                           " has an entry of the wrong type (" + what + ")";
    }
    return true;  // keep parsing; load() reports capture_error
  }

  bool over(const std::string& found, size_t limit, const char* name, const char* fix) {
    limit_error_ = limit_message(found, limit,
                                 std::string(name) + " in src/tokenizer/tokenizer_limits.h", fix);
    return false;
  }
  bool depth_room() {
    const size_t depth = static_cast<size_t>(depth_ + skip_) + 1;
    if (depth <= limits_.max_json_depth) return true;
    return over("JSON nesting depth " + format_count(depth), limits_.max_json_depth,
                "kMaxTokenizerJsonDepth", "tokenizer.json nests a few levels; the file is corrupt");
  }
  bool vocab_room() {
    if (out_.vocab.size() < limits_.max_vocab) return true;
    return over("model.vocab's entry " + format_count(out_.vocab.size() + 1), limits_.max_vocab,
                "kMaxVocab", "no supported model has a vocabulary this large");
  }
  bool merge_room() {
    if (out_.merges.size() < limits_.max_merges) return true;
    return over("model.merges' entry " + format_count(out_.merges.size() + 1), limits_.max_merges,
                "kMaxMerges", "no supported model has this many merges");
  }
  bool token_fits(const std::string& token, const char* where) {
    if (token.size() <= limits_.max_token_bytes) return true;
    return over(std::string("a token of ") + format_count(token.size()) + " bytes in " + where,
                limits_.max_token_bytes, "kMaxTokenBytes", "the file is corrupt");
  }

  TokenizerJson& out_;
  const TokenizerLimits& limits_;
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  int depth_ = 0;
  bool model_key_ = false, in_model_ = false;
  std::string field_;
  Capture capture_ = kNone;
  std::string pending_key_;
  int pair_size_ = 0;
  int skip_ = 0;
  std::string error_;
  std::string limit_error_;
};

}  // namespace

Status parse_tokenizer_json(const std::string& text, const std::string& file, TokenizerJson& out,
                            const TokenizerLimits& limits) {
  Handler h(out, limits);
  if (json::sax_parse(text, &h, json::input_format_t::json, /*strict=*/true)) {
    return Status::ok_status();
  }
  if (!h.limit_error().empty()) return invalid_argument(file + ": " + h.limit_error());
  return data_loss(file + ": malformed JSON (truncated or corrupt file?): " +
                   (h.error().empty() ? std::string("syntax error") : h.error()));
}

Expected<std::string> resolve_tokenizer_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::string file = (fs::path(path) / "tokenizer.json").string();
    if (!fs::exists(file, ec)) return not_found("no tokenizer.json in directory " + path);
    return file;
  }
  if (!fs::exists(path, ec)) return not_found("tokenizer file not found: " + path);
  return path;
}

Expected<std::string> read_tokenizer_file(const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return not_found("cannot open tokenizer file " + path + ": " + ec.message());
  if (size > kMaxTokenizerFileBytes) {
    return invalid_argument(
        path + ": " +
        limit_message("a file of " + format_count(size) + " bytes", kMaxTokenizerFileBytes,
                      "kMaxTokenizerFileBytes in src/tokenizer/tokenizer_limits.h",
                      "this is not a tokenizer.json; check the path"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open tokenizer file " + path);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (!in) return data_loss("cannot read tokenizer file " + path);
  return text;
}

}  // namespace deepinfer::tokenizer::detail
