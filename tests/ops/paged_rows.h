// Key matrices stored the way the paged KV cache stores them (model/cache.h
// PagedRows), for the indexer_scores_multi cases of the CPU and CUDA harnesses: pages of
// page_rows rows placed in REVERSE order in one buffer, with a gap row between pages, so a
// kernel that read the rows as one contiguous matrix, or ignored the page size, reads wrong rows.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/mat.h"

namespace deepinfer::backend::testing {

struct ReversedPages {
  std::vector<float> storage;  // what to place in the backend's memory
  int64_t rows = 0, cols = 0, page_rows = 1;

  int64_t num_pages() const { return (rows + page_rows - 1) / page_rows; }
  int64_t slot_floats() const { return (page_rows + 1) * cols; }  // a page plus the gap row
  // The page table over a copy of `storage` at `base` (a host or a device address).
  std::vector<const float*> table(const float* base) const {
    std::vector<const float*> t;
    for (int64_t p = 0; p < num_pages(); ++p) t.push_back(base + (num_pages() - 1 - p) * slot_floats());
    return t;
  }
  PagedCMat view(const std::vector<const float*>& table) const {
    return {table.data(), rows, cols, page_rows};
  }
};

// `values` is a row-major [rows, cols] matrix.
inline ReversedPages reverse_pages(const std::vector<float>& values, int64_t rows, int64_t cols,
                                   int64_t page_rows) {
  ReversedPages r;
  r.rows = rows;
  r.cols = cols;
  r.page_rows = page_rows;
  r.storage.assign(static_cast<size_t>(r.num_pages() * r.slot_floats()), 1e30f);  // gaps: loud
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t p = i / page_rows, slot = r.num_pages() - 1 - p;
    for (int64_t c = 0; c < cols; ++c) {
      r.storage[static_cast<size_t>(slot * r.slot_floats() + (i % page_rows) * cols + c)] =
          values[static_cast<size_t>(i * cols + c)];
    }
  }
  return r;
}

}  // namespace deepinfer::backend::testing
