// TensorParallelEngine (tensor_parallel_engine.h): creation, the same requests on every rank,
// the lockstep step, rank 0's answers.
#include "runtime/tensor_parallel_engine.h"

#include <algorithm>

#include "io/model_config.h"
#include "parallel/expert_placement.h"
#include "runtime/data_parallel_engine.h"

namespace deepinfer::runtime {

Expected<std::unique_ptr<TensorParallelEngine>> TensorParallelEngine::create(
    const EngineOptions& options) {
  DI_TRY(validate_parallel_options(options));
  const bool context = options.context_parallel_size > 1;
  // Context with tensor parallelism: a grid of cores (core_grid.h), each context-parallel rank a
  // tensor-parallel group.
  const GridShape shape = GridShape::of(options);
  const int n = shape.cores();
  if (n < 2) {
    return invalid_argument(
        "TensorParallelEngine needs tensor_parallel_size or context_parallel_size >= 2");
  }
  auto engine = std::unique_ptr<TensorParallelEngine>(new TensorParallelEngine());
  engine->context_ = context;
  // With expert parallelism (--enable-expert-parallel) the routed experts are split over the
  // same ranks, contiguous blocks, and the exchange runs over the same communicator.
  std::vector<parallel::ExpertPlacement> placements;
  if (options.enable_expert_parallel) {
    DI_ASSIGN_OR_RETURN(const io::ModelConfig config, io::load_model_config(options.model_dir));
    if (options.enable_eplb) {  // EPLB's initial plan, then its rebalances (as data-parallel)
      DI_ASSIGN_OR_RETURN(engine->rebalancer_, ExpertRebalancer::create(options, config));
      placements = engine->rebalancer_->placements();
    } else {
      placements.push_back(parallel::ExpertPlacement::contiguous(config.n_routed_experts, n));
    }
    engine->expert_parallel_ = true;
  }
  if (shape.context > 1 && shape.tensor > 1) {
    // The experts of a grid split over all its cores: a group of its own for their exchange.
    if (!placements.empty()) engine->group_ = parallel::InProcessGroup::create(n);
    engine->grid_ = std::make_unique<CoreGrid>(shape);
    for (int r = 0; r < n; ++r) {
      engine->ranks_.push_back(std::make_unique<Rank>());
      engine->ranks_.back()->comm = engine->grid_->context_comm(r);
      engine->ranks_.back()->tp_comm = engine->grid_->tensor_comm(r);
      if (engine->group_) engine->ranks_.back()->ep_comm = engine->group_->communicator(r);
    }
  } else {
    engine->group_ = parallel::InProcessGroup::create(n);
    for (int r = 0; r < n; ++r) {
      engine->ranks_.push_back(std::make_unique<Rank>());
      engine->ranks_.back()->comm = engine->group_->communicator(r);
    }
  }
  const EngineOptions per_rank = per_rank_options(options, n, /*lockstep=*/true);
  std::vector<Status> failed(static_cast<size_t>(n));
  TensorParallelEngine* e = engine.get();
  // At once: the cores' first lockstep rounds (a start-up profile's forwards) meet here.
  run_on_ranks(std::vector<bool>(static_cast<size_t>(n), true), [&](int r) {
    Rank& rank = *e->ranks_[static_cast<size_t>(r)];
    model::TensorParallel tp;
    model::ContextParallel cp;
    model::ExpertParallel ep;
    (context ? cp.comm : tp.comm) = rank.comm.get();
    if (rank.tp_comm) tp.comm = rank.tp_comm.get();
    if (!placements.empty()) {
      ep.comm = rank.ep_comm ? rank.ep_comm.get() : rank.comm.get();
      ep.placements = placements;
      if (e->rebalancer_) ep.load_counter = e->rebalancer_->counter();
    }
    auto core = EngineCore::create(per_rank, ep, tp, cp);
    if (!core.ok()) {
      failed[static_cast<size_t>(r)] = core.status();
      // Peers waiting in a collective for this rank get an error instead of the timeout.
      if (e->group_) e->group_->abort(core.status());
      if (e->grid_) e->grid_->abort(core.status());
      return;
    }
    rank.core = std::move(core).value();
  });
  for (int r = 0; r < n; ++r) {
    const Status& st = failed[static_cast<size_t>(r)];
    if (!st.ok()) {
      return st.with_context((context ? "context-parallel rank " : "tensor-parallel rank ") +
                             std::to_string(r));
    }
  }
  // One seed: unseeded requests draw the same tokens on every rank.
  for (int r = 1; r < n; ++r) {
    engine->ranks_[static_cast<size_t>(r)]->core->set_engine_seed(
        engine->ranks_[0]->core->engine_seed());
  }
  if (engine->rebalancer_) engine->update_stats();
  return engine;
}

TensorParallelEngine::~TensorParallelEngine() = default;

Expected<RequestHandle> TensorParallelEngine::submit(std::span<const int32_t> prompt_ids,
                                                     std::string prompt_text,
                                                     const SamplingParams& params,
                                                     Engine::StreamCallback on_delta) {
  // Rank 0 first: a request it refuses (too long, bad ids, bad parameters) goes nowhere. The
  // others get the same request; they refuse what rank 0 refuses, so they accept it too.
  const RequestHandle handle = next_handle_;
  DI_ASSIGN_OR_RETURN(
      const RequestHandle got,
      ranks_[0]->core->submit_as(handle, prompt_ids, prompt_text, params, std::move(on_delta)));
  for (size_t r = 1; r < ranks_.size(); ++r) {
    const auto copy = ranks_[r]->core->submit_as(handle, prompt_ids, prompt_text, params, {});
    if (!copy.ok()) {
      return internal_error(std::string(context_ ? "context" : "tensor") + "-parallel rank " +
                            std::to_string(r) +
                            " refused a request rank 0 took: " + copy.status().to_string());
    }
  }
  ++next_handle_;
  return got;
}

Status TensorParallelEngine::abort(RequestHandle id) {
  const Status s = ranks_[0]->core->abort(id);
  if (!s.ok()) return s;
  for (size_t r = 1; r < ranks_.size(); ++r) (void)ranks_[r]->core->abort(id);
  return s;
}

std::vector<RequestOutput> TensorParallelEngine::step() {
  if (!has_unfinished()) return {};
  const size_t n = ranks_.size();
  std::vector<std::vector<RequestOutput>> ended(n);
  // Every rank every time: rank 0 on this thread (its stream callbacks with it).
  run_on_ranks(std::vector<bool>(n, true), [&](int r) {
    ended[static_cast<size_t>(r)] = ranks_[static_cast<size_t>(r)]->core->step();
  });
  // A step boundary: every rank is idle, no collective open (lockstep), so experts may move.
  if (rebalancer_) {
    rebalance_when_due(*rebalancer_, [this] { return rebalance_experts(); }, eplb_error_);
    update_stats();
  }
  return std::move(ended[0]);
}

Status TensorParallelEngine::rebalance_experts() {
  if (!rebalancer_) return EngineDriver::rebalance_experts();
  std::vector<EngineCore*> cores;
  for (const auto& rank : ranks_) cores.push_back(rank->core.get());
  DI_TRY(rebalance_cores(cores, *rebalancer_, group_.get(), "tensor-parallel rank", eplb_stats_));
  update_stats();
  return Status::ok_status();
}

void TensorParallelEngine::update_stats() {
  stats_ = ranks_[0]->core->stats();
  copy_eplb_stats(eplb_stats_, stats_);
}

bool TensorParallelEngine::has_unfinished() const {
  return std::any_of(ranks_.begin(), ranks_.end(),
                     [](const auto& rank) { return rank->core->has_unfinished(); });
}

Status TensorParallelEngine::reset_prefix_cache() {
  // No forward runs here: the ranks reset one after another.
  for (const auto& rank : ranks_) DI_TRY(rank->core->reset_prefix_cache());
  if (rebalancer_) update_stats();
  return Status::ok_status();
}

std::string TensorParallelEngine::describe() const {
  const std::string eplb =
      rebalancer_
          ? "; placed by EPLB" +
                (eplb_error_.empty() ? std::string() : ", last rebalance failed: " + eplb_error_)
          : std::string();
  if (context_) {
    const int grid_tp = grid_ ? grid_->shape().tensor : 1;
    const int cp = num_ranks() / grid_tp;
    return "context parallel: " + std::to_string(cp) +
           " ranks (threads of this process), each forward's rows split zig-zag by causal "
           "attention work, K=V and compressor rows gathered (whole caches on every rank), " +
           (grid_tp > 1
                ? "each rank " + std::to_string(grid_tp) + " tensor-parallel cores (dense weights" +
                      (expert_parallel_ ? "" : " and every expert's rows") + " split), "
                : std::string()) +
           (expert_parallel_
                ? "expert parallel: routed experts split over " +
                      (grid_tp > 1 ? "all " + std::to_string(num_ranks()) + " cores (each"
                                   : std::string("the ranks (each")) +
                      " exchanging its rows" + eplb + "), "
                : std::string()) +
           "lockstep steps; rank 0: " + ranks_[0]->core->describe();
  }
  return "tensor parallel: " + std::to_string(num_ranks()) +
         " ranks (threads of this process), attention groups, dense projections and LM head "
         "split, " +
         (expert_parallel_
              ? "routed experts split (expert parallelism, each rank exchanging its share of a "
                "step's rows" +
                    eplb + ")"
              : std::string("every routed expert's rows split (MoE TP)")) +
         ", lockstep steps; rank 0: " + ranks_[0]->core->describe();
}

}  // namespace deepinfer::runtime
