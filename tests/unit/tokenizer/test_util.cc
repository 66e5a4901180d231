#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace deepinfer::tokenizer::testing {

std::string source_dir() {
  const char* s = std::getenv("DEEPINFER_SOURCE_DIR");
  return s ? s : ".";
}

// The package's copy (shared/tokenizers/deepseek_v4/tokenizer.json minified (the same JSON without whitespace)), so the
// tests need nothing outside the repository.
std::string v4_tokenizer_path() {
  return source_dir() + "/python/deepinfer/data/deepseek_v4/tokenizer.json";
}

const Tokenizer& v4() {
  static const Tokenizer* tok = [] {
    auto t = Tokenizer::from_file(v4_tokenizer_path());
    if (!t.ok()) {
      ADD_FAILURE() << "cannot load " << v4_tokenizer_path() << ": " << t.status().to_string();
      std::abort();
    }
    return new Tokenizer(std::move(t).value());
  }();
  return *tok;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {
struct Reader {
  const std::string& data;
  size_t pos = 0;
  uint32_t u32() {
    if (pos + 4 > data.size()) throw std::runtime_error("truncated reference file");
    uint32_t v;
    std::memcpy(&v, data.data() + pos, 4);  // little-endian hosts only (x86-64, aarch64)
    pos += 4;
    return v;
  }
  std::string bytes(size_t n) {
    if (pos + n > data.size()) throw std::runtime_error("truncated reference file");
    std::string s = data.substr(pos, n);
    pos += n;
    return s;
  }
  std::vector<int32_t> ids(size_t n) {
    std::vector<int32_t> v(n);
    if (pos + 4 * n > data.size()) throw std::runtime_error("truncated reference file");
    if (n > 0) std::memcpy(v.data(), data.data() + pos, 4 * n);  // an empty v's data() may be null
    pos += 4 * n;
    return v;
  }
};
}  // namespace

std::vector<Document> load_corpus(const std::string& suffix) {
  const std::string dir = source_dir() + "/tests/data/tokenizer/";
  const std::string corpus = read_file(dir + "corpus.bin");
  const std::string refs = read_file(dir + "reference_ids" + suffix + ".bin");
  Reader c{corpus};
  if (c.bytes(8) != "DITKCORP" || c.u32() != 1) throw std::runtime_error("bad corpus.bin");
  uint32_t n = c.u32();
  Reader r{refs};
  if (r.bytes(8) != "DITKIDS1" || r.u32() != n)
    throw std::runtime_error("reference_ids.bin does not match corpus.bin");
  std::vector<Document> docs(n);
  for (auto& d : docs) {
    d.name = c.bytes(c.u32());
    d.text = c.bytes(c.u32());
    uint32_t k = r.u32();
    if (k != 0xFFFFFFFFu) {
      d.has_ids = true;
      d.ids = r.ids(k);
    }
    uint32_t m = r.u32();
    if (m != 0xFFFFFFFFu) {
      d.has_plain = true;
      d.plain_ids = r.ids(m);
    }
  }
  return docs;
}

std::string escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace deepinfer::tokenizer::testing
