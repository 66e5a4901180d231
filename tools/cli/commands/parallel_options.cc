// --data-parallel-size, --enable-expert-parallel and --tensor-parallel-size (vLLM's names;
// EngineOptions::data_parallel_size, enable_expert_parallel, tensor_parallel_size), the one
// spelling `generate` and `serve` share. The values go to the engine as given: Engine::create
// checks them in one place (runtime/data_parallel_engine.h) and says what is not built.
#include <CLI/CLI.hpp>
#include <cstdint>

#include "commands.h"

namespace deepinfer::cli {

void add_parallel_options(CLI::App& cmd, ParallelArgs& args) {
  cmd.add_option("--data-parallel-size", args.data_parallel_size,
                 "ranks, each serving whole requests with its own scheduler and KV pages "
                 "(default 1); on the CPU backends, ranks are threads of this process");
  cmd.add_flag("--enable-expert-parallel", args.enable_expert_parallel,
               "split the routed experts over the data-parallel ranks (each loads its share; "
               "the ranks step in lockstep); outputs are unchanged");
  cmd.add_option("--tensor-parallel-size", args.tensor_parallel_size,
                 "only 1: tensor parallelism is not built yet (other values are refused)");
}

}  // namespace deepinfer::cli
