// Factories of the two CPU backends of the op contract (backend/ops.h).
//
// ref: plain FP32 loops, single-threaded, written to be obviously right: the numerical oracle.
// opt: the same contract, multi-threaded (base/thread_pool.h) with inner loops over contiguous
//      FP32 scratch that the compiler vectorises; checked against ref by tests/ops.
#pragma once

#include <memory>

#include "backend/ops.h"

namespace deepinfer::backend::cpu {

std::unique_ptr<Ops> make_ref_ops();
// num_threads counts the caller; 0 = one per hardware thread.
std::unique_ptr<Ops> make_opt_ops(int num_threads = 0);

}  // namespace deepinfer::backend::cpu
