// Backend selection (see select.h).
#include "backend/select.h"

#include <string>

#include "backend/cpu/cpu_ops.h"
#include "base/options.h"
#if DEEPINFER_WITH_CUDA
#include "backend/cuda/cuda_ops.h"
#endif

namespace deepinfer::backend {

bool built_with_cuda() { return DEEPINFER_WITH_CUDA != 0; }

int cuda_device_count() {
#if DEEPINFER_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: none usable
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

Expected<std::string> resolve_backend_name(std::string_view name) {
  const auto& env = env_options();
  if (!env.ok()) return env.status();
  std::string choice(name);
  if (choice.empty()) {
    switch (env->accelerator) {
      case Accelerator::kNvidia:
        return std::string("cuda");
      case Accelerator::kAscend:
        return unimplemented(
            "DEEPINFER_ACCELERATOR=ascend: this engine has no Ascend backend; use nvidia or cpu");
      case Accelerator::kAuto:
      case Accelerator::kCpu:
        return std::string("opt");
    }
  }
  if (choice == "nvidia") choice = "cuda";
  if (choice != "opt" && choice != "ref" && choice != "cuda") {
    return invalid_argument("backend '" + choice + "' is unknown: use opt, ref or cuda");
  }
  return choice;
}

Expected<std::unique_ptr<Ops>> make_ops(std::string_view name, int num_threads,
                                        std::optional<bool> batch_invariant, int cuda_device,
                                        bool record_graphs) {
  const auto& env = env_options();
  if (!env.ok()) return env.status();
  DI_ASSIGN_OR_RETURN(const std::string choice, resolve_backend_name(name));
  if (choice == "opt") {
    return std::unique_ptr<Ops>(
        cpu::make_opt_ops(num_threads > 0 ? num_threads : env->num_threads));
  }
  if (choice == "ref") return std::unique_ptr<Ops>(cpu::make_ref_ops());
  if (choice == "cuda") {
    // Say what asked for the GPU: the flag, or the knob.
    const std::string who = name.empty() ? "DEEPINFER_ACCELERATOR=nvidia" : "backend 'cuda'";
#if DEEPINFER_WITH_CUDA
    auto ops = cuda::CudaOps::create(cuda_device, batch_invariant.value_or(env->batch_invariant),
                                     record_graphs ? env->cuda_graph_max_rows : 0);
    if (!ops.ok()) return ops.status().with_context(who);
    return std::unique_ptr<Ops>(std::move(*ops));
#else
    (void)batch_invariant;
    (void)cuda_device;
    (void)record_graphs;
    return failed_precondition(
        who +
        ": this DeepInfer build has no CUDA backend (nvcc was not found when it was "
        "built); rebuild on a machine with the CUDA toolkit, or use the CPU "
        "(DEEPINFER_ACCELERATOR=cpu)");
#endif
  }
  return internal_error("resolve_backend_name gave '" + choice + "'");
}

}  // namespace deepinfer::backend
