// run_serve (server.h): `deepinfer serve` as a program. The engine loop and the server start,
// one line says where it listens, and the calling thread waits for signals:
//   SIGTERM or SIGINT: drain (stop accepting, running requests finish), then exit 0;
//   a second SIGINT (or SIGTERM) while draining: abort what is left and exit 130 at once.
// Signals are blocked in every thread the server starts and taken with sigtimedwait here, so
// no handler runs inside the engine or the I/O threads (and, under Python, the interpreter's
// own SIGINT handler does not see them).
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "server.h"

namespace deepinfer::server {
namespace {

// 1,000+ concurrent connections need more descriptors than the usual soft limit of 1,024.
void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

int run_serve(const ServeArgs& args) {
  raise_fd_limit();
  sigset_t sigs, old;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, &old);  // inherited by every thread started below
  struct Restore {
    sigset_t* old;
    ~Restore() { pthread_sigmask(SIG_SETMASK, old, nullptr); }
  } restore{&old};

  std::fprintf(stderr, "deepinfer serve: loading %s\n", args.engine.model_dir.c_str());
  auto loop = EngineLoop::create(args.engine, args.loop);
  if (!loop.ok()) {
    std::fprintf(stderr, "deepinfer serve: error: %s\n", loop.status().message().c_str());
    return 1;
  }
  ServerOptions so = args.server;
  if (so.served_model_names.empty()) {
    std::filesystem::path p(args.engine.model_dir);
    std::string name = p.filename().string();
    if (name.empty()) name = p.parent_path().filename().string();
    so.served_model_names.push_back(name.empty() ? "default" : name);
  }
  auto server = Server::start(**loop, so);
  if (!server.ok()) {
    std::fprintf(stderr, "deepinfer serve: error: %s\n", server.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr, "deepinfer serve: %s\n", (*loop)->describe().c_str());
  std::fprintf(stderr,
               "deepinfer serve: serving '%s' on http://%s:%d (OpenAI /v1/chat/completions, "
               "/v1/completions, /v1/models; Anthropic /v1/messages; /health, /metrics)%s\n",
               so.served_model_names.front().c_str(), so.host.c_str(), (*server)->port(),
               so.api_key.empty() ? "" : "; API key required");
  std::fflush(stderr);

  std::atomic<bool> drained{false};
  std::thread drainer;
  int rc = 0;
  for (;;) {
    timespec tick{0, 100 * 1000 * 1000};
    const int sig = sigtimedwait(&sigs, nullptr, &tick);
    if (drained) break;
    if (sig < 0) continue;  // timeout or EINTR
    if (!drainer.joinable()) {
      std::fprintf(stderr,
                   "deepinfer serve: %s: draining (no new requests; %lld running finish). "
                   "Press Ctrl-C again to exit now.\n",
                   sig == SIGTERM ? "SIGTERM" : "SIGINT",
                   static_cast<long long>((*loop)->counters().pending));
      std::fflush(stderr);
      (*server)->begin_drain();
      drainer = std::thread([&] {
        (*loop)->shutdown(/*drain=*/true);
        (*server)->wait_responses(10000);
        drained = true;
      });
      continue;
    }
    std::fprintf(stderr, "deepinfer serve: second signal: aborting and exiting\n");
    rc = 130;
    (*loop)->shutdown(/*drain=*/false);
    break;
  }
  if (drainer.joinable()) drainer.join();
  (*server)->stop();
  std::fprintf(stderr, "deepinfer serve: stopped\n");
  return rc;
}

}  // namespace deepinfer::server
