// Drafters that run the checkpoint's own draft layers (drafter.h). DeepSeek-V4.1's DSpark block
// drafter (spec §6.4; model::Model::dspark_draft): from the anchor (the last context token, not
// yet processed) it drafts a block of k positions in one forward of its stages over the
// context features the main layers left in the cache, chooses them left to right through its
// Markov head, and scores each with its confidence head (σ of the logit = the estimated
// survival of position j given j - 1 survived).
#include <algorithm>
#include <cmath>

#include "runtime/spec/drafter.h"

namespace deepinfer::runtime::spec {
namespace {

class DSparkDrafter final : public Drafter {
 public:
  explicit DSparkDrafter(model::Model& m) : model_(m) {}
  std::string name() const override { return "dspark"; }

  Status propose(model::SequenceCache& cache, std::span<const int32_t> ctx, int k,
                 DraftState& state) override {
    DraftProposal& out = state.proposal;
    out.clear();
    // The drafter was trained on blocks of dspark_block_size positions: never more.
    k = std::min<int>(k, model_.config().dspark.block_size);
    if (k <= 0 || ctx.empty()) return {};
    DI_ASSIGN_OR_RETURN(model::DraftBlock block, model_.dspark_draft(cache, ctx.back(), k));
    out.tokens = std::move(block.tokens);
    out.confidence.reserve(block.confidence.size());
    for (const float c : block.confidence) out.confidence.push_back(1.0f / (1.0f + std::exp(-c)));
    return {};
  }

 private:
  model::Model& model_;
};

// DeepSeek-V4's MTP block (spec §2.8): row t combines the target's final streams at t with the
// embedding of token t + 1 and predicts t + 2, so it runs one position behind the sequence and
// needs the target's hidden streams of every position (observe). After the last position it
// has predicted the first draft; further drafts chain the block on its own output streams
// (DeepSeek-V3's recursive use of one MTP module), and its state is then cut back.
class MtpDrafter final : public Drafter {
 public:
  explicit MtpDrafter(model::Model& m)
      : model_(m), width_(static_cast<int64_t>(m.config().hc_mult) * m.config().hidden_size) {}
  std::string name() const override { return "mtp"; }
  bool wants_hidden() const override { return true; }

  Status observe(model::SequenceCache& cache, std::span<const int32_t> ctx, int64_t first,
                 std::span<const float> hidden, DraftState& st) override {
    if (first == 0) st.lost = false;  // a sequence computed from its start again
    if (st.lost) return {};
    auto rows = [&] { return static_cast<int64_t>(st.pending.size()) / width_; };
    if (st.pending.empty() || first < st.pending_first || first > st.pending_first + rows()) {
      st.pending.clear();
      st.pending_first = first;
    } else {  // drop pending rows at or past `first` (re-fed), then append
      st.pending.resize(static_cast<size_t>((first - st.pending_first) * width_));
    }
    st.pending.insert(st.pending.end(), hidden.begin(), hidden.end());
    // Rows whose next token is known and whose target streams are here.
    const int64_t t0 = cache.draft_length();
    if (t0 < st.pending_first) {
      st.lost = true;  // its rows before pending_first are gone
      st.pending.clear();
      return {};
    }
    const int64_t t_end = std::min({cache.length(), static_cast<int64_t>(ctx.size()) - 1,
                                    st.pending_first + rows()});
    if (t_end <= t0) return {};
    const int64_t n = t_end - t0;
    const std::span<const float> in(st.pending.data() + (t0 - st.pending_first) * width_,
                                    static_cast<size_t>(n * width_));
    DI_ASSIGN_OR_RETURN(std::vector<float> logits,
                        model_.mtp_draft(cache, in, ctx.subspan(static_cast<size_t>(t0 + 1),
                                                                static_cast<size_t>(n)),
                                         &streams_));
    st.pending.erase(st.pending.begin(),
                     st.pending.begin() + (t_end - st.pending_first) * width_);
    st.pending_first = t_end;
    st.next_token = -1;
    if (t_end == cache.length()) {  // predicted the token after the sequence's last one
      const auto V = static_cast<size_t>(model_.vocab_size());
      pick(std::span<const float>(logits).subspan(static_cast<size_t>(n - 1) * V, V),
           st.next_token, st.next_confidence);
      st.next_streams.assign(streams_.end() - width_, streams_.end());
    }
    return {};
  }

  Status propose(model::SequenceCache& cache, std::span<const int32_t> ctx, int k,
                 DraftState& st) override {
    DraftProposal& out = st.proposal;
    out.clear();
    const int64_t L = cache.length();
    if (st.lost || k <= 0 || st.next_token < 0 || cache.draft_length() != L ||
        static_cast<int64_t>(ctx.size()) != L + 1) {
      return {};
    }
    out.tokens.push_back(st.next_token);
    out.confidence.push_back(st.next_confidence);
    std::vector<float> from = st.next_streams;
    Status status;
    for (int j = 1; j < k; ++j) {
      const int32_t prev = out.tokens.back();
      auto logits = model_.mtp_draft(cache, from, {&prev, 1}, &streams_, /*run_ahead=*/true);
      if (!logits.ok()) {
        status = logits.status();
        break;
      }
      int32_t t = 0;
      float p = 0;
      pick(*logits, t, p);
      out.tokens.push_back(t);
      out.confidence.push_back(p);
      from = streams_;
    }
    DI_TRY(cache.truncate_draft(L));  // back to the accepted state
    return status;
  }

 private:
  // The draft token of a logits row (argmax) and the probability the block gives it.
  static void pick(std::span<const float> row, int32_t& token, float& prob) {
    const auto best = std::max_element(row.begin(), row.end());
    token = static_cast<int32_t>(best - row.begin());
    double z = 0;
    for (const float l : row) z += std::exp(static_cast<double>(l - *best));
    prob = static_cast<float>(1.0 / z);
  }

  model::Model& model_;
  int64_t width_;
  std::vector<float> streams_;  // scratch
};

}  // namespace

Expected<std::unique_ptr<Drafter>> make_mtp_drafter(model::Model& model) {
  if (model.drafter() != model::DrafterKind::kMtp) {
    return failed_precondition(std::string("speculative method 'mtp' needs a DeepSeek-V4 "
                                           "checkpoint with an MTP block (mtp.0.*); this one has ") +
                               model::drafter_kind_name(model.drafter()));
  }
  return std::unique_ptr<Drafter>(std::make_unique<MtpDrafter>(model));
}

Expected<std::unique_ptr<Drafter>> make_dspark_drafter(model::Model& model) {
  if (model.drafter() != model::DrafterKind::kDSpark) {
    return failed_precondition(std::string("speculative method 'dspark' needs a DeepSeek-V4.1 "
                                           "checkpoint with DSpark draft layers; this one has ") +
                               model::drafter_kind_name(model.drafter()));
  }
  return std::unique_ptr<Drafter>(std::make_unique<DSparkDrafter>(model));
}

}  // namespace deepinfer::runtime::spec
