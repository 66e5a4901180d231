// The weights of load format "dummy" (vLLM's `--load-format dummy`): for every tensor a config
// implies, the layout an official checkpoint stores it in and the random values it gets, so a
// full-size layer stack runs (and is timed) without a checkpoint on disk. Checkpoint::dummy
// builds its table from here; the bytes are made later where each weight lives (model::Binder:
// Ops::fill_random, a kernel on a GPU), never read from a file.
//
// Layouts follow the config's quantization as DeepSeek ships it: FP8 E4M3 with E8M0 block scales
// for linears, FP4 E2M1 (two per byte) with 1 x 32 E8M0 scales for routed experts when the
// config says so, BF16 norms / embeddings / router / compressors, F32 mHC parameters, sinks,
// position and router biases; an unquantized config gets BF16 where a quantized one has FP8/FP4.
// Values follow tools/gpu/make_synthetic_v4.py (dummy_weights.cc says why each is what it is).
// Deterministic: the same config and seed give the same bits on every backend.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "io/checkpoint.h"
#include "io/expected_tensors.h"
#include "io/model_config.h"

namespace deepinfer::io {

// The dummy weight of `t`, entry `index` of expected_tensors(c): its stored layout with null
// data, and the fills of its values (and scale). kInvalidArgument when the config's sizes admit
// no such layout (an FP4 expert width that is not a multiple of the scale block).
Expected<Weight> dummy_weight(const ExpectedTensor& t, int64_t index, const ModelConfig& c,
                              uint64_t seed);

}  // namespace deepinfer::io
