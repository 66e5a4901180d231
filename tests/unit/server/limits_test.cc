// The server's request limits (tools/server/request_limits.h and ServerOptions, docs/limits.md):
// a request just over each limit is refused with a message naming the limit, the value found and
// the fix; one at the limit is accepted. The body and header sizes go through a real server on
// an ephemeral port (raw sockets), the rest through the request parser.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "api.h"
#include "base/input_limits.h"
#include "deepinfer/engine_loop.h"
#include "request_limits.h"
#include "server.h"

namespace deepinfer::server {
namespace {

using ::testing::HasSubstr;

const std::string kModel = std::string(DEEPINFER_TEST_SOURCE_DIR) + "/models/v4-small";

class ServerLimits : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o;
    o.model_dir = kModel;
    o.num_threads = 1;
    o.max_model_len = 1024;
    auto l = EngineLoop::create(o);
    ASSERT_TRUE(l.ok()) << l.status().message();
    loop_ = l->release();
  }
  static void TearDownTestSuite() {
    loop_->shutdown(true);
    delete loop_;
  }
  static ApiContext ctx() {
    ApiContext c;
    c.loop = loop_;
    c.model_names = {"default"};
    return c;
  }
  // The error parse_chat_request (or parse_completion_request) throws for `body`, or a 0 status.
  static ApiError error_of(const std::string& body, bool completion = false) {
    try {
      if (completion) {
        parse_completion_request(body, ctx());
      } else {
        parse_chat_request(body, ctx());
      }
    } catch (const ApiError& e) {
      return e;
    }
    return ApiError(0, "", "");
  }
  static EngineLoop* loop_;
};
EngineLoop* ServerLimits::loop_ = nullptr;

const std::string kMessages = R"("messages": [{"role": "user", "content": "hi"}])";

std::string chat_with(const std::string& fields) { return "{" + kMessages + ", " + fields + "}"; }

// Sends `request` to 127.0.0.1:port and returns what comes back until the server closes.
std::string http_exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer and close before reading everything
    sent += static_cast<size_t>(n);
  }
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;)
    reply.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return reply;
}

std::string post(const std::string& body, const std::string& extra_headers = "") {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra_headers +
         "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

TEST_F(ServerLimits, BodyAndHeaderSize) {
  ServerOptions o;
  o.port = 0;
  o.io_threads = 1;
  o.max_body_bytes = 2048;
  o.max_header_bytes = 2048;
  auto server = Server::start(*loop_, o);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const int port = (*server)->port();

  const std::string small = R"({"prompt": "hi", "max_tokens": 1})";
  EXPECT_THAT(http_exchange(port, post(small)), HasSubstr("HTTP/1.1 200"));

  const std::string big = R"({"prompt": ")" + std::string(3000, 'x') + R"(", "max_tokens": 1})";
  const std::string over = http_exchange(port, post(big));
  EXPECT_THAT(over, HasSubstr("HTTP/1.1 413"));
  EXPECT_THAT(over, HasSubstr("the request body: " + format_count(big.size()) +
                              " bytes exceeds the limit of 2,048 (bytes: --max-body-bytes); send a "
                              "smaller body, or start the server with a larger --max-body-bytes"));

  const std::string headers =
      http_exchange(port, post(small, "X-Pad: " + std::string(3000, 'p') + "\r\n"));
  EXPECT_THAT(headers, HasSubstr("HTTP/1.1 431"));
  EXPECT_THAT(headers, HasSubstr("the request headers: their size exceeds the limit of 2,048 "
                                 "(bytes: ServerOptions::max_header_bytes)"));
  (*server)->stop();
}

TEST_F(ServerLimits, JsonDepth) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const ApiError e = error_of(chat_with(R"("x": )" + deep));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(std::string(e.what()),
            "the request body's JSON nesting depth 100,001 exceeds the limit of 512 "
            "(kMaxRequestJsonDepth in tools/server/request_limits.h); nest the request less "
            "deeply");
  const std::string ok_deep = std::string(400, '[') + std::string(400, ']');
  EXPECT_EQ(error_of(chat_with(R"("x": )" + ok_deep)).status, 0);
}

TEST_F(ServerLimits, ChoicesN) {
  EXPECT_EQ(error_of(chat_with(R"("n": 128)")).status, 0);
  const ApiError e = error_of(chat_with(R"("n": 129)"));
  EXPECT_EQ(e.param, "n");
  EXPECT_EQ(std::string(e.what()),
            "'n' = 129 exceeds the limit of 128 (kMaxN in tools/server/request_limits.h); send "
            "several requests instead");
}

TEST_F(ServerLimits, Prompts) {
  auto prompts = [](size_t n) {
    std::string s = R"({"max_tokens": 1, "prompt": [)";
    for (size_t i = 0; i < n; ++i) s += i ? R"(, "a")" : R"("a")";
    return s + "]}";
  };
  EXPECT_EQ(error_of(prompts(kMaxPrompts), true).status, 0);
  const ApiError e = error_of(prompts(kMaxPrompts + 1), true);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_THAT(std::string(e.what()),
              HasSubstr("257 prompts exceeds the limit of 256 (kMaxPrompts in "
                        "tools/server/request_limits.h)"));
}

TEST_F(ServerLimits, StopStrings) {
  auto stops = [](size_t n) {
    std::string s = R"("stop": [)";
    for (size_t i = 0; i < n; ++i) {
      s += i ? ", \"s" : "\"s";
      s += std::to_string(i);
      s += '"';
    }
    return s + "]";
  };
  EXPECT_EQ(error_of(chat_with(stops(kMaxStopStrings))).status, 0);
  const ApiError count = error_of(chat_with(stops(kMaxStopStrings + 1)));
  EXPECT_EQ(count.param, "stop");
  EXPECT_EQ(std::string(count.what()),
            "65 stop strings in 'stop' exceeds the limit of 64 (kMaxStopStrings in "
            "tools/server/request_limits.h); pass fewer stop strings");
  const std::string at(kMaxStopStringBytes, 's');
  EXPECT_EQ(error_of(chat_with(R"("stop": ")" + at + "\"")).status, 0);
  const ApiError length = error_of(chat_with(R"("stop": ")" + at + "s\""));
  EXPECT_THAT(std::string(length.what()),
              HasSubstr("a stop string of 1,025 bytes in 'stop' exceeds the limit of 1,024 "
                        "(kMaxStopStringBytes"));
}

TEST_F(ServerLimits, StopTokenIds) {
  auto ids = [](size_t n) {
    std::string s = R"("stop_token_ids": [)";
    for (size_t i = 0; i < n; ++i) s += i ? ", 1" : "1";
    return s + "]";
  };
  EXPECT_EQ(error_of(chat_with(ids(kMaxStopTokenIds))).status, 0);
  const ApiError e = error_of(chat_with(ids(kMaxStopTokenIds + 1)));
  EXPECT_EQ(e.param, "stop_token_ids");
  EXPECT_THAT(std::string(e.what()),
              HasSubstr("1,025 stop token ids exceeds the limit of 1,024 (kMaxStopTokenIds"));
}

// The sampling parameters' own limits (include/deepinfer/sampling_params.h), checked by the
// parser before it keeps anything; an id past int32 is refused, not wrapped.
TEST_F(ServerLimits, LogitBiasAndAllowedTokenIds) {
  auto bias = [](size_t n) {
    std::string s = R"("logit_bias": {)";
    for (size_t i = 0; i < n; ++i) s += (i ? ", \"" : "\"") + std::to_string(i) + "\": 1";
    return s + "}";
  };
  EXPECT_EQ(error_of(chat_with(bias(SamplingParams::kMaxLogitBias))).status, 0);
  const ApiError b = error_of(chat_with(bias(SamplingParams::kMaxLogitBias + 1)));
  EXPECT_EQ(b.param, "logit_bias");
  EXPECT_THAT(std::string(b.what()),
              HasSubstr("4,097 entries in 'logit_bias' exceeds the limit of 4,096 "
                        "(SamplingParams::kMaxLogitBias in include/deepinfer/sampling_params.h)"));
  auto ids = [](size_t n) {
    std::string s = R"("allowed_token_ids": [)";
    for (size_t i = 0; i < n; ++i) s += i ? ", 1" : "1";
    return s + "]";
  };
  EXPECT_EQ(error_of(chat_with(ids(SamplingParams::kMaxAllowedTokenIds))).status, 0);
  const ApiError a = error_of(chat_with(ids(SamplingParams::kMaxAllowedTokenIds + 1)));
  EXPECT_EQ(a.param, "allowed_token_ids");
  EXPECT_THAT(std::string(a.what()),
              HasSubstr("262,145 allowed token ids exceeds the limit of 262,144 "
                        "(SamplingParams::kMaxAllowedTokenIds in include/deepinfer/sampling_params.h)"));
  for (const char* wrapped : {R"("stop_token_ids": [4294967301])",
                              R"("allowed_token_ids": [4294967301])"}) {
    const ApiError w = error_of(chat_with(wrapped));
    EXPECT_EQ(w.status, 400) << wrapped;
    EXPECT_THAT(std::string(w.what()), HasSubstr("integers in [0, 2^31)")) << wrapped;
  }
}

TEST_F(ServerLimits, Logprobs) {
  EXPECT_EQ(error_of(chat_with(R"("logprobs": true, "top_logprobs": 20)")).status, 0);
  const ApiError top = error_of(chat_with(R"("logprobs": true, "top_logprobs": 21)"));
  EXPECT_EQ(top.param, "top_logprobs");
  EXPECT_EQ(std::string(top.what()),
            "'top_logprobs' = 21 exceeds the limit of 20 (kMaxLogprobs in "
            "tools/server/request_limits.h); ask for fewer alternatives");
  EXPECT_EQ(error_of(R"({"prompt": "a", "max_tokens": 1, "logprobs": 21})", true).param,
            "logprobs");
  EXPECT_EQ(error_of(R"({"prompt": "a", "max_tokens": 1, "prompt_logprobs": 21})", true).param,
            "prompt_logprobs");
  EXPECT_EQ(error_of(R"({"prompt": "a", "max_tokens": 1, "prompt_logprobs": 20})", true).status, 0);
}

}  // namespace
}  // namespace deepinfer::server
