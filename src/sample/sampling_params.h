// The sampler's parameters are the public SamplingParams (include/deepinfer/sampling_params.h:
// vLLM's names, defaults and ranges, every field's meaning); sampling_params.cc validates them.
#pragma once

#include "deepinfer/sampling_params.h"  // IWYU pragma: export

namespace deepinfer::sample {

using ::deepinfer::SamplingParams;

}  // namespace deepinfer::sample
