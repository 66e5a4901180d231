// include/deepinfer/model_session.h over model::Model (model/model.h) and the backend selection
// (backend/select.h).
#include "deepinfer/model_session.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "backend/select.h"
#include "base/clock.h"
#include "base/options.h"
#include "model/model.h"

namespace deepinfer {
namespace {

// Per-row statistics of one logits row: log-sum-exp (FP64) and the argmax.
struct RowStats {
  double lse = 0.0;
  int32_t argmax = 0;
};

RowStats row_stats(const float* l, int64_t V) {
  const float* top = std::max_element(l, l + V);
  double sum = 0.0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(l[v]) - *top);
  return {static_cast<double>(*top) + std::log(sum), static_cast<int32_t>(top - l)};
}

}  // namespace

struct ModelSession::Impl {
  std::unique_ptr<backend::Ops> ops;  // outlives the model (declared first)
  std::unique_ptr<model::Model> model;
};

ModelSession::ModelSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ModelSession::~ModelSession() = default;

Expected<std::unique_ptr<ModelSession>> ModelSession::create(const std::string& backend) {
  const auto& env = env_options();
  auto impl = std::make_unique<Impl>();
  DI_ASSIGN_OR_RETURN(impl->ops, backend::make_ops(backend, env.ok() ? env->num_threads : 0));
  return std::unique_ptr<ModelSession>(new ModelSession(std::move(impl)));
}

std::string ModelSession::backend_name() const { return impl_->ops->name(); }

Status ModelSession::load(const std::string& model_dir, const std::string& load_format) {
  DI_ASSIGN_OR_RETURN(const io::LoadFormat format,
                      io::parse_load_format(load_format, "load_format"));
  impl_->model.reset();
  DI_ASSIGN_OR_RETURN(impl_->model, model::load_model(model_dir, *impl_->ops, {format, 0}));
  return Status::ok_status();
}

int64_t ModelSession::vocab_size() const { return impl_->model->vocab_size(); }
int64_t ModelSession::bos_token_id() const { return impl_->model->config().bos_token_id; }
std::vector<int64_t> ModelSession::eos_token_ids() const {
  return impl_->model->config().eos_token_ids;
}
bool ModelSession::has_mtp() const { return impl_->model->has_mtp(); }
bool ModelSession::official_semantics() const { return impl_->model->official_semantics(); }

Expected<GreedyGeneration> ModelSession::generate_greedy(std::span<const int32_t> prompt,
                                                         int max_tokens, bool ignore_eos) {
  model::Model& m = *impl_->model;
  const int64_t V = m.vocab_size();
  const auto& eos = m.config().eos_token_ids;
  GreedyGeneration g;
  g.finish_reason = "length";
  auto seq = m.new_sequence();
  std::vector<int32_t> step(prompt.begin(), prompt.end());
  for (int i = 0; i < max_tokens; ++i) {
    const auto t_step = SteadyClock::now();
    auto out = m.extend(seq, step);
    (i == 0 ? g.prefill_seconds : g.decode_seconds) += seconds_since(t_step);
    if (!out.ok()) return out.status();
    const float* l = out->logits.data();
    const int32_t next = static_cast<int32_t>(std::max_element(l, l + V) - l);
    g.token_ids.push_back(next);
    if (!ignore_eos && std::find(eos.begin(), eos.end(), next) != eos.end()) {
      g.finish_reason = "eos";
      break;
    }
    step.assign(1, next);
  }
  return g;
}

Status ModelSession::score_window(std::span<const int32_t> chunk, bool with_mtp,
                                  PerplexityTotals& t) {
  model::Model& m = *impl_->model;
  const int64_t V = m.vocab_size();
  const int64_t W = static_cast<int64_t>(chunk.size()) - 1;  // tokens fed; chunk[W] is a target
  const int64_t T = W - 1;                                   // scored positions
  auto seq = m.new_sequence();
  DI_ASSIGN_OR_RETURN(auto out, m.extend(seq, chunk.first(static_cast<size_t>(W)),
                                         model::LogitsWanted::kAll, with_mtp));
  if (out.logit_rows != W) {
    return internal_error("perplexity: expected " + std::to_string(W) + " logits rows, got " +
                          std::to_string(out.logit_rows));
  }
  std::vector<int32_t> greedy(static_cast<size_t>(W));
  for (int64_t p = 0; p < W; ++p) {
    const float* l = out.logits.data() + p * V;
    const RowStats r = row_stats(l, V);
    greedy[static_cast<size_t>(p)] = r.argmax;
    if (p < T) {
      const int32_t target = chunk[static_cast<size_t>(p + 1)];
      t.nll += r.lse - static_cast<double>(l[target]);
      t.correct += r.argmax == target;
    }
  }
  t.scored += T;
  if (!with_mtp) return Status::ok_status();
  const size_t row_width = out.hidden.size() / static_cast<size_t>(W);
  const std::span<const float> hidden(out.hidden.data(), row_width * static_cast<size_t>(T));
  DI_ASSIGN_OR_RETURN(auto draft,
                      m.mtp_draft(seq, hidden, chunk.subspan(1, static_cast<size_t>(T))));
  for (int64_t p = 0; p < T; ++p) {
    const float* l = draft.data() + p * V;
    const RowStats r = row_stats(l, V);
    const int32_t target = chunk[static_cast<size_t>(p + 2)];
    t.mtp_nll += r.lse - static_cast<double>(l[target]);
    t.mtp_correct += r.argmax == target;
    t.mtp_accepted += r.argmax == greedy[static_cast<size_t>(p + 1)];
  }
  return Status::ok_status();
}

}  // namespace deepinfer
