// Device plumbing of the CUDA backend (device.h): availability, buffers, arena, uploads.
#include "backend/cuda/device.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "backend/ops.h"
#include "kernels/cuda/launch.h"

namespace deepinfer::backend::cuda {

void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "deepinfer: CUDA error at %s:%d: %s: %s (%s)\n", file, line, what,
               cudaGetErrorString(e), cudaGetErrorName(e));
  std::abort();
}

Status cuda_available(int device) {
  constexpr const char* kHint =
      " (the CUDA backend needs an NVIDIA GPU of compute capability 9.0 or 10.0 with a working "
      "driver; set DEEPINFER_ACCELERATOR=cpu to run on the CPU)";
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return failed_precondition(std::string("no usable CUDA device: ") + cudaGetErrorString(e) +
                               kHint);
  }
  if (count == 0) return failed_precondition(std::string("no CUDA device found") + kHint);
  if (device < 0 || device >= count) {
    return invalid_argument("CUDA device " + std::to_string(device) + " does not exist (" +
                            std::to_string(count) + " found)");
  }
  cudaDeviceProp prop{};
  e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) {
    return failed_precondition(std::string("cannot query CUDA device: ") + cudaGetErrorString(e));
  }
  e = cudaSetDevice(device);
  if (e == cudaSuccess) e = kernels::cuda::launch_probe();
  if (e != cudaSuccess) {
    cudaGetLastError();
    return failed_precondition(std::string("CUDA device ") + std::to_string(device) + " (" +
                               prop.name + ", compute capability " + std::to_string(prop.major) +
                               "." + std::to_string(prop.minor) +
                               ") cannot run this build's kernels: " + cudaGetErrorString(e) +
                               " (built for CMAKE_CUDA_ARCHITECTURES " DEEPINFER_CUDA_ARCHS ")");
  }
  return {};
}

bool is_device_pointer(const void* p) {
  if (p == nullptr) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

Expected<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  const cudaError_t e = cudaMalloc(&b.ptr_, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return resource_exhausted("cudaMalloc of " + std::to_string(bytes) +
                              " bytes failed: " + cudaGetErrorString(e));
  }
  b.bytes_ = bytes;
  return b;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceArena::reset() {
  used_ = 0;
  if (chunks_.size() <= 1 || frozen_) return;
  ++generation_;
  size_t total = 0;
  for (const DeviceBuffer& c : chunks_) total += c.size();
  DI_CUDA_CHECK(cudaStreamSynchronize(stream_));  // queued kernels may still read the chunks
  chunks_.clear();
  auto b = DeviceBuffer::allocate(total);
  if (!b.ok()) {
    std::fprintf(stderr, "deepinfer: %s\n", b.status().message().c_str());
    std::abort();
  }
  chunks_.push_back(std::move(b).value());
}

void* DeviceArena::alloc(size_t bytes) {
  constexpr size_t kAlign = 256;
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  if (bytes == 0) bytes = kAlign;
  if (chunks_.empty() || used_ + bytes > chunks_.back().size()) {
    if (frozen_) {
      overflowed_ = true;
      return nullptr;
    }
    const size_t last = chunks_.empty() ? 0 : chunks_.back().size();
    const size_t want = std::max<size_t>({bytes, 2 * last, size_t{16} << 20});
    auto b = DeviceBuffer::allocate(want);
    if (!b.ok()) throw OutOfMemory("GPU memory exhausted (op scratch): " + b.status().message());
    chunks_.push_back(std::move(b).value());
    used_ = 0;
  }
  void* p = static_cast<char*>(chunks_.back().data()) + used_;
  used_ += bytes;
  return p;
}

namespace {
Expected<DeviceBuffer> copy_to_device(const TensorView& v) {
  if (!v.is_contiguous()) return invalid_argument("upload: tensor is not contiguous");
  DI_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::allocate(static_cast<size_t>(v.nbytes())));
  if (v.nbytes() > 0) {
    const cudaMemcpyKind kind =
        v.device == DeviceKind::kCuda ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
    const cudaError_t e = cudaMemcpy(b.data(), v.data, static_cast<size_t>(v.nbytes()), kind);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return internal_error(std::string("upload: cudaMemcpy failed: ") + cudaGetErrorString(e));
    }
  }
  return b;
}
}  // namespace

Expected<DeviceWeight> upload_weight(const WeightRef& host) {
  DeviceWeight d;
  d.ref = host;
  DI_ASSIGN_OR_RETURN(d.weight, copy_to_device(host.weight));
  d.ref.weight =
      TensorView::make(host.weight.dtype, host.weight.shape, d.weight.data(), DeviceKind::kCuda);
  if (host.quantized()) {
    DI_ASSIGN_OR_RETURN(d.scale, copy_to_device(host.scale));
    d.ref.scale =
        TensorView::make(host.scale.dtype, host.scale.shape, d.scale.data(), DeviceKind::kCuda);
  }
  return d;
}

Expected<DeviceTensor> upload_tensor(const TensorView& host) {
  DeviceTensor d;
  DI_ASSIGN_OR_RETURN(d.buffer, copy_to_device(host));
  d.view = TensorView::make(host.dtype, host.shape, d.buffer.data(), DeviceKind::kCuda);
  return d;
}

}  // namespace deepinfer::backend::cuda
