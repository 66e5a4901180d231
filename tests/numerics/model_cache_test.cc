// The cache containers of the forward pass (model/cache.h) over the page pools
// (backend/page_pool.h): ring semantics that rollback relies on, paged row lists (rows never
// move, pages recycled, clones share pages and copy a shared page before writing into it), and
// the model on top: paging is storage only (the same bits for any page size), and a snapshot
// that shares its pages with the live sequence leaves both exactly as recomputation would.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/page_pool.h"
#include "model/cache.h"
#include "model_test_util.h"
#include "paged_pattern.h"

namespace deepinfer::model::testing {
namespace {

std::vector<float> rows_from(int64_t first, int64_t n, int64_t width) {
  std::vector<float> v;
  for (int64_t r = first; r < first + n; ++r) {
    for (int64_t c = 0; c < width; ++c) v.push_back(static_cast<float>(r * 10 + c));
  }
  return v;
}

// What the model does with a claim: the claimed slots filled by one scatter_rows.
void append(backend::Ops& ops, RowRing& ring, const std::vector<float>& rows, int64_t n) {
  std::vector<float*> dst;
  const int64_t dropped = ring.claim(n, dst);
  std::vector<const float*> src;
  for (int64_t r = dropped; r < n; ++r) src.push_back(rows.data() + r * ring.width());
  ASSERT_EQ(src.size(), dst.size());
  ops.scatter_rows(src, dst, ring.width());
}

void append(backend::Ops& ops, PagedRows& list, int64_t first, int64_t n) {
  const std::vector<float> rows = rows_from(first, n, list.width());
  std::vector<float*> dst;
  list.claim(n, dst);
  std::vector<const float*> src;
  for (int64_t r = 0; r < n; ++r) src.push_back(rows.data() + r * list.width());
  ASSERT_EQ(src.size(), dst.size());
  ops.scatter_rows(src, dst, list.width());
}

// Row r holds r * 10 + c in column c (rows_from), for every r < size.
void expect_rows(const PagedRows& list, int64_t first_value_row = 0) {
  for (int64_t r = 0; r < list.size(); ++r) {
    for (int64_t c = 0; c < list.width(); ++c) {
      ASSERT_EQ(list.row(r)[c], static_cast<float>((first_value_row + r) * 10 + c)) << r;
    }
  }
}

TEST(ModelCache, RingKeepsNewestRowsAndTruncates) {
  auto ops = backend::cpu::make_ref_ops();  // host memory: rows readable in place
  backend::PagePools pools(*ops);
  RowRing ring;
  ring.init(pools, 4, 2);
  std::vector<float> a = rows_from(0, 6, 2);  // more rows than the capacity in one append
  append(*ops, ring, a, 6);
  EXPECT_EQ(ring.size(), 6);
  EXPECT_EQ(ring.oldest(), 2);
  for (int64_t r = 2; r < 6; ++r) EXPECT_EQ(ring.row(r)[1], static_cast<float>(r * 10 + 1));
  ring.truncate(4);  // rows 2, 3 stay readable; 4, 5 are forgotten
  EXPECT_EQ(ring.size(), 4);
  EXPECT_EQ(ring.oldest(), 2);
  std::vector<float> b = rows_from(100, 1, 2);
  append(*ops, ring, b, 1);  // becomes row 4, overwriting nothing readable
  EXPECT_EQ(ring.row(4)[0], 1000.0f);
  EXPECT_EQ(ring.row(2)[0], 20.0f);
  EXPECT_EQ(ring.row(3)[0], 30.0f);
  // A clone is a copy (its data moved as SequenceCache::clone moves it): appending to it leaves
  // the original's rows alone.
  std::vector<RowRing::Copy> copies;
  RowRing copy = ring.clone_uncopied(copies);
  ASSERT_EQ(copies.size(), 1u);
  ops->scatter_rows({&copies[0].src, 1}, {&copies[0].dst, 1}, copies[0].floats);
  EXPECT_EQ(copy.row(2)[0], 20.0f);
  std::vector<float> c = rows_from(200, 1, 2);
  append(*ops, copy, c, 1);
  EXPECT_EQ(copy.row(5)[0], 2000.0f);
  EXPECT_EQ(ring.size(), 5);
  EXPECT_EQ(ring.row(2)[0], 20.0f);
}

TEST(ModelCache, PagedRowsGrowWithoutMovingAndRecyclePages) {
  auto ops = backend::cpu::make_ref_ops();
  backend::PagePools pools(*ops);
  PagedRows list;
  list.init(pools, 3, 8);
  append(*ops, list, 0, 5);
  const float* row0 = list.row(0);
  for (int64_t first = 5; first < 203; first += 9) append(*ops, list, first, 9);
  ASSERT_EQ(list.size(), 203);
  EXPECT_EQ(list.num_pages(), 26);  // ceil(203 / 8)
  EXPECT_EQ(list.row(0), row0);     // earlier rows never move
  expect_rows(list);
  const backend::PagePool::Stats full = pools.stats();
  EXPECT_EQ(full.pages_in_use, 26);

  list.truncate(50);  // pages past row 49 go back to the pool
  EXPECT_EQ(list.num_pages(), 7);
  EXPECT_EQ(pools.stats().pages_in_use, 7);
  append(*ops, list, 1000, 1);
  EXPECT_EQ(list.size(), 51);
  EXPECT_EQ(list.row(50)[0], 10000.0f);
  EXPECT_EQ(list.row(49)[0], 490.0f);

  // A second list reuses the freed pages: the pools take no more memory from the backend.
  PagedRows other;
  other.init(pools, 3, 8);
  append(*ops, other, 0, 150);
  expect_rows(other);
  EXPECT_EQ(pools.stats().bytes_reserved, full.bytes_reserved);
  // Dropping both returns every page.
  list = PagedRows();
  other = PagedRows();
  EXPECT_EQ(pools.stats().pages_in_use, 0);
}

TEST(ModelCache, PagedRowsCloneSharesPagesAndCopiesBeforeWriting) {
  auto ops = backend::cpu::make_ref_ops();
  backend::PagePools pools(*ops);
  PagedRows live;
  live.init(pools, 4, 8);
  append(*ops, live, 0, 20);  // pages: 8 + 8 + 4 rows
  PagedRows snap = live.clone();
  EXPECT_EQ(pools.stats().pages_in_use, 3);  // shared, nothing copied
  EXPECT_EQ(snap.row(19), live.row(19));

  // The live list writes into the shared, partly filled last page: it copies it first.
  append(*ops, live, 20, 6);  // 26 rows: its copy of page 2 and a new page 3
  EXPECT_EQ(pools.stats().pages_in_use, 5);
  EXPECT_NE(live.row(19), snap.row(19));
  EXPECT_EQ(live.row(0), snap.row(0));  // full pages stay shared
  expect_rows(live);
  expect_rows(snap);
  ASSERT_EQ(snap.size(), 20);

  // The snapshot, now the only holder of its last page, appends in place.
  const float* last = snap.row(16);
  std::vector<float*> dst;
  snap.claim(2, dst);
  EXPECT_EQ(snap.row(16), last);
  std::vector<float> vals = rows_from(900, 2, 4);
  const std::vector<const float*> src = {vals.data(), vals.data() + 4};
  ops->scatter_rows(src, dst, 4);
  EXPECT_EQ(live.row(20)[0], 200.0f);  // not the snapshot's rows
  EXPECT_EQ(snap.row(20)[0], 9000.0f);

  // Truncating into a shared full page and appending copies that page too.
  PagedRows branch = live.clone();
  branch.truncate(10);
  append(*ops, branch, 500, 3);
  EXPECT_NE(branch.row(8), live.row(8));
  EXPECT_EQ(branch.row(0), live.row(0));
  EXPECT_EQ(branch.row(9)[0], 90.0f);
  EXPECT_EQ(branch.row(10)[0], 5000.0f);
  EXPECT_EQ(live.row(10)[0], 100.0f);
  expect_rows(live);
}

TEST(ModelCache, LayerGeometryFollowsTheConfig) {
  auto m = load_test_model("v4_tiny_a", "hf_fp32", opt_ops());
  ASSERT_NE(m, nullptr);
  SequenceCache seq = m->new_sequence(CacheOptions{5, 16});
  EXPECT_EQ(seq.max_rollback(), 5);
  const auto& layers = m->config().layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerCache& l = seq.layer(i);
    EXPECT_EQ(l.window.width(), m->config().head_dim);
    EXPECT_EQ(l.comp.ratio, layers[i].compress_ratio);
    EXPECT_EQ(l.idx.ratio, layers[i].attention == io::AttentionKind::kCSA ? 4 : 0);
    if (l.comp.ratio > 0) {
      EXPECT_EQ(l.comp.rows.page_rows(), std::max(1, 16 / l.comp.ratio));
    }
  }
  EXPECT_EQ(seq.footprint_bytes(), 0);
  const std::vector<int32_t> ids = Goldens("v4_tiny_a").prompt("len40");
  ASSERT_TRUE(m->extend(seq, ids).ok());
  EXPECT_GT(seq.footprint_bytes(), 0);
  // 40 tokens: CSA(4) layers hold 10 rows and 10 index keys, HCA(8) 5 rows.
  for (size_t i = 0; i < layers.size(); ++i) {
    const int ratio = layers[i].compress_ratio;
    EXPECT_EQ(seq.layer(i).comp.rows.size(), ratio ? 40 / ratio : 0);
    EXPECT_EQ(seq.layer(i).window.size(), 40);
  }
  EXPECT_EQ(m->cache_memory().bytes_in_use, seq.page_bytes());
}

// Paging is storage only: pages of 16 tokens (many page boundaries, 4 rows per CSA page, 2 per
// HCA page) and one page for everything give the same logits bit for bit, in prefill, in
// several chunks and in decode, on both CPU backends.
TEST(ModelCache, PageSizeDoesNotChangeTheLogits) {
  for (backend::Ops* ops : {&opt_ops(), &ref_ops()}) {
    auto m = load_test_model("v4_tiny_a", "hf_fp32", *ops);
    ASSERT_NE(m, nullptr);
    std::string error;
    const std::vector<float> small = paged_run(*m, 16, &error);
    const std::vector<float> whole = paged_run(*m, 1 << 12, &error);
    ASSERT_TRUE(error.empty()) << error;
    ASSERT_FALSE(small.empty());
    EXPECT_EQ(small, whole) << ops->name();
  }
}

// A prefix snapshot shares the compressed rows and index keys with the live sequence (only the
// rings are copied); both then continue, and each computes exactly what a fresh sequence given
// the same tokens computes.
TEST(ModelCache, SnapshotSharesPagesAndBothContinueExactly) {
  struct {
    const char *cfg, *variant;
  } cases[] = {{"v4_tiny_a", "hf_fp32"},
               {"v4_tiny_a", "official_quant"},
               {"v41_tiny_a", "official_bf16"},
               {"v41_tiny_a", "official_quant"}};
  for (const auto& [cfg, variant] : cases) {
    auto m = load_test_model(cfg, variant, opt_ops());
    ASSERT_NE(m, nullptr);
    const SnapshotRun r = snapshot_run(*m);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.copied_bytes, r.ring_bytes) << "a snapshot copies its rings and nothing else";
    EXPECT_LT(r.copied_bytes, r.held_bytes);
    ASSERT_FALSE(r.live.empty());
    EXPECT_EQ(r.live, r.live_fresh) << variant;
    EXPECT_EQ(r.restored, r.restored_fresh) << variant;
    EXPECT_EQ(r.restored_again, r.live) << variant << ": the snapshot was written to";
  }
}

}  // namespace
}  // namespace deepinfer::model::testing
