// Sparse gathered MQA on the tensor cores (mma.sync m16n8k16, BF16 in, FP32 accumulate), head
// dim 512, for the official semantics: the queries and key rows are BF16 numbers there (the
// RoPE rounding point, FP8 fake quant with power-of-two scales, NVFP4 with E4M3 scales) and the
// probabilities are BF16-rounded (bf16_probs), so every product is exact and only the FP32
// summation order differs from the SIMT kernels (sparse_attention.cu), as between any two
// GEMMs. The caller promises the BF16 inputs (launch.h).
//
// Block = (query token, 16 heads), 4 warps, as sparse_attention_group_kernel: the compacted key
// addresses, then
//   scores   warp w takes the key tiles w, w + 4, ... (8 keys each): D[16 heads, 8 keys] over 32
//            mma steps of 16 channels, the queries from shared memory (BF16), each key's
//            channels straight from global memory as float4 (thread t of a quad takes channels
//            16s + 4t .. 16s + 4t + 3 of step s: the channel order inside a step is free as
//            long as the queries are read in the same order), scaled into z as the SIMT kernel
//            does;
//   softmax  sparse_group_softmax, the SIMT kernels' own code (max, BF16 probabilities, FP32
//            denominator with the sink);
//   P·V      keys in chunks of 32 staged in shared memory as BF16, channel-major (the mma's B
//            operand is two consecutive keys of one channel; ldmatrix reads it), warp w owning
//            channels 128w .. 128w + 127 (16 tiles of 8): D[16 heads, 8 channels] +=
//            P[16 heads, 16 keys] · V[16 keys, 8 channels]; o = D / den.
// The SIMT group kernel does the same work at FP32 FMA rate (~31 TFLOP/s at a 4096-token
// prefill, 45 ms over 4 layers: bench/results/model_cuda_h200_2026-12-03_stop32_call1.log).
#include "kernels/cuda/attention/sparse_common.cuh"
#include "kernels/cuda/mma_common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kD = 512;
constexpr int kHeads = kSparseGroup;   // 16: one mma row tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kQld = kD + 16;          // halves per staged query row: 264 words, so the 8-byte
                                       // reads of a half warp (8g + 2t words) hit 32 banks
constexpr int kChunk = 32;             // keys per staged V chunk
constexpr int kVld = kChunk / 2 + 4;   // words per channel row (16 key pairs + 4): 80 bytes, so
                                       // ldmatrix's 8 row reads hit 8 distinct bank groups
constexpr int kChannelsPerWarp = kD / kWarps;  // 128
constexpr int kTilesPerWarp = kChannelsPerWarp / 8;

constexpr size_t kVtBytes = size_t{kD} * kVld * sizeof(uint32_t);
constexpr size_t kQsBytes = size_t{kHeads} * kQld * sizeof(uint16_t);

__global__ void __launch_bounds__(kThreads)
    sparse_attention_mma_kernel(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                const float* sink, float scale, MatDesc o, bool round_out) {
  grid_dependency_sync();
  extern __shared__ uint4 smem_mma[];
  uint32_t* vt = reinterpret_cast<uint32_t*>(smem_mma);                        // [kD][kVld]
  uint16_t* qs = reinterpret_cast<uint16_t*>(reinterpret_cast<char*>(vt) + kVtBytes);  // [16][kQld]
  const float** rows = reinterpret_cast<const float**>(reinterpret_cast<char*>(qs) + kQsBytes);
  float* z = reinterpret_cast<float*>(rows + L);  // [16][L]
  float* mx = z + kHeads * L;                     // [16]
  float* den = mx + kHeads;                       // [16]
  __shared__ int count;
  const int64_t tok = blockIdx.x, h0 = static_cast<int64_t>(blockIdx.y) * kHeads;
  const int hn = static_cast<int>(n_heads - h0 < kHeads ? n_heads - h0 : kHeads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;

  // The group's queries as BF16 (rows past hn zero): pairs of channels per thread.
  for (int i = threadIdx.x; i < kHeads * kD / 2; i += kThreads) {
    const int h = i / (kD / 2), c = 2 * (i % (kD / 2));
    const float* qh = q.data + tok * q.ld + (h0 + h) * kD;
    const uint32_t v = h < hn ? pack_bf16(qh[c], qh[c + 1]) : 0u;
    *reinterpret_cast<uint32_t*>(qs + h * kQld + c) = v;
  }
  sparse_compact_rows(keys, tok, L, rows, &count);
  __syncthreads();
  const int n = count;
  if (n == 0) {
    for (int64_t i = threadIdx.x; i < int64_t{hn} * kD; i += kThreads) {
      o.data[tok * o.ld + h0 * kD + i] = 0.0f;
    }
    return;
  }

  // Scores.
  const uint16_t* qa = qs + g * kQld + 4 * t;  // head g; head g + 8 is 8 rows on
  for (int kt = warp; kt * 8 < n; kt += kWarps) {
    const int j = kt * 8 + g;  // this thread's key (the mma's column g); past n: the tile's first
    const float* kr = rows[j < n ? j : kt * 8] + 4 * t;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 8
    for (int s = 0; s < kD / 16; ++s) {
      const float4 k4 = sparse_load4(kr + 16 * s);
      const uint2 alo = *reinterpret_cast<const uint2*>(qa + 16 * s);              // a0, a2
      const uint2 ahi = *reinterpret_cast<const uint2*>(qa + 8 * kQld + 16 * s);   // a1, a3
      mma_bf16_16816(acc, alo.x, ahi.x, alo.y, ahi.y, pack_bf16(k4.x, k4.y),
                     pack_bf16(k4.z, k4.w));
    }
    // acc: (head g, key 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1) of the tile.
    const int k0 = kt * 8 + 2 * t;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int h = g + (i >= 2 ? 8 : 0), jj = k0 + (i & 1);
      if (h < hn && jj < n) z[h * L + jj] = acc[i] * scale;
    }
  }
  __syncthreads();
  sparse_group_softmax(z, L, n, hn, sink, h0, /*bf16_probs=*/true, mx, den);

  // P·V.
  float acc[kTilesPerWarp][4] = {};
  const int c_warp = warp * kChannelsPerWarp;
  for (int j0 = 0; j0 < n; j0 += kChunk) {
    __syncthreads();  // z and den are final; the previous chunk's readers of vt are done
    // Stage keys j0 .. j0 + 31 (zero past n): task = (key pair kp, channel quad c4).
    for (int task = threadIdx.x; task < (kChunk / 2) * (kD / 4); task += kThreads) {
      const int kp = task % (kChunk / 2), c4 = task / (kChunk / 2);
      const int ja = j0 + 2 * kp;
      const float4 va = ja < n ? sparse_load4(rows[ja] + 4 * c4) : make_float4(0.f, 0.f, 0.f, 0.f);
      const float4 vb = ja + 1 < n ? sparse_load4(rows[ja + 1] + 4 * c4) : make_float4(0.f, 0.f, 0.f, 0.f);
      uint32_t* w = vt + (4 * c4) * kVld + kp;
      w[0] = pack_bf16(va.x, vb.x);
      w[kVld] = pack_bf16(va.y, vb.y);
      w[2 * kVld] = pack_bf16(va.z, vb.z);
      w[3 * kVld] = pack_bf16(va.w, vb.w);
    }
    __syncthreads();
    const int nk = min(kChunk, n - j0);
    for (int ks = 0; ks < nk; ks += 16) {
      // P[16 heads, keys ks .. ks + 15] (probabilities past n are zero: z holds garbage there).
      const auto p = [&](int h, int kk) {
        const int jj = j0 + ks + kk;
        return h < hn && jj < n ? z[h * L + jj] : 0.0f;
      };
      const uint32_t a0 = pack_bf16(p(g, 2 * t), p(g, 2 * t + 1));
      const uint32_t a1 = pack_bf16(p(g + 8, 2 * t), p(g + 8, 2 * t + 1));
      const uint32_t a2 = pack_bf16(p(g, 2 * t + 8), p(g, 2 * t + 9));
      const uint32_t a3 = pack_bf16(p(g + 8, 2 * t + 8), p(g + 8, 2 * t + 9));
      // ldmatrix x4 per pair of channel tiles: matrices (tile, keys 0-7), (tile, keys 8-15),
      // (tile + 1, keys 0-7), (tile + 1, keys 8-15); lane l gives row l % 8 of matrix l / 8.
      const int mi = lane >> 3, r = lane & 7;
#pragma unroll
      for (int nt = 0; nt < kTilesPerWarp; nt += 2) {
        const int ch = c_warp + 8 * nt + r + (mi >> 1) * 8;
        uint32_t b[4];
        ldmatrix_x4(b, vt + ch * kVld + (ks >> 1) + (mi & 1) * 4);
        mma_bf16_16816(acc[nt], a0, a1, a2, a3, b[0], b[1]);
        mma_bf16_16816(acc[nt + 1], a0, a1, a2, a3, b[2], b[3]);
      }
    }
  }
  // acc[nt]: (head g, channel 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1) of tile nt.
#pragma unroll
  for (int nt = 0; nt < kTilesPerWarp; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int h = g + (i >= 2 ? 8 : 0);
      if (h >= hn) continue;
      const int c = c_warp + 8 * nt + 2 * t + (i & 1);
      const float v = acc[nt][i] / den[h];
      o.data[tok * o.ld + (h0 + h) * kD + c] = round_out ? bf16_round_d(v) : v;
    }
  }
}

size_t mma_smem_bytes(int64_t L) {
  return kVtBytes + kQsBytes + static_cast<size_t>(L) * sizeof(const float*) +
         static_cast<size_t>(kHeads) * static_cast<size_t>(L + 2) * sizeof(float);
}
constexpr size_t kMmaSmemLimit = 160 * 1024;

}  // namespace

bool launch_sparse_attention_mma(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                 const float* sink, float scale, MatDesc o, bool round_out,
                                 cudaStream_t stream) {
  const int64_t L1 = L > 0 ? L : 1;
  if (keys.d != kD || mma_smem_bytes(L1) > kMmaSmemLimit) return false;
  if (q.rows == 0 || n_heads == 0) return true;
  allow_dynamic_smem(reinterpret_cast<const void*>(sparse_attention_mma_kernel),
                     static_cast<int>(kMmaSmemLimit));
  const dim3 grid(static_cast<unsigned>(q.rows),
                  static_cast<unsigned>((n_heads + kHeads - 1) / kHeads));
  launch_kernel(sparse_attention_mma_kernel, grid, kThreads, mma_smem_bytes(L1), stream, q, n_heads,
                keys, L, sink, scale, o, round_out);
  return true;
}

}  // namespace deepinfer::kernels::cuda
