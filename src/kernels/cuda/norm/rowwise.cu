// Row-wise and element-wise kernels: RMSNorm, BF16 rounding, add/scale/copy_rows, embedding
// gather, SwiGLU, and the two row helpers the grouped MoE composes (per-row gate scaling and
// scatter-add of expert outputs).
//
// Element-wise kernels use a 2-D grid (columns x rows, rows grid-strided) so strided Mats
// (column slices, ld > cols) need no special case. RMSNorm reduces each (row, group) in one block
// with a fixed tree order: deterministic and independent of the batch.
#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kEw = 256;

dim3 ew_grid(const MatDesc& m) {
  const int64_t gx = (m.cols + kEw - 1) / kEw;
  const int64_t gy = m.rows < 65535 ? m.rows : 65535;
  return dim3(static_cast<unsigned>(gx < 1 ? 1 : gx), static_cast<unsigned>(gy < 1 ? 1 : gy));
}

#define DI_EW_LOOP(m)                                                            \
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
  if (c >= (m).cols) return;                                                     \
  for (int64_t r = blockIdx.y; r < (m).rows; r += gridDim.y)

__global__ void rms_norm_kernel(MatDesc x, WeightDesc w, bool has_w, float eps, int64_t g,
                                MatDesc y, bool round_out) {
  grid_dependency_sync();
  __shared__ float red[32];
  const int64_t groups = x.cols / g;
  const int64_t row = blockIdx.x / groups, c0 = (blockIdx.x % groups) * g;
  const float* xr = x.data + row * x.ld + c0;
  const float ss = block_sum(rms_sumsq_thread(xr, g), red);
  rms_norm_apply(xr, y.data + row * y.ld + c0, g, ss, eps, w, has_w, round_out);
}

__global__ void round_bf16_kernel(MatDesc x) {
  grid_dependency_sync();
  DI_EW_LOOP(x) {
    float* p = x.data + r * x.ld + c;
    *p = bf16_round_d(*p);
  }
}

__global__ void add_kernel(MatDesc a, MatDesc b, MatDesc out) {
  grid_dependency_sync();
  DI_EW_LOOP(a) {
    out.data[r * out.ld + c] = a.data[r * a.ld + c] + b.data[(b.rows == 1 ? 0 : r) * b.ld + c];
  }
}

__global__ void scale_kernel(MatDesc x, float s) {
  grid_dependency_sync();
  DI_EW_LOOP(x) { x.data[r * x.ld + c] *= s; }
}

__global__ void copy_rows_kernel(MatDesc src, const int32_t* rows, MatDesc dst) {
  grid_dependency_sync();
  DI_EW_LOOP(dst) {
    const int64_t sr = rows ? rows[r] : r;
    dst.data[r * dst.ld + c] = src.data[sr * src.ld + c];
  }
}

// out's `streams` column blocks of table.k channels each take the row (rounded when asked):
// the mHC streams' input in one pass (Ops::embed_streams).
__global__ void embed_kernel(const int32_t* ids, WeightDesc table, MatDesc out, int64_t streams,
                             bool round_out) {
  grid_dependency_sync();
  const int64_t D = table.k;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= D) return;
  for (int64_t r = blockIdx.y; r < out.rows; r += gridDim.y) {
    float v = weight_at_d(table, ids[r], c);
    if (round_out) v = bf16_round_d(v);
    for (int64_t s = 0; s < streams; ++s) out.data[r * out.ld + s * D + c] = v;
  }
}

// x's `streams` column blocks of b.cols channels each += b's row, then rounded when asked
// (Ops::add_streams: the MTP block's input, spec §2.8).
__global__ void add_streams_kernel(MatDesc b, int64_t streams, bool round_out, MatDesc x) {
  grid_dependency_sync();
  DI_EW_LOOP(b) {
    const float bv = b.data[r * b.ld + c];
    for (int64_t s = 0; s < streams; ++s) {
      float* p = x.data + r * x.ld + s * b.cols + c;
      const float v = *p + bv;
      *p = round_out ? bf16_round_d(v) : v;
    }
  }
}

__global__ void swiglu_kernel(MatDesc a, MatDesc b, float limit, MatDesc out) {
  grid_dependency_sync();
  DI_EW_LOOP(a) {
    float u = a.data[r * a.ld + c], v = b.data[r * b.ld + c];
    if (limit > 0.0f) {
      u = fminf(u, limit);
      v = fminf(fmaxf(v, -limit), limit);
    }
    out.data[r * out.ld + c] = u * (1.0f / (1.0f + expf(-u))) * v;
  }
}

__global__ void scale_rows_kernel(MatDesc x, const float* s, int64_t s_ld, const int32_t* s_rows,
                                  const int32_t* s_cols) {
  grid_dependency_sync();
  DI_EW_LOOP(x) {
    const int64_t sr = s_rows ? s_rows[r] : r;
    const int64_t sc = s_cols ? s_cols[r] : 0;
    x.data[r * x.ld + c] *= s[sr * s_ld + sc];
  }
}

__global__ void scatter_add_rows_kernel(MatDesc src, const int32_t* rows, MatDesc out) {
  grid_dependency_sync();
  DI_EW_LOOP(src) {
    const int64_t dr = rows ? rows[r] : r;
    out.data[dr * out.ld + c] += src.data[r * src.ld + c];
  }
}

// One block per row pair; rows are short (<= a few thousand floats), so a grid-stride loop over
// the columns of one row per block is enough.
__global__ void scatter_rows_kernel(const float* const* src, float* const* dst, int64_t cols) {
  grid_dependency_sync();
  const float* s = src[blockIdx.x];
  float* d = dst[blockIdx.x];
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) d[c] = s[c];
}

}  // namespace

void launch_scatter_rows(const float* const* src, float* const* dst, int64_t n, int64_t cols,
                         cudaStream_t stream) {
  if (n > 0 && cols > 0) {
    launch_kernel(scatter_rows_kernel, static_cast<unsigned>(n), 256, 0, stream, src, dst, cols);
  }
}

void launch_rms_norm(MatDesc x, const WeightDesc* w, float eps, int64_t group, MatDesc y,
                     bool round_out, cudaStream_t stream) {
  const int64_t g = group > 0 ? group : x.cols;
  if (x.rows == 0 || g == 0) return;
  const int64_t blocks = x.rows * (x.cols / g);
  launch_kernel(rms_norm_kernel, static_cast<unsigned>(blocks), rms_norm_threads(g), 0, stream, x,
                w ? *w : WeightDesc{}, w != nullptr, eps, g, y, round_out);
}

void launch_round_bf16(MatDesc x, cudaStream_t stream) {
  if (x.rows && x.cols) launch_kernel(round_bf16_kernel, ew_grid(x), kEw, 0, stream, x);
}
void launch_add(MatDesc a, MatDesc b, MatDesc out, cudaStream_t stream) {
  if (a.rows && a.cols) launch_kernel(add_kernel, ew_grid(a), kEw, 0, stream, a, b, out);
}
void launch_scale(MatDesc x, float s, cudaStream_t stream) {
  if (x.rows && x.cols) launch_kernel(scale_kernel, ew_grid(x), kEw, 0, stream, x, s);
}
void launch_copy_rows(MatDesc src, const int32_t* rows, MatDesc dst, cudaStream_t stream) {
  if (dst.rows && dst.cols)
    launch_kernel(copy_rows_kernel, ew_grid(dst), kEw, 0, stream, src, rows, dst);
}
void launch_embed(const int32_t* ids, const WeightDesc& table, MatDesc out, int64_t streams,
                  bool round_out, cudaStream_t stream) {
  const MatDesc one{out.data, out.rows, table.k, out.ld};  // the grid: one stream's columns
  if (out.rows && table.k && streams > 0) {
    launch_kernel(embed_kernel, ew_grid(one), kEw, 0, stream, ids, table, out, streams, round_out);
  }
}
void launch_add_streams(MatDesc b, int64_t streams, bool round_out, MatDesc x,
                        cudaStream_t stream) {
  if (b.rows && b.cols && streams > 0) {
    launch_kernel(add_streams_kernel, ew_grid(b), kEw, 0, stream, b, streams, round_out, x);
  }
}

void launch_swiglu(MatDesc a, MatDesc b, float limit, MatDesc out, cudaStream_t stream) {
  if (a.rows && a.cols) launch_kernel(swiglu_kernel, ew_grid(a), kEw, 0, stream, a, b, limit, out);
}
void launch_scale_rows(MatDesc x, const float* s, int64_t s_ld, const int32_t* s_rows,
                       const int32_t* s_cols, cudaStream_t stream) {
  if (x.rows && x.cols)
    launch_kernel(scale_rows_kernel, ew_grid(x), kEw, 0, stream, x, s, s_ld, s_rows, s_cols);
}
void launch_scatter_add_rows(MatDesc src, const int32_t* rows, MatDesc out, cudaStream_t stream) {
  if (src.rows && src.cols)
    launch_kernel(scatter_add_rows_kernel, ew_grid(src), kEw, 0, stream, src, rows, out);
}

}  // namespace deepinfer::kernels::cuda
