// Mat / CMat: the activation operands of the backend op contract (ops.h).
//
// Activations between ops are FP32 row-major matrices with a leading dimension, so the model can
// hand an op a column slice (one head, one half of a compressor row) without copying. Non-owning;
// whoever allocated the buffer outlives the view. Device pointers are allowed: the backend that
// receives the Mat decides what `data` means.
#pragma once

#include <cstdint>

namespace deepinfer::backend {

struct Mat {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;  // elements between the starts of consecutive rows (>= cols)

  Mat() = default;
  Mat(float* d, int64_t r, int64_t c) : data(d), rows(r), cols(c), ld(c) {}
  Mat(float* d, int64_t r, int64_t c, int64_t l) : data(d), rows(r), cols(c), ld(l) {}

  float* row(int64_t i) const { return data + i * ld; }
  float& at(int64_t i, int64_t j) const { return data[i * ld + j]; }
  // Columns [c0, c0 + n) of every row, same rows.
  Mat cols_slice(int64_t c0, int64_t n) const { return {data + c0, rows, n, ld}; }
  // Rows [r0, r0 + n).
  Mat rows_slice(int64_t r0, int64_t n) const { return {data + r0 * ld, n, cols, ld}; }
};

struct CMat {
  const float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;

  CMat() = default;
  CMat(const float* d, int64_t r, int64_t c) : data(d), rows(r), cols(c), ld(c) {}
  CMat(const float* d, int64_t r, int64_t c, int64_t l) : data(d), rows(r), cols(c), ld(l) {}
  CMat(const Mat& m) : data(m.data), rows(m.rows), cols(m.cols), ld(m.ld) {}  // NOLINT: implicit

  const float* row(int64_t i) const { return data + i * ld; }
  float at(int64_t i, int64_t j) const { return data[i * ld + j]; }
  CMat cols_slice(int64_t c0, int64_t n) const { return {data + c0, rows, n, ld}; }
  CMat rows_slice(int64_t r0, int64_t n) const { return {data + r0 * ld, n, cols, ld}; }
};

// Rows of a matrix kept in fixed-size pages (a paged KV cache's row list): row r is at
// pages[r / page_rows] + (r % page_rows) * cols. `pages` is a host array of this backend's
// addresses, owned by whoever made the view (model/cache.h PagedRows).
struct PagedCMat {
  const float* const* pages = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t page_rows = 1;

  const float* row(int64_t r) const { return pages[r / page_rows] + (r % page_rows) * cols; }
  int64_t num_pages() const { return (rows + page_rows - 1) / page_rows; }
};

}  // namespace deepinfer::backend
