// Roofline probe for bench_vs_hf.py: the machine's FP32 FMA peak and its read bandwidth at a
// given working-set size, measured with T threads in the same run as the engines they bound.
//
// Built and run by the script (c++ -O2 -mavx2 -mfma -pthread), not part of the CMake build.
//   roofline_probe T BYTES...   -> one JSON object on stdout
//
// fma: each thread runs 12 independent vfmadd231ps ymm chains (more than FMA latency x pipes,
// so the pipes, not the dependency, set the rate). Reported as GMAC/s (8 per FMA): per thread
// CPU second (the hardware peak, immune to another job holding the core) and per wall second
// with T threads (what the machine gave during the probe).
// read: each thread sums its own contiguous 1/T of a BYTES buffer with 8 independent AVX2
// accumulators, again and again; GB/s of wall time, best of several passes. BYTES near a
// model's weight bytes gives the bandwidth of the cache level that working set lives in.
#include <immintrin.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double wall_s() {
  using C = std::chrono::steady_clock;
  return std::chrono::duration<double>(C::now().time_since_epoch()).count();
}

// 12 chains x 8 lanes x iters FMAs; returns a value so nothing is optimised away.
float fma_chains(int64_t iters) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

float sum_floats(const float* p, int64_t n) {
  __m256 acc[8];
  for (auto& v : acc) v = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_loadu_ps(p + i + 8 * j));
  }
  __m256 s = acc[0];
  for (int j = 1; j < 8; ++j) s = _mm256_add_ps(s, acc[j]);
  float out[8];
  _mm256_storeu_ps(out, s);
  float r = out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
  for (; i < n; ++i) r += p[i];
  return r;
}

// Runs fn(t) on T threads started together; returns the wall time of the slowest.
template <typename F>
double run_threads(int T, F fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> th;
  double t0 = 0;
  for (int t = 0; t < T; ++t) {
    th.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) {
      }
      fn(t);
    });
  }
  while (ready.load() < T) {
  }
  t0 = wall_s();
  go.store(true);
  for (auto& x : th) x.join();
  return wall_s() - t0;
}

volatile float g_sink;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: roofline_probe THREADS [BYTES...]\n");
    return 2;
  }
  const int T = std::max(1, std::atoi(argv[1]));

  // FMA peak: 10^9 FMAs (~0.16 s at 2 per cycle, 3 GHz) per thread per pass, best of 5 passes.
  const int64_t iters = 1'000'000'000 / 12;
  double best_cpu = 0, best_wall = 0;
  for (int pass = 0; pass < 5; ++pass) {
    std::vector<double> cpu(T);
    const double w = run_threads(T, [&](int t) {
      const double c0 = thread_cpu_s();
      g_sink = fma_chains(iters);
      cpu[t] = thread_cpu_s() - c0;
    });
    const double macs = 12.0 * 8.0 * static_cast<double>(iters);
    double per_cpu = 0;
    for (int t = 0; t < T; ++t) per_cpu = std::max(per_cpu, macs / cpu[t]);
    best_cpu = std::max(best_cpu, per_cpu);
    best_wall = std::max(best_wall, T * macs / w);
  }
  std::printf("{\"threads\": %d, \"fma_gmacs_per_core_cpu\": %.3f, \"fma_gmacs_wall\": %.3f", T,
              best_cpu / 1e9, best_wall / 1e9);

  std::printf(", \"read\": [");
  for (int a = 2; a < argc; ++a) {
    const int64_t bytes = std::max<int64_t>(std::atoll(argv[a]), 64 * 1024);
    const int64_t n = bytes / 4;
    std::vector<float> buf(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      buf[static_cast<size_t>(i)] = 1e-9f * static_cast<float>(i & 1023);
    // Each thread re-reads its part `reps` times per run (~0.1 s of reading at 20 GB/s, so a
    // small, cache-resident buffer is not timed against thread start-up); best of 5 runs.
    const int64_t per = (n / T) & ~int64_t{63};
    const int64_t reps = std::max<int64_t>(1, 2'000'000'000 / std::max<int64_t>(bytes, 1));
    double best = 0;
    for (int run = 0; run < 5; ++run) {
      const double w = run_threads(T, [&](int t) {
        float s = 0;
        for (int64_t r = 0; r < reps; ++r) s += sum_floats(buf.data() + t * per, per);
        g_sink = s;
      });
      best = std::max(best, static_cast<double>(per * T * 4) * static_cast<double>(reps) / w);
    }
    std::printf("%s{\"bytes\": %lld, \"gb_s\": %.3f}", a > 2 ? ", " : "",
                static_cast<long long>(bytes), best / 1e9);
  }
  std::printf("]}\n");
  return 0;
}
