// The cache containers of the forward pass (model/deepseek_v4/cache.h): ring semantics that
// rollback relies on, and SequenceCache geometry per layer kind.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "model/deepseek_v4/cache.h"
#include "model_test_util.h"

namespace deepinfer::model::deepseek_v4::testing {
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

void append(backend::Ops& ops, RowList& list, const std::vector<float>& rows, int64_t n) {
  float* at = list.claim(n);
  std::vector<const float*> src;
  std::vector<float*> dst;
  for (int64_t r = 0; r < n; ++r) {
    src.push_back(rows.data() + r * list.width());
    dst.push_back(at + r * list.width());
  }
  ops.scatter_rows(src, dst, list.width());
}

TEST(ModelCache, RingKeepsNewestRowsAndTruncates) {
  auto ops = backend::cpu::make_ref_ops();  // host memory: rows readable in place
  RowRing ring;
  ring.init(*ops, 4, 2);
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
}

TEST(ModelCache, RowListGrowsKeepingItsRows) {
  auto ops = backend::cpu::make_ref_ops();
  RowList list;
  list.init(*ops, 3);
  for (int64_t first = 0; first < 200; first += 7) {  // many appends force several regrowths
    std::vector<float> a = rows_from(first, 7, 3);
    append(*ops, list, a, 7);
  }
  ASSERT_EQ(list.size(), 203);
  for (int64_t r = 0; r < 203; ++r) EXPECT_EQ(list.row(r)[2], static_cast<float>(r * 10 + 2));
  list.truncate(50);
  std::vector<float> b = rows_from(1000, 1, 3);
  append(*ops, list, b, 1);
  EXPECT_EQ(list.size(), 51);
  EXPECT_EQ(list.row(50)[0], 10000.0f);
  EXPECT_EQ(list.row(49)[0], 490.0f);
}

TEST(ModelCache, LayerGeometryFollowsTheConfig) {
  auto m = load_model("v4_tiny_a", "hf_fp32", opt_ops());
  ASSERT_NE(m, nullptr);
  SequenceCache seq = m->new_sequence(CacheOptions{5});
  EXPECT_EQ(seq.max_rollback(), 5);
  const auto& layers = m->config().layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerCache& l = seq.layer(i);
    EXPECT_EQ(l.kind, layers[i].attention);
    EXPECT_EQ(l.window.width(), m->config().head_dim);
    EXPECT_EQ(l.comp.ratio, layers[i].compress_ratio);
    EXPECT_EQ(l.idx.ratio, layers[i].attention == io::AttentionKind::kCSA ? 4 : 0);
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
}

}  // namespace
}  // namespace deepinfer::model::deepseek_v4::testing
