// Fuzz target: what a client sends the server. The first byte picks the form, the rest is it:
//   0: the JSON body of POST /v1/chat/completions   (parse_chat_request)
//   1: the JSON body of POST /v1/completions        (parse_completion_request)
//   2: the JSON body of POST /v1/messages           (parse_messages_request)
//   3: raw HTTP/1.1 bytes through Boost.Beast's request parser, configured as http_server.cc
//      configures it (body and header limits; smaller ones here, so that inputs of fuzzer size
//      reach them), whose body, when the request is complete, goes to the parser its target
//      routes to, as HttpSession::handle does.
// The parsers run against the committed tiny model (models/default: its tokenizer encodes the
// prompts, its limits bound them). A request must parse or throw: ApiError, or another
// std::exception, which the server also answers with 400 (http_server.cc). Anything else
// escaping, or a crash, is a finding.
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "api.h"
#include "deepinfer/engine_loop.h"

namespace {

using deepinfer::server::ApiContext;

const ApiContext& context() {
  // Created once and kept for the process (a fuzzer runs millions of inputs against it).
  static const ApiContext ctx = [] {
    deepinfer::EngineOptions o;
    o.model_dir = DEEPINFER_FUZZ_MODEL_DIR;
    o.num_threads = 1;
    o.max_model_len = 1024;
    auto loop = deepinfer::EngineLoop::create(o);
    if (!loop.ok()) {
      std::fprintf(stderr, "http_request fuzz: cannot load %s: %s\n", DEEPINFER_FUZZ_MODEL_DIR,
                   loop.status().message().c_str());
      std::abort();
    }
    ApiContext c;
    c.loop = loop->release();
    c.model_names = {"default"};
    return c;
  }();
  return ctx;
}

void parse_body(int kind, const std::string& body) {
  try {
    if (kind == 0) (void)deepinfer::server::parse_chat_request(body, context());
    if (kind == 1) (void)deepinfer::server::parse_completion_request(body, context());
    if (kind == 2) (void)deepinfer::server::parse_messages_request(body, context());
  } catch (const std::exception&) {  // ApiError or a JSON type error: a 400 answer
  }
}

void parse_http(std::string_view bytes) {
  namespace http = boost::beast::http;
  http::request_parser<http::string_body> parser;
  parser.body_limit(2048);
  parser.header_limit(1024);
  parser.eager(true);
  boost::beast::error_code ec;
  while (!bytes.empty() && !parser.is_done()) {
    const size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
    if (ec == http::error::need_more) {
      ec = {};
      break;  // the rest is an incomplete piece: what a socket read would wait on
    }
    if (ec || used == 0) break;
    bytes.remove_prefix(used);
  }
  if (!ec && !parser.is_done()) parser.put_eof(ec);
  if (ec || !parser.is_done()) return;  // the server answers 400/413/431 and closes
  const auto& req = parser.get();
  std::string target(req.target());
  if (const size_t q = target.find('?'); q != std::string::npos) target.resize(q);
  if (target == "/v1/chat/completions") parse_body(0, req.body());
  if (target == "/v1/completions") parse_body(1, req.body());
  if (target == "/v1/messages") parse_body(2, req.body());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int kind = data[0] % 4;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (kind < 3) {
    parse_body(kind, rest);
  } else {
    parse_http(rest);
  }
  return 0;
}
