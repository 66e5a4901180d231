// Ceilings of the card, measured in the benchmark's own process, and the weight counts that turn
// them into floors for a step (decode_bench; usable by draft_bench).
//
//   * copy bandwidth: a 2 GiB device-to-device cudaMemcpy (bytes read + written) / time: the
//     rate a step that only streams weights could reach;
//   * device-to-host rate: one cudaMemcpy into pageable host memory (what a step's copy of its
//     logits rows to a std::vector costs per byte);
//   * tensor-core rates: an N x N x N GEMM timed after warm-up, FP8 E4M3 x E4M3 -> BF16 through
//     cuBLASLt and BF16 x BF16 -> BF16 through cuBLAS. The checkpoint's linears are FP8/FP4, so
//     the FP8 rate is the best a prefill's matmuls could do; a card or library that offers no FP8
//     algorithm leaves fp8_tflops at 0 and says why (the caller then uses the BF16 rate).
//
// Nothing here fails the benchmark: a ceiling that cannot be measured is reported as 0 with a
// note, so the timings still print.
#pragma once

#include <string>

#include "io/checkpoint.h"

namespace deepinfer::bench {

// Device-to-device copy bandwidth in GB/s (bytes read + written per second).
double measure_copy_gbps();

// Device-to-host copy rate into pageable memory, GB/s, for copies of `bytes`.
double measure_d2h_gbps(size_t bytes);
// The same into page-locked memory (cudaMallocHost): what the logits' copy could reach if
// StepOutputs held them there; 0 when the host allocation fails.
double measure_d2h_pinned_gbps(size_t bytes);

struct GemmRates {
  int n = 0;               // the GEMM was n x n x n
  double fp8_tflops = 0;   // 0: not measured (fp8_note says why)
  double bf16_tflops = 0;  // 0: not measured (bf16_note says why)
  std::string fp8_note, bf16_note;
};
GemmRates measure_gemm_tflops(int n = 8192);

// Bytes and parameters of the weights a step touches, from the checkpoint (decode_bench's
// banner says how the floors use them).
struct WeightBytes {
  double dense = 0;       // bytes of everything but routed experts (head included)
  double per_expert = 0;  // bytes of one routed expert's w1+w2+w3 (+ scales)
  int moe_layers = 0, experts = 0, top_k = 0;
  // Weights one token multiplies, split: the body (every layer, shared and top-k routed experts)
  // once per token; the LM head (head.weight, or the embedding when tied) once per logits row.
  double body_params = 0;
  double head_params = 0;
  double head_bytes = 0;  // the LM head's weight bytes (read once per step)
  // Bytes of the weights a decode step at `batch` reads: the dense part plus the distinct routed
  // experts of B tokens routed uniformly at random, E·(1 − (1 − k/E)^B) per MoE layer.
  double step_bytes(int batch) const;
  // Matmul FLOPs of a step over `tokens` rows of which `logit_rows` want logits.
  double body_flops(double tokens) const { return 2.0 * body_params * tokens; }
  double head_flops(double logit_rows) const { return 2.0 * head_params * logit_rows; }
};
WeightBytes count_weights(const io::Checkpoint& ck);

}  // namespace deepinfer::bench
