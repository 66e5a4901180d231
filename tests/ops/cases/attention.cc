// Op cases, attention side (first written for CUDA): sparse MQA with sink (head dims 64 and 512,
// absent keys, a token with no key, BF16 probabilities, V4-Flash decode shape; keys by index and by
// address), compressor pooling with missing slots, indexer scores (FP32 and BF16 rounding points,
// paged keys), the selected rows' addresses, top-k with ties and short rows.
#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "../op_harness.h"
#include "../paged_rows.h"

namespace deepinfer::backend::testing {

namespace {

struct SparseShape {
  int64_t H, d, R, L, M;
};
struct SparseVariant {
  bool sink, bf16_probs, device_idx;
};

// One shape of sparse attention in the given variants against the oracle; each variant with a
// sink also by address (== by index, bit for bit) and rounded in the store (== rounded after).
void check_sparse_attention(CaseContext& ctx, SparseShape s,
                            std::initializer_list<SparseVariant> variants) {
  // BF16 probabilities come with the official semantics' promise: queries and keys are BF16
  // numbers (ops.h), so those variants get rounded copies.
  const Buf kv_f = random_buf(ctx.rng, s.R, s.d);
  const Buf q_f = random_buf(ctx.rng, s.M, s.H * s.d, -0.2f, 0.2f);
  const Buf kv_b = bf16_rounded(kv_f), q_b = bf16_rounded(q_f);
  const Buf sink = random_buf(ctx.rng, 1, s.H);
  std::vector<int32_t> idx(static_cast<size_t>(s.M * s.L));
  for (auto& i : idx) i = ctx.rng() % 5 == 0 ? -1 : static_cast<int32_t>(ctx.rng() % s.R);
  if (s.M > 1) {
    for (int64_t j = 0; j < s.L; ++j) idx[static_cast<size_t>(j)] = -1;  // token 0: no key
  }
  const DBuf dkv_f = dev_copy(ctx, kv_f, 1), dq_f = dev_copy(ctx, q_f, 2);
  const DBuf dkv_b = dev_copy(ctx, kv_b, 1), dq_b = dev_copy(ctx, q_b, 2);
  const BackendMem dsink = dev_array(ctx, sink.v), didx = dev_array(ctx, idx);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  for (const SparseVariant v : variants) {
    const bool bf16p = v.bf16_probs;
    const Buf& kv = bf16p ? kv_b : kv_f;
    const Buf& q = bf16p ? q_b : q_f;
    const DBuf& dkv = bf16p ? dkv_b : dkv_f;
    const DBuf& dq = bf16p ? dq_b : dq_f;
    const float* hsink = v.sink ? sink.v.data() : nullptr;
    const float* dev_sink = v.sink ? dsink.as<float>() : nullptr;
    Buf want(s.M, s.H * s.d);
    ctx.ref->sparse_attention(q.cmat(), s.H, kv.cmat(), idx.data(), s.L, hsink, scale, bf16p,
                              want.mat());
    DBuf dout = dev_poisoned(ctx, s.M, s.H * s.d);
    ctx.ops->sparse_attention(dq.cmat(), s.H, dkv.cmat(),
                              v.device_idx ? didx.as<int32_t>() : idx.data(), s.L, dev_sink, scale,
                              bf16p, dout.mat());
    const std::string t = "sparse_attention H=" + std::to_string(s.H) +
                          " d=" + std::to_string(s.d) + " L=" + std::to_string(s.L) +
                          " M=" + std::to_string(s.M) + (v.sink ? " sink" : "") +
                          (bf16p ? " bf16probs" : "") + (v.device_idx ? " device idx" : "");
    const std::vector<float> got = dout.download();
    close(ctx, t, got, want.v, bf16p ? 2e-3 : 2e-5);
    // The same keys by address (a host table staged, or a device one), absent entries moved
    // to other columns: the index form's bits exactly.
    if (!v.sink) continue;
    const int64_t pad = 5, L2 = s.L + pad;
    std::vector<const float*> rows(static_cast<size_t>(s.M * L2), nullptr);
    for (int64_t t2 = 0; t2 < s.M; ++t2) {
      for (int64_t j = 0; j < s.L; ++j) {
        const int32_t r = idx[static_cast<size_t>(t2 * s.L + j)];
        rows[static_cast<size_t>(t2 * L2 + j + (j >= s.L / 3 ? pad : 0))] =
            r >= 0 ? dkv.cmat().row(r) : nullptr;
      }
    }
    const BackendMem drows = dev_array(ctx, rows);
    const float* const* key_rows = v.device_idx ? drows.as<const float* const>() : rows.data();
    DBuf dout2 = dev_poisoned(ctx, s.M, s.H * s.d);
    ctx.ops->sparse_attention_rows(dq.cmat(), s.H, key_rows, L2, s.d, dev_sink, scale, bf16p,
                                   dout2.mat());
    close(ctx, t + " by address == by index", dout2.download(), got, 0.0);
    // sparse_attention_rows_rounded: the same output rounded to BF16 (in the kernels' stores
    // on CUDA), bit for bit.
    std::vector<float> rounded = got;
    for (float& x : rounded) x = bf16_to_float(float_to_bf16(x));
    DBuf dout3 = dev_poisoned(ctx, s.M, s.H * s.d);
    ctx.ops->sparse_attention_rows_rounded(dq.cmat(), s.H, key_rows, L2, s.d, dev_sink, scale,
                                           bf16p, dout3.mat());
    close(ctx, t + " rounded", dout3.download(), rounded, 0.0);
  }
}

}  // namespace

OP_CASE(sparse_attention, kOnAll, Feature::kSparseAttention, Feature::kAttentionSink,
        Feature::kBf16Probs) {
  // Few rows (M · head groups well under the SM count) take the split-key path (shapes 2-4);
  // the fifth has rows enough not to split and is long enough (16·L floats past the
  // shared-memory limit) for the one-block-per-head fallback. The last two have rows enough
  // not to split at head dim 512: CUDA's tensor-core kernels for BF16 probabilities (64 heads:
  // the staged kernel's block of 64; 20 heads: the 16-head kernel, a group of 4).
  for (SparseShape s : {SparseShape{4, 64, 50, 37, 5}, SparseShape{3, 512, 300, 130, 3},
                        SparseShape{64, 512, 4096, 640, 2}, SparseShape{20, 64, 4000, 3000, 2},
                        SparseShape{20, 64, 4000, 3000, 70}, SparseShape{64, 512, 1000, 128, 70},
                        SparseShape{20, 512, 600, 100, 140}}) {
    check_sparse_attention(ctx, s,
                           {{true, false, false}, {false, false, false}, {true, true, false},
                            {true, false, true}});
  }
}

// CUDA's staged tensor-core kernel (attention/sparse_attention_staged.cu: 32 heads and more,
// head dim 512, BF16 probabilities) at V4-Flash's key count (640 = 20 whole chunks of 32, with
// a fifth of them absent, so most rows end in a partial chunk) and with 80 heads (a full block
// of 64 and one of 16), with and without the sink, the keys on the host and on the device.
// Rows 1, 3 and 40 take its split-key form on a card of 132 SMs when that is on (16, 16, 11
// (40 heads, 333 keys) and 3 splits; row 0 of several has no key, so a whole row of splits is
// empty; ops_cuda_test runs this case again with CudaOps::set_sparse_staged_split on), else
// the SIMT split; 70 rows of 80 heads (140 blocks) the unsplit kernel.
OP_CASE(sparse_attention_staged, kOnAll, Feature::kSparseAttention, Feature::kAttentionSink,
        Feature::kBf16Probs) {
  for (SparseShape s : {SparseShape{64, 512, 4096, 640, 40}, SparseShape{80, 512, 900, 200, 70},
                        SparseShape{64, 512, 4096, 640, 1}, SparseShape{64, 512, 4096, 640, 3},
                        SparseShape{40, 512, 700, 333, 3}}) {
    check_sparse_attention(ctx, s, {{true, true, false}, {false, true, true}});
  }
}

// indexer_scores_multi over runs of rows that share their keys (prefill chunks of two sequences,
// 150 and 70 rows, causal visible counts, pages of 256 rows) beside one decode row: CUDA takes
// its tensor-core kernel here (BF16 rounding points, runs of 64 rows and more), whose inputs
// are BF16 numbers by contract, so they are rounded first. Visible parts against the oracle.
OP_CASE(indexer_multi_prefill_runs, kOnAll, Feature::kIndexer, Feature::kIndexerBf16) {
  const int64_t H = 64, di = 128, page = 256;
  struct Seq {
    int64_t rows, keys;
  };
  const std::vector<Seq> seqs = {{150, 600}, {70, 300}, {1, 400}};
  std::vector<Buf> keys;
  std::vector<DBuf> dkeys;
  std::vector<std::vector<const float*>> tables;
  int64_t M = 0, width = 0;
  for (const Seq& sq : seqs) {
    keys.push_back(bf16_rounded(random_buf(ctx.rng, sq.keys, di)));
    dkeys.push_back(dev_copy(ctx, keys.back()));
    tables.emplace_back();
    for (int64_t r = 0; r < sq.keys; r += page) tables.back().push_back(dkeys.back().cmat().row(r));
    M += sq.rows;
    width = std::max(width, sq.keys);
  }
  const Buf q = bf16_rounded(random_buf(ctx.rng, M, H * di));
  const Buf w = random_buf(ctx.rng, M, H, -0.5f, 1.0f);
  const DBuf dq = dev_copy(ctx, q), dw = dev_copy(ctx, w, 1);
  std::vector<PagedCMat> row_keys;
  std::vector<int32_t> vis;
  std::vector<size_t> seq_of;
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (int64_t j = 0; j < seqs[i].rows; ++j) {
      row_keys.push_back(PagedCMat{tables[i].data(), seqs[i].keys, di, page});
      vis.push_back(static_cast<int32_t>(std::min(seqs[i].keys, 4 + 4 * j + (j == 0 ? 0 : 1))));
      seq_of.push_back(i);
    }
  }
  DBuf dout = dev_poisoned(ctx, M, width);
  ctx.ops->indexer_scores_multi(dq.cmat(), H, dw.cmat(), row_keys, vis.data(), true, dout.mat());
  const std::vector<float> got = dout.download();
  std::vector<float> got_vis, want_vis;
  for (int64_t t = 0; t < M; ++t) {
    const size_t sq = seq_of[static_cast<size_t>(t)];
    const int64_t v = vis[static_cast<size_t>(t)];
    Buf want(1, seqs[sq].keys);
    ctx.ref->indexer_scores(q.cmat().rows_slice(t, 1), H, w.cmat().rows_slice(t, 1),
                            keys[sq].cmat(), &vis[static_cast<size_t>(t)], true, want.mat());
    got_vis.insert(got_vis.end(), got.begin() + t * width, got.begin() + t * width + v);
    want_vis.insert(want_vis.end(), want.v.begin(), want.v.begin() + v);
  }
  close(ctx, "indexer_scores_multi prefill runs bf16", got_vis, want_vis, 2e-2);
}

OP_CASE(softmax_pool, kOnAll, Feature::kCompressorPool) {
  const int64_t width = 96, spr = 4, rows = 5;
  const Buf values = random_buf(ctx.rng, rows * spr, width),
            gates = random_buf(ctx.rng, rows * spr, width, -4.0f, 4.0f);
  const DBuf dv = dev_copy(ctx, values), dg = dev_copy(ctx, gates);
  std::vector<PoolSlot> hs, ds;
  for (int64_t i = 0; i < rows * spr; ++i) {
    const bool missing = i == 0 || (i >= 4 && i < 8);  // row 1 has no slot at all
    hs.push_back({missing ? nullptr : values.v.data() + i * width, gates.v.data() + i * width});
    ds.push_back(
        {missing ? nullptr : dv.mem.as<float>() + i * width, dg.mem.as<float>() + i * width});
  }
  Buf want(rows, width);
  ctx.ref->softmax_pool(hs, spr, want.mat());
  DBuf dout = dev_poisoned(ctx, rows, width, 1);
  ctx.ops->softmax_pool(ds, spr, dout.mat());
  close(ctx, "softmax_pool", dout.download(), want.v, 1e-5);
}

OP_CASE(indexer_and_topk, kOnAll, Feature::kIndexer, Feature::kIndexerBf16) {
  struct Shape {
    int64_t H, di, R, M;
  };
  for (Shape s : {Shape{4, 32, 70, 3}, Shape{64, 128, 1024, 4}}) {
    const Buf q = random_buf(ctx.rng, s.M, s.H * s.di);
    const Buf w = random_buf(ctx.rng, s.M, s.H, -0.5f, 1.0f);
    const Buf keys = random_buf(ctx.rng, s.R, s.di);
    std::vector<int32_t> vis(static_cast<size_t>(s.M));
    for (int64_t t = 0; t < s.M; ++t)
      vis[static_cast<size_t>(t)] = static_cast<int32_t>(s.R - 7 * t);
    vis[0] = static_cast<int32_t>(s.R + 5);  // clamped to R
    const DBuf dq = dev_copy(ctx, q), dw = dev_copy(ctx, w, 1), dk = dev_copy(ctx, keys, 3);
    for (bool bf16 : {false, true}) {
      Buf want(s.M, s.R);
      ctx.ref->indexer_scores(q.cmat(), s.H, w.cmat(), keys.cmat(), vis.data(), bf16, want.mat());
      DBuf dout = dev_poisoned(ctx, s.M, s.R);
      ctx.ops->indexer_scores(dq.cmat(), s.H, dw.cmat(), dk.cmat(), vis.data(), bf16, dout.mat());
      close(ctx, "indexer_scores H=" + std::to_string(s.H) + (bf16 ? " bf16" : ""), dout.download(),
            want.v, bf16 ? 2e-2 : 2e-5);
    }
  }
  // indexer_scores_multi: rows of three sequences (the middle one without index keys yet), each
  // reading its own paged keys (pages of 7 and of 256 rows, stored in reverse order); the
  // visible part of every row must equal the backend's single-matrix call on the contiguous keys
  // bit for bit (batch invariance, paging is storage only) and the oracle within the tolerance.
  {
    const int64_t H = 64, di = 128, M = 7;
    const std::vector<int64_t> seq_rows = {300, 0, 1100};
    const std::vector<int64_t> page_rows = {7, 1, 256};
    const std::vector<int64_t> seq_of = {0, 0, 1, 2, 2, 2, 2};
    std::vector<Buf> keys;
    std::vector<DBuf> dkeys, dpaged;
    std::vector<std::vector<const float*>> tables;
    for (size_t i = 0; i < seq_rows.size(); ++i) {
      keys.push_back(random_buf(ctx.rng, seq_rows[i], di));
      dkeys.push_back(dev_copy(ctx, keys.back(), static_cast<int>(i)));
      const ReversedPages rp = reverse_pages(keys.back().v, seq_rows[i], di, page_rows[i]);
      Buf storage(static_cast<int64_t>(rp.storage.size()) / di, di);
      storage.v = rp.storage;
      dpaged.push_back(dev_copy(ctx, storage));
      tables.push_back(rp.table(dpaged.back().mem.as<float>()));
    }
    const Buf q = random_buf(ctx.rng, M, H * di);
    const Buf w = random_buf(ctx.rng, M, H, -0.5f, 1.0f);
    const DBuf dq = dev_copy(ctx, q), dw = dev_copy(ctx, w, 1);
    std::vector<PagedCMat> row_keys;
    std::vector<int32_t> vis;
    for (int64_t t = 0; t < M; ++t) {
      const int64_t sq = seq_of[static_cast<size_t>(t)], R = seq_rows[static_cast<size_t>(sq)];
      const size_t s = static_cast<size_t>(sq);
      row_keys.push_back(R == 0 ? PagedCMat{nullptr, 0, di, 1}
                                : PagedCMat{tables[s].data(), R, di, page_rows[s]});
      vis.push_back(static_cast<int32_t>(R == 0 ? 0 : R - 37 * (t % 3)));
    }
    for (bool bf16 : {false, true}) {
      DBuf dout = dev_poisoned(ctx, M, 1100);
      ctx.ops->indexer_scores_multi(dq.cmat(), H, dw.cmat(), row_keys, vis.data(), bf16,
                                    dout.mat());
      const std::vector<float> got = dout.download();
      std::vector<float> got_vis, want_vis, single_vis;
      for (int64_t t = 0; t < M; ++t) {
        const size_t sq = static_cast<size_t>(seq_of[static_cast<size_t>(t)]);
        const int64_t R = seq_rows[sq], v = vis[static_cast<size_t>(t)];
        if (R == 0) continue;
        Buf want(1, R);
        ctx.ref->indexer_scores(q.cmat().rows_slice(t, 1), H, w.cmat().rows_slice(t, 1),
                                keys[sq].cmat(), &vis[static_cast<size_t>(t)], bf16, want.mat());
        DBuf one = dev_poisoned(ctx, 1, R);
        ctx.ops->indexer_scores(dq.cmat().rows_slice(t, 1), H, dw.cmat().rows_slice(t, 1),
                                dkeys[sq].cmat(), &vis[static_cast<size_t>(t)], bf16, one.mat());
        const std::vector<float> single = one.download();
        got_vis.insert(got_vis.end(), got.begin() + t * 1100, got.begin() + t * 1100 + v);
        want_vis.insert(want_vis.end(), want.v.begin(), want.v.begin() + v);
        single_vis.insert(single_vis.end(), single.begin(), single.begin() + v);
      }
      const std::string name = std::string("indexer_scores_multi") + (bf16 ? " bf16" : "");
      close(ctx, name, got_vis, want_vis, bf16 ? 2e-2 : 2e-5);
      close(ctx, name + " == single call", got_vis, single_vis, 0.0);
    }
    // paged_row_addresses over the same paged matrices: a device table at a column offset, the
    // selection a host array (staged); each address is the page table's row.
    const int64_t K = 9, ld = K + 4;
    std::vector<int32_t> sel(static_cast<size_t>(M * K));
    for (int64_t t = 0; t < M; ++t) {
      const int64_t R = row_keys[static_cast<size_t>(t)].rows;
      for (int64_t k = 0; k < K; ++k) {
        sel[static_cast<size_t>(t * K + k)] =
            R == 0 || k == 3 ? -1 : static_cast<int32_t>((t * 131 + k * 97) % R);
      }
    }
    const std::vector<const float*> sentinel(static_cast<size_t>(M * ld), q.v.data());
    const BackendMem dout = dev_array(ctx, sentinel);
    ctx.ops->paged_row_addresses(sel.data(), K, row_keys, dout.as<const float*>() + 3, ld);
    const std::vector<const float*> got = download_array<const float*>(ctx, dout, sentinel.size());
    int64_t wrong = 0;
    for (int64_t t = 0; t < M; ++t) {
      const PagedCMat& k = row_keys[static_cast<size_t>(t)];
      for (int64_t j = 0; j < ld; ++j) {
        const float* want = q.v.data();  // untouched outside [3, 3 + K)
        if (j >= 3 && j < 3 + K) {
          const int32_t r = sel[static_cast<size_t>(t * K + j - 3)];
          want = r >= 0 ? k.row(r) : nullptr;
        }
        wrong += got[static_cast<size_t>(t * ld + j)] != want;
      }
    }
    equal_ints(ctx, "paged_row_addresses: wrong addresses (inside or outside its columns)",
               {static_cast<int32_t>(wrong)}, {0});
  }
  // top-k on identical inputs (ties from a coarse grid), k larger than some rows.
  for (int64_t R : {40, 3000}) {
    const int64_t M = 4, k = 64;
    Buf sc = random_buf(ctx.rng, M, R, -8.0f, 8.0f);
    for (float& v : sc.v) v = std::round(v * 4.0f) / 4.0f;
    const std::vector<int32_t> vis = {static_cast<int32_t>(R), 10, 0, static_cast<int32_t>(R - 1)};
    std::vector<int32_t> want(static_cast<size_t>(M * k)), got(want.size(), -7);
    ctx.ref->topk(sc.cmat(), vis.data(), k, want.data());
    const DBuf dsc = dev_copy(ctx, sc, 2);
    ctx.ops->topk(dsc.cmat(), vis.data(), k, got.data());
    equal_ints(ctx, "topk R=" + std::to_string(R), got, want);
    BackendMem dout = dev_array(ctx, std::vector<int32_t>(want.size(), -7));
    const BackendMem dvis = dev_array(ctx, vis);
    ctx.ops->topk(dsc.cmat(), dvis.as<int32_t>(), k, dout.as<int32_t>());
    equal_ints(ctx, "topk device arrays R=" + std::to_string(R),
               download_ints(ctx, dout, want.size()), want);
  }
}

}  // namespace deepinfer::backend::testing
