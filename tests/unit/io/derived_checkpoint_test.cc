// tests/support/derived_checkpoint: the recipe folders (derive.json) that stand in for committed
// weights are rebuilt exactly: casts round to nearest even as torch does, renames and constant
// tensors land under their names, and a broken recipe is an error naming the problem.
#include "derived_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "base/numeric_types.h"
#include "fixture_writer.h"
#include "io/safetensors.h"

namespace deepinfer::io {
namespace {

testing::RawTensor f32(const std::string& name, std::vector<float> v) {
  testing::RawTensor t{name, "F32", {static_cast<int64_t>(v.size())}, {}};
  t.bytes.resize(v.size() * 4);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

class DerivedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir.file("src"));
    std::filesystem::create_directories(dir.file("variant"));
    std::filesystem::create_directories(dir.file("out"));
    // 1 + 2^-8 is a tie between two BF16 values (rounds to even: 1.0); 1 + 3*2^-8 rounds up.
    testing::write_safetensors(dir.file("src/model.safetensors"),
                               {f32("w", {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f}),
                                f32("norm", {0.1f, 0.2f})});
    testing::write_text(dir.file("src/tokenizer.json"), "{}");
    testing::write_text(dir.file("variant/config.json"), R"({"k": 1})");
  }
  void recipe(const std::string& tensors) {
    testing::write_text(dir.file("variant/derive.json"),
                        R"({"from": "../src", "copy": ["tokenizer.json"], "tensors": )" + tensors +
                            "}");
  }
  testing::TempDir dir;
};

TEST_F(DerivedCheckpoint, CastsRenamesAndFills) {
  recipe(R"([{"name": "model.w", "source": "w", "dtype": "BF16"},
             {"name": "norm", "dtype": "F32"},
             {"name": "scale", "fill": 1.0, "shape": [2, 3], "dtype": "BF16"}])");
  deepinfer::testing::materialize_derived(dir.file("variant"), dir.file("out"));
  EXPECT_TRUE(std::filesystem::exists(dir.file("out/config.json")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("out/tokenizer.json")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/derive.json")));
  auto f = SafetensorsFile::open(dir.file("out/model.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const SafetensorsEntry* w = (*f)->find("model.w");
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->dtype, DType::kBF16);
  const TensorView wv = (*f)->view(*w);
  EXPECT_EQ(bf16_to_float(wv.ptr<uint16_t>()[0]), 1.0f);
  EXPECT_EQ(bf16_to_float(wv.ptr<uint16_t>()[1]), 1.0f + 4 * 0x1p-8f);
  EXPECT_EQ(bf16_to_float(wv.ptr<uint16_t>()[2]), -2.5f);
  const TensorView nv = (*f)->view(*(*f)->find("norm"));
  EXPECT_EQ(nv.ptr<float>()[1], 0.2f);
  const SafetensorsEntry* s = (*f)->find("scale");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(bf16_to_float((*f)->view(*s).ptr<uint16_t>()[5]), 1.0f);
  EXPECT_EQ((*f)->find("w"), nullptr);
}

TEST_F(DerivedCheckpoint, FolderWithWeightsIsUsedAsIs) {
  EXPECT_EQ(deepinfer::testing::checkpoint_dir(dir.file("src")), dir.file("src"));
  recipe(R"([{"name": "w", "dtype": "BF16"}])");
  const std::string made = deepinfer::testing::checkpoint_dir(dir.file("variant"));
  EXPECT_NE(made, dir.file("variant"));
  EXPECT_TRUE(std::filesystem::exists(made + "/model.safetensors"));
  EXPECT_EQ(deepinfer::testing::checkpoint_dir(dir.file("variant")), made);  // once per process
}

TEST_F(DerivedCheckpoint, BrokenRecipesNameTheProblem) {
  auto error_of = [&](const std::string& tensors) -> std::string {
    recipe(tensors);
    try {
      deepinfer::testing::materialize_derived(dir.file("variant"), dir.file("out"));
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of(R"([{"name": "x", "dtype": "BF16"}])").find("source tensor x"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "w", "dtype": "Q4"}])").find("unknown dtype"), std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "w", "dtype": "I64"}])").find("cannot convert"),
            std::string::npos);
}

}  // namespace
}  // namespace deepinfer::io
