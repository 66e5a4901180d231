#include "safetensors_writer.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "tensor/dtype.h"

namespace deepinfer::io::testing {

using nlohmann::json;

std::vector<uint8_t> raw_file(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out;
  out.reserve(8 + header.size() + data_bytes);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  for (char ch : header) out.push_back(static_cast<uint8_t>(ch));
  out.resize(out.size() + data_bytes, 0);
  return out;
}

std::vector<uint8_t> safetensors_bytes(const std::vector<RawTensor>& unsorted,
                                       const json& metadata) {
  std::vector<const RawTensor*> tensors;
  for (const auto& t : unsorted) tensors.push_back(&t);
  auto size_of = [](const RawTensor* t) {
    const auto d = dtype_from_safetensors(t->dtype);
    return d ? dtype_size(*d) : 1;
  };
  std::stable_sort(tensors.begin(), tensors.end(), [&](const RawTensor* a, const RawTensor* b) {
    return size_of(a) > size_of(b);
  });
  json header = json::object();
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const RawTensor* t : tensors) {
    header[t->name] = {{"dtype", t->dtype},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  std::vector<uint8_t> out = raw_file(text, 0);
  out.reserve(out.size() + offset);
  for (const RawTensor* t : tensors) out.insert(out.end(), t->bytes.begin(), t->bytes.end());
  return out;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
}

void write_text(const std::string& path, const std::string& text) {
  write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
}

void write_safetensors(const std::string& path, const std::vector<RawTensor>& tensors,
                       const json& metadata) {
  write_file(path, safetensors_bytes(tensors, metadata));
}

}  // namespace deepinfer::io::testing
