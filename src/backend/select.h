// Backend selection: the one place that turns a user's choice (a CLI --backend name, the
// DEEPINFER_ACCELERATOR knob) into an Ops object, so every front end picks backends the same way.
//
//   ""      the knob decides: DEEPINFER_ACCELERATOR=nvidia -> "cuda"; cpu or unset -> "opt".
//           Unset stays on the CPU for now: the GPU path is correct but not yet the faster one
//           at every size (docs/cuda_backend.md), so it is opt-in.
//   "opt"   the threaded CPU backend (num_threads; 0 = DEEPINFER_NUM_THREADS, else one per core)
//   "ref"   the FP32 oracle, one thread
//   "cuda"  the CUDA backend on GPU `cuda_device` (default 0); a clear error when this build
//           has no CUDA or the machine has no usable GPU
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "backend/ops.h"
#include "base/status.h"

namespace deepinfer::backend {

// The backend `name` selects ("opt", "ref" or "cuda"), with "" resolved through
// DEEPINFER_ACCELERATOR as make_ops does, without creating it (front ends check what a backend
// supports before loading anything). Errors as make_ops's for unknown names and ascend.
Expected<std::string> resolve_backend_name(std::string_view name);

// batch_invariant: unset = DEEPINFER_BATCH_INVARIANT (the CPU backends are invariant anyway; the
// CUDA backend then picks its invariant kernels).
// record_graphs false: the CUDA backend never records CUDA graphs (as
// DEEPINFER_CUDA_GRAPH_MAX_ROWS=0), for ranks of this process stepping at once on one GPU: its op
// streams are blocking streams, so a capture on one rank's stream makes the other ranks'
// legacy-stream copies on that GPU fail (cudaErrorStreamCaptureImplicit) and their frees
// synchronise the device under it.
Expected<std::unique_ptr<Ops>> make_ops(std::string_view name, int num_threads = 0,
                                        std::optional<bool> batch_invariant = std::nullopt,
                                        int cuda_device = 0, bool record_graphs = true);

// True when this build contains the CUDA backend.
bool built_with_cuda();
// The GPUs the CUDA backend can see (CUDA_VISIBLE_DEVICES applies); 0 without a CUDA build, a
// driver or a device.
int cuda_device_count();

}  // namespace deepinfer::backend
