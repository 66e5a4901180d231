// deepinfer._core.Tokenizer and IncrementalDetokenizer (re-exported by deepinfer.tokenizer).
// Errors from from_file become FileNotFoundError (missing file) or ValueError (anything else),
// with the C++ message. encode() releases the GIL for long texts.
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string_view>
#include <vector>

#include "bindings.h"
#include "deepinfer/tokenizer.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace deepinfer::python {
namespace {

constexpr size_t kReleaseGilBytes =
    4096;  // below this, the GIL round trip costs more than it frees

[[noreturn]] void raise_status(const Status& s) {
  PyErr_SetString(s.code() == StatusCode::kNotFound ? PyExc_FileNotFoundError : PyExc_ValueError,
                  s.message().c_str());
  throw nb::python_error();
}

// The UTF-8 bytes of a str (strict: lone surrogates raise UnicodeEncodeError) or of bytes.
std::string_view text_bytes(nb::handle text) {
  if (PyUnicode_Check(text.ptr())) {
    Py_ssize_t n = 0;
    const char* p = PyUnicode_AsUTF8AndSize(text.ptr(), &n);
    if (!p) throw nb::python_error();
    return {p, static_cast<size_t>(n)};
  }
  if (PyBytes_Check(text.ptr())) {
    return {PyBytes_AS_STRING(text.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(text.ptr()))};
  }
  throw nb::type_error("encode() expects str or bytes");
}

nb::str to_str(const std::string& s) {
  // Our decoders only produce well-formed UTF-8.
  return nb::steal<nb::str>(
      PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "strict"));
}

}  // namespace

void bind_tokenizer(nb::module_& m) {
  nb::class_<Tokenizer>(m, "Tokenizer",
                        "Byte-level BPE tokenizer that reproduces Hugging Face `tokenizers` ids "
                        "(DeepSeek-V4 tokenizer.json).")
      .def_static(
          "from_file",
          [](const std::filesystem::path& path) {
            auto t = Tokenizer::from_file(path.string());
            if (!t.ok()) raise_status(t.status());
            return std::move(t).value();
          },
          "path"_a, "Loads a tokenizer.json, or the tokenizer.json of a model directory.")
      .def(
          "encode",
          [](const Tokenizer& self, nb::handle text, bool allow_special) {
            std::string_view bytes = text_bytes(text);
            std::vector<int32_t> ids;
            if (bytes.size() >= kReleaseGilBytes) {
              nb::gil_scoped_release release;  // str/bytes are immutable; `text` stays referenced
              ids = self.encode(bytes, allow_special);
            } else {
              ids = self.encode(bytes, allow_special);
            }
            return ids;
          },
          "text"_a, "allow_special"_a = true,
          "Text (str, or bytes: invalid UTF-8 becomes U+FFFD) -> ids. allow_special=False encodes "
          "special tokens as plain text.")
      .def(
          "decode",
          [](const Tokenizer& self, const std::vector<int32_t>& ids, bool skip_special_tokens) {
            return to_str(self.decode(ids, skip_special_tokens));
          },
          "ids"_a, "skip_special_tokens"_a = false, "Ids -> text (unknown ids are skipped).")
      .def_prop_ro("vocab_size", &Tokenizer::vocab_size)
      .def_prop_ro("bos_id", &Tokenizer::bos_id)
      .def_prop_ro("eos_id", &Tokenizer::eos_id)
      .def_prop_ro("path", &Tokenizer::path)
      .def(
          "token_to_id",
          [](const Tokenizer& self, const std::string& token) { return self.token_to_id(token); },
          "token"_a)
      .def("id_to_token", &Tokenizer::id_to_token, "id"_a)
      .def("is_special", &Tokenizer::is_special, "id"_a)
      .def(
          "pieces",
          [](const Tokenizer& self, nb::handle text, bool allow_special) {
            return self.pieces(text_bytes(text), allow_special);
          },
          "text"_a, "allow_special"_a = true, "The pre-tokenized pieces (for debugging).");

  nb::class_<IncrementalDetokenizer>(
      m, "IncrementalDetokenizer",
      "Streaming decode: add() one id at a time, get text deltas that "
      "never split a character; flush() returns the rest.")
      .def(nb::init<const Tokenizer&, bool>(), "tokenizer"_a, "skip_special_tokens"_a = false)
      .def(
          "add", [](IncrementalDetokenizer& self, int32_t id) { return to_str(self.add(id)); },
          "id"_a)
      .def("flush", [](IncrementalDetokenizer& self) { return to_str(self.flush()); })
      .def_prop_ro("pending_bytes", &IncrementalDetokenizer::pending_bytes);
}

}  // namespace deepinfer::python
