// KvCoordinator implementation: see coordinator.h.
#include "kv/coordinator.h"

#include <algorithm>
#include <string>

#include "base/check.h"
#include "kv/block_hash.h"

namespace deepinfer::kv {

Expected<KvCoordinator> KvCoordinator::create(const io::ModelConfig& model,
                                              const KvConfig& config) {
  DI_ASSIGN_OR_RETURN(CacheLayout layout, make_cache_layout(model, config));
  return KvCoordinator(std::move(layout), config);
}

KvCoordinator::KvCoordinator(CacheLayout layout, const KvConfig& config)
    : layout_(std::move(layout)),
      config_(config),
      pool_(std::make_unique<BlockPool>(config.num_blocks)) {
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    const GroupSpec& spec = layout_.groups[g];
    const auto index = static_cast<int32_t>(g);
    const bool caching = config_.enable_prefix_caching;
    std::unique_ptr<GroupManager> m;
    switch (spec.kind) {
      case CacheKind::kWindow:
        m = std::make_unique<WindowGroupManager>(index, spec, pool_.get(), config_.block_size,
                                                 caching, config_.max_rollback_tokens);
        break;
      case CacheKind::kCompressed:
      case CacheKind::kIndexer:
        m = std::make_unique<FullGroupManager>(index, spec, pool_.get(), config_.block_size,
                                               caching, config_.max_rollback_tokens);
        break;
      case CacheKind::kCompressorState:
        m = std::make_unique<StateGroupManager>(index, spec, pool_.get(), config_.block_size,
                                                caching, config_.max_rollback_tokens);
        break;
    }
    managers_.push_back(std::move(m));
  }
}

int64_t KvCoordinator::find_prefix_hit(std::span<const int32_t> tokens) const {
  return find_prefix_hit(std::span<const uint64_t>(prefix_hashes(tokens)));
}

std::vector<uint64_t> KvCoordinator::prefix_hashes(std::span<const int32_t> tokens) const {
  std::vector<uint64_t> hashes;
  if (!config_.enable_prefix_caching || tokens.size() < 2) return hashes;
  // The last token is always computed (its logits are needed): blocks of the others only.
  extend_block_hashes(hashes, tokens, static_cast<int64_t>(tokens.size()) - 1, config_.block_size);
  return hashes;
}

int64_t KvCoordinator::find_prefix_hit(std::span<const uint64_t> hashes) const {
  if (!config_.enable_prefix_caching || hashes.empty()) return 0;
  // Full groups need every block from the start, so their leading hits bound k; the window and
  // state groups need blocks near k only, so the largest k they all accept is searched downward.
  int64_t k = static_cast<int64_t>(hashes.size());
  for (const auto& m : managers_) k = std::min(k, m->resume_limit(hashes));
  for (; k > 0; --k) {
    bool ok = true;
    for (const auto& m : managers_) {
      if (!m->can_resume(hashes, k)) {
        ok = false;
        break;
      }
    }
    if (ok) break;
  }
  return k * config_.block_size;
}

int64_t KvCoordinator::peak_blocks(int64_t len, int64_t chunk) const {
  int64_t n = 0;
  for (const auto& m : managers_) n += m->peak_blocks(len, std::max<int64_t>(1, chunk));
  return n;
}

void KvCoordinator::publish(Seq& s, std::span<const int32_t> known) {
  if (!config_.enable_prefix_caching) return;
  extend_block_hashes(s.hashes, known, s.len, config_.block_size);
  for (size_t g = 0; g < managers_.size(); ++g) managers_[g]->publish(s.groups[g], s.hashes);
}

bool KvCoordinator::start(SeqId id, std::span<const int32_t> tokens, int64_t num_hit,
                          int64_t num_new) {
  DI_CHECK(!contains(id));
  DI_CHECK(num_hit >= 0 && num_new >= 0 && num_hit % config_.block_size == 0);
  DI_CHECK(num_hit == 0 || num_hit < static_cast<int64_t>(tokens.size()));
  const int64_t k = num_hit / config_.block_size;
  Seq s;
  s.groups.resize(managers_.size());
  if (k > 0) {
    extend_block_hashes(s.hashes, tokens, num_hit, config_.block_size);
    DI_CHECK(static_cast<int64_t>(s.hashes.size()) == k);
  }
  const int64_t new_len = num_hit + num_new;
  int64_t need = 0;
  for (const auto& m : managers_) {
    if (k > 0) {
      DI_CHECK(m->can_resume(s.hashes, k));
      need += m->blocks_to_resume(s.hashes, k);
    }
    SeqBlocks after_resume;
    after_resume.blocks.resize(static_cast<size_t>(k));
    need += m->blocks_to_grow(after_resume, new_len);
  }
  if (need > pool_->num_free()) return false;

  // Take every hit block back before allocating anything: an allocation may evict cached
  // free blocks, including ones another group is about to reuse.
  if (k > 0) {
    for (size_t g = 0; g < managers_.size(); ++g) managers_[g]->resume(s.groups[g], s.hashes, k);
  }
  for (size_t g = 0; g < managers_.size(); ++g) managers_[g]->grow(s.groups[g], new_len);
  if (k > 0 && layout_.state_group >= 0) {
    const SeqBlocks& st = s.groups[static_cast<size_t>(layout_.state_group)];
    s.restore = st.blocks[static_cast<size_t>(k - 1)];
  }
  s.len = new_len;
  publish(s, tokens);
  ++stats_.queries;
  stats_.query_tokens += static_cast<int64_t>(tokens.size());
  stats_.hit_tokens += num_hit;
  stats_.hit_sequences += k > 0 ? 1 : 0;
  seqs_.emplace(id, std::move(s));
  return true;
}

bool KvCoordinator::grow(SeqId id, std::span<const int32_t> known_tokens, int64_t num_new) {
  const auto it = seqs_.find(id);
  DI_CHECK(it != seqs_.end() && num_new >= 0);
  Seq& s = it->second;
  s.restore = kNullBlock;
  const int64_t new_len = s.len + num_new;
  int64_t need = 0;
  for (size_t g = 0; g < managers_.size(); ++g) {
    managers_[g]->release_unneeded(s.groups[g], s.len);
    need += managers_[g]->blocks_to_grow(s.groups[g], new_len);
  }
  if (need > pool_->num_free()) return false;
  for (size_t g = 0; g < managers_.size(); ++g) managers_[g]->grow(s.groups[g], new_len);
  s.len = new_len;
  publish(s, known_tokens);
  return true;
}

Status KvCoordinator::rollback(SeqId id, int64_t k) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end())
    return not_found("rollback: sequence " + std::to_string(id) + " has no KV");
  Seq& s = it->second;
  if (k < 0 || k > s.len) {
    return out_of_range("rollback of " + std::to_string(k) + " tokens on sequence " +
                        std::to_string(id) + " holding " + std::to_string(s.len));
  }
  if (k > config_.max_rollback_tokens) {
    return out_of_range("rollback of " + std::to_string(k) +
                        " tokens exceeds KvConfig.max_rollback_tokens = " +
                        std::to_string(config_.max_rollback_tokens) +
                        " (raise it to the longest speculative draft)");
  }
  const int64_t new_len = s.len - k;
  const auto published = static_cast<int64_t>(s.hashes.size()) * config_.block_size;
  if (new_len < published) {
    return failed_precondition("rollback to " + std::to_string(new_len) + " tokens would undo " +
                               "tokens already published to the prefix cache (up to " +
                               std::to_string(published) + "); only unaccepted tokens roll back");
  }
  for (size_t g = 0; g < managers_.size(); ++g) managers_[g]->shrink(s.groups[g], new_len);
  s.len = new_len;
  return Status::ok_status();
}

void KvCoordinator::free(SeqId id, std::span<const int32_t> known) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  if (!known.empty()) publish(it->second, known);
  for (size_t g = 0; g < managers_.size(); ++g) managers_[g]->free(it->second.groups[g]);
  seqs_.erase(it);
}

Status KvCoordinator::reset_prefix_cache() {
  if (!seqs_.empty()) {
    return failed_precondition("reset_prefix_cache: " + std::to_string(seqs_.size()) +
                               " sequences still hold KV blocks");
  }
  pool_->drop_free_hashes();
  return Status::ok_status();
}

int64_t KvCoordinator::num_tokens(SeqId id) const {
  const auto it = seqs_.find(id);
  return it == seqs_.end() ? 0 : it->second.len;
}

void KvCoordinator::append_tables(SeqId id, SeqTables& out) const {
  const auto it = seqs_.find(id);
  DI_CHECK(it != seqs_.end());
  const Seq& s = it->second;
  out.groups.resize(managers_.size());
  for (size_t g = 0; g < managers_.size(); ++g) {
    const SeqBlocks& b = s.groups[g];
    BlockTable& t = out.groups[g];
    t.first_block = b.first_live;
    t.ids.assign(b.blocks.begin() + b.first_live, b.blocks.end());
  }
  out.state_slot = layout_.state_group >= 0
                       ? s.groups[static_cast<size_t>(layout_.state_group)].slot
                       : kNullBlock;
}

SeqTables KvCoordinator::tables(SeqId id) const {
  SeqTables t;
  append_tables(id, t);
  return t;
}

BlockId KvCoordinator::state_restore_block(SeqId id) const {
  const auto it = seqs_.find(id);
  return it == seqs_.end() ? kNullBlock : it->second.restore;
}

Status KvCoordinator::check_consistency() const {
  DI_TRY(pool_->check_consistency());
  std::vector<int32_t> refs(static_cast<size_t>(pool_->num_blocks()), 0);
  for (const auto& [id, s] : seqs_) {
    for (size_t g = 0; g < s.groups.size(); ++g) {
      const SeqBlocks& b = s.groups[g];
      for (size_t j = 0; j < b.blocks.size(); ++j) {
        const bool live = static_cast<int64_t>(j) >= b.first_live;
        if (!live && b.blocks[j] != kNullBlock) {
          return internal_error("sequence " + std::to_string(id) + " group " +
                                layout_.groups[g].name + " keeps a block below first_live");
        }
        if (b.blocks[j] != kNullBlock) ++refs[static_cast<size_t>(b.blocks[j])];
      }
      if (b.slot != kNullBlock) ++refs[static_cast<size_t>(b.slot)];
    }
  }
  for (size_t i = 0; i < refs.size(); ++i) {
    if (refs[i] != pool_->ref_count(static_cast<BlockId>(i))) {
      return internal_error("block " + std::to_string(i) + ": sequences hold " +
                            std::to_string(refs[i]) + " references, the pool counts " +
                            std::to_string(pool_->ref_count(static_cast<BlockId>(i))));
    }
  }
  return Status::ok_status();
}

}  // namespace deepinfer::kv
