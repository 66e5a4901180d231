// --data-parallel-size, --enable-expert-parallel and --tensor-parallel-size (vLLM's names;
// EngineOptions::data_parallel_size, enable_expert_parallel, tensor_parallel_size) and
// --cuda-devices (ours: vLLM gives each rank's process its GPUs through CUDA_VISIBLE_DEVICES,
// and our ranks share one process), the one spelling `generate` and `serve` share. The values go to
// the engine as given: Engine::create checks them in one place (runtime/data_parallel_engine.h) and
// says what is not built.
#include <CLI/CLI.hpp>
#include <cstdint>

#include "commands.h"

namespace deepinfer::cli {

void add_parallel_options(CLI::App& cmd, ParallelArgs& args) {
  cmd.add_option("--data-parallel-size", args.data_parallel_size,
                 "ranks, each serving whole requests with its own scheduler and KV pages "
                 "(default 1); threads of this process, on the CPU or each on a GPU of its own "
                 "(--backend cuda)");
  cmd.add_option("--cuda-devices", args.cuda_devices,
                 "--backend cuda: the GPU of each data-parallel rank, comma-separated, in rank "
                 "order (default: rank r on GPU r); a GPU may be named twice")
      ->delimiter(',');
  cmd.add_flag("--enable-expert-parallel", args.enable_expert_parallel,
               "split the routed experts whole over the data-, tensor- or context-parallel "
               "ranks (each loads its share; the ranks step in lockstep); outputs are "
               "unchanged");
  cmd.add_option("--tensor-parallel-size", args.tensor_parallel_size,
                 "split the weights (attention groups, every expert's rows, head) over N ranks "
                 "(threads, CPU backends) stepping every batch together, inside each "
                 "--data-parallel-size rank when both are given; outputs are unchanged");
  cmd.add_option("--context-parallel-size", args.context_parallel_size,
                 "split each forward's rows over N ranks (threads) by causal attention work "
                 "(zig-zag), for long prefills; DeepSeek-V4 and V4.1 on the CPU; outputs are "
                 "unchanged");
  cmd.add_flag("--enable-eplb", args.enable_eplb,
               "with --enable-expert-parallel: count each layer's expert loads and re-place the "
               "experts by DeepSeek's EPLB policy while serving (outputs are unchanged)");
  cmd.add_option("--num-redundant-experts", args.num_redundant_experts,
                 "EPLB: extra replicas of the hottest experts (default 0); routed experts plus "
                 "these must be a multiple of the expert-parallel ranks (--data-parallel-size, or "
                 "--tensor-parallel-size)");
  cmd.add_option("--eplb-step-interval", args.eplb_step_interval,
                 "EPLB: engine steps between rebalances (default 3000; 0: never by itself)");
  cmd.add_option("--eplb-window-size", args.eplb_window_size,
                 "EPLB: engine steps of expert load a rebalance plans from (default 1000)");
}

void ParallelArgs::apply(EngineOptions& o) const {
  o.data_parallel_size = data_parallel_size;
  o.enable_expert_parallel = enable_expert_parallel;
  o.tensor_parallel_size = tensor_parallel_size;
  o.context_parallel_size = context_parallel_size;
  o.enable_eplb = enable_eplb;
  o.num_redundant_experts = num_redundant_experts;
  o.eplb_step_interval = eplb_step_interval;
  o.eplb_window_size = eplb_window_size;
  o.cuda_devices = cuda_devices;
}

}  // namespace deepinfer::cli
