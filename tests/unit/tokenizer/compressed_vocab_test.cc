// The Engram compressed token map and the normalizer steps under it, against Hugging Face
// `tokenizers` (tests/reference/engram/make_engram_vectors.py): every code point through every
// step, tricky strings, small tokenizers, and the whole map of the real V4 tokenizer.
#include "tokenizer/compressed_vocab.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engram_test_util.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer::testing {
namespace {

using json = nlohmann::json;

NormalizerStep one(NormalizerStep::Kind kind) {
  NormalizerStep s;
  s.kind = kind;
  return s;
}

// The HF steps the reference data names, as TextNormalizers.
std::map<std::string, TextNormalizer> steps() {
  using K = NormalizerStep::Kind;
  std::map<std::string, TextNormalizer> out;
  const std::pair<const char*, K> single[] = {{"nfc", K::kNfc},
                                              {"nfd", K::kNfd},
                                              {"nfkc", K::kNfkc},
                                              {"nfkd", K::kNfkd},
                                              {"lowercase", K::kLowercase},
                                              {"strip_accents", K::kStripAccents},
                                              {"strip", K::kStrip}};
  for (const auto& [name, kind] : single) {
    out.emplace(name, TextNormalizer::make({one(kind)}).value());
  }
  out.emplace("engram", engram_normalizer());
  return out;
}

std::string show(const std::string& s) {
  return json(s).dump(-1, ' ', true, json::error_handler_t::replace);
}

// Every code point alone through every step: per block of 4096, the number of code points the
// step changes and a hash of what it makes of them, as HF does (unicode_steps.txt).
TEST(EngramNormalizer, EveryCodePointMatchesHf) {
  std::map<std::pair<std::string, int>, std::pair<int, uint64_t>> want;
  std::istringstream in(read_file(engram_data_dir() + "/unicode_steps.txt"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name;
    int block = 0, count = 0;
    uint64_t hash = 0;
    ls >> name >> block >> count >> std::hex >> hash;
    want[{name, block}] = {count, hash};
  }
  for (const auto& [name, norm] : steps()) {
    std::map<int, std::pair<int, uint64_t>> got;
    std::map<int, std::string> examples;
    for (uint32_t cp = 0; cp < 0x110000; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string c;
      utf8::append_code_point(cp, c);
      const std::string r = norm.normalize(c);
      if (r == c) continue;
      char hex[16];
      std::snprintf(hex, sizeof hex, "%X:", cp);
      auto& [count, hash] =
          got.try_emplace(static_cast<int>(cp / 4096), 0, kFnvOffset).first->second;
      ++count;
      hash = fnv1a(r + ";", fnv1a(hex, hash));
      auto& ex = examples[static_cast<int>(cp / 4096)];
      if (ex.size() < 200) ex += std::string(hex) + show(r) + " ";
    }
    for (const auto& [key, value] : want) {
      if (key.first != name) continue;
      auto it = got.find(key.second);
      EXPECT_TRUE(it != got.end() && it->second == value)
          << name << ": code points U+" << std::hex << key.second * 4096 << "..+FFF differ from HF"
          << std::dec << " (HF changes " << value.first << ", we change "
          << (it == got.end() ? 0 : it->second.first) << "; ours: " << examples[key.second] << ")";
    }
    for (const auto& [block, value] : got) {
      EXPECT_TRUE(want.count({name, block}))
          << name << ": we change code points in U+" << std::hex << block * 4096
          << "..+FFF, HF changes none: " << examples[block];
    }
  }
}

TEST(EngramNormalizer, StringsMatchHf) {
  const json cases = json::parse(read_file(engram_data_dir() + "/normalize_cases.json"))["cases"];
  const auto all = steps();
  for (const auto& c : cases) {
    const std::string input = c["input"].get<std::string>();
    for (const auto& [name, norm] : all) {
      EXPECT_EQ(norm.normalize(input), c[name].get<std::string>()) << name << " of " << show(input);
    }
  }
}

TEST(CompressedVocab, SmallTokenizersMatchHf) {
  for (const char* name : kSmallTokenizers) {
    SCOPED_TRACE(name);
    const std::string dir = engram_data_dir() + "/tokenizers/" + name;
    const json want = json::parse(read_file(dir + "/expected.json"));
    auto texts = TokenTexts::from_file(dir + "/tokenizer.json");
    ASSERT_TRUE(texts.ok()) << texts.status().to_string();
    const CompressedVocab v = build_compressed_vocab(*texts);
    EXPECT_EQ(v.count, want["count"].get<int32_t>());
    ASSERT_EQ(v.map.size(), want["map"].size());
    for (size_t id = 0; id < v.map.size(); ++id) {
      EXPECT_EQ(v.map[id], want["map"][id].get<int32_t>())
          << "id " << id << " text " << show(std::string(texts->text(static_cast<int32_t>(id))))
          << " key " << show(engram_key(*texts, static_cast<int32_t>(id)));
    }
    EXPECT_TRUE(check_compressed_vocab_size(v, *texts, want["count"].get<int64_t>()).ok());
  }
}

uint64_t hash_ids(const std::vector<int32_t>& ids, size_t begin, size_t end, uint64_t h) {
  return fnv1a(std::string_view(reinterpret_cast<const char*>(ids.data() + begin),
                                (end - begin) * sizeof(int32_t)),
               h);  // little-endian hosts, as the golden
}

std::string describe(const TokenTexts& t, const CompressedVocab& v, int32_t id) {
  return "id " + std::to_string(id) + " -> compressed " +
         std::to_string(v.map[static_cast<size_t>(id)]) + ", text " +
         show(std::string(t.text(id))) + ", key " + show(engram_key(t, id));
}

TEST(CompressedVocab, V4MapMatchesHf) {
  const V4MapGolden& g = v4_golden();
  const TokenTexts& t = v4_texts();
  const CompressedVocab v = build_compressed_vocab(t);
  EXPECT_EQ(v.count, 99092);  // the released V4.1 config's engram_compressed_vocab_size
  EXPECT_EQ(v.count, g.count);
  ASSERT_EQ(static_cast<int32_t>(v.map.size()), g.size);
  EXPECT_EQ(hash_ids(v.map, 0, v.map.size(), kFnvOffset), g.map_hash);
  for (size_t b = 0; b < g.block_map_hash.size(); ++b) {
    const size_t begin = b * kBlockIds, end = std::min(v.map.size(), begin + kBlockIds);
    EXPECT_EQ(hash_ids(v.map, begin, end, kFnvOffset), g.block_map_hash[b])
        << "the map differs in ids [" << begin << ", " << end << ")";
  }
  // Which texts are not plain ASCII, and every such token against HF: the listed ones share
  // the compressed id of the named first id, every other one opens a new compressed id.
  std::vector<int32_t> non_ascii;
  for (int32_t id = 0; id < t.size(); ++id) {
    for (unsigned char ch : t.text(id)) {
      if (ch >= 0x80) {
        non_ascii.push_back(id);
        break;
      }
    }
  }
  EXPECT_EQ(static_cast<int32_t>(non_ascii.size()), g.non_ascii);
  EXPECT_EQ(hash_ids(non_ascii, 0, non_ascii.size(), kFnvOffset), g.non_ascii_hash);
  std::map<int32_t, int32_t> reuse(g.reuse.begin(), g.reuse.end());
  int32_t seen_max = -1, failures = 0;
  size_t next = 0;
  for (int32_t id = 0; id < t.size() && failures < 10; ++id) {
    const int32_t c = v.map[static_cast<size_t>(id)];
    const bool opens = c > seen_max;
    seen_max = std::max(seen_max, c);
    if (next >= non_ascii.size() || non_ascii[next] != id) continue;
    ++next;
    auto it = reuse.find(id);
    if (it == reuse.end() && !opens) {
      ++failures;
      ADD_FAILURE() << "HF gives a new compressed id to " << describe(t, v, id) << "; we share "
                    << describe(t, v, v.first_id[static_cast<size_t>(c)]);
    } else if (it != reuse.end() && c != v.map[static_cast<size_t>(it->second)]) {
      ++failures;
      ADD_FAILURE() << "HF groups " << describe(t, v, id) << " with " << describe(t, v, it->second);
    }
  }
}

TEST(CompressedVocab, CountCheckExplainsAMismatch) {
  const TokenTexts& t = v4_texts();
  const CompressedVocab v = build_compressed_vocab(t);
  EXPECT_TRUE(check_compressed_vocab_size(v, t, 99092).ok());
  Status s = check_compressed_vocab_size(v, t, 99000);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  for (const char* part : {"99092", "99000", "tokenizer.json", "compressed 99000: id "}) {
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " not in: " << s.message();
  }
  s = check_compressed_vocab_size(v, t, 100000);
  EXPECT_NE(s.message().find("compressed 99091: id "), std::string::npos) << s.message();
}

}  // namespace
}  // namespace deepinfer::tokenizer::testing
