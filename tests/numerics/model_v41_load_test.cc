// Loading a DeepSeek-V4.1 checkpoint that cannot run is an error that names the problem and the
// fix, never a crash or a model that computes something else: copies of the committed tiny
// checkpoint (tests/data/model/v41_tiny_a/official_bf16) with one thing broken each.
// (Config-level schedule errors are tested in tests/unit/io/model_config_v41_test.cc.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/safetensors.h"
#include "model_test_util.h"
#include "safetensors_writer.h"

namespace deepinfer::model::testing {
namespace {

namespace fs = std::filesystem;
using io::testing::RawTensor;
using nlohmann::json;

struct Breakage {
  std::function<void(json& config)> config;              // edits config.json
  std::function<void(std::vector<RawTensor>&)> tensors;  // edits the weights
  bool tokenizer = true;                                 // copy tokenizer.json
  std::string tokenizer_from;                            // another tokenizer.json instead
};

class BrokenCheckpoint {
 public:
  explicit BrokenCheckpoint(const Breakage& b) {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("deepinfer_v41_broken_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const fs::path src = model_dir("v41_tiny_a", "official_bf16");
    std::ifstream in(src / "config.json");
    std::stringstream ss;
    ss << in.rdbuf();
    json config = json::parse(ss.str());
    if (b.config) b.config(config);
    io::testing::write_text((dir_ / "config.json").string(), config.dump(2));
    if (!b.tokenizer_from.empty()) {
      fs::copy_file(b.tokenizer_from, dir_ / "tokenizer.json");
    } else if (b.tokenizer) {
      fs::copy_file(src / "tokenizer.json", dir_ / "tokenizer.json");
    }
    auto file = io::SafetensorsFile::open((src / "model.safetensors").string());
    EXPECT_TRUE(file.ok());
    std::vector<RawTensor> tensors;
    for (const auto& e : (*file)->entries()) {
      const TensorView v = (*file)->view(e);
      const auto* p = static_cast<const uint8_t*>(v.data);
      tensors.push_back({e.name, std::string(dtype_name(e.dtype)), e.shape, {p, p + v.nbytes()}});
    }
    if (b.tensors) b.tensors(tensors);
    io::testing::write_safetensors((dir_ / "model.safetensors").string(), tensors);
  }
  ~BrokenCheckpoint() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // The load error's message ("" when it loads).
  std::string error() const {
    auto m = load_model(dir_.string(), opt_ops());
    if (m.ok()) return "";
    std::printf("%s\n", m.status().to_string().c_str());
    return m.status().to_string();
  }

 private:
  fs::path dir_;
};

void drop(std::vector<RawTensor>& t, const std::string& name) {
  std::erase_if(t, [&](const RawTensor& r) { return r.name == name; });
}

// The load error of a copy broken by `edit` ("" when it loads).
std::string load_error(const std::function<void(Breakage&)>& edit) {
  Breakage b;
  edit(b);
  return BrokenCheckpoint(b).error();
}

#define EXPECT_MENTIONS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "error: " << (text) << "\nwanted: " << (part)

TEST(ModelV41Load, TheUnbrokenCopyLoads) {
  EXPECT_EQ(load_error([](Breakage&) {}), "");
}

TEST(ModelV41Load, NoTokenizerJson) {
  const std::string e = load_error([](Breakage& b) { b.tokenizer = false; });
  EXPECT_MENTIONS(e, "no tokenizer.json");
  EXPECT_MENTIONS(e, "copy the checkpoint's tokenizer.json");
}

TEST(ModelV41Load, TokenizerOfAnotherModel) {
  // The compressed vocabulary this tokenizer gives is not the one the config was made with.
  const std::string e = load_error([](Breakage& b) {
    b.tokenizer_from = source_dir() + "/tests/data/tokenizer/tiny_gpt2/tokenizer.json";
  });
  EXPECT_MENTIONS(e, "engram_compressed_vocab_size");
}

TEST(ModelV41Load, EngramTableRowsDisagreeWithTheConfig) {
  const std::string e = load_error([](Breakage& b) {
    b.config = [](json& c) { c["text_config"]["engram_num_embeddings"][0] = 40; };
  });
  EXPECT_MENTIONS(e, "layers.1.engram.embed.weight");
  EXPECT_MENTIONS(e, "expected [40, 32]");
}

TEST(ModelV41Load, EngramTableTooSmallForItsHashBuckets) {
  // Config and table agree on 40 rows, but layer 1's primes need more.
  const std::string e = load_error([](Breakage& b) {
    b.config = [](json& c) { c["text_config"]["engram_num_embeddings"][0] = 40; };
    b.tensors = [](std::vector<RawTensor>& t) {
      for (auto& r : t) {
        if (r.name == "layers.1.engram.embed.weight") {
          r.shape = {40, 32};
          r.bytes.resize(40 * 32 * 2);
        }
      }
    };
  });
  EXPECT_MENTIONS(e, "table rows");
  EXPECT_MENTIONS(e, "engram_num_embeddings");
}

TEST(ModelV41Load, MissingEngramTable) {
  const std::string e = load_error([](Breakage& b) {
    b.tensors = [](std::vector<RawTensor>& t) { drop(t, "layers.4.engram.embed.weight"); };
  });
  EXPECT_MENTIONS(e, "layers.4.engram.embed.weight");
}

TEST(ModelV41Load, EngramTableOfTheWrongShape) {
  const std::string e = load_error([](Breakage& b) {
    b.tensors = [](std::vector<RawTensor>& t) {
      for (auto& r : t) {
        if (r.name == "layers.1.engram.embed.weight") {
          r.shape = {76, 64};  // same bytes, other shape
        }
      }
    };
  });
  EXPECT_MENTIONS(e, "layers.1.engram.embed.weight");
}

TEST(ModelV41Load, MissingCompressorOfAKvSource) {
  const std::string e = load_error([](Breakage& b) {
    b.tensors = [](std::vector<RawTensor>& t) { drop(t, "layers.2.attn.compressor.wkv.weight"); };
  });
  EXPECT_MENTIONS(e, "layers.2.attn.compressor.wkv.weight");
}

TEST(ModelV41Load, PartialDSparkDrafter) {
  // Some mtp.* tensors but not all: a damaged drafter is an error, not a model without one.
  const std::string e = load_error([](Breakage& b) {
    b.tensors = [](std::vector<RawTensor>& t) { drop(t, "mtp.0.main_norm.weight"); };
  });
  EXPECT_MENTIONS(e, "mtp.0.main_norm.weight");
}

TEST(ModelV41Load, ScheduleThatCannotRun) {
  // KV sources out of order (the layers between two sources reuse the earlier one).
  const std::string e = load_error([](Breakage& b) {
    b.config = [](json& c) { c["text_config"]["kv_source_layer_ids"] = {5, 2, 4}; };
  });
  EXPECT_MENTIONS(e, "kv_source_layer_ids");
}

}  // namespace
}  // namespace deepinfer::model::testing
