// include/deepinfer/tokenizer.h over the tokenizer module (tokenizer.h).
#include <utility>

#include "deepinfer/tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {

struct Tokenizer::Impl {
  tokenizer::Tokenizer tok;
};

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Expected<Tokenizer> Tokenizer::from_file(const std::string& path) {
  DI_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::from_file(path));
  return Tokenizer(std::make_shared<const Impl>(Impl{std::move(tok)}));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  return impl_->tok.encode(text, allow_special);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  return impl_->tok.decode(ids, skip_special);
}

int32_t Tokenizer::vocab_size() const { return impl_->tok.vocab_size(); }
std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->tok.token_to_id(token);
}
std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  return impl_->tok.id_to_token(id);
}
bool Tokenizer::is_special(int32_t id) const { return impl_->tok.is_special(id); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->tok.bos_id(); }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->tok.eos_id(); }
const std::string& Tokenizer::path() const { return impl_->tok.path(); }
std::vector<std::string> Tokenizer::pieces(std::string_view text, bool allow_special) const {
  return impl_->tok.pieces(text, allow_special);
}

struct IncrementalDetokenizer::Impl {
  tokenizer::IncrementalDetokenizer detok;
};

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : impl_(std::make_unique<Impl>(
          Impl{tokenizer::IncrementalDetokenizer(tokenizer.impl_->tok, skip_special)})) {}
IncrementalDetokenizer::~IncrementalDetokenizer() = default;
IncrementalDetokenizer::IncrementalDetokenizer(IncrementalDetokenizer&&) noexcept = default;
IncrementalDetokenizer& IncrementalDetokenizer::operator=(IncrementalDetokenizer&&) noexcept =
    default;

std::string IncrementalDetokenizer::add(int32_t id) { return impl_->detok.add(id); }
std::string IncrementalDetokenizer::flush() { return impl_->detok.flush(); }
size_t IncrementalDetokenizer::pending_bytes() const { return impl_->detok.pending_bytes(); }

}  // namespace deepinfer
