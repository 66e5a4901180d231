// Python-compatible JSON serialisation (see python_json.h for why it exists).
#include "tokenizer/chat/python_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace deepinfer::chat {
namespace {

void append_escaped(std::string& out, std::string_view text) {
  out.push_back('"');
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", u);
          out += buf;
        } else {
          out.push_back(c);  // ensure_ascii=False: UTF-8 passes through unchanged
        }
    }
  }
  out.push_back('"');
}

void append_value(std::string& out, const OrderedJson& v) {
  switch (v.type()) {
    case OrderedJson::value_t::null:
      out += "null";
      break;
    case OrderedJson::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      break;
    case OrderedJson::value_t::number_integer:
      out += std::to_string(v.get<std::int64_t>());
      break;
    case OrderedJson::value_t::number_unsigned:
      out += std::to_string(v.get<std::uint64_t>());
      break;
    case OrderedJson::value_t::number_float:
      out += python_float_repr(v.get<double>());
      break;
    case OrderedJson::value_t::string:
      append_escaped(out, v.get_ref<const std::string&>());
      break;
    case OrderedJson::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ", ";
        first = false;
        append_value(out, item);
      }
      out.push_back(']');
      break;
    }
    case OrderedJson::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ", ";
        first = false;
        append_escaped(out, key);
        out += ": ";
        append_value(out, item);
      }
      out.push_back('}');
      break;
    }
    case OrderedJson::value_t::binary:
    case OrderedJson::value_t::discarded:
      out += "null";
      break;
  }
}

}  // namespace

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  // Shortest round-trip digits in scientific form, "d.ddde+XX", then Python's layout rule
  // (float_repr_style "short"): fixed notation when -4 < decpt <= 16, else exponent.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  std::size_t pos = 0;
  if (sci[0] == '-') {
    out.push_back('-');
    pos = 1;
  }
  const std::size_t e_pos = sci.find('e');
  std::string digits;
  for (std::size_t i = pos; i < e_pos; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int exp10 = std::atoi(sci.c_str() + e_pos + 1);
  const int decpt = exp10 + 1;  // value = 0.<digits> * 10^decpt
  const int ndigits = static_cast<int>(digits.size());
  // Built with append() only: GCC 12's -Wrestrict misfires on chained std::string operator+.
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out.append("0.");
      out.append(static_cast<std::size_t>(-decpt), '0');
      out.append(digits);
    } else if (decpt >= ndigits) {
      out.append(digits);
      out.append(static_cast<std::size_t>(decpt - ndigits), '0');
      out.append(".0");
    } else {
      out.append(digits, 0, static_cast<std::size_t>(decpt));
      out.push_back('.');
      out.append(digits, static_cast<std::size_t>(decpt), std::string::npos);
    }
  } else {
    out.push_back(digits[0]);
    if (ndigits > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    const int e = decpt - 1;
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", e < 0 ? '-' : '+', std::abs(e));
    out.append(ebuf);
  }
  return out;
}

std::string python_json_dumps(const OrderedJson& value) {
  std::string out;
  append_value(out, value);
  return out;
}

std::string python_json_string(std::string_view text) {
  std::string out;
  append_escaped(out, text);
  return out;
}

}  // namespace deepinfer::chat
