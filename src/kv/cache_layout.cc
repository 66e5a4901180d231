// CacheLayout construction from a ModelConfig (spec §1.1, §3): groups in a fixed order
// (window, compressed by ascending ratio, indexer by ascending ratio, state) so block tables
// line up the same way for every sequence and every run.
#include "kv/cache_layout.h"

#include <map>

namespace deepinfer::kv {

std::string_view cache_kind_name(CacheKind kind) {
  switch (kind) {
    case CacheKind::kWindow:
      return "window";
    case CacheKind::kCompressed:
      return "compressed";
    case CacheKind::kIndexer:
      return "indexer";
    case CacheKind::kCompressorState:
      return "state";
  }
  return "?";
}

std::string CacheLayout::describe() const {
  std::string s = "B=" + std::to_string(block_size) + ":";
  for (const auto& g : groups) {
    s += " " + g.name + "(" + std::to_string(g.layers.size()) + " layers)";
  }
  return s;
}

Expected<CacheLayout> make_cache_layout(const io::ModelConfig& model, const KvConfig& config) {
  const std::string where = model.source.empty() ? "the model config" : model.source;
  if (model.num_layers <= 0 || model.layers.empty()) {
    return invalid_argument(where + ": the model has no layers; a KV layout needs at least one");
  }
  if (model.sliding_window <= 0) {
    return invalid_argument(where + ": sliding_window is " + std::to_string(model.sliding_window) +
                            "; expected a positive window (V4: 128)");
  }
  if (config.block_size <= 0) {
    return invalid_argument("KvConfig.block_size is " + std::to_string(config.block_size) +
                            "; expected a positive number of tokens (e.g. 256)");
  }
  if (config.num_blocks <= 0) {
    return invalid_argument("KvConfig.num_blocks is " + std::to_string(config.num_blocks) +
                            "; expected a positive pool size");
  }
  if (config.max_rollback_tokens < 0) {
    return invalid_argument("KvConfig.max_rollback_tokens is negative");
  }

  std::vector<io::LayerSpec> all = model.layers;
  all.insert(all.end(), model.mtp_layers.begin(), model.mtp_layers.end());

  CacheLayout layout;
  layout.block_size = config.block_size;
  GroupSpec window;
  window.kind = CacheKind::kWindow;
  window.ratio = 1;
  window.window = model.sliding_window;
  window.rows_per_block = config.block_size;
  window.row_elements = model.head_dim;
  window.name = "window";
  std::map<int, std::vector<int>> compressed, indexer;
  std::vector<int> stateful;
  int64_t state_floats = 0;
  // V4.1 (CSA2): only a Full layer owns compressed rows and index keys (Reuse and Reindex layers
  // read their source's); its running state is m (kv, gate) rows of d, none at ratio 1. The
  // DSpark stages keep window-sized context rings. Same sizes as io::kv_cache_size.
  const bool csa2 = model.family == io::ModelFamily::kDeepseekV41;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& l = all[i];
    const int id = static_cast<int>(i);
    window.layers.push_back(id);
    if (csa2 && l.role != io::Csa2Role::kFull) continue;
    if (l.attention == io::AttentionKind::kSWA || l.compress_ratio <= 0) continue;
    const int m = l.compress_ratio;
    if (config.block_size % m != 0) {
      return invalid_argument("KvConfig.block_size " + std::to_string(config.block_size) +
                              " is not a multiple of layer " + std::to_string(id) +
                              "'s compress_ratio " + std::to_string(m) +
                              "; pick a multiple of every ratio (V4-Flash: 128 or 256)");
    }
    compressed[m].push_back(id);
    if (csa2) {
      indexer[m].push_back(id);
      if (m > 1) {
        stateful.push_back(id);
        state_floats += 2 * int64_t{m} * model.head_dim;
      }
      continue;
    }
    stateful.push_back(id);
    // Same sizes as io::kv_cache_size: CSA keeps 2m slots of 2d (attention) and 2d_I (indexer)
    // channels for kv and score; HCA m slots of d.
    if (l.attention == io::AttentionKind::kCSA) {
      indexer[m].push_back(id);
      state_floats += 2 * (2 * m) * (2 * int64_t{model.head_dim}) +
                      2 * (2 * m) * (2 * int64_t{model.index_head_dim});
    } else {
      state_floats += 2 * int64_t{m} * model.head_dim;
    }
  }
  layout.groups.push_back(std::move(window));
  // One row group per ratio, ascending: compressed rows (d wide), then index keys (d_I wide).
  const auto add_row_groups = [&](CacheKind kind, std::map<int, std::vector<int>>& by_ratio,
                                  int64_t row_elements) {
    for (auto& [m, layers] : by_ratio) {
      GroupSpec g;
      g.kind = kind;
      g.ratio = m;
      g.layers = std::move(layers);
      g.rows_per_block = config.block_size / m;
      g.row_elements = row_elements;
      g.name = std::string(cache_kind_name(kind)) + "/" + std::to_string(m);
      layout.groups.push_back(std::move(g));
    }
  };
  add_row_groups(CacheKind::kCompressed, compressed, model.head_dim);
  add_row_groups(CacheKind::kIndexer, indexer, model.index_head_dim);
  if (!stateful.empty()) {
    GroupSpec g;
    g.kind = CacheKind::kCompressorState;
    g.ratio = 0;
    g.layers = std::move(stateful);
    g.rows_per_block = 1;
    g.row_elements = state_floats;
    g.name = "state";
    layout.state_group = static_cast<int32_t>(layout.groups.size());
    layout.groups.push_back(std::move(g));
  }
  return layout;
}

}  // namespace deepinfer::kv
