// CudaOps: the ops DeepSeek-V4.1 adds to the contract (ops.h: single-pass mHC's collapse, NVFP4
// fake-quant, the CSA2 candidate blocks, the Engram gate; hc_pre's collapse_pre and the router
// options live with their V4 ops in cuda_ops.cc). The kernels follow the host defaults of
// backend/ops_v41.cc; the op harness (tests/ops/cases/v41.cc) checks them.
// Integer arrays (visible, blocks, out) may be host or device memory, as for topk.
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_internal.h"
#include "base/check.h"
#include "kernels/cuda/launch.h"

namespace deepinfer::backend::cuda {

namespace kc = ::deepinfer::kernels::cuda;

void CudaOps::hc_collapse(CMat streams, CMat pre, int n, Mat y) {
  DI_CHECK(n >= 1 && streams.cols == n * y.cols && pre.cols == n && pre.rows == streams.rows &&
           y.rows == streams.rows);
  kc::launch_hc_collapse(md(streams), md(pre), n, md(y), stream_);
}

void CudaOps::fake_quant_nvfp4(Mat x, int64_t block) {
  DI_CHECK(block > 0);
  kc::launch_fake_quant_nvfp4(md(x), block, stream_);
}

void CudaOps::candidate_blocks(CMat scores, const int32_t* visible, int64_t block_size,
                               int64_t n_blocks, int32_t* out) {
  DI_CHECK(block_size > 0 && n_blocks > 0);
  arena().reset();
  const int32_t* vis = on_device(visible, scores.rows);
  float* scratch = arena().alloc_n<float>(
      kc::candidate_blocks_scratch_floats(scores.rows, scores.cols, block_size));
  if (is_device_pointer(out)) {
    kc::launch_candidate_blocks(md(scores), vis, block_size, n_blocks, out, scratch, stream_);
    return;
  }
  int32_t* dev = arena().alloc_n<int32_t>(scores.rows * n_blocks);
  kc::launch_candidate_blocks(md(scores), vis, block_size, n_blocks, dev, scratch, stream_);
  store_ints(dev, out, scores.rows * n_blocks);
}

void CudaOps::restrict_to_blocks(Mat scores, const int32_t* visible, const int32_t* blocks,
                                 int64_t n_blocks, int64_t block_size) {
  DI_CHECK(block_size > 0 && n_blocks > 0);
  arena().reset();
  const int32_t* vis = on_device(visible, scores.rows);
  const int32_t* b = on_device(blocks, scores.rows * n_blocks);
  kc::launch_restrict_to_blocks(md(scores), vis, b, n_blocks, block_size, stream_);
}

void CudaOps::engram_gate(Mat streams, CMat kv, CMat w, int n, float eps) {
  const int64_t D = w.cols;
  DI_CHECK(w.rows == n && streams.cols == n * D && kv.cols == (n + 1) * D &&
           kv.rows == streams.rows);
  kc::launch_engram_gate(md(streams), md(kv), md(w), n, eps, stream_);
}

}  // namespace deepinfer::backend::cuda
