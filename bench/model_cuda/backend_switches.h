// The CudaOps A/B switches that decode_bench and draft_bench both take, parsed and applied in
// one place (tools/gpu/run_model_cuda.sh's `ab` stage passes one of them as AB_FLAG):
//
//   --fused-act-quant    FP8/FP4 linears of 1-4 rows act-quantize x inside the decode GEMV
//                        instead of a pass of their own (CudaOps::set_fused_act_quant(true); off
//                        by default), the A/B of the fused GEMV.
//   --unfused-small-ops  the ops this library fuses into one kernel (kv_rows_finish,
//                        q_heads_finish, hc_pre_norm) run as the ops they stand for
//                        (CudaOps::set_fused_small_ops(false)): the same bits, the A/B of the
//                        launches fused away.
//   --ungrouped-linear   V4's grouped output projection (wo_a) as one linear per group instead
//                        of Ops::linear_grouped's one launch (CudaOps::set_grouped_linear(false)).
//   --hc-dot-tokens=N    tokens per block of mHC's logit partial sums (hc.cu; default: the
//                        kernel's rule), the same bits: CudaOps::set_hc_dot_tokens(N).
//   --sample-cluster=N   blocks per row of the GPU sampler (sample.cu: 1, 2, 4 or 8; default:
//                        the kernel's rule), the same tokens: CudaOps::set_sample_cluster(N).
//   --pageable-outputs   the step outputs copied to the host (logits of host-sampled rows,
//                        hidden rows) in pageable memory instead of page-locked
//                        (backend/host_memory.h, set_host_pinning(false)): the A/B of the
//                        locked copy. Applied before the first step allocates them.
//   --sparse-16-head     sparse attention with BF16 probabilities at 32+ heads on the 16-head
//                        tensor-core kernel instead of the staged 64-head one
//                        (CudaOps::set_sparse_staged(false)): the A/B of the staged kernel.
//   --staged-sparse-split  few rows (decode at small batch) of that attention split their
//                        keys on the staged kernel instead of the SIMT one
//                        (CudaOps::set_sparse_staged_split(true); off by default until its first
//                        GPU run): the A/B of the staged split.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_ops.h"
#include "backend/host_memory.h"

namespace deepinfer::bench {

struct BackendSwitches {
  bool fused_act_quant = false;
  bool fused_small_ops = true;
  bool grouped_linear = true;
  int hc_dot_tokens = 0;
  int sample_cluster = 0;
  bool pageable_outputs = false;
  bool sparse_staged = true;
  bool sparse_staged_split = false;

  // True when `flag` is one of the switches above (and taken).
  bool parse(const std::string& flag) {
    if (flag == "--fused-act-quant") {
      fused_act_quant = true;
    } else if (flag == "--unfused-small-ops") {
      fused_small_ops = false;
    } else if (flag == "--ungrouped-linear") {
      grouped_linear = false;
    } else if (flag.rfind("--hc-dot-tokens=", 0) == 0) {
      hc_dot_tokens = std::atoi(flag.c_str() + 16);
      if (hc_dot_tokens < 1 || hc_dot_tokens > 1024) {
        std::fprintf(stderr, "--hc-dot-tokens takes 1 to 1024 tokens per block, not '%s'\n",
                     flag.c_str() + 16);
        return false;  // then the caller's usage error
      }
    } else if (flag.rfind("--sample-cluster=", 0) == 0) {
      sample_cluster = std::atoi(flag.c_str() + 17);
      if (sample_cluster != 1 && sample_cluster != 2 && sample_cluster != 4 &&
          sample_cluster != 8) {
        std::fprintf(stderr, "--sample-cluster takes 1, 2, 4 or 8 blocks per row, not '%s'\n",
                     flag.c_str() + 17);
        return false;
      }
    } else if (flag == "--pageable-outputs") {
      pageable_outputs = true;
    } else if (flag == "--sparse-16-head") {
      sparse_staged = false;
    } else if (flag == "--staged-sparse-split") {
      sparse_staged_split = true;
    } else {
      return false;
    }
    return true;
  }
  void apply(backend::cuda::CudaOps& ops) const {
    ops.set_fused_act_quant(fused_act_quant);
    ops.set_fused_small_ops(fused_small_ops);
    ops.set_grouped_linear(grouped_linear);
    ops.set_hc_dot_tokens(hc_dot_tokens);
    ops.set_sample_cluster(sample_cluster);
    ops.set_sparse_staged(sparse_staged);
    ops.set_sparse_staged_split(sparse_staged_split);
    backend::set_host_pinning(!pageable_outputs);
  }
};

}  // namespace deepinfer::bench
