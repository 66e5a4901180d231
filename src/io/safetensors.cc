#include "io/safetensors.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/input_limits.h"
#include "io/json_fields.h"

namespace deepinfer::io {
namespace {

using nlohmann::json;

std::string known_dtypes() {
  std::string out;
  for (DType t :
       {DType::kBF16, DType::kF16, DType::kF32, DType::kF64, DType::kF8E4M3, DType::kF8E8M0,
        DType::kI8, DType::kU8, DType::kI16, DType::kI32, DType::kI64, DType::kBool}) {
    if (!out.empty()) out += ", ";
    out += dtype_name(t);
  }
  return out;
}

std::string brief(const json& v) { return json_brief(v); }

Status entry_error(const std::string& label, const std::string& name, const std::string& what) {
  return data_loss(label + ": tensor '" + name + "': " + what);
}

Expected<SafetensorsEntry> parse_entry(const std::string& label, const std::string& name,
                                       const json& value, uint64_t data_size,
                                       const SafetensorsLimits& limits) {
  if (name.size() > limits.max_name_bytes) {
    return data_loss(label + ": tensor '" + name.substr(0, 40) + "...': " +
                     limit_message("a name of " + format_count(name.size()) + " bytes",
                                   limits.max_name_bytes,
                                   "kMaxTensorNameBytes in src/io/io_limits.h",
                                   "the header is corrupt or not from a model checkpoint"));
  }
  if (!value.is_object()) {
    return entry_error(
        label, name,
        "header entry must be an object with dtype, shape and data_offsets, found " + brief(value));
  }
  SafetensorsEntry e;
  e.name = name;
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(key)) return entry_error(label, name, std::string("missing '") + key + "'");
  }
  const json& dtype = value["dtype"];
  if (!dtype.is_string()) {
    return entry_error(label, name, "'dtype' must be a string, found " + brief(dtype));
  }
  const auto parsed = dtype_from_safetensors(dtype.get_ref<const std::string&>());
  if (!parsed) {
    return entry_error(label, name,
                       "unknown dtype " + brief(dtype) + " (known: " + known_dtypes() + ")");
  }
  e.dtype = *parsed;

  const json& shape = value["shape"];
  if (!shape.is_array()) {
    return entry_error(label, name, "'shape' must be an array of integers, found " + brief(shape));
  }
  if (shape.size() > limits.max_rank) {
    return entry_error(label, name,
                       limit_message("a shape of rank " + format_count(shape.size()),
                                     limits.max_rank, "kMaxTensorRank in src/io/io_limits.h",
                                     "the header is corrupt or not from a model checkpoint"));
  }
  uint64_t numel = 1;
  bool overflow = false;
  for (const json& d : shape) {
    if (!d.is_number_integer()) {
      return entry_error(label, name,
                         "'shape' must hold non-negative integers, found " + brief(shape));
    }
    if (d.is_number_unsigned() ? false : d.get<int64_t>() < 0) {
      return entry_error(label, name, "'shape' has a negative dimension: " + brief(shape));
    }
    const uint64_t dim = d.get<uint64_t>();
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return entry_error(label, name, "'shape' dimension too large: " + brief(shape));
    }
    e.shape.push_back(static_cast<int64_t>(dim));
    if (__builtin_mul_overflow(numel, dim, &numel)) overflow = true;
  }

  const json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return entry_error(
        label, name,
        "'data_offsets' must be [begin, end] with non-negative integers, found " + brief(offsets));
  }
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.end < e.begin) {
    return entry_error(label, name,
                       "data_offsets end " + std::to_string(e.end) + " is before begin " +
                           std::to_string(e.begin));
  }
  if (e.end > data_size) {
    return entry_error(label, name,
                       "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                           "] run past the end of the data section (" + std::to_string(data_size) +
                           " bytes); the file is truncated or the header is corrupt");
  }
  uint64_t expected = 0;
  if (overflow ||
      __builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(e.dtype)), &expected)) {
    return entry_error(label, name, "shape " + brief(shape) + " is too large");
  }
  if (expected != e.nbytes()) {
    return entry_error(label, name,
                       "byte size " + std::to_string(e.nbytes()) + " does not match shape " +
                           shape_to_string(e.shape) + " x " + std::string(dtype_name(e.dtype)) +
                           " (" + std::to_string(expected) + " bytes)");
  }
  return e;
}

}  // namespace

Expected<SafetensorsHeader> parse_safetensors(const uint8_t* bytes, size_t size,
                                              const std::string& label,
                                              const SafetensorsLimits& limits) {
  if (size < 8) {
    return data_loss(label + ": file is " + std::to_string(size) +
                     " bytes, shorter than the 8-byte safetensors header length; not a "
                     "safetensors file or truncated");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > limits.max_header_bytes) {
    return data_loss(label + ": header length " +
                     limit_message(format_count(header_len) + " bytes", limits.max_header_bytes,
                                   "kMaxSafetensorsHeaderBytes in src/io/io_limits.h",
                                   "the length is absurd: not a safetensors file, or corrupt"));
  }
  if (header_len > size - 8) {
    return data_loss(label + ": header length " + std::to_string(header_len) +
                     " is larger than the rest of the file (" + std::to_string(size - 8) +
                     " bytes); the file is truncated");
  }
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  DI_TRY(check_json_depth(std::string_view(text, header_len), limits.max_json_depth,
                          label + ": header", "kMaxCheckpointJsonDepth in src/io/io_limits.h",
                          "a safetensors header nests 3 levels; the file is corrupt",
                          StatusCode::kDataLoss));
  json header;
  try {
    header = json::parse(text, text + header_len);
  } catch (const json::exception& e) {
    return data_loss(label + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) {
    return data_loss(label + ": header must be a JSON object, found " + brief(header));
  }
  const size_t tensor_count = header.size() - (header.contains("__metadata__") ? 1 : 0);
  if (tensor_count > limits.max_tensors) {
    return data_loss(label + ": " +
                     limit_message(format_count(tensor_count) + " tensors", limits.max_tensors,
                                   "kMaxTensorsPerFile in src/io/io_limits.h",
                                   "split the tensors over more shards"));
  }

  SafetensorsHeader out;
  out.data_offset = 8 + header_len;
  const uint64_t data_size = size - out.data_offset;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) {
        return data_loss(label + ": '__metadata__' must be an object of strings, found " +
                         brief(value));
      }
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          return data_loss(label + ": '__metadata__' value for '" + mk +
                           "' must be a string, found " + brief(mv));
        }
        out.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    auto entry = parse_entry(label, key, value, data_size, limits);
    if (!entry.ok()) return entry.status();
    out.entries.push_back(std::move(entry).value());
  }

  std::sort(out.entries.begin(), out.entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const SafetensorsEntry* prev = nullptr;
  for (const auto& e : out.entries) {
    if (e.nbytes() == 0) continue;  // empty tensors occupy no bytes
    if (prev != nullptr && e.begin < prev->end) {
      return data_loss(label + ": tensors '" + prev->name + "' [" + std::to_string(prev->begin) +
                       ", " + std::to_string(prev->end) + ") and '" + e.name + "' [" +
                       std::to_string(e.begin) + ", " + std::to_string(e.end) +
                       ") overlap in the data section");
    }
    prev = &e;
  }
  return out;
}

SafetensorsFile::SafetensorsFile(MappedFile file, SafetensorsHeader header)
    : file_(std::move(file)), header_(std::move(header)) {
  index_.reserve(header_.entries.size());
  for (size_t i = 0; i < header_.entries.size(); ++i) index_.emplace(header_.entries[i].name, i);
}

Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped.ok()) return mapped.status();
  auto header = parse_safetensors(mapped->data(), mapped->size(), path);
  if (!header.ok()) return header.status();
  return std::unique_ptr<SafetensorsFile>(
      new SafetensorsFile(std::move(mapped).value(), std::move(header).value()));
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.entries[it->second];
}

TensorView SafetensorsFile::view(const SafetensorsEntry& entry) const {
  const uint8_t* base = file_.data() + header_.data_offset + entry.begin;
  return TensorView::make(entry.dtype, entry.shape, base);
}

}  // namespace deepinfer::io
