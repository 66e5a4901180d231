// The HTTP server against its peer, the same requests through the in-process engine, in the same
// run: output throughput and TTFT / inter-token latency percentiles at 1, 16, 64 and 256
// concurrent streams, then 1,000 concurrent connections held idle and then all made active.
//
//   server_bench [--model DIR] [--backend opt|cuda] [--concurrency 1,16,64,256]
//                [--requests-per-stream N] [--max-tokens N] [--prompt-len N] [--repeats N]
//                [--idle-connections N] [--idle-seconds S] [--csv OUT] [--json OUT]
//
// Both paths share one EngineLoop (one model): the peer submits through
// EngineLoop::submit_stream from one thread per stream and times the events it reads; the server
// path runs `Server` on a loopback port and a C++ client (Boost.Beast, one blocking connection per
// stream, in its own threads) posts streaming /v1/completions with token-id prompts and times the
// SSE events as they arrive. Every stream runs its requests back to back (at least 32 requests per
// phase); each concurrency alternates the two paths --repeats times (default 2) and pools the
// samples. Requests: random token-id prompts of --prompt-len tokens on average and --max-tokens
// output tokens on average (each uniform in [x/2, 3x/2], the same per request in both paths;
// ignore_eos), temperature 0.8 with a per-request seed; prefix caching is off so neither path
// reuses the other's prompts. Figures: output tokens/s over the phase's wall time, TTFT (request
// sent -> first token), ITL (between tokens of one stream), p50/p90/p99. A benchmark, not a test:
// it never fails on time; the server/peer ratios are printed.
// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/engine_loop.h"
#include "server.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using deepinfer::EngineLoop;
using deepinfer::RequestEvent;
using deepinfer::SamplingParams;

struct Options {
  std::string model = std::string(DEEPINFER_BENCH_SOURCE_DIR) + "/models/default";
  std::string backend;
  std::vector<int> concurrency = {1, 16, 64, 256};
  int requests_per_stream = 4;
  int max_tokens = 64;
  int prompt_len = 128;
  int repeats = 2;  // each concurrency: in-process, server, in-process, server, ...
  int idle_connections = 1000;
  double idle_seconds = 3.0;
  std::string csv, json;
};

struct Samples {
  std::vector<double> ttft, itl;
  int64_t tokens = 0;
  double seconds = 0;
  int failures = 0;
};

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5));
  return v[i];
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Prompt lengths and output lengths vary per request (uniform in [len/2, 3len/2]), the same
// for both paths: streams of equal lengths would run in lockstep (all prefilling, then all
// decoding), an artifact of the benchmark that real traffic does not have and that the two
// paths would not reproduce alike (the server's round trip desynchronises its streams).
int vary(int mean, int i, uint32_t salt) {
  std::mt19937 rng(static_cast<uint32_t>(i) * 2654435761u + salt);
  return std::max(1, mean / 2 + static_cast<int>(rng() % static_cast<uint32_t>(mean + 1)));
}

std::vector<std::vector<int32_t>> make_prompts(int n, int len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(10, 8000);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].resize(static_cast<size_t>(vary(len, static_cast<int>(i), 7)));
    for (int32_t& t : out[i]) t = id(rng);
  }
  return out;
}

int max_tokens_for(const Options& o, int i) { return vary(o.max_tokens, i, 11); }

SamplingParams params_for(const Options& o, int i) {
  SamplingParams p;
  p.max_tokens = max_tokens_for(o, i);
  p.temperature = 0.8f;
  p.seq_seed = static_cast<uint64_t>(i);
  p.ignore_eos = true;
  return p;
}

// ---- the in-process peer ------------------------------------------------------------------
// One thread per stream, as the server's client has: submit_stream, read its events (next()),
// submit the next request when the final event arrives. So both paths resubmit from a client
// thread; what differs is HTTP, JSON and SSE. (Resubmitting from the engine's callback instead
// would let the peer's next request into the very next step, a head start no out-of-engine
// client has: one step of TTFT, 10-400 ms on the CPU.)
Samples run_inprocess(EngineLoop& loop, const Options& o, int streams,
                      const std::vector<std::vector<int32_t>>& prompts) {
  Samples s;
  std::mutex mu;
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int k = 0; k < streams; ++k) {
    threads.emplace_back([&, k] {
      std::vector<double> ttft, itl;
      int64_t tokens = 0;
      int failures = 0;
      for (int r = 0; r < o.requests_per_stream; ++r) {
        const int i = k * o.requests_per_stream + r;
        const auto sent = Clock::now();
        auto st = loop.submit_stream(prompts[static_cast<size_t>(i)], params_for(o, i));
        if (!st.ok()) {
          ++failures;
          continue;
        }
        bool first = true;
        Clock::time_point last;
        while (auto ev = (*st)->next()) {
          const auto now = Clock::now();
          if (ev->done) {
            tokens += ev->usage.completion_tokens;
            if (!ev->output.error.empty()) ++failures;
            break;
          }
          if (ev->delta.token_ids.empty()) continue;
          if (first) {
            ttft.push_back(ms(now - sent));
          } else {
            itl.push_back(ms(now - last));
          }
          first = false;
          last = now;
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      s.ttft.insert(s.ttft.end(), ttft.begin(), ttft.end());
      s.itl.insert(s.itl.end(), itl.begin(), itl.end());
      s.tokens += tokens;
      s.failures += failures;
    });
  }
  for (std::thread& t : threads) t.join();
  s.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return s;
}

// ---- the server path ----------------------------------------------------------------------
std::string completion_body(const Options& o, const std::vector<int32_t>& prompt, int i) {
  nlohmann::json j = {{"model", "default"},
                      {"prompt", prompt},
                      {"max_tokens", max_tokens_for(o, i)},
                      {"temperature", 0.8},
                      {"seed", i},
                      {"ignore_eos", true},
                      {"stream", true},
                      {"stream_options", {{"include_usage", true}}}};
  return j.dump();
}

// One streaming request on an open connection; appends its TTFT/ITL, returns its tokens.
int64_t stream_one(tcp::socket& sock, beast::flat_buffer& buf, const std::string& body,
                   std::vector<double>& ttft, std::vector<double>& itl) {
  http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.keep_alive(true);
  req.body() = body;
  req.prepare_payload();
  const auto sent = Clock::now();
  http::write(sock, req);
  http::response_parser<http::buffer_body> p;
  p.body_limit(boost::none);
  http::read_header(sock, buf, p);
  if (p.get().result() != http::status::ok) throw std::runtime_error("HTTP status not 200");
  std::string pending;
  char data[16384];
  bool first = true;
  Clock::time_point last;
  int64_t tokens = 0;
  while (!p.is_done()) {
    p.get().body().data = data;
    p.get().body().size = sizeof data;
    beast::error_code ec;
    http::read_some(sock, buf, p, ec);  // returns on any progress (read() would fill `data`)
    if (ec && ec != http::error::need_buffer) throw beast::system_error(ec);
    pending.append(data, sizeof data - p.get().body().size);
    const auto now = Clock::now();
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      const std::string ev = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (ev.rfind("data: {", 0) != 0) continue;
      if (ev.find("\"usage\"") != std::string::npos &&
          ev.find("\"choices\":[]") != std::string::npos) {
        tokens = nlohmann::json::parse(ev.substr(6))["usage"]["completion_tokens"].get<int64_t>();
        continue;
      }
      if (ev.find("\"text\":\"\"") != std::string::npos) continue;  // the finish event
      if (first) {
        ttft.push_back(ms(now - sent));
      } else {
        itl.push_back(ms(now - last));
      }
      first = false;
      last = now;
    }
  }
  return tokens;
}

Samples run_server(int port, const Options& o, int streams,
                   const std::vector<std::vector<int32_t>>& prompts) {
  Samples s;
  std::mutex mu;
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int k = 0; k < streams; ++k) {
    threads.emplace_back([&, k] {
      std::vector<double> ttft, itl;
      int64_t tokens = 0;
      int failures = 0;
      try {
        net::io_context ioc;
        tcp::socket sock(ioc);
        sock.connect(
            tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
        sock.set_option(tcp::no_delay(true));
        beast::flat_buffer buf;
        for (int r = 0; r < o.requests_per_stream; ++r) {
          const int i = k * o.requests_per_stream + r;
          tokens += stream_one(sock, buf, completion_body(o, prompts[static_cast<size_t>(i)], i),
                               ttft, itl);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "stream %d: %s\n", k, e.what());
        ++failures;
      }
      std::lock_guard<std::mutex> lock(mu);
      s.ttft.insert(s.ttft.end(), ttft.begin(), ttft.end());
      s.itl.insert(s.itl.end(), itl.begin(), itl.end());
      s.tokens += tokens;
      s.failures += failures;
    });
  }
  for (std::thread& t : threads) t.join();
  s.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return s;
}

// n connections opened and held idle, then one request on each, all at once.
struct IdleResult {
  int opened = 0, held = 0, answered = 0;
  double seconds_active = 0;
};

IdleResult run_idle(int port, deepinfer::server::Server& server, const Options& o) {
  IdleResult r;
  net::io_context ioc;
  std::vector<tcp::socket> socks;
  const tcp::endpoint ep(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
  for (int i = 0; i < o.idle_connections; ++i) {
    tcp::socket s(ioc);
    beast::error_code ec;
    s.connect(ep, ec);
    if (ec) break;
    socks.push_back(std::move(s));
  }
  r.opened = static_cast<int>(socks.size());
  std::this_thread::sleep_for(std::chrono::duration<double>(o.idle_seconds));
  r.held = static_cast<int>(server.open_connections());
  const auto t0 = Clock::now();
  const std::string body = R"({"prompt": [11, 12, 13, 14], "max_tokens": 4, "ignore_eos": true})";
  for (tcp::socket& s : socks) {
    http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    beast::error_code ec;
    http::write(s, req, ec);
  }
  for (tcp::socket& s : socks) {
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    beast::error_code ec;
    http::read(s, buf, res, ec);
    if (!ec && res.result() == http::status::ok) ++r.answered;
  }
  r.seconds_active = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model")
      o.model = next();
    else if (a == "--backend")
      o.backend = next();
    else if (a == "--concurrency")
      o.concurrency = parse_list(next());
    else if (a == "--requests-per-stream")
      o.requests_per_stream = std::stoi(next());
    else if (a == "--max-tokens")
      o.max_tokens = std::stoi(next());
    else if (a == "--prompt-len")
      o.prompt_len = std::stoi(next());
    else if (a == "--idle-connections")
      o.idle_connections = std::stoi(next());
    else if (a == "--repeats")
      o.repeats = std::stoi(next());
    else if (a == "--idle-seconds")
      o.idle_seconds = std::stod(next());
    else if (a == "--csv")
      o.csv = next();
    else if (a == "--json")
      o.json = next();
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  deepinfer::EngineOptions eo;
  eo.model_dir = o.model;
  eo.backend = o.backend;
  eo.max_num_seqs = *std::max_element(o.concurrency.begin(), o.concurrency.end());
  eo.max_model_len = 2 * (o.prompt_len + o.max_tokens) + 16;
  eo.enable_prefix_caching = false;
  deepinfer::EngineLoopOptions lo;
  lo.max_waiting = 1 << 20;
  auto loop = EngineLoop::create(eo, lo);
  if (!loop.ok()) {
    std::fprintf(stderr, "%s\n", loop.status().message().c_str());
    return 1;
  }
  deepinfer::server::ServerOptions so;
  so.port = 0;
  so.served_model_names = {"default"};
  auto server = deepinfer::server::Server::start(**loop, so);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().message().c_str());
    return 1;
  }
  const int port = (*server)->port();
  std::printf(
      "# %s\n# server on 127.0.0.1:%d, %d requests per stream (at least 32 per phase), prompts "
      "of %d and outputs of %d tokens on average (each uniform in [x/2, 3x/2])\n",
      (*loop)->describe().c_str(), port, o.requests_per_stream, o.prompt_len, o.max_tokens);
  {  // warm-up: both paths, a few requests
    Options w = o;
    w.requests_per_stream = 1;
    const auto pw = make_prompts(8, o.prompt_len, 99);
    run_inprocess(**loop, w, 8, pw);
    run_server(port, w, 8, pw);
  }
  nlohmann::json rows = nlohmann::json::array(), summary = nlohmann::json::array();
  std::ofstream csv;
  if (!o.csv.empty()) {
    csv.open(o.csv);
    csv << "concurrency,path,round,requests,tokens,seconds,tokens_per_s,ttft_p50_ms,ttft_p90_ms,"
           "ttft_p99_ms,itl_p50_ms,itl_p90_ms,itl_p99_ms,failures\n";
  }
  std::printf("%-5s %-10s %9s %10s %10s %10s %10s %10s %10s %8s\n", "conc", "path", "tok/s",
              "ttft p50", "ttft p90", "ttft p99", "itl p50", "itl p90", "itl p99", "fail");
  uint32_t seed = 1;
  for (int c : o.concurrency) {
    // At least 32 requests per phase, so that low concurrencies have stable percentiles.
    Options oc = o;
    oc.requests_per_stream = std::max(o.requests_per_stream, (32 + c - 1) / c);
    Samples res[2];
    for (int round = 0; round < 2 * o.repeats; ++round) {
      const int which = round % 2;
      const auto prompts = make_prompts(c * oc.requests_per_stream, o.prompt_len, seed++);
      Samples s =
          which == 0 ? run_inprocess(**loop, oc, c, prompts) : run_server(port, oc, c, prompts);
      Samples& acc = res[which];  // pooled over the repeats
      acc.ttft.insert(acc.ttft.end(), s.ttft.begin(), s.ttft.end());
      acc.itl.insert(acc.itl.end(), s.itl.begin(), s.itl.end());
      acc.tokens += s.tokens;
      acc.seconds += s.seconds;
      acc.failures += s.failures;
      const char* path = which == 0 ? "in-process" : "server";
      const double tps = static_cast<double>(s.tokens) / s.seconds;
      std::printf("%-5d %-10s %9.1f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %8d\n", c, path, tps,
                  pct(s.ttft, 50), pct(s.ttft, 90), pct(s.ttft, 99), pct(s.itl, 50), pct(s.itl, 90),
                  pct(s.itl, 99), s.failures);
      nlohmann::json row = {{"concurrency", c},
                            {"path", path},
                            {"requests", c * oc.requests_per_stream},
                            {"round", round / 2},
                            {"tokens", s.tokens},
                            {"seconds", s.seconds},
                            {"tokens_per_s", tps},
                            {"ttft_p50_ms", pct(s.ttft, 50)},
                            {"ttft_p90_ms", pct(s.ttft, 90)},
                            {"ttft_p99_ms", pct(s.ttft, 99)},
                            {"itl_p50_ms", pct(s.itl, 50)},
                            {"itl_p90_ms", pct(s.itl, 90)},
                            {"itl_p99_ms", pct(s.itl, 99)},
                            {"failures", s.failures}};
      rows.push_back(row);
      if (csv.is_open()) {
        csv << c << "," << path << "," << round / 2 << "," << row["requests"] << "," << s.tokens
            << "," << s.seconds << "," << tps << "," << pct(s.ttft, 50) << "," << pct(s.ttft, 90)
            << "," << pct(s.ttft, 99) << "," << pct(s.itl, 50) << "," << pct(s.itl, 90) << ","
            << pct(s.itl, 99) << "," << s.failures << "\n";
      }
    }
    const double ratio = (static_cast<double>(res[1].tokens) / res[1].seconds) /
                         (static_cast<double>(res[0].tokens) / res[0].seconds);
    std::printf(
        "      pooled over %d rounds: server / in-process throughput %.3f, median TTFT "
        "%.2f vs %.2f ms (%+.2f), median ITL %.3f vs %.3f ms (%+.3f)\n",
        o.repeats, ratio, pct(res[1].ttft, 50), pct(res[0].ttft, 50),
        pct(res[1].ttft, 50) - pct(res[0].ttft, 50), pct(res[1].itl, 50), pct(res[0].itl, 50),
        pct(res[1].itl, 50) - pct(res[0].itl, 50));
    summary.push_back({{"concurrency", c},
                       {"throughput_ratio", ratio},
                       {"server_ttft_p50_ms", pct(res[1].ttft, 50)},
                       {"inprocess_ttft_p50_ms", pct(res[0].ttft, 50)},
                       {"server_itl_p50_ms", pct(res[1].itl, 50)},
                       {"inprocess_itl_p50_ms", pct(res[0].itl, 50)}});
  }
  const IdleResult idle = run_idle(port, **server, o);
  std::printf(
      "idle-then-active: %d connections opened, %d held by the server after %.1f s idle, "
      "%d answered (200) when all sent a request at once, in %.2f s\n",
      idle.opened, idle.held, o.idle_seconds, idle.answered, idle.seconds_active);
  if (!o.json.empty()) {
    std::ofstream(o.json) << nlohmann::json({{"describe", (*loop)->describe()},
                                             {"rows", rows},
                                             {"summary", summary},
                                             {"idle_connections",
                                              {{"opened", idle.opened},
                                               {"held", idle.held},
                                               {"answered", idle.answered},
                                               {"idle_seconds", o.idle_seconds},
                                               {"active_seconds", idle.seconds_active}}}})
                                 .dump(2)
                          << "\n";
  }
  (*server)->stop();
  (*loop)->shutdown(false);
  return 0;
}
