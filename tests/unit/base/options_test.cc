#include "base/options.h"

#include <gtest/gtest.h>

#include <map>

namespace deepinfer {
namespace {

using Env = std::map<std::string, std::string>;

std::optional<std::string> lookup(const char* name, void* ctx) {
  auto* env = static_cast<Env*>(ctx);
  auto it = env->find(name);
  if (it == env->end()) return std::nullopt;
  return it->second;
}

Expected<EnvOptions> parse(Env env) { return parse_env_options(&lookup, &env); }

TEST(EnvOptions, DefaultsMatchTheOriginal) {
  auto o = parse({});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->accelerator, Accelerator::kAuto);
  EXPECT_FALSE(o->batch_invariant);
  EXPECT_FALSE(o->enable_mtp_varlen);
  EXPECT_EQ(o->use_nextn_decode, 5);
  EXPECT_EQ(o->yoco_prefill_keep_tokens, 140);
  EXPECT_TRUE(o->cuda_pdl);  // ours, not the original's: on where the card has it (sm_90+)
  EXPECT_FALSE(o->hf_model_dir.has_value());
}

TEST(EnvOptions, ParsesEveryKnob) {
  auto o = parse({{"DEEPINFER_ACCELERATOR", "nvidia"},
                  {"DEEPINFER_BATCH_INVARIANT", "1"},
                  {"DEEPINFER_ENABLE_MTP_VARLEN", "1"},
                  {"DEEPINFER_USE_NEXTN_DECODE", "3"},
                  {"DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE", "compact"},
                  {"DEEPINFER_YOCO_PREFILL_KEEP_TOKENS", "200"},
                  {"DEEPINFER_HF_MODEL_DIR", "/models/x"},
                  {"DEEPINFER_NUM_THREADS", "8"},
                  {"DEEPINFER_CUDA_GRAPH_MAX_ROWS", "64"},
                  {"DEEPINFER_CUDA_PDL", "0"},
                  {"DEEPINFER_API_KEY", "sekret"},
                  {"DEEPINFER_VARLEN_TRACE", "/tmp/varlen.csv"}});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->accelerator, Accelerator::kNvidia);
  EXPECT_TRUE(o->batch_invariant);
  EXPECT_TRUE(o->enable_mtp_varlen);
  EXPECT_EQ(o->use_nextn_decode, 3);
  EXPECT_EQ(o->yoco_prefill_truncation_mode, "compact");
  EXPECT_EQ(o->yoco_prefill_keep_tokens, 200);
  EXPECT_EQ(*o->hf_model_dir, "/models/x");
  EXPECT_EQ(o->num_threads, 8);
  EXPECT_EQ(o->cuda_graph_max_rows, 64);
  EXPECT_FALSE(o->cuda_pdl);
  EXPECT_EQ(*o->api_key, "sekret");
  EXPECT_EQ(*o->varlen_trace, "/tmp/varlen.csv");
  auto lines = describe_env_options(*o);
  EXPECT_EQ(lines.size(), 12u);
  EXPECT_EQ(lines[11], "DEEPINFER_VARLEN_TRACE=/tmp/varlen.csv (set)");
  EXPECT_EQ(lines[8], "DEEPINFER_CUDA_GRAPH_MAX_ROWS=64 (set)");
  EXPECT_EQ(lines[9], "DEEPINFER_CUDA_PDL=0 (set)");
  EXPECT_EQ(lines[10], "DEEPINFER_API_KEY=(set, hidden) (set)");  // never printed
  EXPECT_EQ(lines[0], "DEEPINFER_ACCELERATOR=nvidia (set)");
}

TEST(EnvOptions, BadValuesNameTheVariable) {
  auto a = parse({{"DEEPINFER_ACCELERATOR", "tpu"}});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("DEEPINFER_ACCELERATOR='tpu'"), std::string::npos);
  auto b = parse({{"DEEPINFER_BATCH_INVARIANT", "maybe"}});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("DEEPINFER_BATCH_INVARIANT"), std::string::npos);
  auto c = parse({{"DEEPINFER_USE_NEXTN_DECODE", "5x"}});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("DEEPINFER_USE_NEXTN_DECODE"), std::string::npos);
  auto d = parse({{"DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE", "full"}});
  EXPECT_FALSE(d.ok());
  auto e = parse({{"DEEPINFER_CUDA_PDL", "sometimes"}});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("DEEPINFER_CUDA_PDL='sometimes'"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
