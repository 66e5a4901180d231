// The OpenAI- and Anthropic-compatible HTTP server over an EngineLoop (docs/server.md).
//
//   auto loop = EngineLoop::create(options);
//   auto server = Server::start(**loop, {.port = 8000});   // listening, own I/O threads
//   ... (*server)->begin_drain(); (*loop)->shutdown(true); (*server)->stop();
//
// HTTP/1.1 through Boost.Beast on Boost.Asio (Debian's libboost-dev): an asynchronous server,
// a few I/O threads for any number of connections, each connection on its own strand. Only
// include/deepinfer/ is used from the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/engine_loop.h"
#include "deepinfer/status.h"

namespace deepinfer::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                              // 0: an ephemeral port (Server::port() says which)
  std::string api_key;                          // empty: no authentication
  std::vector<std::string> served_model_names;  // empty: the model directory's name
  int io_threads = 0;                           // 0: min(4, hardware threads)
  int64_t max_body_bytes = 32 << 20;
  int max_header_bytes = 64 << 10;
  int keep_alive_seconds = 600;  // an idle connection is closed after this
  std::string effort_profile = "preview";
  int64_t default_max_tokens = 0;
  bool log_requests = false;
};

class Server {
 public:
  // Binds and starts the I/O threads. Errors name the address (in use, no permission).
  static Expected<std::unique_ptr<Server>> start(EngineLoop& loop, const ServerOptions& options);
  ~Server();  // stop()
  int port() const;
  // Stops accepting connections; /health answers 503; generation requests answer 503. Requests
  // already running go on.
  void begin_drain();
  // Waits until no response is being generated or written (or the timeout); true when none.
  bool wait_responses(int timeout_ms);
  // Closes every connection and joins the I/O threads.
  void stop();
  int64_t open_connections() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `deepinfer serve`: the whole program (engine, server, signals). SIGTERM or SIGINT drains
// (no new requests, running ones finish) and exits; a second SIGINT exits at once.
struct ServeArgs {
  EngineOptions engine;
  EngineLoopOptions loop;
  ServerOptions server;
};
int run_serve(const ServeArgs& args);

}  // namespace deepinfer::server
