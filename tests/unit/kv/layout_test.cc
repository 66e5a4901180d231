// CacheLayout from a ModelConfig: the groups V4 needs (spec §3), their sizes, and the errors
// for block sizes that would split a compression window.
#include <gtest/gtest.h>

#include "kv/cache_layout.h"
#include "test_models.h"

namespace deepinfer::kv {
namespace {

TEST(CacheLayout, V4FlashHasWindowTwoCompressedOneIndexerAndState) {
  KvConfig cfg;
  cfg.block_size = 256;
  cfg.num_blocks = 100;
  auto layout = make_cache_layout(testing_models::v4_flash_shaped(), cfg);
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  const auto& g = layout->groups;
  ASSERT_EQ(g.size(), 5u);
  EXPECT_EQ(g[0].name, "window");
  EXPECT_EQ(g[0].layers.size(), 44u);  // 43 main layers + the MTP block
  EXPECT_EQ(g[0].rows_per_block, 256);
  EXPECT_EQ(g[0].window, 128);
  EXPECT_EQ(g[1].name, "compressed/4");
  EXPECT_EQ(g[1].layers.size(), 21u);
  EXPECT_EQ(g[1].rows_per_block, 64);
  EXPECT_EQ(g[2].name, "compressed/128");
  EXPECT_EQ(g[2].layers.size(), 20u);
  EXPECT_EQ(g[2].rows_per_block, 2);
  EXPECT_EQ(g[3].name, "indexer/4");
  EXPECT_EQ(g[3].layers.size(), 21u);
  EXPECT_EQ(g[3].row_elements, 128);
  EXPECT_EQ(g[4].kind, CacheKind::kCompressorState);
  EXPECT_EQ(g[4].layers.size(), 41u);
  EXPECT_EQ(layout->state_group, 4);
  // Per-token elements of compressed + indexer rows must match spec §3's 3440 per token.
  double per_token = 0;
  for (const auto& s : g) {
    if (s.kind == CacheKind::kCompressed || s.kind == CacheKind::kIndexer) {
      per_token +=
          static_cast<double>(s.layers.size()) * static_cast<double>(s.row_elements) / s.ratio;
    }
  }
  EXPECT_DOUBLE_EQ(per_token, 3440.0);
  // Compressor state floats agree with io::kv_cache_size.
  EXPECT_EQ(
      g[4].row_elements,
      io::kv_cache_size(testing_models::v4_flash_shaped()).compressor_state_floats_per_sequence);
}

TEST(CacheLayout, SwaOnlyModelHasOnlyTheWindowGroup) {
  KvConfig cfg;
  cfg.block_size = 8;
  cfg.num_blocks = 10;
  auto layout = make_cache_layout(testing_models::swa_only(), cfg);
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(layout->groups.size(), 1u);
  EXPECT_EQ(layout->state_group, -1);
}

TEST(CacheLayout, RejectsBlockSizesThatSplitACompressionWindow) {
  KvConfig cfg;
  cfg.block_size = 64;  // not a multiple of 128
  cfg.num_blocks = 10;
  auto layout = make_cache_layout(testing_models::v4_flash_shaped(), cfg);
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(layout.status().message().find("block_size 64"), std::string::npos);
  EXPECT_NE(layout.status().message().find("compress_ratio 128"), std::string::npos);
}

TEST(CacheLayout, RejectsEmptyPoolAndNonPositiveBlockSize) {
  KvConfig cfg;
  cfg.block_size = 0;
  cfg.num_blocks = 10;
  EXPECT_FALSE(make_cache_layout(testing_models::tiny(), cfg).ok());
  cfg.block_size = 8;
  cfg.num_blocks = 0;
  auto r = make_cache_layout(testing_models::tiny(), cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("num_blocks"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::kv
