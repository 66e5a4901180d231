// The n-gram (prompt lookup) drafter: see drafter.h. Linear in the context per call: for each
// suffix length n from max_n down to min_n, the latest earlier occurrence of the last n tokens
// (scanning backwards, so the most recent match wins, as in vLLM's prompt lookup) proposes what
// followed it. Code, quotes, structured data and agent transcripts repeat themselves, which is
// where this helps; on text that does not repeat it proposes nothing and costs nothing.
#include <algorithm>

#include "runtime/spec/drafter.h"

namespace deepinfer::runtime::spec {
namespace {

class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int min_n, int max_n) : min_n_(std::max(1, min_n)), max_n_(std::max(min_n_, max_n)) {}
  std::string name() const override { return "ngram"; }

  Status propose(model::SequenceCache& /*cache*/, std::span<const int32_t> ctx, int k,
                 DraftState& state) override {
    DraftProposal& out = state.proposal;
    out.clear();
    const auto len = static_cast<int64_t>(ctx.size());
    if (k <= 0) return {};
    for (int n = std::min<int64_t>(max_n_, len - 1); n >= min_n_; --n) {
      const std::span<const int32_t> suffix = ctx.subspan(static_cast<size_t>(len - n));
      // Latest earlier occurrence [s, s + n) with s + n < len (something follows it).
      for (int64_t s = len - n - 1; s >= 0; --s) {
        if (!std::equal(suffix.begin(), suffix.end(), ctx.begin() + s)) continue;
        // What followed it, continued periodically past the context's end: a loop of period
        // len - from keeps proposing itself (generated text that repeats, tables, lists).
        const int64_t from = s + n;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t at = from + j;
          out.tokens.push_back(at < len ? ctx[static_cast<size_t>(at)]
                                        : out.tokens[static_cast<size_t>(at - len)]);
        }
        return {};
      }
    }
    return {};
  }

 private:
  int min_n_, max_n_;
};

}  // namespace

std::unique_ptr<Drafter> make_ngram_drafter(int min_n, int max_n) {
  return std::make_unique<NgramDrafter>(min_n, max_n);
}

}  // namespace deepinfer::runtime::spec
