// DataParallelEngine (data_parallel_engine.h): rank options, creation, placement, the lockstep or
// independent step over the ranks, and the merged stats.
#include "runtime/data_parallel_engine.h"

#include <algorithm>
#include <thread>

#include "backend/select.h"
#include "base/options.h"
#include "io/model_config.h"
#include "parallel/expert_placement.h"
#include "sched/rank_balancer.h"

namespace deepinfer::runtime {
namespace {

// In-process ranks are threads; beyond this many the per-rank models and thread pools would
// only compete for the same cores.
constexpr int kMaxDataParallelRanks = 64;

}  // namespace

// Per-rank limits (max_num_seqs, num_kv_blocks, the token budget, prefix_cache_bytes) apply to
// each rank as given. Thread counts left to the engine ("all cores") are shared out, so N ranks
// do not start N times the cores in workers.
EngineOptions per_rank_options(const EngineOptions& options, int n, bool lockstep) {
  EngineOptions o = options;
  o.data_parallel_size = 1;
  o.tensor_parallel_size = 1;
  o.context_parallel_size = 1;
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  int threads = options.num_threads;
  if (threads < 0) {
    const auto& env = env_options();
    threads = env.ok() ? env->num_threads : 0;
  }
  o.num_threads = threads > 0 ? threads : std::max(1, hw / n);
  if (o.sampling_threads == 0) o.sampling_threads = std::clamp(hw / n, 1, 8);
  // Lockstep needs each rank's step complete when step() returns (data_parallel_engine.h).
  if (lockstep) o.async_scheduling = false;
  return o;
}

namespace {

void add_stats(EngineStats& t, const EngineStats& s) {
  t.steps += s.steps;
  t.prompt_tokens += s.prompt_tokens;
  t.generated_tokens += s.generated_tokens;
  t.preemptions += s.preemptions;
  t.forward_seconds += s.forward_seconds;
  t.sample_seconds += s.sample_seconds;
  t.host_seconds += s.host_seconds;
  t.gap_seconds += s.gap_seconds;
  t.prefix_hit_tokens += s.prefix_hit_tokens;
  t.prefix_restores += s.prefix_restores;
  t.prefix_recomputes += s.prefix_recomputes;
  t.replay_skipped_rows += s.replay_skipped_rows;
  t.prefix_window_replays += s.prefix_window_replays;
  t.prefix_window_replay_tokens += s.prefix_window_replay_tokens;
  t.spec_verify_steps += s.spec_verify_steps;
  t.spec_draft_tokens += s.spec_draft_tokens;
  t.spec_accepted_tokens += s.spec_accepted_tokens;
  t.spec_grammar_cut_tokens += s.spec_grammar_cut_tokens;
  t.spec_draft_window_restarts += s.spec_draft_window_restarts;
  t.draft_seconds += s.draft_seconds;
  t.graph_setup_steps += s.graph_setup_steps;
  t.graph_setup_seconds += s.graph_setup_seconds;
  t.graph_captures += s.graph_captures;
  t.graph_replays += s.graph_replays;
  t.graph_drops += s.graph_drops;
  t.graph_startup_seconds = std::max(t.graph_startup_seconds, s.graph_startup_seconds);
  t.spec_varlen_probes_passed += s.spec_varlen_probes_passed;
  t.spec_varlen_probes_failed += s.spec_varlen_probes_failed;
  t.spec_varlen_paused_plans += s.spec_varlen_paused_plans;
  if (t.spec_step_cost_seconds.empty()) t.spec_step_cost_seconds = s.spec_step_cost_seconds;
  if (t.spec_draft_context_share.empty()) t.spec_draft_context_share = s.spec_draft_context_share;
  t.kv_bytes_reserved += s.kv_bytes_reserved;
  t.kv_bytes_in_use_peak += s.kv_bytes_in_use_peak;
  t.num_running += s.num_running;
  t.num_waiting += s.num_waiting;
  t.kv_blocks_total += s.kv_blocks_total;
  t.kv_blocks_in_use += s.kv_blocks_in_use;
  t.kv_bytes_in_use += s.kv_bytes_in_use;
  t.prefix_queries += s.prefix_queries;
  t.prefix_query_tokens += s.prefix_query_tokens;
  t.prefix_hit_sequences += s.prefix_hit_sequences;
  t.prefix_cache_hit_tokens += s.prefix_cache_hit_tokens;
  t.kv_blocks_cached += s.kv_blocks_cached;
  t.prefix_snapshots += s.prefix_snapshots;
  t.prefix_snapshot_bytes += s.prefix_snapshot_bytes;
}

}  // namespace

namespace {

// context_parallel_size: alone, with tensor parallelism (a grid, also inside data-parallel
// ranks), inside data-parallel ranks and/or with expert parallelism, on the CPU.
Status validate_context_parallel(const EngineOptions& options) {
  const int32_t cp = options.context_parallel_size;
  const std::string flag = "context_parallel_size (--context-parallel-size) " + std::to_string(cp);
  if (cp < 1 || cp > kMaxDataParallelRanks) {
    return invalid_argument(flag + ": give 1 (one rank) up to " +
                            std::to_string(kMaxDataParallelRanks));
  }
  if (cp == 1) return Status::ok_status();
  const int32_t tp = options.tensor_parallel_size;
  if (tp < 1 || options.data_parallel_size < 1 ||
      options.data_parallel_size > kMaxDataParallelRanks ||
      static_cast<int64_t>(cp) * options.data_parallel_size * tp > kMaxDataParallelRanks) {
    return invalid_argument(flag + " x data_parallel_size (--data-parallel-size) " +
                            std::to_string(options.data_parallel_size) +
                            " x tensor_parallel_size (--tensor-parallel-size) " +
                            std::to_string(tp) + ": give each at least 1 and at most " +
                            std::to_string(kMaxDataParallelRanks) + " cores in all");
  }
  DI_ASSIGN_OR_RETURN(const std::string backend, backend::resolve_backend_name(options.backend));
  if (backend == "cuda") {
    return unimplemented(flag +
                         " with the CUDA backend: ranks on GPUs are not built yet; run the ranks "
                         "on the CPU (backend opt), or one GPU with context_parallel_size 1");
  }
  return Status::ok_status();
}

// cuda_devices: GPUs for the CUDA backend only, one per data-parallel rank, ids the machine has;
// without it, data_parallel_size ranks need that many GPUs.
Status validate_cuda_devices(const EngineOptions& options, const std::string& backend) {
  const std::vector<int32_t>& ids = options.cuda_devices;
  const int32_t ranks = options.data_parallel_size;
  if (backend != "cuda") {
    if (ids.empty()) return Status::ok_status();
    return invalid_argument(
        "cuda_devices (--cuda-devices) names GPUs but the backend is '" + backend +
        "' (the CPU): run on the GPU (--backend cuda, or DEEPINFER_ACCELERATOR=nvidia), or leave "
        "cuda_devices out");
  }
  const int count = backend::cuda_device_count();
  const std::string have = "this machine has " + std::to_string(count) + " GPU" +
                           (count == 1 ? "" : "s") + " (CUDA_VISIBLE_DEVICES applies)";
  if (ids.empty()) {
    if (ranks <= 1 || ranks <= count) return Status::ok_status();
    return invalid_argument(
        "data_parallel_size (--data-parallel-size) " + std::to_string(ranks) +
        " on the CUDA backend puts each rank on a GPU of its own, and " + have +
        (count == 0 ? std::string(": run the ranks on the CPU (backend opt)")
                    : ": give at most " + std::to_string(count) +
                          " ranks, or name each rank's GPU with cuda_devices (--cuda-devices; a "
                          "GPU may be named twice)"));
  }
  if (static_cast<int64_t>(ids.size()) != ranks) {
    return invalid_argument("cuda_devices (--cuda-devices) names " + std::to_string(ids.size()) +
                            (ids.size() == 1 ? " GPU" : " GPUs") + " for " + std::to_string(ranks) +
                            " data-parallel rank" + (ranks == 1 ? "" : "s") +
                            ": give one GPU id per rank, in rank order, or none (rank r on GPU "
                            "r)");
  }
  for (const int32_t id : ids) {
    if (id < 0 || id >= count) {
      return invalid_argument("cuda_devices (--cuda-devices) names GPU " + std::to_string(id) +
                              ", and " + have +
                              (count > 0 ? ": give ids 0.." + std::to_string(count - 1)
                                         : ": run on the CPU (backend opt)"));
    }
  }
  return Status::ok_status();
}

}  // namespace

Status validate_parallel_options(const EngineOptions& options) {
  DI_TRY(validate_context_parallel(options));
  if (options.context_parallel_size > 1) {
    DI_TRY(validate_eplb_options(options, nullptr));
    DI_ASSIGN_OR_RETURN(const std::string backend, backend::resolve_backend_name(options.backend));
    return validate_cuda_devices(options, backend);  // CPU ranks here: cuda_devices refused
  }
  const int32_t tp = options.tensor_parallel_size;
  const int32_t dp = options.data_parallel_size;
  if (tp < 1) {
    return invalid_argument("tensor_parallel_size (--tensor-parallel-size) is " +
                            std::to_string(tp) + ": give 1");
  }
  if (tp > kMaxDataParallelRanks) {
    return invalid_argument("tensor_parallel_size (--tensor-parallel-size) is " +
                            std::to_string(tp) + ": give 1 (one rank) up to " +
                            std::to_string(kMaxDataParallelRanks));
  }
  if (dp < 1 || dp > kMaxDataParallelRanks) {
    return invalid_argument("data_parallel_size (--data-parallel-size) is " + std::to_string(dp) +
                            ": give 1 (one rank) up to " + std::to_string(kMaxDataParallelRanks));
  }
  if (static_cast<int64_t>(tp) * dp > kMaxDataParallelRanks) {
    return invalid_argument("tensor_parallel_size x data_parallel_size is " +
                            std::to_string(static_cast<int64_t>(tp) * dp) +
                            " ranks: give at most " + std::to_string(kMaxDataParallelRanks));
  }
  DI_TRY(validate_eplb_options(options, nullptr));  // the model's part in create()
  DI_ASSIGN_OR_RETURN(const std::string backend, backend::resolve_backend_name(options.backend));
  if (backend == "cuda" && (tp > 1 || (dp > 1 && options.enable_expert_parallel))) {
    const std::string what =
        tp > 1 ? "tensor_parallel_size (--tensor-parallel-size) " + std::to_string(tp)
               : "enable_expert_parallel (--enable-expert-parallel) over data_parallel_size " +
                     std::to_string(dp);
    return unimplemented(what +
                         " with the CUDA backend: the ranks' device-to-device exchange (NCCL) is "
                         "not built yet; on GPUs give data parallelism alone (each rank a whole "
                         "model on its own GPU), or run these ranks on the CPU (backend opt)");
  }
  return validate_cuda_devices(options, backend);
}

Expected<std::unique_ptr<DataParallelEngine>> DataParallelEngine::create(
    const EngineOptions& options) {
  DI_TRY(validate_parallel_options(options));
  const int n = options.data_parallel_size;
  if (n < 2) return invalid_argument("DataParallelEngine needs data_parallel_size >= 2");
  auto engine = std::unique_ptr<DataParallelEngine>(new DataParallelEngine(options));
  engine->expert_parallel_ = options.enable_expert_parallel;
  // Tensor and/or context parallelism inside each data-parallel rank: a grid of `inner` cores per
  // rank over groups of their own (core_grid.h). Expert parallelism spans every core of every
  // rank (n x inner expert ranks).
  const GridShape shape = GridShape::of(options);
  const int inner = shape.cores();
  engine->cores_per_rank_ = inner;
  for (int r = 0; r < n; ++r) {
    engine->ranks_.push_back(std::make_unique<Rank>());
    if (inner == 1) continue;
    Rank& rank = *engine->ranks_.back();
    rank.copies.resize(static_cast<size_t>(inner - 1));
    rank.grid = std::make_unique<CoreGrid>(shape);
    for (int core = 0; core < inner; ++core) {
      rank.context_comms.push_back(rank.grid->context_comm(core));
      rank.tensor_comms.push_back(rank.grid->tensor_comm(core));
    }
  }
  std::vector<parallel::ExpertPlacement> placements;
  if (engine->expert_parallel_) {
    DI_ASSIGN_OR_RETURN(const io::ModelConfig config, io::load_model_config(options.model_dir));
    engine->experts_ = config.n_routed_experts;
    if (options.enable_eplb) {
      DI_ASSIGN_OR_RETURN(engine->rebalancer_, ExpertRebalancer::create(options, config));
      placements = engine->rebalancer_->placements();
    } else {
      placements.push_back(
          parallel::ExpertPlacement::contiguous(config.n_routed_experts, n * inner));
    }
    engine->group_ = parallel::InProcessGroup::create(n * inner);
    for (int i = 0; i < n * inner; ++i) {
      engine->ranks_[static_cast<size_t>(i / inner)]->ep_comms.push_back(
          engine->group_->communicator(i));
    }
  }
  const EngineOptions per_rank =
      per_rank_options(options, n * inner, options.enable_expert_parallel || inner > 1);
  // On the CUDA backend each rank has a GPU of its own (validate_parallel_options allows only
  // data parallelism there): the one cuda_devices names, else GPU r.
  DI_ASSIGN_OR_RETURN(const std::string backend_name,
                      backend::resolve_backend_name(options.backend));
  const bool on_gpus = backend_name == "cuda";
  std::vector<Status> failed(static_cast<size_t>(n * inner));
  DataParallelEngine* e = engine.get();
  // At once: with expert (or tensor) parallelism the cores' first lockstep rounds meet at the
  // end of create. Core i is tensor-parallel rank i % inner of data-parallel rank i / inner.
  run_on_ranks(std::vector<bool>(static_cast<size_t>(n * inner), true), [&](int i) {
    Rank& rank = *e->ranks_[static_cast<size_t>(i / inner)];
    const int t = i % inner;
    model::ExpertParallel ep;
    if (e->expert_parallel_) {
      ep.comm = rank.ep_comms[static_cast<size_t>(t)].get();
      ep.placements = placements;
      if (e->rebalancer_) ep.load_counter = e->rebalancer_->counter();
    }
    model::TensorParallel tpar;
    model::ContextParallel cpar;
    if (rank.grid) {
      cpar.comm = rank.context_comms[static_cast<size_t>(t)].get();
      tpar.comm = rank.tensor_comms[static_cast<size_t>(t)].get();
    }
    EngineOptions core_options = per_rank;
    bool gpu_shared = false;  // another rank steps on the same GPU at once: no CUDA graphs
    if (on_gpus) {
      const std::vector<int32_t>& ids = options.cuda_devices;
      const int32_t device = ids.empty() ? i : ids[static_cast<size_t>(i)];
      core_options.cuda_devices = {device};
      gpu_shared = std::count(ids.begin(), ids.end(), device) > 1;
    }
    auto core = EngineCore::create(core_options, ep, tpar, cpar, gpu_shared);
    if (!core.ok()) {
      failed[static_cast<size_t>(i)] = core.status();
      // Peers waiting in a collective for this rank get an error instead of the timeout.
      if (e->group_) e->group_->abort(core.status());
      if (rank.grid) rank.grid->abort(core.status());
      return;
    }
    (t == 0 ? rank.core : rank.copies[static_cast<size_t>(t - 1)]) = std::move(core).value();
  });
  for (int i = 0; i < n * inner; ++i) {
    const Status& st = failed[static_cast<size_t>(i)];
    if (st.ok()) continue;
    const int core = i % inner;
    return st.with_context(
        "data-parallel rank " + std::to_string(i / inner) +
        (shape.context > 1 ? ", context-parallel rank " + std::to_string(core / shape.tensor)
                           : std::string()) +
        (shape.tensor > 1 ? ", tensor-parallel rank " + std::to_string(core % shape.tensor)
                          : std::string()));
  }
  // A rank's tensor-parallel copies draw what its first core draws (one engine seed).
  for (const auto& rank : engine->ranks_) {
    for (const auto& copy : rank->copies) copy->set_engine_seed(rank->core->engine_seed());
  }
  engine->update_stats();
  return engine;
}

DataParallelEngine::~DataParallelEngine() = default;

void run_on_ranks(const std::vector<bool>& run, const std::function<void(int)>& body) {
  std::vector<int> ranks;
  for (size_t r = 0; r < run.size(); ++r) {
    if (run[r]) ranks.push_back(static_cast<int>(r));
  }
  if (ranks.empty()) return;
  std::vector<std::thread> threads;
  threads.reserve(ranks.size() - 1);
  for (size_t i = 1; i < ranks.size(); ++i) threads.emplace_back(body, ranks[i]);
  body(ranks[0]);
  for (std::thread& t : threads) t.join();
}

Expected<RequestHandle> DataParallelEngine::submit(std::span<const int32_t> prompt_ids,
                                                   std::string prompt_text,
                                                   const SamplingParams& params,
                                                   Engine::StreamCallback on_delta) {
  std::vector<sched::RankLoad> loads;
  const std::vector<uint64_t> hashes = ranks_[0]->core->prompt_block_hashes(prompt_ids);
  for (const auto& rank : ranks_) {
    loads.push_back({rank->live_samples, rank->core->stats().kv_blocks_in_use,
                     rank->core->cached_prefix_tokens(hashes)});
  }
  const int r = sched::place_request(loads);
  Rank& rank = *ranks_[static_cast<size_t>(r)];
  Engine::StreamCallback held;
  if (on_delta) {
    // Runs on the rank's thread during step(): keep the delta for the caller's thread.
    auto callback = std::make_shared<Engine::StreamCallback>(std::move(on_delta));
    auto* deltas = &rank.deltas;
    held = [callback, deltas](const StreamDelta& d) { deltas->emplace_back(callback, d); };
  }
  const RequestHandle handle = next_handle_;
  const std::string text_copy = rank.copies.empty() ? std::string() : prompt_text;
  DI_ASSIGN_OR_RETURN(
      const RequestHandle got,
      rank.core->submit_as(handle, prompt_ids, std::move(prompt_text), params, std::move(held)));
  // The rank's tensor-parallel copies get the same request; they refuse what its first core
  // refuses, so they take this one too.
  for (size_t t = 0; t < rank.copies.size(); ++t) {
    const auto copy = rank.copies[t]->submit_as(handle, prompt_ids, text_copy, params, {});
    if (!copy.ok()) {
      return internal_error("tensor-parallel rank " + std::to_string(t + 1) +
                            " of data-parallel rank " + std::to_string(r) +
                            " refused a request its first core took: " + copy.status().to_string());
    }
  }
  ++next_handle_;
  rank.live_samples += params.n;
  live_[got] = {r, params.n};
  return got;
}

Status DataParallelEngine::abort(RequestHandle id) {
  const auto it = live_.find(id);
  if (it == live_.end()) {
    return not_found("abort: request " + std::to_string(id) + " is unknown or has already ended");
  }
  Rank& rank = *ranks_[static_cast<size_t>(it->second.rank)];
  const Status s = rank.core->abort(id);
  if (s.ok()) {
    for (const auto& copy : rank.copies) (void)copy->abort(id);
  }
  return s;
}

std::vector<RequestOutput> DataParallelEngine::step() {
  const size_t n = ranks_.size();
  std::vector<bool> stepping(n, false);
  bool any = false;
  for (size_t r = 0; r < n; ++r) {
    stepping[r] = ranks_[r]->core->has_unfinished();
    any = any || stepping[r];
  }
  if (!any) return {};
  // Lockstep: a rank without work still steps, to serve its experts to the others.
  if (expert_parallel_) std::fill(stepping.begin(), stepping.end(), true);
  std::vector<std::vector<RequestOutput>> ended(n);
  // Every core of a stepping rank (its tensor-parallel copies too: their forwards pair up);
  // the copies' outputs are dropped, the first core's answer. Core i: rank i / cores_per_rank_.
  std::vector<bool> cores(n * static_cast<size_t>(cores_per_rank_), false);
  for (size_t i = 0; i < cores.size(); ++i)
    cores[i] = stepping[i / static_cast<size_t>(cores_per_rank_)];
  run_on_ranks(cores, [&](int i) {
    Rank& rank = *ranks_[static_cast<size_t>(i / cores_per_rank_)];
    const int t = i % cores_per_rank_;
    if (t == 0) {
      ended[static_cast<size_t>(i / cores_per_rank_)] = rank.core->step();
    } else {
      (void)rank.copies[static_cast<size_t>(t - 1)]->step();
    }
  });
  std::vector<RequestOutput> done;
  for (size_t r = 0; r < n; ++r) {
    Rank& rank = *ranks_[r];
    for (auto& [callback, delta] : std::exchange(rank.deltas, {})) (*callback)(delta);
    for (RequestOutput& out : ended[r]) {
      const auto it = live_.find(out.id);
      if (it != live_.end()) {
        rank.live_samples -= it->second.samples;
        live_.erase(it);
      }
      done.push_back(std::move(out));
    }
  }
  // A step boundary: every rank is idle, no collective open (lockstep), so experts may move.
  if (rebalancer_) {
    rebalance_when_due(
        *rebalancer_, [this] { return rebalance_experts(); }, eplb_error_);
  }
  update_stats();
  return done;
}

Status rebalance_cores(const std::vector<EngineCore*>& cores, ExpertRebalancer& rebalancer,
                       parallel::InProcessGroup* group, const char* what, EngineStats& eplb) {
  DI_ASSIGN_OR_RETURN(ExpertRebalancer::Plan plan, rebalancer.plan());
  const size_t n = cores.size();
  std::vector<Status> failed(n);
  std::vector<model::ExpertMoves> moves(n);
  // Each rank rebinds its own model on its own thread; no forward runs meanwhile.
  run_on_ranks(std::vector<bool>(n, true), [&](int r) {
    auto m = cores[static_cast<size_t>(r)]->set_expert_placements(plan.placements);
    if (m.ok()) {
      moves[static_cast<size_t>(r)] = *m;
    } else {
      failed[static_cast<size_t>(r)] = m.status();
    }
  });
  for (size_t r = 0; r < n; ++r) {
    if (failed[r].ok()) continue;
    // The ranks must agree on the placement, or their next exchange mismatches: the ones that
    // switched go back (they held those experts a moment ago, so binding them again succeeds).
    for (size_t q = 0; q < n; ++q) {
      if (!failed[q].ok()) continue;
      const auto back = cores[q]->set_expert_placements(rebalancer.placements());
      if (!back.ok()) {
        // Not expected; if it happens the ranks disagree: fail the group rather than exchange
        // with mismatched placements (later steps end their requests with this error).
        if (group != nullptr) group->abort(back.status());
        return back.status().with_context("EPLB: restoring the old placement on rank " +
                                          std::to_string(q));
      }
    }
    return failed[r].with_context(std::string("EPLB: rebalance on ") + what + " " +
                                  std::to_string(r));
  }
  rebalancer.adopt(std::move(plan.placements));
  ++eplb.eplb_rebalances;
  for (const model::ExpertMoves& m : moves) eplb.eplb_experts_bound += m.bound;
  eplb.eplb_balance_before = plan.balance_before;
  eplb.eplb_balance_after = plan.balance_after;
  return Status::ok_status();
}

void rebalance_when_due(ExpertRebalancer& rebalancer, const std::function<Status()>& rebalance,
                        std::string& error) {
  if (!rebalancer.end_step()) return;
  const Status s = rebalance();
  error = s.ok() ? std::string() : s.message();
  if (!s.ok()) rebalancer.adopt(rebalancer.placements());  // the period restarts
}

void copy_eplb_stats(const EngineStats& eplb, EngineStats& stats) {
  stats.eplb_rebalances = eplb.eplb_rebalances;
  stats.eplb_experts_bound = eplb.eplb_experts_bound;
  stats.eplb_balance_before = eplb.eplb_balance_before;
  stats.eplb_balance_after = eplb.eplb_balance_after;
}

Status DataParallelEngine::rebalance_experts() {
  if (!rebalancer_) return EngineDriver::rebalance_experts();
  std::vector<EngineCore*> cores;  // every expert rank: each rank's cores, its copies too
  for (const auto& rank : ranks_) {
    cores.push_back(rank->core.get());
    for (const auto& copy : rank->copies) cores.push_back(copy.get());
  }
  DI_TRY(rebalance_cores(cores, *rebalancer_, group_.get(),
                         cores_per_rank_ > 1 ? "core" : "data-parallel rank", eplb_stats_));
  update_stats();
  return Status::ok_status();
}

bool DataParallelEngine::has_unfinished() const {
  return std::any_of(ranks_.begin(), ranks_.end(),
                     [](const auto& rank) { return rank->core->has_unfinished(); });
}

Status DataParallelEngine::reset_prefix_cache() {
  if (!live_.empty()) {
    return failed_precondition("reset_prefix_cache: " + std::to_string(live_.size()) +
                               " requests have not ended");
  }
  // No request is live, so no rank runs a forward here: the ranks reset one after another.
  for (const auto& rank : ranks_) {
    DI_TRY(rank->core->reset_prefix_cache());
    for (const auto& copy : rank->copies) DI_TRY(copy->reset_prefix_cache());
  }
  update_stats();
  return Status::ok_status();
}

int DataParallelEngine::rank_of(RequestHandle id) const {
  const auto it = live_.find(id);
  return it == live_.end() ? -1 : it->second.rank;
}

void DataParallelEngine::update_stats() {
  stats_ = {};
  std::vector<EngineStats::SpecProbe>& probes = stats_.spec_varlen_recent_probes;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const EngineStats& s = ranks_[r]->core->stats();
    add_stats(stats_, s);
    for (EngineStats::SpecProbe p : s.spec_varlen_recent_probes) {
      p.rank = static_cast<int>(r);
      probes.push_back(p);
    }
  }
  // Every rank's latest decisions (at most 8 each), the latest 8 of them by plan step (the ranks
  // step together, so their plan steps run alike); ties in rank order.
  constexpr size_t kKept = 8;
  std::stable_sort(probes.begin(), probes.end(),
                   [](const auto& a, const auto& b) { return a.plan_step < b.plan_step; });
  if (probes.size() > kKept) probes.erase(probes.begin(), probes.end() - kKept);
  copy_eplb_stats(eplb_stats_, stats_);
}

std::string DataParallelEngine::describe() const {
  const int n = num_ranks();
  std::string ranks = "data parallel: " + std::to_string(n) + " ranks (threads of this process), ";
  const GridShape grid = GridShape::of(options_);
  if (grid.context > 1 && grid.tensor > 1) {
    ranks += "each rank " + std::to_string(grid.context) + " context-parallel ranks of " +
             std::to_string(grid.tensor) +
             " tensor-parallel cores (a grid; every forward's rows split zig-zag, the weights "
             "sharded, lockstep steps); ";
  } else if (grid.context > 1) {
    ranks += "each rank " + std::to_string(cores_per_rank_) +
             " context-parallel ranks (every forward's rows split zig-zag, lockstep steps); ";
  } else if (cores_per_rank_ > 1) {
    ranks += "each rank " + std::to_string(cores_per_rank_) +
             " tensor-parallel ranks (attention groups, dense projections and LM head split" +
             (expert_parallel_ ? "" : ", routed experts by intermediate rows") +
             ", lockstep steps); ";
  }
  const std::string expert_ranks =
      cores_per_rank_ > 1 ? " over all " + std::to_string(n * cores_per_rank_) + " cores"
                          : std::string();
  if (rebalancer_) {
    const int slots = experts_ + options_.num_redundant_experts;
    ranks += "expert parallel: " + std::to_string(experts_) + " routed experts in " +
             std::to_string(slots) + " slots" + expert_ranks + " placed by EPLB (rebalanced " +
             (options_.eplb_step_interval > 0
                  ? "every " + std::to_string(options_.eplb_step_interval) + " steps"
                  : std::string("on command")) +
             ", loads over the last " + std::to_string(options_.eplb_window_size) + " steps" +
             (eplb_error_.empty() ? "" : "; last rebalance failed: " + eplb_error_) +
             "), lockstep steps; ";
  } else if (expert_parallel_) {
    ranks += "expert parallel: " + std::to_string(experts_) + " routed experts split contiguously" +
             expert_ranks + ", lockstep steps; ";
  } else if (cores_per_rank_ == 1) {
    ranks += "each rank holds the whole model; ";
  }
  return ranks + "rank 0: " + ranks_[0]->core->describe();
}

}  // namespace deepinfer::runtime
