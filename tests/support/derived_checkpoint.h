// Committed fixture variants that are a pure function of another committed checkpoint (a BF16
// save of FP32 weights, the same weights under other tensor names) are not stored: their folder
// holds config.json and derive.json, and tests materialize the weights from that recipe. This
// keeps the repository within the size the GPU machine accepts (the tree travels whole).
//
// derive.json:
//   {"from": "../official_fp32",           source folder (relative), holding model.safetensors
//                                          (committed weights, not another recipe)
//    "copy": ["tokenizer.json"],           optional: files copied from the source folder
//    "metadata": {"format": "pt"},         optional: the safetensors __metadata__
//    "tensors": [
//      {"name": N, "source": S, "dtype": D},     tensor S of the source (default: N) stored as
//                                                D (F32 / BF16 by round-to-nearest-even, as torch
//                                                casts; any dtype unchanged)
//      {"name": N, "fill": 1.0, "shape": [..], "dtype": D}]}   a constant tensor
// The generating scripts (tests/reference/model*/make_goldens.py) write derive.json and check
// that the recipe reproduces the bytes transformers' own save_pretrained wrote.
#pragma once

#include <string>

namespace deepinfer::testing {

// The folder to load for committed fixture folder `dir`: `dir` itself when it holds weights
// (model.safetensors or an index), else a temporary folder built from `dir`/derive.json once per
// process (removed at exit). Throws std::runtime_error naming the problem.
std::string checkpoint_dir(const std::string& dir);

// Builds the variant described by `dir`/derive.json into the existing empty folder `out`.
void materialize_derived(const std::string& dir, const std::string& out);

}  // namespace deepinfer::testing
