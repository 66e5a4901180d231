// The launch switches of launch.h that host code sets and every launch_kernel reads: the
// process-wide programmatic-dependent-launch switch (DEEPINFER_CUDA_PDL, set by CudaOps::create)
// and the launch counters the benchmarks read. Atomics: a backend may be made on one thread
// while another launches.
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {
namespace {
std::atomic<bool> g_programmatic_launch{false};
std::atomic<uint64_t> g_kernel_launches{0};
std::atomic<bool> g_histogram_on{false};
std::mutex g_histogram_mutex;
std::mutex g_smem_mutex;
std::set<std::tuple<const void*, int, int>>& raised_smem() {
  static std::set<std::tuple<const void*, int, int>> s;  // (kernel, device, bytes), g_smem_mutex
  return s;
}
std::map<const void*, uint64_t>& histogram() {
  static std::map<const void*, uint64_t> h;  // kernel -> launches, under g_histogram_mutex
  return h;
}

// "deepinfer::kernels::cuda::(anonymous namespace)::gemv_kernel<4, true>(Args...)" ->
// "gemv_kernel<4, true>": the namespaces and parameter list say nothing about which launch it is.
std::string short_kernel_name(const void* kernel) {
  const char* mangled = nullptr;
  if (cudaFuncGetName(&mangled, kernel) != cudaSuccess || mangled == nullptr) {
    return "(unnamed kernel)";
  }
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : mangled;
  std::free(demangled);
  // Cut the parameter list: the last top-level '(' (template arguments may hold parentheses).
  int depth = 0;
  size_t params = std::string::npos;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (c == '(' && depth == 0) params = i;
  }
  if (params != std::string::npos && params > 0) name.resize(params);
  // Drop the qualifying namespaces before the kernel's own name (outside template arguments).
  depth = 0;
  size_t start = 0;
  for (size_t i = 0; i + 1 < name.size(); ++i) {
    const char c = name[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (c == ':' && name[i + 1] == ':' && depth == 0) start = i + 2;
  }
  return name.substr(start);
}
}  // namespace

void set_programmatic_launch(bool on) {
  g_programmatic_launch.store(on, std::memory_order_relaxed);
}
bool programmatic_launch() { return g_programmatic_launch.load(std::memory_order_relaxed); }
uint64_t kernel_launches() { return g_kernel_launches.load(std::memory_order_relaxed); }
void count_kernel_launch(const void* kernel) {
  g_kernel_launches.fetch_add(1, std::memory_order_relaxed);
  if (g_histogram_on.load(std::memory_order_relaxed)) {
    const std::lock_guard<std::mutex> lock(g_histogram_mutex);
    ++histogram()[kernel];
  }
}

void allow_dynamic_smem(const void* kernel, int bytes) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return;  // no device: the launch that follows reports it
  }
  const std::lock_guard<std::mutex> lock(g_smem_mutex);
  if (raised_smem().emplace(kernel, device, bytes).second) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  }
}

int device_sm_count() {
  constexpr int kDevices = 64, kFallback = 132;
  static std::atomic<int> cached[kDevices] = {};  // 0: not yet asked
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) {
    cudaGetLastError();
    return kFallback;
  }
  int n = cached[device].load(std::memory_order_relaxed);
  if (n == 0) {
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || n <= 0) {
      cudaGetLastError();
      n = kFallback;
    }
    cached[device].store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_launch_histogram(bool on) { g_histogram_on.store(on, std::memory_order_relaxed); }
void reset_launch_histogram() {
  const std::lock_guard<std::mutex> lock(g_histogram_mutex);
  histogram().clear();
}
std::vector<std::pair<std::string, uint64_t>> launch_histogram() {
  std::map<const void*, uint64_t> copy;
  {
    const std::lock_guard<std::mutex> lock(g_histogram_mutex);
    copy = histogram();
  }
  std::map<std::string, uint64_t> by_name;  // one name may cover several instantiations' pointers
  for (const auto& [kernel, n] : copy) by_name[short_kernel_name(kernel)] += n;
  std::vector<std::pair<std::string, uint64_t>> out(by_name.begin(), by_name.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace deepinfer::kernels::cuda
