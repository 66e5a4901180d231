// Grouped MoE stages on the tensor cores for many pairs per expert (prefill), FP4 weights with
// 1x32 E8M0 scales: the operands, mma steps and sums of grouped_mma.cu's kernels, so a pair's
// bits do not depend on which kernel runs, in a shape that reuses each input row and each
// decoded weight operand more.
//
// Block = 64 weight rows (warp w: rows 16w .. 16w + 15, one mma tile) of an active expert; the
// expert's pairs in chunks of 64 (8 tiles of 8). Per 128-wide K pass the chunk's paired inputs
// (64 rows x 256 bytes) and the block's weight codes and scales are copied into shared memory
// (cp.async, three stages) and read there by all four warps; a warp decodes its rows' codes once
// per pass for all 8 tiles. grouped_mma_tiles_kernel instead gives each block 16 rows, decodes
// per 4 tiles and reads every input from global memory per tile and weight-row block: 4x the
// input traffic of this form, twice the decode work, and no sharing of an input load between
// warps (H200, top-6 of 256 at 4096 tokens: 9.0 against 20.4 ms in stop 32's first form).
//
// Bits: grouped_mma_kernel gives warp q the passes p = q, q + 4, ... (in increasing p, one mma
// chain from 0) and adds the four partial sums in warp order. Here each warp runs every pass of
// its rows in that order, q-major: the chain of q = 0, then a new chain from 0 for q = 1, and so
// on; after each chain the running sum, ((s0 + s1) + s2), takes it (in shared memory: the
// registers hold one chain), the last addition in registers before the epilogue. Each mma step
// gets the same operand values (grouped_mma_common.cuh), so every accumulator is the same.
#include "kernels/cuda/moe/grouped_mma_common.cuh"

namespace deepinfer::kernels::cuda::grouped_mma {
namespace {

constexpr int kWideWarps = 4;
constexpr int kWideRows = 16 * kWideWarps;        // weight rows per block
constexpr int kWideTiles = 8;                     // tiles of 8 pairs per chunk
constexpr int kWidePairs = kTile * kWideTiles;    // pairs per chunk
constexpr int kRowChunks = kPass * 2 / 16;        // 16-byte chunks of a pass's input row

// Where chunk c of staged row r sits in its row. The mma reads chunk 4t + u of rows 8j + g
// (thread g, t; step pair u): a quarter warp (g in {2h, 2h + 1}, t = 0..3) then meets eight
// distinct 16-byte bank groups. The XOR is an involution inside the row.
__device__ __forceinline__ int swizzle(int r, int c) {
  return c ^ (((c >> 3) & 1) | ((r & 1) << 1));
}

// The stage's weight codes of one pass for this thread: rows g and g + 8 of the warp's 16, of w1
// / w2 (a) and, gate-up, of w3 (b).
template <bool kGateUp>
struct PassCodes {
  RowCodes<true> alo, ahi, blo, bhi;
};

// Mma steps 2u and 2u + 1 of a pass for every active tile: operands 4u .. 4u + 3 of each row
// (grouped_mma.cu's quad_tiles: the same registers), then per tile one 16-byte input load from
// shared memory and two mma per weight.
template <bool kGateUp, bool kOne, int kU>
__device__ __forceinline__ void wide_quad(const PassCodes<kGateUp>& c, const uint4* xs, int g,
                                          int t, int active, float (*acc_a)[4],
                                          float (*acc_b)[4]) {
  const uint32_t a0 = decode_pair<true, kOne, 4 * kU>(c.alo);
  const uint32_t a1 = decode_pair<true, kOne, 4 * kU>(c.ahi);
  const uint32_t a2 = decode_pair<true, kOne, 4 * kU + 1>(c.alo);
  const uint32_t a3 = decode_pair<true, kOne, 4 * kU + 1>(c.ahi);
  const uint32_t a4 = decode_pair<true, kOne, 4 * kU + 2>(c.alo);
  const uint32_t a5 = decode_pair<true, kOne, 4 * kU + 2>(c.ahi);
  const uint32_t a6 = decode_pair<true, kOne, 4 * kU + 3>(c.alo);
  const uint32_t a7 = decode_pair<true, kOne, 4 * kU + 3>(c.ahi);
  uint32_t b0 = 0, b1 = 0, b2 = 0, b3 = 0, b4 = 0, b5 = 0, b6 = 0, b7 = 0;
  if constexpr (kGateUp) {
    b0 = decode_pair<true, kOne, 4 * kU>(c.blo);
    b1 = decode_pair<true, kOne, 4 * kU>(c.bhi);
    b2 = decode_pair<true, kOne, 4 * kU + 1>(c.blo);
    b3 = decode_pair<true, kOne, 4 * kU + 1>(c.bhi);
    b4 = decode_pair<true, kOne, 4 * kU + 2>(c.blo);
    b5 = decode_pair<true, kOne, 4 * kU + 2>(c.bhi);
    b6 = decode_pair<true, kOne, 4 * kU + 3>(c.blo);
    b7 = decode_pair<true, kOne, 4 * kU + 3>(c.bhi);
  }
#pragma unroll
  for (int j = 0; j < kWideTiles; ++j) {
    if (j < active) {  // block-uniform: whole warps take the mma
      const int r = kTile * j + g;
      const uint4 q = xs[r * kRowChunks + swizzle(r, 4 * t + kU)];
      mma_bf16_16816(acc_a[j], a0, a1, a2, a3, q.x, q.y);
      mma_bf16_16816(acc_a[j], a4, a5, a6, a7, q.z, q.w);
      if constexpr (kGateUp) {
        mma_bf16_16816(acc_b[j], b0, b1, b2, b3, q.x, q.y);
        mma_bf16_16816(acc_b[j], b4, b5, b6, b7, q.z, q.w);
      }
    }
  }
}

template <bool kGateUp, bool kOne>
__device__ __forceinline__ void wide_pass_as(const PassCodes<kGateUp>& c, const uint4* xs, int g,
                                             int t, int active, float (*acc_a)[4],
                                             float (*acc_b)[4]) {
  wide_quad<kGateUp, kOne, 0>(c, xs, g, t, active, acc_a, acc_b);
  wide_quad<kGateUp, kOne, 1>(c, xs, g, t, active, acc_a, acc_b);
  wide_quad<kGateUp, kOne, 2>(c, xs, g, t, active, acc_a, acc_b);
  wide_quad<kGateUp, kOne, 3>(c, xs, g, t, active, acc_a, acc_b);
}

// The form is chosen per warp (a vote): both forms give the same exact operand values where the
// one-multiplication form applies (two_form), so one vote over all the pass's rows is enough.
template <bool kGateUp>
__device__ __forceinline__ void wide_pass(const PassCodes<kGateUp>& c, const uint4* xs, int g,
                                          int t, int active, float (*acc_a)[4],
                                          float (*acc_b)[4]) {
  bool one = c.alo.one && c.ahi.one;
  if constexpr (kGateUp) one = one && c.blo.one && c.bhi.one;
  if (__all_sync(0xffffffffu, one)) {
    wide_pass_as<kGateUp, true>(c, xs, g, t, active, acc_a, acc_b);
  } else {
    PassCodes<kGateUp> c2 = c;
    c2.alo = two_form(c.alo), c2.ahi = two_form(c.ahi);
    if constexpr (kGateUp) c2.blo = two_form(c.blo), c2.bhi = two_form(c.bhi);
    wide_pass_as<kGateUp, false>(c2, xs, g, t, active, acc_a, acc_b);
  }
}

// The stage's values of a chunk's pairs: the last chain added to the running sum in registers,
// then the epilogue (grouped_mma.cu's stores).
template <bool kGateUp>
__device__ __forceinline__ void wide_epilogue(const GroupedStageArgs& st, const float* my_sums,
                                              const float (*acc_a)[4], const float (*acc_b)[4],
                                              int32_t pair0, int n, int active, int64_t row0,
                                              int g, int t) {
#pragma unroll
  for (int j = 0; j < kWideTiles; ++j) {
    if (j >= active) continue;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int tk = 2 * t + (i & 1);
      if (kTile * j + tk >= n) continue;
      const float* sa = my_sums + (j * 4 + i) * 32;
      const float a = *sa + acc_a[j][i];
      float b = 0.0f;
      if constexpr (kGateUp) b = sa[kWideTiles * 4 * 32] + acc_b[j][i];
      const int64_t row = row0 + g + (i >= 2 ? 8 : 0);
      const int32_t pair = pair0 + kTile * j + tk;
      const int32_t pr = st.layout.row_pair[pair];
      st.out[static_cast<int64_t>(pair) * st.out_ld + row] = moe_epilogue<kGateUp>(
          a, b, st.ep, st.gates + pr / st.top_k * st.gates_ld + pr % st.top_k);
    }
  }
}

template <bool kGateUp>
constexpr int kSums = kGateUp ? 2 : 1;

// The weight codes and scales of each pass go through shared memory with the inputs, in a
// three-deep cp.async pipeline (passes i + 1 and i + 2 in flight while pass i is multiplied). A
// first form prefetched the codes into registers one pass ahead: 9.04 against 8.24 ms at 4096
// tokens (cuda_moe_wide_perf_h200_2026-12-03_stop32.txt.xz, call 3), its DRAM latency exposed.
//
// Grid: x = the weight-row block, y = the active expert, so the blocks that run together share
// an expert's input rows in L2 (with the expert in x, every row block re-read its expert's inputs
// from DRAM: the down stage moved 9 GB for 1 GB of weights, ncu, call 3).
constexpr int kStages = 3;
constexpr int kCodeChunks = kPass / 2 / 16;  // 16-byte chunks of one row's FP4 codes per pass
template <bool kGateUp>
constexpr int kStageU4 = kWidePairs * kRowChunks + kSums<kGateUp> * kWideRows * kCodeChunks +
                         kSums<kGateUp> * kWideRows * 4 / 16;
template <bool kGateUp>
constexpr size_t kStagedSmem = size_t{kStages} * kStageU4<kGateUp> * sizeof(uint4) +
                               size_t{kWideWarps} * kSums<kGateUp> * kWideTiles * 4 * 32 *
                                   sizeof(float) +
                               kWidePairs * sizeof(const uint16_t*);

// Pass i of the q-major order (chains q = 0..3, each p = q, q + 4, ...).
__device__ __forceinline__ int pass_at(int i, int n_pass) {
  for (int q = 0; q < 4; ++q) {
    const int nq = q < n_pass ? (n_pass - q + 3) / 4 : 0;
    if (i < nq) return q + 4 * i;
    i -= nq;
  }
  return -1;
}

template <bool kGateUp>
__global__ void __launch_bounds__(kWideWarps * 32, 2)
    grouped_mma_wide_kernel(const uint16_t* in, int64_t in_ld, GroupedStageArgs st) {
  grid_dependency_sync();
  constexpr int kS = kSums<kGateUp>;
  const int e = static_cast<int>(blockIdx.y) < *st.layout.n_active ? st.layout.active[blockIdx.y]
                                                                    : -1;
  if (e < 0) return;
  const GroupedExpert& ex = st.experts[e];
  const WeightDesc& da = kGateUp ? ex.w1 : ex.w2;
  const int64_t K = da.k;
  const int n_pass = static_cast<int>(K / kPass);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t block_row0 = static_cast<int64_t>(blockIdx.x) * kWideRows;
  if (block_row0 >= da.n) return;  // the whole block (n % 64 == 0, host check)
  const int64_t row0 = block_row0 + 16 * warp;

  extern __shared__ uint4 smem[];
  float* sums = reinterpret_cast<float*>(smem + kStages * kStageU4<kGateUp>);
  const uint16_t** in_rows =
      reinterpret_cast<const uint16_t**>(sums + kWideWarps * kS * kWideTiles * 4 * 32);
  float* my_sums = sums + warp * kS * kWideTiles * 4 * 32 + lane;

  // This thread's copy tasks of every pass, as sources at pass 0: code chunks (weight, row,
  // chunk) = task / 256, task / 4 % 64, task % 4 for task = threadIdx.x + 128 m; one scale word.
  constexpr int kCodeTasks = kS * kWideRows * kCodeChunks / (kWideWarps * 32);
  const uint8_t* code_src[kCodeTasks];
#pragma unroll
  for (int m = 0; m < kCodeTasks; ++m) {
    const int task = threadIdx.x + kWideWarps * 32 * m;
    const int w = task / (kWideRows * kCodeChunks), r = task / kCodeChunks % kWideRows;
    const WeightDesc& d = w == 0 ? da : ex.w3;
    code_src[m] = static_cast<const uint8_t*>(d.w) + (block_row0 + r) * (K / 2) +
                  (task % kCodeChunks) * 16;
  }
  const uint8_t* scale_src = nullptr;
  if (threadIdx.x < kS * kWideRows) {
    const WeightDesc& d = threadIdx.x < kWideRows ? da : ex.w3;
    scale_src = static_cast<const uint8_t*>(d.scale) +
                (block_row0 + threadIdx.x % kWideRows) * d.scale_ld;
  }

  const int32_t begin = st.layout.offsets[e], count = st.layout.counts[e];
  const int chunk_col = threadIdx.x % kRowChunks;
  for (int32_t p0 = 0; p0 < count; p0 += kWidePairs) {
    const int n = min(kWidePairs, count - p0);
    const int active = (n + kTile - 1) / kTile;
    __syncthreads();  // the previous chunk's readers of in_rows and the stages are done
    if (threadIdx.x < kWidePairs) {
      const int32_t r = begin + p0 + (static_cast<int>(threadIdx.x) < n ? threadIdx.x : 0);
      const int64_t in_row = kGateUp ? st.layout.row_pair[r] / st.top_k : r;
      in_rows[threadIdx.x] = in + in_row * in_ld;
    }
    __syncthreads();
    // Stage pass index i (if any) into slot i % kStages, and close its group either way (the
    // wait counts groups).
    const auto stage = [&](int i) {
      if (i < n_pass) {
        const int p = pass_at(i, n_pass);
        uint4* xs = smem + (i % kStages) * kStageU4<kGateUp>;
        uint4* cs = xs + kWidePairs * kRowChunks;
        uint32_t* ss = reinterpret_cast<uint32_t*>(cs + kS * kWideRows * kCodeChunks);
        for (int r = threadIdx.x / kRowChunks; r < active * kTile;
             r += kWideWarps * 32 / kRowChunks) {
          cp_async16(xs + r * kRowChunks + swizzle(r, chunk_col),
                     in_rows[r] + static_cast<int64_t>(p) * kPass + chunk_col * 8);
        }
#pragma unroll
        for (int m = 0; m < kCodeTasks; ++m) {
          cp_async16(cs + threadIdx.x + kWideWarps * 32 * m,
                     code_src[m] + static_cast<int64_t>(p) * (kPass / 2));
        }
        if (scale_src != nullptr) cp_async4(ss + threadIdx.x, scale_src + p * (kPass / 32));
      }
      cp_async_commit();
    };
    stage(0);
    stage(1);
    float acc_a[kWideTiles][4], acc_b[kWideTiles][4];
    int i = 0;
#pragma unroll 1
    for (int q = 0; q < 4; ++q) {
#pragma unroll
      for (int j = 0; j < kWideTiles; ++j) {
#pragma unroll
        for (int k = 0; k < 4; ++k) acc_a[j][k] = 0.0f, acc_b[j][k] = 0.0f;
      }
#pragma unroll 1
      for (int p = q; p < n_pass; p += 4, ++i) {
        stage(i + 2);
        cp_async_wait<2>();
        __syncthreads();  // pass i is in its slot for every warp
        const uint4* xs = smem + (i % kStages) * kStageU4<kGateUp>;
        const uint4* cs = xs + kWidePairs * kRowChunks;
        const uint32_t* ss = reinterpret_cast<const uint32_t*>(cs + kS * kWideRows * kCodeChunks);
        const auto codes_of = [&](int w, int r) {
          RowCodes<true> c;
          const uint4 v = cs[(w * kWideRows + r) * kCodeChunks + t];
          c.w[0] = v.x, c.w[1] = v.y, c.w[2] = v.z, c.w[3] = v.w;
          set_scale(c, (ss[w * kWideRows + r] >> (8 * t)) & 0xffu);
          return c;
        };
        PassCodes<kGateUp> codes;
        codes.alo = codes_of(0, 16 * warp + g);
        codes.ahi = codes_of(0, 16 * warp + g + 8);
        if constexpr (kGateUp) {
          codes.blo = codes_of(1, 16 * warp + g);
          codes.bhi = codes_of(1, 16 * warp + g + 8);
        }
        wide_pass<kGateUp>(codes, xs, g, t, active, acc_a, acc_b);
        __syncthreads();  // every warp is done with slot i % kStages before it is refilled
      }
      if (q == 3) break;
#pragma unroll
      for (int j = 0; j < kWideTiles; ++j) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          float* sa = my_sums + (j * 4 + k) * 32;
          *sa = q == 0 ? acc_a[j][k] : *sa + acc_a[j][k];
          if constexpr (kGateUp) {
            float* sb = sa + kWideTiles * 4 * 32;
            *sb = q == 0 ? acc_b[j][k] : *sb + acc_b[j][k];
          }
        }
      }
    }
    cp_async_wait<0>();  // the empty trailing groups
    wide_epilogue<kGateUp>(st, my_sums, acc_a, acc_b, begin + p0, n, active, row0, g, t);
  }
}

template <bool kGateUp>
void launch_wide(const uint16_t* in, int64_t in_ld, const GroupedStageArgs& args, int max_active,
                 int64_t rows, cudaStream_t stream) {
  // Above the default 48 KiB of dynamic shared memory: raised once per kernel and device
  // (launch.h).
  allow_dynamic_smem(reinterpret_cast<const void*>(grouped_mma_wide_kernel<kGateUp>),
                     static_cast<int>(kStagedSmem<kGateUp>));
  const dim3 grid(static_cast<unsigned>(rows / kWideRows), static_cast<unsigned>(max_active));
  launch_kernel(grouped_mma_wide_kernel<kGateUp>, grid, kWideWarps * 32, kStagedSmem<kGateUp>,
                stream, in, in_ld, args);
}

}  // namespace

bool wide_stage_fits(bool fp4, int64_t rows) { return fp4 && rows % kWideRows == 0; }

void launch_wide_stage(bool gate_up, const uint16_t* in, int64_t in_ld,
                       const GroupedStageArgs& args, int max_active, int64_t rows,
                       cudaStream_t stream) {
  if (gate_up) {
    launch_wide<true>(in, in_ld, args, max_active, rows, stream);
  } else {
    launch_wide<false>(in, in_ld, args, max_active, rows, stream);
  }
}

}  // namespace deepinfer::kernels::cuda::grouped_mma
