// Conversions from the op contract's views to the kernels' POD descriptors, shared by the
// CudaOps translation units.
#pragma once

#include "backend/mat.h"
#include "backend/weight_ref.h"
#include "kernels/cuda/launch.h"

namespace deepinfer::backend::cuda {

kernels::cuda::MatDesc md(CMat m);
kernels::cuda::MatDesc md(Mat m);
kernels::cuda::WeightDesc wd(const WeightRef& w);

}  // namespace deepinfer::backend::cuda
