// Model configs for the KV and scheduler tests: a DeepSeek-V4-Flash-shaped one (spec §1.1:
// layers 0-1 SWA, even layers CSA ratio 4, odd layers HCA ratio 128, one SWA MTP block) and a
// tiny one (window 8, ratios 4 and 8) that makes every boundary case reachable in a few tokens.
#pragma once

#include "io/model_config.h"

namespace deepinfer::testing_models {

inline io::ModelConfig v4_flash_shaped() {
  io::ModelConfig c;
  c.source = "v4-flash-shaped (test)";
  c.num_layers = 43;
  c.head_dim = 512;
  c.index_head_dim = 128;
  c.sliding_window = 128;
  c.max_position_embeddings = 1048576;
  for (int i = 0; i < c.num_layers; ++i) {
    io::LayerSpec l;
    if (i >= 2) {
      l.attention = i % 2 == 0 ? io::AttentionKind::kCSA : io::AttentionKind::kHCA;
      l.compress_ratio = i % 2 == 0 ? 4 : 128;
    }
    c.layers.push_back(l);
  }
  c.mtp_layers.push_back(io::LayerSpec{});
  return c;
}

inline io::ModelConfig tiny(int window = 8) {
  io::ModelConfig c;
  c.source = "tiny (test)";
  c.num_layers = 3;
  c.head_dim = 16;
  c.index_head_dim = 8;
  c.sliding_window = window;
  c.max_position_embeddings = 4096;
  c.layers.resize(3);
  c.layers[1].attention = io::AttentionKind::kCSA;
  c.layers[1].compress_ratio = 4;
  c.layers[2].attention = io::AttentionKind::kHCA;
  c.layers[2].compress_ratio = 8;
  return c;
}

// Window-only: no compressed layer, so no compressed, indexer or state group.
inline io::ModelConfig swa_only() {
  io::ModelConfig c = tiny();
  c.source = "swa-only (test)";
  for (auto& l : c.layers) l = io::LayerSpec{};
  return c;
}

}  // namespace deepinfer::testing_models
