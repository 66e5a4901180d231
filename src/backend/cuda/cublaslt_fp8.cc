#include "backend/cuda/cublaslt_fp8.h"

#include <cublasLt.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cuda/dl_library.h"
#include "base/check.h"

namespace deepinfer::backend::cuda {

namespace {

// The cuBLASLt entry points used, resolved once.
struct LtApi {
  cublasStatus_t (*create)(cublasLtHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasLtHandle_t) = nullptr;
  cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t*, cublasComputeType_t,
                                cudaDataType_t) = nullptr;
  cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t) = nullptr;
  cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*,
                             size_t) = nullptr;
  cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t*, cudaDataType, uint64_t, uint64_t,
                                  int64_t) = nullptr;
  cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t) = nullptr;
  cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t*) = nullptr;
  cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t) = nullptr;
  cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                             const void*, size_t) = nullptr;
  cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                              cublasLtMatmulHeuristicResult_t*, int*) = nullptr;
  cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*,
                           cublasLtMatrixLayout_t, const void*, cublasLtMatrixLayout_t, const void*,
                           const void*, cublasLtMatrixLayout_t, void*, cublasLtMatrixLayout_t,
                           const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t) = nullptr;
  size_t (*version)() = nullptr;  // optional: for the probe's report
  bool ok() const {
    return create && destroy && desc_create && desc_destroy && desc_set && layout_create &&
           layout_destroy && pref_create && pref_destroy && pref_set && heuristic && matmul;
  }
};

const LtApi& lt_api() {
  static const LtApi api = [] {
    LtApi a;
    void* lib = open_first_library({"libcublasLt.so.13", "libcublasLt.so"});
    if (lib == nullptr) return a;
    resolve_symbol(lib, "cublasLtCreate", a.create);
    resolve_symbol(lib, "cublasLtDestroy", a.destroy);
    resolve_symbol(lib, "cublasLtMatmulDescCreate", a.desc_create);
    resolve_symbol(lib, "cublasLtMatmulDescDestroy", a.desc_destroy);
    resolve_symbol(lib, "cublasLtMatmulDescSetAttribute", a.desc_set);
    resolve_symbol(lib, "cublasLtMatrixLayoutCreate", a.layout_create);
    resolve_symbol(lib, "cublasLtMatrixLayoutDestroy", a.layout_destroy);
    resolve_symbol(lib, "cublasLtMatmulPreferenceCreate", a.pref_create);
    resolve_symbol(lib, "cublasLtMatmulPreferenceDestroy", a.pref_destroy);
    resolve_symbol(lib, "cublasLtMatmulPreferenceSetAttribute", a.pref_set);
    resolve_symbol(lib, "cublasLtMatmulAlgoGetHeuristic", a.heuristic);
    resolve_symbol(lib, "cublasLtMatmul", a.matmul);
    resolve_symbol(lib, "cublasLtGetVersion", a.version);
    return a;
  }();
  return api;
}

template <typename T>
bool set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  return lt_api().desc_set(d, attr, &v, sizeof v) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace

// usable false: cuBLASLt offered no algorithm for the shape.
struct Fp8BlockGemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulHeuristicResult_t algo{};
  size_t workspace_bytes = 0;
  bool usable = false;

  ~Plan() { release(); }
  void release() {
    const LtApi& api = lt_api();
    if (d != nullptr) api.layout_destroy(d);
    if (b != nullptr) api.layout_destroy(b);
    if (a != nullptr) api.layout_destroy(a);
    if (op != nullptr) api.desc_destroy(op);
    op = nullptr, a = b = d = nullptr;
  }
};

std::unique_ptr<Fp8BlockGemm> Fp8BlockGemm::open() {
  const LtApi& api = lt_api();
  cublasLtHandle_t h = nullptr;
  if (!api.ok() || api.create(&h) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr,
                 "deepinfer: cuBLASLt (libcublasLt.so.13) not usable: FP8 linears above the "
                 "grouped stage's rows run on a dequantised BF16 copy\n");
    return nullptr;
  }
  std::unique_ptr<Fp8BlockGemm> g(new Fp8BlockGemm());
  g->handle_ = h;
  return g;
}

Fp8BlockGemm::~Fp8BlockGemm() {
  plans_.clear();  // descriptors before the handle
  if (handle_ != nullptr) lt_api().destroy(static_cast<cublasLtHandle_t>(handle_));
}

bool Fp8BlockGemm::shape_ok(int64_t N, int64_t K, int64_t ldy) {
  return K > 0 && K % 512 == 0 && N > 0 && N % 16 == 0 && ldy >= N && ldy % 4 == 0;
}

namespace {

// Descriptors for one form of the product; `why` names the first call that failed, or says
// that the heuristic offered nothing. weight_on_a: W (128 x 128 scales) is cuBLAS's A and the
// output is yᵀ[N, M] column-major, i.e. y row-major (the form used); otherwise x (1 x 128) is A
// and the output is y column-major (probe only: it would need a transposition).
bool make_plan(void* handle, int64_t M, int64_t N, int64_t K, int64_t ldd, cudaDataType out,
               bool weight_on_a, size_t workspace_bytes, cublasLtMatmulDesc_t* op,
               cublasLtMatrixLayout_t* a, cublasLtMatrixLayout_t* b, cublasLtMatrixLayout_t* d,
               cublasLtMatmulHeuristicResult_t* algo, const void* a_scale, const void* b_scale,
               std::string* why) {
  const LtApi& api = lt_api();
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const int32_t blk = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  const int32_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  const int64_t rows_a = weight_on_a ? N : M, cols_b = weight_on_a ? M : N;
  const uint64_t ws = workspace_bytes;
  auto step = [why](cublasStatus_t st, const char* what) {
    if (st != CUBLAS_STATUS_SUCCESS && why->empty())
      *why = std::string(what) + " (status " + std::to_string(static_cast<int>(st)) + ")";
    return st == CUBLAS_STATUS_SUCCESS;
  };
  auto ok = [](bool holds) { return holds ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE; };
  cublasLtMatmulPreference_t pref = nullptr;
  int found = 0;
  // The scale pointers are set before the heuristic (cuBLASLt checks the scale modes with them);
  // run() sets each call's own.
  const bool made =
      step(api.desc_create(op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc create") &&
      step(ok(set(*op, CUBLASLT_MATMUL_DESC_TRANSA, ta) &&
              set(*op, CUBLASLT_MATMUL_DESC_TRANSB, tb)),
           "transposes") &&
      step(ok(set(*op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, weight_on_a ? blk : vec) &&
              set(*op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, weight_on_a ? vec : blk)),
           "scale modes") &&
      step(ok(set(*op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale) &&
              set(*op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale)),
           "scale pointers") &&
      step(api.layout_create(a, CUDA_R_8F_E4M3, K, rows_a, K), "layout A") &&
      step(api.layout_create(b, CUDA_R_8F_E4M3, K, cols_b, K), "layout B") &&
      step(api.layout_create(d, out, rows_a, cols_b, ldd), "layout D") &&
      step(api.pref_create(&pref), "preference") &&
      step(api.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
           "workspace preference") &&
      step(api.heuristic(static_cast<cublasLtHandle_t>(handle), *op, *a, *b, *d, *d, pref, 1, algo,
                         &found),
           "heuristic") &&
      step(ok(found > 0), "no algorithm");
  if (pref != nullptr) api.pref_destroy(pref);
  return made;
}

}  // namespace

Fp8BlockGemm::Plan* Fp8BlockGemm::plan(const Fp8GemmOperands& o, size_t workspace_bytes) {
  const int64_t M = o.M, N = o.N, K = o.K, ldy = o.ldy;
  auto& slot = plans_[{M, N, K, ldy}];
  if (slot == nullptr || slot->workspace_bytes != workspace_bytes) {
    // Column-major, as cuBLAS sees row-major data: yᵀ[N, M] = (Wᵀ)ᵀ[N, K] · xᵀ[K, M], W's 128 x
    // 128 scales on A, x's 1 x 128 ones on B ("TN", the form Hopper's FP8 kernels take), FP32
    // output.
    auto p = std::make_unique<Plan>();
    p->workspace_bytes = workspace_bytes;
    std::string why;
    p->usable = shape_ok(N, K, ldy) && M > 0 &&
                make_plan(handle_, M, N, K, ldy, CUDA_R_32F, true, workspace_bytes, &p->op, &p->a,
                          &p->b, &p->d, &p->algo, o.w_scale, o.x_scale, &why);
    slot = std::move(p);
  }
  return slot->usable ? slot.get() : nullptr;
}

std::string Fp8BlockGemm::probe(int64_t M, int64_t N, int64_t K, const void* placeholder,
                                size_t workspace_bytes) {
  std::string r = "cuBLASLt " + std::to_string(lt_api().version ? lt_api().version() : 0);
  for (const bool weight_on_a : {true, false}) {
    for (const cudaDataType out : {CUDA_R_32F, CUDA_R_16BF}) {
      Plan p;
      std::string why;
      const int64_t ldd = weight_on_a ? N : M;
      const bool ok = make_plan(handle_, M, N, K, ldd, out, weight_on_a, workspace_bytes, &p.op,
                                &p.a, &p.b, &p.d, &p.algo, placeholder, placeholder, &why);
      r += std::string("; ") +
           (weight_on_a ? "A=W(128x128) B=x(1x128)" : "A=x(1x128) B=W(128x128)") +
           (out == CUDA_R_32F ? " D=F32: " : " D=BF16: ") + (ok ? "ok" : why);
    }
  }
  return r;
}

void Fp8BlockGemm::run(Plan& p, const Fp8GemmOperands& o, cudaStream_t stream, void* workspace,
                       size_t workspace_bytes) {
  DI_CHECK(p.usable && p.workspace_bytes == workspace_bytes);
  // The scale pointers are per call (each weight and input has its own); alpha = 1, beta = 0.
  const void* a_scale = o.w_scale;
  const void* b_scale = o.x_scale;
  DI_CHECK(set(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale) &&
           set(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale));
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s =
      lt_api().matmul(static_cast<cublasLtHandle_t>(handle_), p.op, &alpha, o.w, p.a, o.x, p.b,
                      &beta, o.y, p.d, o.y, p.d, &p.algo.algo, workspace, workspace_bytes, stream);
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(
        stderr,
        "deepinfer: cublasLtMatmul (FP8 block-scaled, M=%lld N=%lld K=%lld) failed: status %d\n",
        static_cast<long long>(o.M), static_cast<long long>(o.N), static_cast<long long>(o.K),
        static_cast<int>(s));
    std::abort();
  }
}

}  // namespace deepinfer::backend::cuda
