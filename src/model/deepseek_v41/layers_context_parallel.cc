// V41Model::layers_context_parallel (v41_model.h): a step's main layers split over the
// context-parallel ranks.
#include <vector>

#include "model/deepseek_v41/v41_model.h"

namespace deepinfer::model::deepseek_v41 {

void V41Model::layers_context_parallel(const StepInputs& in, Mat X, Mat pre_prev, Mat feats) {
  backend::Ops& o = *ops;
  DenseBuffers& d = step;
  ContextSplit& cp = *cp_split;
  cp.plan(in);
  const int64_t m = static_cast<int64_t>(cp.mine().size()), M = X.rows;
  const int32_t* ids = cp.ids().data();
  RowInputs rows;
  rows.ids = ids;
  rows.positions = cp.positions().data();
  LayerEnv split_env = env();
  split_env.query_of = cp.local_of().data();
  split_env.query_count = m;
  Mat Xl(fit(cp_x, m * X.cols), m, X.cols), pre_l(fit(cp_pre, m * pre_prev.cols), m, pre_prev.cols);
  Mat feats_l(fit(cp_feats, m * feats.cols), m, feats.cols);
  if (m > 0) {
    embed_streams(ids, Xl);
    o.copy_rows(constant_rows(onehot, m, false), nullptr, pre_l);  // layer 0: stream 0
  }
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const Block& b = w.layers[l];
    if (b.engram) {  // the whole step's lookup (its n-grams span the rows), then this rank's
      gather_engram(l, in, M, d);
      const int64_t width = engram_lookup->columns() * cfg().engram.head_dim;
      Mat mine_rows(fit(cp_engram, m * width), m, width);
      if (m > 0) {
        o.copy_rows(
            CMat(d.engram_in[static_cast<size_t>(b.engram->index)].as<const float>(), M, width),
            cp.rows().data(), mine_rows);
      }
    }
    if (m > 0) {
      before_block(l, Xl, feats_l, quarter, d, b.engram ? &cp_engram : nullptr);
      attention_in(b.base, Xl, pre_l, rows, d);
    }
    AttentionRows r = attention_rows(env(), b.base.attn, m, d.attn);
    cp.gather_cache_rows(r);
    csa2_core(split_env, b.base.attn, b.base.spec, l, r, in, attn, cs);
    if (m > 0) {
      attention_out_ffn(b.base, Xl, pre_l, rows, d);
    } else if (exchange) {  // no rows here: this rank's experts still serve the others' rows
      moe_serve_only(o, cfg(), num, b.base.moe, d.moe, *exchange);
    }
  }
  std::vector<CMat> local{Xl, pre_l};
  std::vector<Mat> full{X, pre_prev};
  if (feats.cols > 0) {
    local.push_back(feats_l);
    full.push_back(feats);
  }
  cp.gather_rows(local, full, "final streams, pre and drafter features");
}

}  // namespace deepinfer::model::deepseek_v41
