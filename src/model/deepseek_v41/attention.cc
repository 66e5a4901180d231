// V4.1's attention core (see attention.h).
#include "model/deepseek_v41/attention.h"

#include "base/check.h"
#include "model/layers/compressor.h"
#include "model/recorded_steps.h"

namespace deepinfer::model::deepseek_v41 {

using backend::CMat;
using backend::Mat;

namespace {

// A Full layer's compressor: the step's closed groups become index keys and compressed KV rows
// of this layer's lists (spec §6.2; rounding points of the official mode, §6.7 item 6).
void compress_full(const LayerEnv& env, const AttentionWeights& w, const AttentionRows& r,
                   std::span<const CompressorJob> jobs, AttentionScratch& s, Csa2Scratch& cs) {
  backend::Ops& ops = env.ops;
  const Numerics& num = env.num;
  const io::ModelConfig& cfg = env.config;
  const CompressorWeights& cw = *w.compressor;
  const IndexerWeights& ix = *w.indexer;
  const Mat latent = compressor_pool(ops, num, cw, r.ckv, r.cg, jobs, s.comp);
  const int64_t n = latent.rows, d = cfg.head_dim, di = cfg.index_head_dim;
  const int32_t* pos = s.comp.positions.data();  // each row's first token: w · ratio
  const std::span<const float> freqs = env.rope.compress;
  // wk runs over the rows padded to their bucket (compressor_pool leaves room): an eager GEMM's
  // first call at a row count is slow on a GPU (cuBLAS sets a shape up; V4Model::head_rows).
  const int64_t nb = RecordedSteps::padded_count(n, ops.record_max_rows());
  Mat keys_all(fit(cs.keys, nb * di), nb, di), kv(fit(cs.rows, n * d), n, d);
  const Mat keys = keys_all.rows_slice(0, n);
  if (n > 0) {
    // Index keys from the unrotated latent: wk (plain linear), k_norm, RoPE, MXFP4.
    ops.linear(CMat(latent.data, nb, latent.cols, latent.ld), *ix.wk, keys_all,
               num.gemm_rounded());
    num.rms_norm_act(ops, keys, &*ix.k_norm, 0, keys);
    num.rope_act(ops, keys, 1, di, pos, freqs, false);
    ops.fake_quant_fp4(keys, kIndexerFp4Block);
    // Compressed KV: RoPE at the group's first token, NVFP4 over every channel.
    ops.copy_rows(latent, nullptr, kv);
    num.rope_act(ops, kv, 1, d, pos, freqs, false);
    ops.fake_quant_nvfp4(kv, kV41CompressedNvfp4Block);
  }
  append_closed_rows(
      ops, cw.ratio, jobs, keys, [](const CompressorJob& j) -> PagedRows& { return j.keys->rows; },
      s.comp);
  append_closed_rows(
      ops, cw.ratio, jobs, kv, [](const CompressorJob& j) -> PagedRows& { return j.state->rows; },
      s.comp);
}

}  // namespace

void csa2_core(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
               size_t layer, const AttentionRows& r, const StepInputs& in, AttentionScratch& s,
               Csa2Scratch& cs) {
  const int32_t* pos = in.positions.data();
  const LayerOf own = [layer](const SequenceSpan& sq) -> LayerCache& {
    return sq.cache->layer(layer);
  };
  if (spec.attention == io::AttentionKind::kSWA) {
    attend(env, w, r, in, own, LayerOf{}, 0, false, s);
    return;
  }
  const auto src = static_cast<size_t>(spec.kv_source);
  const LayerOf source = [src](const SequenceSpan& sq) -> LayerCache& {
    return sq.cache->layer(src);
  };
  if (spec.role == io::Csa2Role::kFull) {
    std::vector<CompressorJob>& jobs = s.comp_jobs;
    jobs.clear();
    for (const SequenceSpan& sq : in.sequences) {
      if (sq.count == 0) continue;
      // A window replay (Model::window_replay_state) feeds positions whose compressed rows and
      // index keys the cache already holds: they are read, not made again.
      const int64_t held = sq.cache->compressed_until();
      DI_CHECK(held <= pos[sq.begin] || held >= pos[sq.begin] + sq.count);
      if (held >= pos[sq.begin] + sq.count) continue;
      LayerCache& lc = sq.cache->layer(layer);
      jobs.push_back({&lc.comp, sq.begin, sq.count, pos[sq.begin], &lc.idx});
    }
    compress_full(env, w, r, jobs, s, cs);
  }
  if (spec.role == io::Csa2Role::kFull || spec.role == io::Csa2Role::kReindex) {
    SelectOpts so;
    so.ratio = spec.compress_ratio;
    so.topk = env.config.index_topk;
    so.block_size = env.config.candidate_block_size;
    so.n_blocks = env.config.candidate_topk_blocks;
    so.candidates = spec.candidate_source  ? SelectOpts::Candidates::kMake
                    : spec.uses_candidates ? SelectOpts::Candidates::kUse
                                           : SelectOpts::Candidates::kNone;
    select_compressed(env, r.iq, r.iw, in, source, so, s);
  }
  DI_CHECK(spec.index_source >= spec.kv_source);  // Reuse layers read the latest picks
  attend(env, w, r, in, own, source, spec.compress_ratio, false, s);
}

}  // namespace deepinfer::model::deepseek_v41
