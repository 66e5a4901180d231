// TensorStore: single file, index + shards, directory of shards; index and duplicate errors.
#include "io/tensor_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fixture_writer.h"

namespace deepinfer::io {
namespace {

using ::testing::HasSubstr;
using testing::RawTensor;
using testing::TempDir;

RawTensor u8(const std::string& name, uint8_t fill, int64_t n = 4) {
  return RawTensor{name, "U8", {n}, std::vector<uint8_t>(static_cast<size_t>(n), fill)};
}

void write_index(const TempDir& dir, const nlohmann::json& weight_map) {
  testing::write_text(dir.file(kSafetensorsIndexName),
                      nlohmann::json{{"weight_map", weight_map}}.dump());
}

TEST(TensorStore, SingleFile) {
  TempDir dir;
  testing::write_safetensors(dir.file("model.safetensors"), {u8("b", 2), u8("a", 1)});
  auto store = TensorStore::open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(store->layout(), StoreLayout::kSingleFile);
  EXPECT_EQ(store->names(), (std::vector<std::string>{"a", "b"}));
  const auto* loc = store->find("b");
  ASSERT_NE(loc, nullptr);
  EXPECT_EQ(store->view(*loc).ptr<uint8_t>()[3], 2);
  EXPECT_EQ(store->find("c"), nullptr);
  // A path to the file itself works too.
  auto direct = TensorStore::open(dir.file("model.safetensors"));
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->size(), 2u);
}

TEST(TensorStore, IndexedShardsAreMappedOnce) {
  TempDir dir;
  testing::write_safetensors(dir.file("s1.safetensors"), {u8("a", 1), u8("b", 2)});
  testing::write_safetensors(dir.file("s2.safetensors"), {u8("c", 3)});
  testing::write_safetensors(dir.file("unrelated.safetensors"), {u8("a", 9)});  // not in the index
  write_index(dir, {{"a", "s1.safetensors"}, {"b", "s1.safetensors"}, {"c", "s2.safetensors"}});
  auto store = TensorStore::open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(store->layout(), StoreLayout::kIndexed);
  EXPECT_EQ(store->files().size(), 2u);
  EXPECT_EQ(store->size(), 3u);
  EXPECT_EQ(store->view(*store->find("c")).ptr<uint8_t>()[0], 3);
  EXPECT_EQ(store->find("a")->file, store->find("b")->file);
}

TEST(TensorStore, IndexPointsAtMissingShard) {
  TempDir dir;
  testing::write_safetensors(dir.file("s1.safetensors"), {u8("a", 1)});
  write_index(dir, {{"a", "s1.safetensors"}, {"b", "s9.safetensors"}});
  auto store = TensorStore::open(dir.path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(store.status().message(), HasSubstr("places tensor 'b' in shard 's9.safetensors'"));
  EXPECT_THAT(store.status().message(), HasSubstr(dir.file("s9.safetensors") + " does not exist"));
}

TEST(TensorStore, TensorListedInIndexMissingFromShard) {
  TempDir dir;
  testing::write_safetensors(dir.file("s1.safetensors"), {u8("a", 1)});
  write_index(dir, {{"a", "s1.safetensors"}, {"z", "s1.safetensors"}});
  auto store = TensorStore::open(dir.path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(store.status().message(), HasSubstr("tensor 'z' is listed in"));
  EXPECT_THAT(store.status().message(),
              HasSubstr(dir.file("s1.safetensors") + " does not contain it"));
}

TEST(TensorStore, StrayTensorInShardIsAWarning) {
  TempDir dir;
  testing::write_safetensors(dir.file("s1.safetensors"), {u8("a", 1), u8("extra", 1)});
  write_index(dir, {{"a", "s1.safetensors"}});
  auto store = TensorStore::open(dir.path());
  ASSERT_TRUE(store.ok());
  ASSERT_EQ(store->warnings().size(), 1u);
  EXPECT_THAT(store->warnings()[0],
              HasSubstr("'extra' is stored in s1.safetensors but not listed"));
}

TEST(TensorStore, DuplicateNamesAcrossShards) {
  TempDir dir;
  testing::write_safetensors(dir.file("s1.safetensors"), {u8("a", 1)});
  testing::write_safetensors(dir.file("s2.safetensors"), {u8("a", 2), u8("b", 2)});
  auto store = TensorStore::open(dir.path());  // no index: every *.safetensors
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(),
              HasSubstr("tensor 'a' is stored twice: in " + dir.file("s1.safetensors") +
                        " and in " + dir.file("s2.safetensors")));
  write_index(dir, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
  store = TensorStore::open(dir.path());
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("tensor 'a' is stored twice"));
}

TEST(TensorStore, DirectoryWithoutIndex) {
  TempDir dir;
  testing::write_safetensors(dir.file("part-b.safetensors"), {u8("b", 2)});
  testing::write_safetensors(dir.file("part-a.safetensors"), {u8("a", 1)});
  testing::write_text(dir.file("README"), "not a tensor file");
  auto store = TensorStore::open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(store->layout(), StoreLayout::kDirectory);
  EXPECT_EQ(store->files().size(), 2u);
  EXPECT_EQ(store->names(), (std::vector<std::string>{"a", "b"}));
}

TEST(TensorStore, Errors) {
  TempDir dir;
  auto empty = TensorStore::open(dir.path());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(empty.status().message(), HasSubstr("no safetensors files in " + dir.path()));

  auto missing = TensorStore::open(dir.file("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  testing::write_text(dir.file(kSafetensorsIndexName), "{\"weight_map\": [1]}");
  auto bad = TensorStore::open(dir.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'weight_map' object"));

  testing::write_text(dir.file(kSafetensorsIndexName),
                      "{\"weight_map\": {\"a\": \"../x.safetensors\"}}");
  bad = TensorStore::open(dir.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("not a file inside the model directory"));

  testing::write_text(dir.file(kSafetensorsIndexName), "{\"weight_map\": ");
  bad = TensorStore::open(dir.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("is not valid JSON"));
}

}  // namespace
}  // namespace deepinfer::io
