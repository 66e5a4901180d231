// Python json.dumps(ensure_ascii=False) compatibility: the renderer embeds this text in prompts.
// Expected strings are what CPython 3 prints for the same values.
#include "tokenizer/chat/python_json.h"

#include <gtest/gtest.h>

namespace deepinfer::chat {
namespace {

TEST(PythonJson, FloatRepr) {
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(1e-5), "1e-05");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(123456789.123), "123456789.123");
  EXPECT_EQ(python_float_repr(1.5e300), "1.5e+300");
  EXPECT_EQ(python_float_repr(5e-324), "5e-324");
  EXPECT_EQ(python_float_repr(2.5e-7), "2.5e-07");
}

TEST(PythonJson, DumpsLayoutOrderAndEscapes) {
  const auto v = OrderedJson::parse(
      R"({"z": 1, "a": [true, null, 2.50, "é\u0001\"\\\n\t"], "m": {}, "e": []})");
  EXPECT_EQ(
      python_json_dumps(v),
      "{\"z\": 1, \"a\": [true, null, 2.5, \"é\\u0001\\\"\\\\\\n\\t\"], \"m\": {}, \"e\": []}");
  EXPECT_EQ(python_json_string("\x7f/\b\f\r"), "\"\x7f/\\b\\f\\r\"");
}

}  // namespace
}  // namespace deepinfer::chat
