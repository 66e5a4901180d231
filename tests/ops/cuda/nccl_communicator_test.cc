// NcclCommunicator on 1..min(GPUs, 4) ranks, one thread per GPU, in both sum orders, against
// the serial references of src/parallel/communicator.h. The rank-order mode must match them
// bit for bit on data whose sums depend on the order; NCCL's own order is checked on small
// integers stored as floats (exact in any order). A plain executable (GPU machines may lack
// GoogleTest): prints one line per failed check and a summary; exit 0 pass, 1 fail, 77 no GPU.
#include "parallel/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace deepinfer;
using namespace deepinfer::parallel;

std::vector<float> order_sensitive_values(int rank, int64_t count, bool exact_in_any_order) {
  std::mt19937 rng(1234u + static_cast<uint32_t>(rank));
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) {
    if (exact_in_any_order) {
      x = static_cast<float>(static_cast<int>(rng() % 2001) - 1000);
    } else {
      const float mantissa = 1.0f + static_cast<float>(rng() % 1000000) / 1000000.0f;
      x = std::ldexp(mantissa, static_cast<int>(rng() % 41) - 20) * (rng() % 2 ? 1.0f : -1.0f);
    }
  }
  return v;
}

// A device copy of host data, freed at the end of the scope.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    if (cudaMalloc(&ptr, n > 0 ? n : 1) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  void upload(const std::vector<T>& v) {
    cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  template <typename T>
  std::vector<T> download(size_t count) const {
    std::vector<T> v(count);
    cudaMemcpy(v.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
};

struct Checker {
  std::vector<std::string> failures;
  int checks = 0;
  void expect(bool ok, const std::string& what) {
    ++checks;
    if (!ok) failures.push_back(what);
  }
  void expect_ok(const Status& s, const std::string& what) {
    expect(s.ok(), what + ": " + s.to_string());
  }
};

void run_rank(const NcclUniqueId& id, int rank, int n, NcclSumOrder order, Checker& check) {
  const std::string where = std::to_string(n) + " ranks, " +
                            (order == NcclSumOrder::kRankOrder ? "rank order" : "NCCL order") +
                            ", rank " + std::to_string(rank) + ": ";
  cudaSetDevice(rank);
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  auto created = NcclCommunicator::create(id, rank, n, rank, stream, {order});
  check.expect_ok(created.status(), where + "create");
  if (!created.ok()) return;
  NcclCommunicator& comm = **created;
  const bool exact_only = order == NcclSumOrder::kNccl;

  // all_reduce_sum, FP32.
  const int64_t count = 1000;
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(order_sensitive_values(r, count, exact_only));
  std::vector<float> expected(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    float acc = inputs[0][static_cast<size_t>(i)];
    for (int r = 1; r < n; ++r) acc += inputs[static_cast<size_t>(r)][static_cast<size_t>(i)];
    expected[static_cast<size_t>(i)] = acc;
  }
  DeviceBuffer buf(static_cast<size_t>(count) * sizeof(float));
  buf.upload(inputs[static_cast<size_t>(rank)]);
  check.expect_ok(comm.all_reduce_sum({buf.ptr, count, DType::kF32}, {buf.ptr, count, DType::kF32}),
                  where + "all_reduce_sum");
  cudaStreamSynchronize(stream);
  std::vector<float> got = buf.download<float>(static_cast<size_t>(count));
  check.expect(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)) == 0,
               where + "all_reduce_sum bits differ from the rank-order fold");

  // reduce_scatter_sum, FP32: block `rank` of every rank's inputs.
  const int64_t block = count / n;
  DeviceBuffer send(static_cast<size_t>(block * n) * sizeof(float)),
      recv(static_cast<size_t>(block) * sizeof(float));
  send.upload(inputs[static_cast<size_t>(rank)]);
  check.expect_ok(
      comm.reduce_scatter_sum({send.ptr, block * n, DType::kF32}, {recv.ptr, block, DType::kF32}),
      where + "reduce_scatter_sum");
  cudaStreamSynchronize(stream);
  got = recv.download<float>(static_cast<size_t>(block));
  check.expect(
      std::memcmp(got.data(), expected.data() + rank * block, got.size() * sizeof(float)) == 0,
      where + "reduce_scatter_sum bits differ from the rank-order fold");

  // all_gather, BF16 (moved as bytes).
  std::vector<uint16_t> mine(7);
  for (size_t i = 0; i < mine.size(); ++i)
    mine[i] = static_cast<uint16_t>(rank * 100 + static_cast<int>(i));
  DeviceBuffer part(mine.size() * 2), all(mine.size() * 2 * static_cast<size_t>(n));
  part.upload(mine);
  check.expect_ok(comm.all_gather({part.ptr, 7, DType::kBF16}, {all.ptr, 7 * n, DType::kBF16}),
                  where + "all_gather");
  cudaStreamSynchronize(stream);
  const std::vector<uint16_t> gathered =
      all.download<uint16_t>(mine.size() * static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    for (int i = 0; i < 7; ++i) {
      check.expect(gathered[static_cast<size_t>(q * 7 + i)] == q * 100 + i,
                   where + "all_gather value");
    }
  }

  // all_to_allv with uneven and zero counts: rank p sends (p + q) % 3 int32s to rank q.
  std::vector<int64_t> send_counts, recv_counts;
  std::vector<int32_t> out_values;
  for (int q = 0; q < n; ++q) {
    send_counts.push_back((rank + q) % 3);
    recv_counts.push_back((q + rank) % 3);
    for (int j = 0; j < (rank + q) % 3; ++j) out_values.push_back(rank * 100 + q * 10 + j);
  }
  DeviceBuffer a2a_send(out_values.size() * 4 + 4), a2a_recv(static_cast<size_t>(3 * n) * 4);
  a2a_send.upload(out_values);
  check.expect_ok(
      comm.all_to_allv({a2a_send.ptr, static_cast<int64_t>(out_values.size()), DType::kI32},
                       send_counts, {a2a_recv.ptr, 3 * n, DType::kI32}, recv_counts),
      where + "all_to_allv");
  cudaStreamSynchronize(stream);
  const std::vector<int32_t> arrived = a2a_recv.download<int32_t>(static_cast<size_t>(3 * n));
  size_t at = 0;
  for (int p = 0; p < n; ++p) {
    for (int j = 0; j < (p + rank) % 3; ++j) {
      check.expect(arrived[at++] == p * 100 + rank * 10 + j, where + "all_to_allv value");
    }
  }

  // broadcast from the last rank, then a barrier.
  std::vector<int32_t> token = {rank == n - 1 ? 4242 : -1};
  DeviceBuffer one(4);
  one.upload(token);
  check.expect_ok(comm.broadcast({one.ptr, 1, DType::kI32}, n - 1), where + "broadcast");
  check.expect_ok(comm.barrier(), where + "barrier");
  check.expect(one.download<int32_t>(1)[0] == 4242, where + "broadcast value");

  created->reset();
  cudaStreamDestroy(stream);
}

}  // namespace

int main() {
  int devices = 0;
  const cudaError_t probe = cudaGetDeviceCount(&devices);
  if (probe != cudaSuccess || devices < 1) {
    std::printf("nccl_communicator_test: no usable GPU (%s): skipped\n",
                probe != cudaSuccess ? cudaGetErrorString(probe) : "0 devices");
    return 77;
  }
  const int max_ranks = devices < 4 ? devices : 4;
  int checks = 0, failed = 0;
  for (int n = 1; n <= max_ranks; ++n) {
    for (NcclSumOrder order : {NcclSumOrder::kNccl, NcclSumOrder::kRankOrder}) {
      auto id = make_nccl_unique_id();
      if (!id.ok()) {
        std::printf("FAIL make_nccl_unique_id: %s\n", id.status().to_string().c_str());
        return 1;
      }
      std::vector<Checker> checkers(static_cast<size_t>(n));
      std::vector<std::thread> threads;
      for (int r = 0; r < n; ++r) {
        threads.emplace_back(run_rank, std::cref(*id), r, n, order,
                             std::ref(checkers[static_cast<size_t>(r)]));
      }
      for (auto& t : threads) t.join();
      for (const Checker& c : checkers) {
        checks += c.checks;
        failed += static_cast<int>(c.failures.size());
        for (const std::string& f : c.failures) std::printf("FAIL %s\n", f.c_str());
      }
    }
  }
  std::printf("nccl_communicator_test: 1..%d ranks, %d checks, %d failed\n", max_ranks, checks,
              failed);
  return failed == 0 ? 0 : 1;
}
