// Tokenizer::from_file / from_json_text: reads tokenizer.json (and, from a file,
// tokenizer_config.json beside it for BOS/EOS) and checks that every component is one we
// reproduce exactly; anything else is a clear Unimplemented error rather than silently
// different ids.
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "base/input_limits.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_data.h"
#include "tokenizer/tokenizer_limits.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string type_of(const json& j) {
  if (j.is_object()) {
    auto it = j.find("type");
    if (it != j.end() && it->is_string()) return it->get<std::string>();
  }
  return "";
}

bool is_identity_normalizer(const json& n) {
  if (n.is_null()) return true;
  if (type_of(n) != "Sequence") return false;
  auto it = n.find("normalizers");
  if (it == n.end() || !it->is_array()) return false;
  for (const auto& sub : *it) {
    if (!is_identity_normalizer(sub)) return false;
  }
  return true;
}

// Flattens nested Sequence pre-tokenizers.
void flatten_pre_tokenizers(const json& p, std::vector<const json*>& out) {
  if (p.is_null()) return;
  if (type_of(p) == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array()) {
    for (const auto& sub : p["pretokenizers"]) flatten_pre_tokenizers(sub, out);
    return;
  }
  out.push_back(&p);
}

bool json_bool(const json& obj, const char* key, bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  return it->is_boolean() ? it->get<bool>() : fallback;
}

// Maps a token written in ByteLevel characters back to bytes; false when a character is
// outside the byte map.
bool byte_level_to_bytes(std::string_view token, std::string& out) {
  const auto& map = detail::ByteLevelMap::get();
  out.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(token.data());
  for (size_t i = 0; i < token.size();) {
    size_t bad = 0;
    size_t len = utf8::sequence_length(p + i, token.size() - i, &bad);
    if (len == 0) return false;
    uint32_t cp = utf8::decode(p + i, len);
    if (cp >= 324 || map.cp_to_byte[cp] < 0) return false;
    out.push_back(static_cast<char>(map.cp_to_byte[cp]));
    i += len;
  }
  return true;
}

std::optional<std::string> config_token(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::nullopt;
}

Status load_pre_tokenizer(const std::string& where, const json& root, PreTokenizer* out) {
  std::vector<const json*> steps;
  auto it = root.find("pre_tokenizer");
  if (it != root.end()) flatten_pre_tokenizers(*it, steps);
  std::vector<SplitKind> kinds;
  bool byte_level = false;
  for (size_t k = 0; k < steps.size(); ++k) {
    const json& s = *steps[k];
    const std::string type = type_of(s);
    if (byte_level) {
      return unimplemented(where + ": pre_tokenizer step '" + type +
                           "' after ByteLevel is not supported (ByteLevel must come last)");
    }
    if (type == "Split") {
      const json& pattern = s.value("pattern", json());
      if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string()) {
        return unimplemented(where +
                             ": pre_tokenizer Split with a non-regex pattern is not supported");
      }
      const std::string regex = pattern["Regex"].get<std::string>();
      const std::string behavior = s.value("behavior", std::string());
      if (behavior != "Isolated" || json_bool(s, "invert", false)) {
        return unimplemented(where + ": pre_tokenizer Split behavior '" + behavior +
                             "' (invert=" + (json_bool(s, "invert", false) ? "true" : "false") +
                             ") is not supported (only Isolated)");
      }
      auto kind = split_kind_for_regex(regex);
      if (!kind) {
        return unimplemented(where + ": pre_tokenizer Split regex " + json(regex).dump() +
                             " has no hand-written scanner (supported: DeepSeek's three splits and "
                             "GPT-2's ByteLevel regex)");
      }
      kinds.push_back(*kind);
    } else if (type == "ByteLevel") {
      if (json_bool(s, "add_prefix_space", false)) {
        return unimplemented(
            where + ": pre_tokenizer ByteLevel with add_prefix_space=true is not supported");
      }
      if (json_bool(s, "use_regex", true)) kinds.push_back(SplitKind::kGpt2);
      byte_level = true;
    } else {
      return unimplemented(where + ": pre_tokenizer type '" + type + "' is not supported");
    }
  }
  if (!byte_level) {
    return unimplemented(
        where + ": not a byte-level BPE tokenizer (the pre_tokenizer has no ByteLevel step)");
  }
  *out = PreTokenizer(std::move(kinds));
  return Status();
}

// The model, normalizer and decoder must be ones we reproduce exactly (the pre-tokenizer has
// its own check, load_pre_tokenizer).
Status check_model(const std::string& where, const json& root, const json& model) {
  std::string mtype = type_of(model);
  if (mtype.empty() && model.contains("merges")) mtype = "BPE";
  if (mtype != "BPE") {
    return unimplemented(where + ": model type '" + mtype +
                         "' is not supported (only byte-level BPE)");
  }
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0)) {
    return unimplemented(where + ": BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      return unimplemented(where + ": BPE " + key + " is not supported");
    }
  }
  if (!is_identity_normalizer(root.value("normalizer", json()))) {
    return unimplemented(where + ": normalizer '" + type_of(root["normalizer"]) +
                         "' is not supported (only none or an empty Sequence)");
  }
  return Status();
}

Status check_decoder(const std::string& where, const json& root) {
  const json dec = root.value("decoder", json());
  std::vector<const json*> decs;
  if (type_of(dec) == "Sequence" && dec.contains("decoders") && dec["decoders"].is_array()) {
    for (const auto& x : dec["decoders"]) decs.push_back(&x);
  } else if (!dec.is_null()) {
    decs.push_back(&dec);
  }
  if (decs.size() != 1 || type_of(*decs[0]) != "ByteLevel") {
    return unimplemented(where + ": decoder '" + type_of(dec) +
                         "' is not supported (only ByteLevel)");
  }
  return Status();
}

// An id must index the per-id tables, which are sized by the largest id.
Status check_id(const std::string& where, const std::string& what, int64_t id) {
  if (id < 0) return invalid_argument(where + ": " + what + " has a bad id " + std::to_string(id));
  if (static_cast<uint64_t>(id) >= kMaxVocab) {
    return invalid_argument(
        where + ": " + what + ": " +
        limit_message("id " + format_count(static_cast<uint64_t>(id)), kMaxVocab - 1,
                      "kMaxVocab - 1 in src/tokenizer/tokenizer_limits.h",
                      "ids index tables sized by the largest one; the file is corrupt"));
  }
  return Status();
}

// model.vocab as captured by the reader -> token -> id (keys view tj's strings).
Status read_vocab(const std::string& where, const detail::TokenizerJson& tj,
                  detail::StringIdMap& vocab, int32_t& max_id) {
  if (!tj.capture_error.empty()) return invalid_argument(where + ": " + tj.capture_error);
  if (!tj.has_vocab) return invalid_argument(where + ": model.vocab is missing or not an object");
  vocab.reserve(tj.vocab.size());
  for (const auto& [tok, id64] : tj.vocab) {
    DI_TRY(check_id(where, "model.vocab entry " + json(tok).dump(), id64));
    const int32_t id = static_cast<int32_t>(id64);
    vocab.set(tok, id);
    max_id = std::max(max_id, id);
  }
  return Status();
}

Status read_added_tokens(const std::string& where, const json& root,
                         std::vector<AddedToken>& added, int32_t& max_id) {
  auto ait = root.find("added_tokens");
  if (ait == root.end() || ait->is_null()) return Status();
  if (!ait->is_array()) return invalid_argument(where + ": added_tokens is not an array");
  if (ait->size() > kMaxAddedTokens) {
    return invalid_argument(
        where + ": " +
        limit_message(format_count(ait->size()) + " added_tokens", kMaxAddedTokens,
                      "kMaxAddedTokens in src/tokenizer/tokenizer_limits.h",
                      "no supported model has this many added tokens; the file is corrupt"));
  }
  for (const auto& t : *ait) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string() || t["id"].get<int64_t>() < 0) {
      return invalid_argument(where + ": bad added_tokens entry " + t.dump());
    }
    const std::string& content = t["content"].get_ref<const std::string&>();
    if (content.size() > kMaxTokenBytes) {
      return invalid_argument(
          where + ": " +
          limit_message("an added token of " + format_count(content.size()) + " bytes",
                        kMaxTokenBytes, "kMaxTokenBytes in src/tokenizer/tokenizer_limits.h",
                        "the file is corrupt"));
    }
    DI_TRY(check_id(where, "added_tokens entry " + json(content).dump(), t["id"].get<int64_t>()));
    AddedToken a;
    a.id = t["id"].get<int32_t>();
    a.content = content;
    a.special = json_bool(t, "special", false);
    a.normalized = json_bool(t, "normalized", !a.special);
    a.lstrip = json_bool(t, "lstrip", false);
    a.rstrip = json_bool(t, "rstrip", false);
    a.single_word = json_bool(t, "single_word", false);
    max_id = std::max(max_id, a.id);
    added.push_back(std::move(a));
  }
  return Status();
}

// The per-id tables: flags, token texts and their bytes, and text -> id.
void build_id_tables(const detail::TokenizerJson& tj, const detail::StringIdMap& vocab,
                     const std::vector<AddedToken>& added, int32_t max_id,
                     detail::TokenizerData& d) {
  const size_t n = static_cast<size_t>(max_id) + 1;
  std::vector<std::string_view> token_of(n);
  std::vector<uint8_t> is_added(n, 0);
  for (const auto& [tok, id] : tj.vocab) {
    if (vocab.find(tok) == static_cast<int32_t>(id))
      token_of[id] = tok;  // a repeated key: the last wins
  }
  std::unordered_set<std::string_view> special_contents;
  for (const auto& a : added) {
    token_of[a.id] = a.content;
    is_added[a.id] = 1;
    if (a.special) special_contents.insert(a.content);
  }
  d.flags.assign(n, 0);
  d.token_offsets.resize(n + 1);
  d.bytes_offsets.resize(n + 1);
  std::vector<uint8_t> exists(n, 0);
  for (const auto& [tok, id] : tj.vocab) exists[id] = 1;
  for (const auto& a : added) exists[a.id] = 1;
  std::string bytes;
  for (size_t id = 0; id < n; ++id) {
    d.token_offsets[id] = static_cast<uint32_t>(d.token_arena.size());
    d.bytes_offsets[id] = static_cast<uint32_t>(d.bytes_arena.size());
    if (!exists[id]) continue;
    uint8_t f = detail::TokenizerData::kExists;
    if (special_contents.count(token_of[id])) f |= detail::TokenizerData::kSpecial;
    d.flags[id] = f;
    d.token_arena.append(token_of[id]);
    if (byte_level_to_bytes(token_of[id], bytes)) {
      d.bytes_arena.append(bytes);
    } else {
      d.bytes_arena.append(token_of[id]);
    }
  }
  d.token_offsets[n] = static_cast<uint32_t>(d.token_arena.size());
  d.bytes_offsets[n] = static_cast<uint32_t>(d.bytes_arena.size());
  d.token_ids.reserve(n * 2);
  for (size_t id = 0; id < n; ++id) {
    if (exists[id] && !is_added[id])
      d.token_ids.insert(d.token(static_cast<int32_t>(id)), static_cast<int32_t>(id));
  }
  for (const auto& a : added) d.token_ids.set(d.token(a.id), a.id);  // added tokens win, as in HF
}

// The BPE model: byte -> id, the unknown token, the merge table, ignore_merges.
Status build_bpe(const std::string& where, const json& model, const detail::TokenizerJson& tj,
                 const detail::StringIdMap& vocab, detail::TokenizerData& d) {
  const auto& map = detail::ByteLevelMap::get();
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    utf8::append_code_point(map.byte_to_cp[b], ch);
    if (int32_t id = vocab.find(ch); id >= 0) d.bpe.set_byte_id(static_cast<uint8_t>(b), id);
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    int32_t unk = vocab.find(model["unk_token"].get_ref<const std::string&>());
    if (unk >= 0) d.bpe.set_unk(unk, json_bool(model, "fuse_unk", false));
  }
  if (!tj.has_merges) return invalid_argument(where + ": model.merges is missing or not an array");
  std::vector<std::pair<uint64_t, std::pair<int32_t, int32_t>>> entries;
  entries.reserve(tj.merges.size());
  std::string joined;
  int32_t rank = 0;
  for (const auto& [first, second] : tj.merges) {
    std::string_view a = first, b = second;
    if (second.empty()) {  // the "a b" form
      size_t sp = a.find(' ');
      if (sp == std::string_view::npos || a.find(' ', sp + 1) != std::string_view::npos) {
        return invalid_argument(
            where + ": model.merges[" + std::to_string(rank) + "] " +
            (first == "\x01" ? std::string("is not a pair of two tokens")
                             : json(first).dump() + " is not two tokens separated by one space"));
      }
      b = a.substr(sp + 1);
      a = a.substr(0, sp);
    }
    joined.assign(a);
    joined.append(b);
    const int32_t ia = vocab.find(a), ib = vocab.find(b), ij = vocab.find(joined);
    if (ia < 0 || ib < 0 || ij < 0) {
      std::string_view missing = ia < 0 ? a : ib < 0 ? b : std::string_view(joined);
      return invalid_argument(where + ": model.merges[" + std::to_string(rank) + "] \"" +
                              std::string(a) + " " + std::string(b) + "\": token " +
                              json(std::string(missing)).dump() + " is not in model.vocab");
    }
    entries.push_back({MergeTable::key(ia, ib), {rank, ij}});
    ++rank;
  }
  d.bpe.merges().build(entries);
  if (json_bool(model, "ignore_merges", false)) {
    std::unordered_map<std::string, int32_t> whole;
    std::string bytes;
    for (const auto& [tok, id] : tj.vocab) {
      if (byte_level_to_bytes(tok, bytes)) whole.emplace(bytes, static_cast<int32_t>(id));
    }
    d.bpe.set_ignore_merges(std::move(whole));
  }
  return Status();
}

Expected<std::shared_ptr<detail::TokenizerData>> load(const std::string& file,
                                                      const detail::TokenizerJson& tj) {
  const json& root = tj.root;
  const std::string& where = file;
  if (!root.is_object()) return invalid_argument(where + ": the top level is not a JSON object");
  auto d = std::make_shared<detail::TokenizerData>();
  d->path = file;
  d->uid = detail::TokenizerData::next_uid();

  auto mit = root.find("model");
  if (mit == root.end() || !mit->is_object())
    return invalid_argument(where + ": no \"model\" object");
  const json& model = *mit;
  DI_TRY(check_model(where, root, model));
  DI_TRY(load_pre_tokenizer(where, root, &d->pre));
  DI_TRY(check_decoder(where, root));

  detail::StringIdMap vocab;
  int32_t max_id = -1;
  DI_TRY(read_vocab(where, tj, vocab, max_id));
  std::vector<AddedToken> added;
  DI_TRY(read_added_tokens(where, root, added, max_id));
  if (max_id < 0) return invalid_argument(where + ": the vocabulary is empty");
  build_id_tables(tj, vocab, added, max_id, *d);
  DI_TRY(build_bpe(where, model, tj, vocab, *d));
  d->added.build(std::move(added));
  return d;
}

// tokenizer.json's text -> the loaded data, BOS/EOS from `cfg` (tokenizer_config.json's
// object, or null) else well-known names. `file` names the source in errors.
Expected<std::shared_ptr<detail::TokenizerData>> load_text(std::string text,
                                                           const std::string& file,
                                                           const json& cfg) {
  detail::TokenizerJson tj;
  DI_TRY(detail::parse_tokenizer_json(text, file, tj));
  text.clear();
  text.shrink_to_fit();
  std::shared_ptr<detail::TokenizerData> d;
  try {
    DI_ASSIGN_OR_RETURN(d, load(file, tj));
  } catch (const json::exception& e) {
    return invalid_argument(file + ": unexpected tokenizer.json structure: " + e.what());
  }
  auto find = [&](std::string_view name) -> std::optional<int32_t> {
    const int32_t id = d->token_ids.find(name);
    if (id < 0) return std::nullopt;
    return id;
  };
  if (cfg.is_object()) {
    if (auto s = config_token(cfg, "bos_token")) d->bos = find(*s);
    if (auto s = config_token(cfg, "eos_token")) d->eos = find(*s);
  }
  if (!d->bos) {
    for (const char* name :
         {"<｜begin▁of▁sentence｜>", "<|begin_of_text|>", "<s>", "<|startoftext|>"}) {
      if (auto id = find(name)) {
        d->bos = id;
        break;
      }
    }
  }
  if (!d->eos) {
    for (const char* name : {"<｜end▁of▁sentence｜>", "<|end_of_text|>", "</s>", "<|endoftext|>"}) {
      if (auto id = find(name)) {
        d->eos = id;
        break;
      }
    }
  }
  return d;
}

}  // namespace

Expected<Tokenizer> Tokenizer::from_file(const std::string& path) {
  std::error_code ec;
  DI_ASSIGN_OR_RETURN(const std::string file, detail::resolve_tokenizer_path(path));
  DI_ASSIGN_OR_RETURN(std::string text, detail::read_tokenizer_file(file));
  // BOS/EOS: tokenizer_config.json beside the file, else well-known names.
  const fs::path cfg_path = fs::path(file).parent_path() / "tokenizer_config.json";
  json cfg;
  if (fs::exists(cfg_path, ec)) {
    auto cfg_text = detail::read_tokenizer_file(cfg_path.string());
    if (cfg_text.ok()) cfg = json::parse(*cfg_text, nullptr, /*allow_exceptions=*/false);
  }
  DI_ASSIGN_OR_RETURN(auto d, load_text(std::move(text), file, cfg));
  return Tokenizer(std::move(d));
}

Expected<Tokenizer> Tokenizer::from_json_text(std::string_view text, const std::string& name) {
  DI_ASSIGN_OR_RETURN(auto d, load_text(std::string(text), name, json()));
  return Tokenizer(std::move(d));
}

}  // namespace deepinfer::tokenizer
