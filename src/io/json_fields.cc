#include "io/json_fields.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <system_error>
#include <utility>
#include <vector>

#include "base/input_limits.h"
#include "io/io_limits.h"

namespace deepinfer::io {

using nlohmann::json;

namespace {

// Whether `value` nests arrays and objects more than `cap` levels deep; iterative, so that
// asking about a deep document cannot itself overflow the stack.
bool deeper_than(const json& value, size_t cap) {
  std::vector<std::pair<const json*, size_t>> stack{{&value, 0}};
  while (!stack.empty()) {
    auto [v, depth] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    if (depth + 1 > cap) return true;
    for (const json& child : *v) stack.push_back({&child, depth + 1});
  }
  return false;
}

}  // namespace

std::string json_brief(const json& value) {
  // dump() recurses: a value nested deeper than a message needs is summarised instead.
  if (deeper_than(value, 16)) {
    return value.is_array() ? "[...] (nested more than 16 levels)"
                            : "{...} (nested more than 16 levels)";
  }
  std::string s = value.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

Expected<std::string> read_checkpoint_json(const std::string& path, uint64_t max_bytes,
                                           const char* max_bytes_name) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return failed_precondition("cannot read " + path + ": " + ec.message());
  if (size > max_bytes) {
    return invalid_argument(
        path + ": " +
        limit_message("a file of " + format_count(size) + " bytes", max_bytes,
                      std::string(max_bytes_name) + " in src/io/io_limits.h",
                      "this is not the small JSON file a checkpoint holds; check the path"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return failed_precondition("cannot read " + path);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  DI_TRY(check_checkpoint_json(text, path));
  return text;
}

Status check_checkpoint_json(std::string_view text, const std::string& source) {
  return check_json_depth(text, kMaxCheckpointJsonDepth, source,
                          "kMaxCheckpointJsonDepth in src/io/io_limits.h",
                          "checkpoint JSON files nest a few levels; the file is corrupt");
}

Expected<std::string> read_config_json(const std::string& path) {
  return read_checkpoint_json(path, kMaxConfigBytes, "kMaxConfigBytes");
}

const char* json_type_name(const json& value) {
  if (value.is_boolean()) return "a boolean";
  if (value.is_number_integer()) return "an integer";
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return "null";
}

bool JsonFields::has(std::string_view key) const { return get(key) != nullptr; }

const json* JsonFields::get(std::string_view key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

const char* JsonFields::first_present(std::initializer_list<const char*> keys) const {
  for (const char* k : keys) {
    if (has(k)) return k;
  }
  return nullptr;
}

Status JsonFields::missing(const char* key, std::string_view what) const {
  std::string m = source_ + ": missing required field '" + field(key) + "'";
  if (!what.empty()) m += " (" + std::string(what) + ")";
  return invalid_argument(m);
}

Status JsonFields::wrong_type(std::string_view key, std::string_view expected,
                              const json& found) const {
  return invalid_argument(source_ + ": field '" + field(key) + "' must be " +
                          std::string(expected) + ", found " + json_type_name(found) + " " +
                          json_brief(found));
}

Status JsonFields::invalid(std::string_view key, const std::string& message) const {
  return invalid_argument(source_ + ": field '" + field(key) + "' " + message);
}

Status JsonFields::integer(const char* key, int64_t& out, bool required) const {
  const json* v = get(key);
  if (v == nullptr) return required ? missing(key) : Status::ok_status();
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return invalid(key, "is out of range: " + json_brief(*v));
    }
    out = v->get<int64_t>();
    return Status::ok_status();
  }
  // 4096.0 is accepted as 4096; 4096.5 is not.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      out = static_cast<int64_t>(d);
      return Status::ok_status();
    }
  }
  return wrong_type(key, "an integer", *v);
}

Status JsonFields::integer(const char* key, int& out, bool required) const {
  int64_t wide = out;
  DI_TRY(integer(key, wide, required));
  if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
    return invalid(key, "is out of range: " + std::to_string(wide));
  }
  out = static_cast<int>(wide);
  return Status::ok_status();
}

Status JsonFields::number(const char* key, double& out, bool required) const {
  const json* v = get(key);
  if (v == nullptr) return required ? missing(key) : Status::ok_status();
  if (!v->is_number()) return wrong_type(key, "a number", *v);
  out = v->get<double>();
  return Status::ok_status();
}

Status JsonFields::boolean(const char* key, bool& out, bool required) const {
  const json* v = get(key);
  if (v == nullptr) return required ? missing(key) : Status::ok_status();
  if (!v->is_boolean()) return wrong_type(key, "true or false", *v);
  out = v->get<bool>();
  return Status::ok_status();
}

Status JsonFields::string(const char* key, std::string& out, bool required) const {
  const json* v = get(key);
  if (v == nullptr) return required ? missing(key) : Status::ok_status();
  if (!v->is_string()) return wrong_type(key, "a string", *v);
  out = v->get<std::string>();
  return Status::ok_status();
}

namespace {

template <typename T>
Status read_int_list(const JsonFields& f, const char* key, std::vector<T>& out, int64_t lo,
                     int64_t hi) {
  const json* v = f.get(key);
  if (v == nullptr) return Status::ok_status();
  if (!v->is_array()) return f.wrong_type(key, "an array of integers", *v);
  std::vector<T> list;
  list.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_number_integer() || e.get<int64_t>() < lo || e.get<int64_t>() > hi) {
      return f.invalid(key, "entry " + std::to_string(i) + " must be an integer in [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "], found " +
                                json_brief(e));
    }
    list.push_back(static_cast<T>(e.get<int64_t>()));
  }
  out = std::move(list);
  return Status::ok_status();
}

}  // namespace

Status JsonFields::int_list(const char* key, std::vector<int>& out, int64_t lo, int64_t hi) const {
  return read_int_list(*this, key, out, lo, hi);
}

Status JsonFields::int_list(const char* key, std::vector<int64_t>& out, int64_t lo,
                            int64_t hi) const {
  return read_int_list(*this, key, out, lo, hi);
}

}  // namespace deepinfer::io
