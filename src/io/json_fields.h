// JsonFields: typed reads of one JSON object's fields with messages that name the file and the
// field ("config.json: field 'hidden_size' must be an integer, found \"4k\""). JSON null counts
// as absent. Internal to src/io.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace deepinfer::io {

class JsonFields {
 public:
  // `prefix` is prepended to field names in messages ("quantization_config.").
  JsonFields(const nlohmann::json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  bool has(std::string_view key) const;
  const nlohmann::json* get(std::string_view key) const;  // nullptr when absent or null
  // The first of `keys` that is present, or nullptr.
  const char* first_present(std::initializer_list<const char*> keys) const;

  // Each reads `key` into `out`; absent keeps `out` (the default) unless `required`.
  Status integer(const char* key, int64_t& out, bool required = false) const;
  Status integer(const char* key, int& out, bool required = false) const;
  Status number(const char* key, double& out, bool required = false) const;
  Status boolean(const char* key, bool& out, bool required = false) const;
  Status string(const char* key, std::string& out, bool required = false) const;
  // An array of integers in [lo, hi] (layer ids, row counts); absent keeps `out`.
  Status int_list(const char* key, std::vector<int>& out, int64_t lo, int64_t hi) const;
  Status int_list(const char* key, std::vector<int64_t>& out, int64_t lo, int64_t hi) const;

  Status missing(const char* key, std::string_view what = {}) const;
  Status wrong_type(std::string_view key, std::string_view expected,
                    const nlohmann::json& found) const;
  Status invalid(std::string_view key, const std::string& message) const;
  std::string field(std::string_view key) const { return prefix_ + std::string(key); }
  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& object_;
  std::string source_;
  std::string prefix_;
};

// A short rendering of a JSON value for messages (a deeply nested one is summarised, not
// dumped: dump() recurses).
std::string json_brief(const nlohmann::json& value);

// Reads a checkpoint's JSON file (model.safetensors.index.json, config.json) of at most
// `max_bytes` (whose constant in io_limits.h is `max_bytes_name`), checked with
// check_checkpoint_json. The size is checked before anything is read.
Expected<std::string> read_checkpoint_json(const std::string& path, uint64_t max_bytes,
                                           const char* max_bytes_name);
// InvalidArgument when the text nests deeper than kMaxCheckpointJsonDepth.
Status check_checkpoint_json(std::string_view text, const std::string& source);
// config.json: read_checkpoint_json with kMaxConfigBytes. parse_model_config's text should
// pass check_checkpoint_json first.
Expected<std::string> read_config_json(const std::string& path);
const char* json_type_name(const nlohmann::json& value);

}  // namespace deepinfer::io
