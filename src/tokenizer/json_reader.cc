// The SAX reader of json_reader.h.
#include "tokenizer/json_reader.h"

namespace deepinfer::tokenizer::detail {
namespace {

using json = nlohmann::json;

class Handler : public nlohmann::json_sax<json> {
 public:
  explicit Handler(TokenizerJson& out) : out_(out), dom_(out.root, /*allow_exceptions=*/false) {}

  bool null() override { return capture_ ? bad("null") : dom_.null(); }
  bool boolean(bool v) override { return capture_ ? bad("a boolean") : dom_.boolean(v); }
  bool number_integer(number_integer_t v) override {
    if (skip_ > 0) return true;
    if (capture_ == kVocab) {
      out_.vocab.emplace_back(std::move(pending_key_), v);
      return true;
    }
    return capture_ ? bad("a number") : dom_.number_integer(v);
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (skip_ > 0) return true;
    if (capture_ == kVocab) {
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
        if (pair_size_ == 0)
          out_.merges.back().first = std::move(s);
        else if (pair_size_ == 1)
          out_.merges.back().second = std::move(s);
        ++pair_size_;
        return true;
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
      pending_key_ = std::move(k);
      return true;
    }
    if (capture_) return bad("an object");
    if (depth_ == 1) model_key_ = (k == "model");
    if (depth_ == 2) field_ = model_key_ && in_model_ ? k : std::string();
    return dom_.key(k);
  }
  bool start_object(std::size_t n) override {
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
    if (capture_ == kMerges && depth_ == kCaptureDepth && skip_ == 0) {
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

  TokenizerJson& out_;
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  int depth_ = 0;
  bool model_key_ = false, in_model_ = false;
  std::string field_;
  Capture capture_ = kNone;
  std::string pending_key_;
  int pair_size_ = 0;
  int skip_ = 0;
  std::string error_;
};

}  // namespace

bool parse_tokenizer_json(const std::string& text, TokenizerJson& out, std::string& error) {
  Handler h(out);
  bool ok = json::sax_parse(text, &h, json::input_format_t::json, /*strict=*/true);
  if (!ok) {
    error = h.error().empty() ? "syntax error" : h.error();
    return false;
  }
  return true;
}

}  // namespace deepinfer::tokenizer::detail
