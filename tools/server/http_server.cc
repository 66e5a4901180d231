// The HTTP layer of the server (server.h): Boost.Beast sessions on Asio strands, routing,
// authentication, SSE, client-disconnect detection and draining. Request/response shapes
// live in request_parse.cc / responses.cc; metrics in metrics.cc.
//
// One connection = one HttpSession on its own strand. A generation request is parsed, tokenized
// and validated on the strand, submitted to the EngineLoop, and its events are posted back to
// the strand from the engine thread. While a response is being generated the session keeps one
// raw read pending on the socket: end-of-file or a reset means the client went away, and every
// engine request of that response is aborted at once (its KV is freed by the next step). SSE
// responses use chunked transfer encoding; events that pile up while a write is in flight go
// out together in the next chunk.
// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <algorithm>
#include <atomic>
#include <charconv>
#include <optional>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "api.h"
#include "deepinfer/input_limits.h"
#include "json_util.h"
#include "metrics.h"
#include "server.h"

namespace deepinfer::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Compares without an early exit, so the time taken does not reveal how much of a guess matched.
bool constant_time_equal(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string random_hex(size_t n) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(kHex[rng() % 16]);
  return s;
}

}  // namespace

struct Server::Impl {
  EngineLoop& loop;
  ServerOptions opts;
  ApiContext ctx;
  Metrics metrics;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> responses{0};  // generation responses not yet fully written
  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  int bound_port = 0;
  std::mutex sessions_mu;
  std::vector<std::weak_ptr<class HttpSession>> sessions;

  Impl(EngineLoop& l, const ServerOptions& o)
      : loop(l), opts(o), metrics(o.served_model_names.front()) {
    ctx.loop = &loop;
    ctx.model_names = opts.served_model_names;
    ctx.effort_profile = opts.effort_profile;
    ctx.default_max_tokens = opts.default_max_tokens;
  }
  void do_accept();
};

using Request = http::request<http::string_body>;

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket&& socket, Server::Impl& srv) : stream_(std::move(socket)), srv_(srv) {
    ++srv_.connections;
  }
  ~HttpSession() { --srv_.connections; }

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }
  // From Server::stop(): close the socket (on the strand).
  void close_now() {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->close(); });
  }

 private:
  // A response being generated: the engine requests of one API request.
  struct Generation {
    uint64_t serial = 0;
    GenerationSpec spec;
    std::unique_ptr<ResponseBuilder> builder;
    std::vector<RequestHandle> handles;
    size_t done = 0;
    bool headers_sent = false;
    bool anthropic = false;
    std::string id;
    Clock::time_point arrival;
  };
  // Per engine request, touched only on the engine thread (its callbacks): latency metrics.
  struct Timing {
    Clock::time_point arrival;
    bool first = true;
    std::vector<Clock::time_point> last;  // per sample
  };
  struct Out {
    enum Kind { kResponse, kHeader, kChunk, kLast } kind;
    std::shared_ptr<http::response<http::string_body>> res;
    std::string data;
  };

  // ---- reading ----------------------------------------------------------------------------
  void do_read() {
    if (closed_) return;
    parser_.emplace();
    parser_->body_limit(static_cast<uint64_t>(srv_.opts.max_body_bytes));
    parser_->header_limit(static_cast<uint32_t>(srv_.opts.max_header_bytes));
    stream_.expires_after(std::chrono::seconds(srv_.opts.keep_alive_seconds));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // The header is in: answer "Expect: 100-continue" (curl sends it for bodies over 1 KiB and
  // waits a second for it otherwise), then read the body within a minute.
  void on_header(beast::error_code ec) {
    if (ec || parser_->is_done()) return on_read(ec);
    stream_.expires_after(std::chrono::seconds(60));
    auto read_body = [self = shared_from_this()] {
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       [self](beast::error_code e, size_t) { self->on_read(e); });
    };
    const auto expect = parser_->get().find(http::field::expect);
    if (expect != parser_->get().end() && beast::iequals(expect->value(), "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(stream_, net::buffer(kContinue),
                       [self = shared_from_this(), read_body](beast::error_code e, size_t) {
                         if (e) return self->on_read(e);
                         read_body();
                       });
      return;
    }
    read_body();
  }

  void on_read(beast::error_code ec) {
    stream_.expires_never();
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset) {
      return close();
    }
    if (ec == http::error::body_limit) {
      keep_alive_ = false;
      // Beast reports an oversized Content-Length while it parses that header, before the
      // header is done (content_length() asserts then): read the field it has parsed so far.
      std::optional<uint64_t> length;
      if (parser_->is_header_done()) {
        if (const auto l = parser_->content_length()) length = *l;
      } else {
        const auto field = parser_->get()[http::field::content_length];
        uint64_t v = 0;
        const auto [end, err] = std::from_chars(field.data(), field.data() + field.size(), v);
        if (err == std::errc() && end == field.data() + field.size() && !field.empty()) length = v;
      }
      return send_error(
          ApiError(413, "invalid_request_error",
                   "the request body: " +
                       limit_message(length ? format_count(*length) + " bytes" : "its size",
                                     static_cast<uint64_t>(srv_.opts.max_body_bytes),
                                     "bytes: --max-body-bytes",
                                     "send a smaller body, or start the "
                                     "server with a larger --max-body-bytes")),
          false);
    }
    if (ec == http::error::header_limit) {
      keep_alive_ = false;
      return send_error(
          ApiError(
              431, "invalid_request_error",
              "the request headers: " +
                  limit_message("their size", static_cast<uint64_t>(srv_.opts.max_header_bytes),
                                "bytes: ServerOptions::max_header_bytes",
                                "send fewer or shorter headers")),
          false);
    }
    if (ec) {
      keep_alive_ = false;
      return send_error(bad_request(std::string("malformed HTTP request: ") + ec.message()), false);
    }
    handle(parser_->release());
  }

  // A raw read kept pending while a response is generated: EOF or an error = client gone.
  void monitor() {
    if (monitoring_ || closed_) return;
    if (buffer_.size() > 1 << 20) return;  // a pipelining client: stop reading ahead
    monitoring_ = true;
    stream_.socket().async_read_some(
        buffer_.prepare(4096),
        net::bind_executor(stream_.get_executor(),
                           [self = shared_from_this()](beast::error_code ec, size_t n) {
                             self->on_monitor(ec, n);
                           }));
  }

  void on_monitor(beast::error_code ec, size_t n) {
    monitoring_ = false;
    if (ec == net::error::operation_aborted && want_read_) {
      want_read_ = false;
      return do_read();
    }
    if (ec) {
      client_gone();
      return;
    }
    buffer_.commit(n);
    if (gen_) return monitor();
    if (want_read_) {
      want_read_ = false;
      do_read();
    }
  }

  void client_gone() {
    if (gen_) {
      for (RequestHandle h : gen_->handles) (void)srv_.loop.abort(h);
      end_generation();
    }
    close();
  }

  // ---- routing ----------------------------------------------------------------------------
  void handle(Request req) {
    keep_alive_ = req.keep_alive();
    std::string target(req.target());
    if (const size_t q = target.find('?'); q != std::string::npos) target.resize(q);
    const bool anthropic = target == "/v1/messages";
    try {
      if (target == "/health" || target == "/ping") {
        if (srv_.draining) {
          throw ApiError(503, "service_unavailable", "the server is shutting down");
        }
        return send(200, "application/json", "{}");
      }
      if (target == "/metrics") {
        return send(200, "text/plain; version=0.0.4; charset=utf-8",
                    srv_.metrics.render(srv_.loop.stats(), srv_.loop.counters(),
                                        srv_.connections.load(), srv_.draining));
      }
      const bool api = target.rfind("/v1/", 0) == 0 || target == "/version";
      if (!api) {
        throw ApiError(404, "not_found_error", "no route for " + target);
      }
      check_auth(req);
      if (target == "/version") return send(200, "application/json", R"({"version":"0.1.0"})");
      if (target == "/v1/models") {
        if (req.method() != http::verb::get) throw method_not_allowed("GET");
        return send(200, "application/json", models_json());
      }
      if (target == "/v1/chat/completions" || target == "/v1/completions" || anthropic) {
        if (req.method() != http::verb::post) throw method_not_allowed("POST");
        return generate(target, req.body(), anthropic);
      }
      throw ApiError(404, "not_found_error", "no route for " + target);
    } catch (const ApiError& e) {
      send_error(e, anthropic);
    } catch (const std::exception& e) {
      // A field of an unexpected JSON type deep inside a message (nlohmann's type_error) and
      // the like: the client's request, not our state, is at fault.
      send_error(bad_request(std::string("invalid request: ") + e.what()), anthropic);
    }
  }

  static ApiError method_not_allowed(const char* allowed) {
    return ApiError(405, "invalid_request_error",
                    std::string("method not allowed (use ") + allowed + ")");
  }

  void check_auth(const Request& req) {
    if (srv_.opts.api_key.empty()) return;
    std::string given;
    if (auto it = req.find(http::field::authorization); it != req.end()) {
      const std::string v(it->value());
      if (v.rfind("Bearer ", 0) == 0) given = v.substr(7);
    }
    if (given.empty()) {
      if (auto it = req.find("x-api-key"); it != req.end()) given = std::string(it->value());
    }
    if (given.empty() || !constant_time_equal(given, srv_.opts.api_key)) {
      throw ApiError(401, "authentication_error",
                     given.empty() ? "missing API key (Authorization: Bearer KEY or x-api-key)"
                                   : "incorrect API key",
                     "", "invalid_api_key");
    }
  }

  std::string models_json() const {
    Json data = Json::array();
    for (const std::string& name : srv_.opts.served_model_names) {
      data.push_back({{"id", name},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "deepinfer"},
                      {"root", srv_.opts.served_model_names.front()},
                      {"max_model_len", srv_.loop.max_model_len()}});
    }
    return dump({{"object", "list"}, {"data", data}});
  }

  // ---- generation -------------------------------------------------------------------------
  void generate(const std::string& target, const std::string& body, bool anthropic) {
    const Clock::time_point arrival = Clock::now();
    if (srv_.draining) throw ApiError(503, "service_unavailable", "the server is shutting down");
    auto g = std::make_unique<Generation>();
    g->arrival = arrival;
    g->anthropic = anthropic;
    g->serial = ++serial_;
    if (target == "/v1/chat/completions") {
      g->spec = parse_chat_request(body, srv_.ctx);
      g->id = "chatcmpl-" + random_hex(24);
    } else if (target == "/v1/completions") {
      g->spec = parse_completion_request(body, srv_.ctx);
      g->id = "cmpl-" + random_hex(24);
    } else {
      g->spec = parse_messages_request(body, srv_.ctx);
      g->id = "msg_" + random_hex(24);
    }
    g->builder = make_response_builder(g->spec, srv_.ctx, g->id);
    gen_ = std::move(g);
    ++srv_.responses;
    const uint64_t serial = gen_->serial;
    for (size_t i = 0; i < gen_->spec.prompts.size(); ++i) {
      PromptInput& p = gen_->spec.prompts[i];
      auto timing = std::make_shared<Timing>();
      timing->arrival = arrival;
      timing->last.resize(static_cast<size_t>(gen_->spec.params.n));
      auto cb = [self = shared_from_this(), serial, i, timing](RequestEvent&& ev) {
        self->record(*timing, ev);
        net::post(self->stream_.get_executor(), [self, serial, i, ev = std::move(ev)]() mutable {
          self->on_event(serial, i, std::move(ev));
        });
      };
      auto h = srv_.loop.submit(p.ids, gen_->spec.params, std::move(cb), p.text);
      if (!h.ok()) {
        for (RequestHandle done : gen_->handles) (void)srv_.loop.abort(done);
        end_generation();
        const Status& st = h.status();
        if (st.code() == StatusCode::kResourceExhausted) {
          throw ApiError(503, "service_unavailable", st.message());
        }
        if (st.code() == StatusCode::kFailedPrecondition) {
          throw ApiError(503, "service_unavailable", st.message());
        }
        throw bad_request(st.message());
      }
      gen_->handles.push_back(*h);
    }
    srv_.metrics.prepare_time.observe(seconds(Clock::now() - arrival));
    monitor();
  }

  // Engine thread: latency metrics at the moment the engine hands the event over.
  void record(Timing& t, const RequestEvent& ev) {
    const Clock::time_point now = Clock::now();
    if (ev.done) {
      srv_.metrics.e2e.observe(seconds(now - t.arrival));
      std::string reason = "stop";
      for (const CompletionOutput& o : ev.output.outputs) {
        if (o.finish_reason != "stop") reason = o.finish_reason;
      }
      if (ev.rejected) reason = "rejected";
      srv_.metrics.request_finished(reason);
      return;
    }
    if (ev.delta.token_ids.empty()) return;
    if (t.first) {
      t.first = false;
      srv_.metrics.ttft.observe(seconds(now - t.arrival));
    }
    const size_t i = static_cast<size_t>(ev.delta.index);
    if (i < t.last.size()) {
      if (t.last[i] != Clock::time_point{}) srv_.metrics.itl.observe(seconds(now - t.last[i]));
      t.last[i] = now;
    }
  }

  void on_event(uint64_t serial, size_t prompt, RequestEvent ev) {
    try {
      handle_event(serial, prompt, std::move(ev));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "deepinfer serve: internal error while answering: %s\n", e.what());
      client_gone();  // abort the rest; the client sees the connection close
    }
  }

  void handle_event(uint64_t serial, size_t prompt, RequestEvent ev) {
    if (!gen_ || gen_->serial != serial || closed_) return;  // an abandoned response
    Generation& g = *gen_;
    if (ev.done) ++g.done;
    if (g.spec.stream && !g.headers_sent) {
      if (ev.done && ev.rejected) {
        for (RequestHandle h : g.handles) (void)srv_.loop.abort(h);
        const ApiError e =
            bad_request(ev.output.error, g.spec.params.structured ? "response_format" : "");
        end_generation();
        return send_error(e, g.anthropic);
      }
      g.headers_sent = true;
      Out head{Out::kHeader, nullptr, {}};
      queue(std::move(head));
      std::string start = g.builder->stream_start();
      if (!start.empty()) queue({Out::kChunk, nullptr, std::move(start)});
    }
    std::string out = g.builder->on_event(prompt, ev);
    if (g.spec.stream && !out.empty()) queue({Out::kChunk, nullptr, std::move(out)});
    if (g.done < g.handles.size()) return;
    // Every engine request of this response ended.
    if (g.spec.stream) {
      queue({Out::kChunk, nullptr, g.builder->finish()});
      queue({Out::kLast, nullptr, {}});
      response_complete_ = true;
      end_generation();
      return;
    }
    const std::optional<ApiError> failure = g.builder->failure();
    const bool anthropic = g.anthropic;
    std::string body = failure ? std::string() : g.builder->finish();
    end_generation();
    if (failure) return send_error(*failure, anthropic);
    send(200, "application/json", std::move(body));
  }

  void end_generation() {
    if (!gen_) return;
    gen_.reset();
    --srv_.responses;
  }

  // ---- writing ----------------------------------------------------------------------------
  void send(int status, const char* type, std::string body) {
    auto res =
        std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
    res->set(http::field::server, "deepinfer");
    res->set(http::field::content_type, type);
    res->keep_alive(keep_alive_ && !srv_.stopped);
    res->body() = std::move(body);
    res->prepare_payload();
    srv_.metrics.http_response(status);
    response_complete_ = true;
    queue({Out::kResponse, std::move(res), {}});
  }

  void send_error(const ApiError& e, bool anthropic) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(e.status), 11);
    res->set(http::field::server, "deepinfer");
    res->set(http::field::content_type, "application/json");
    if (e.status == 503 || e.status == 429) res->set(http::field::retry_after, "1");
    if (e.status == 401) res->set(http::field::www_authenticate, "Bearer");
    res->keep_alive(keep_alive_ && !srv_.stopped);
    res->body() = anthropic ? anthropic_error_body(e) : openai_error_body(e);
    res->prepare_payload();
    srv_.metrics.http_response(e.status);
    if (srv_.opts.log_requests)
      std::fprintf(stderr, "deepinfer serve: %d %s\n", e.status, e.what());
    response_complete_ = true;
    queue({Out::kResponse, std::move(res), {}});
  }

  void queue(Out&& o) {
    if (closed_) return;
    out_.push_back(std::move(o));
    write_next();
  }

  void write_next() {
    if (writing_ || out_.empty() || closed_) return;
    writing_ = true;
    Out o = std::move(out_.front());
    out_.pop_front();
    auto done = [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); };
    switch (o.kind) {
      case Out::kResponse: {
        auto res = o.res;
        http::async_write(
            stream_, *res,
            [self = shared_from_this(), res](beast::error_code ec, size_t) { self->on_write(ec); });
        return;
      }
      case Out::kHeader: {
        // The SSE response header and the first chunk(s) go out in one write (one wake-up of
        // the client fewer before its first token).
        http::response<http::empty_body> header(http::status::ok, 11);
        header.set(http::field::server, "deepinfer");
        header.set(http::field::content_type, "text/event-stream");
        header.set(http::field::cache_control, "no-cache");
        header.set("X-Accel-Buffering", "no");
        header.keep_alive(keep_alive_);
        header.chunked(true);
        std::ostringstream os;
        os << header.base();  // status line, fields and the blank line
        auto head = std::make_shared<std::string>(os.str());
        auto data = std::make_shared<std::string>();
        while (!out_.empty() && out_.front().kind == Out::kChunk) {
          *data += out_.front().data;
          out_.pop_front();
        }
        srv_.metrics.http_response(200);
        if (data->empty()) {
          net::async_write(stream_, net::buffer(*head),
                           [self = shared_from_this(), head](beast::error_code ec, size_t) {
                             self->on_write(ec);
                           });
          return;
        }
        net::async_write(
            stream_, beast::buffers_cat(net::buffer(*head), http::make_chunk(net::buffer(*data))),
            [self = shared_from_this(), head, data](beast::error_code ec, size_t) {
              self->on_write(ec);
            });
        return;
      }
      case Out::kChunk: {
        // Everything queued behind this chunk goes out with it.
        auto data = std::make_shared<std::string>(std::move(o.data));
        while (!out_.empty() && out_.front().kind == Out::kChunk) {
          *data += out_.front().data;
          out_.pop_front();
        }
        if (data->empty()) {
          writing_ = false;
          return write_next();
        }
        net::async_write(stream_, http::make_chunk(net::buffer(*data)),
                         [self = shared_from_this(), data](beast::error_code ec, size_t) {
                           self->on_write(ec);
                         });
        return;
      }
      case Out::kLast:
        net::async_write(stream_, http::make_chunk_last(), std::move(done));
        return;
    }
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    if (ec) return client_gone();
    if (!out_.empty()) return write_next();
    if (response_complete_ && !gen_) {
      response_complete_ = false;
      if (!keep_alive_ || srv_.stopped) return close();
      if (monitoring_) {
        want_read_ = true;
        beast::error_code ignored;
        stream_.socket().cancel(ignored);  // on_monitor then starts the next read
        return;
      }
      do_read();
    }
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    if (gen_) {
      for (RequestHandle h : gen_->handles) (void)srv_.loop.abort(h);
      end_generation();
    }
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  Server::Impl& srv_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = true;
  bool closed_ = false;
  bool monitoring_ = false;
  bool want_read_ = false;
  bool writing_ = false;
  bool response_complete_ = false;
  std::deque<Out> out_;
  std::unique_ptr<Generation> gen_;
  uint64_t serial_ = 0;
};

void Server::Impl::do_accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      // Out of file descriptors and the like: keep accepting after a short pause.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return do_accept();
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    socket.set_option(net::socket_base::keep_alive(true), ignored);
    auto s = std::make_shared<HttpSession>(std::move(socket), *this);
    {
      std::lock_guard<std::mutex> lock(sessions_mu);
      std::erase_if(sessions, [](const std::weak_ptr<HttpSession>& w) { return w.expired(); });
      sessions.push_back(s);
    }
    s->start();
    do_accept();
  });
}

Expected<std::unique_ptr<Server>> Server::start(EngineLoop& loop, const ServerOptions& options) {
  ServerOptions o = options;
  if (o.served_model_names.empty()) o.served_model_names.push_back("default");
  auto impl = std::make_unique<Impl>(loop, o);
  beast::error_code ec;
  const net::ip::address addr = net::ip::make_address(o.host, ec);
  if (ec) return invalid_argument("--host '" + o.host + "' is not an IP address");
  const tcp::endpoint ep(addr, static_cast<unsigned short>(o.port));
  const std::string where = o.host + ":" + std::to_string(o.port);
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (ec) return invalid_argument("cannot listen on " + where + ": " + ec.message());
  impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return invalid_argument("cannot listen on " + where + ": " + ec.message());
  impl->bound_port = impl->acceptor.local_endpoint().port();
  impl->do_accept();
  const int n = o.io_threads > 0
                    ? o.io_threads
                    : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 4);
  for (int i = 0; i < n; ++i) impl->threads.emplace_back([p = impl.get()] { p->ioc.run(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { stop(); }
int Server::port() const { return impl_->bound_port; }
int64_t Server::open_connections() const { return impl_->connections.load(); }

void Server::begin_drain() {
  impl_->draining = true;
  net::post(impl_->ioc, [p = impl_.get()] {
    beast::error_code ec;
    p->acceptor.close(ec);
  });
}

bool Server::wait_responses(int timeout_ms) {
  const auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (impl_->responses.load() > 0) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void Server::stop() {
  if (impl_->stopped.exchange(true)) return;
  begin_drain();
  {
    std::lock_guard<std::mutex> lock(impl_->sessions_mu);
    for (auto& w : impl_->sessions) {
      if (auto s = w.lock()) s->close_now();
    }
  }
  // Give the closes a moment to run, then stop the loop threads.
  const auto end = Clock::now() + std::chrono::seconds(2);
  while (impl_->connections.load() > 0 && Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
}

}  // namespace deepinfer::server
