// deepinfer._core engine: the C++ Engine (include/deepinfer/engine.h) for python/deepinfer/llm.py.
//
// Sampling parameters cross the boundary as a dict of the C++ field names, so the one
// validation (SamplingParams::validate) decides what is legal; unknown keys are refused here.
// Structured outputs come as key "structured": {"schema_type": str, "schema": str} (llm.py
// serialises dict schemas); the engine compiles it at submit, so a bad schema is a ValueError
// from submit with the compiler's message.
// Outputs come back as plain dicts (llm.py wraps them in vLLM-shaped classes). Errors become
// ValueError (FileNotFoundError for a missing model directory).
#include <Python.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "bindings.h"
#include "deepinfer/engine.h"
#include "deepinfer/engine_loop.h"
#include "deepinfer/options.h"

namespace nb = nanobind;

namespace deepinfer::python {
namespace {

[[noreturn]] void raise(const Status& status) {
  PyObject* type =
      status.code() == StatusCode::kNotFound ? PyExc_FileNotFoundError : PyExc_ValueError;
  PyErr_SetString(type, status.message().c_str());
  throw nb::python_error();
}

[[noreturn]] void raise_value(const std::string& message) {
  PyErr_SetString(PyExc_ValueError, message.c_str());
  throw nb::python_error();
}

template <typename T>
T get_as(nb::handle v, const char* key) {
  try {
    return nb::cast<T>(v);
  } catch (const std::exception&) {
    raise_value(std::string("SamplingParams.") + key + ": wrong type (" +
                nb::str(nb::type_name(v.type())).c_str() + ")");
  }
}

int32_t get_int(nb::handle v, const char* key) {
  if (PyBool_Check(v.ptr()) || !PyLong_Check(v.ptr())) {
    raise_value(std::string("SamplingParams.") + key + " must be an integer");
  }
  const long long x = nb::cast<long long>(v);
  if (x < INT32_MIN || x > INT32_MAX) {
    raise_value(std::string("SamplingParams.") + key + " = " + std::to_string(x) +
                " is out of range");
  }
  return static_cast<int32_t>(x);
}

float get_float(nb::handle v, const char* key) {
  if (PyBool_Check(v.ptr()) || !(PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr()))) {
    raise_value(std::string("SamplingParams.") + key + " must be a number");
  }
  return static_cast<float>(nb::cast<double>(v));
}

SamplingParams params_from_dict(const nb::dict& d) {
  SamplingParams p;
  for (auto [k, v] : d) {
    const std::string key = nb::cast<std::string>(k);
    const char* kc = key.c_str();
    const bool none = v.is_none();
    if (key == "n")
      p.n = get_int(v, kc);
    else if (key == "temperature")
      p.temperature = get_float(v, kc);
    else if (key == "top_p")
      p.top_p = get_float(v, kc);
    else if (key == "top_k")
      p.top_k = get_int(v, kc);
    else if (key == "min_p")
      p.min_p = get_float(v, kc);
    else if (key == "repetition_penalty")
      p.repetition_penalty = get_float(v, kc);
    else if (key == "presence_penalty")
      p.presence_penalty = get_float(v, kc);
    else if (key == "frequency_penalty")
      p.frequency_penalty = get_float(v, kc);
    else if (key == "max_tokens")
      p.max_tokens = none ? std::nullopt : std::optional(get_int(v, kc));
    else if (key == "min_tokens")
      p.min_tokens = get_int(v, kc);
    else if (key == "logprobs")
      p.logprobs = none ? std::nullopt : std::optional(get_int(v, kc));
    else if (key == "ignore_eos")
      p.ignore_eos = get_as<bool>(v, kc);
    else if (key == "include_stop_str_in_output")
      p.include_stop_str_in_output = get_as<bool>(v, kc);
    else if (key == "stop") {
      if (!none) p.stop = get_as<std::vector<std::string>>(v, kc);
    } else if (key == "stop_token_ids") {
      if (!none) {
        for (nb::handle x : nb::cast<nb::sequence>(v)) p.stop_token_ids.push_back(get_int(x, kc));
      }
    } else if (key == "seq_seed") {
      if (!none) {
        if (PyBool_Check(v.ptr()) || !PyLong_Check(v.ptr()) || nb::cast<long long>(v) < 0) {
          raise_value("SamplingParams.seq_seed must be a non-negative integer");
        }
        p.seq_seed = nb::cast<uint64_t>(v);
      }
    } else if (key == "allowed_token_ids") {
      if (!none) {
        for (nb::handle x : nb::cast<nb::sequence>(v)) {
          p.allowed_token_ids.push_back(get_int(x, kc));
        }
      }
    } else if (key == "logit_bias") {
      if (!none) {
        if (!PyDict_Check(v.ptr())) {
          raise_value("SamplingParams.logit_bias must be a dict {token_id: bias}");
        }
        for (auto [t, b] : nb::cast<nb::dict>(v)) {
          p.logit_bias[get_int(t, "logit_bias (a token id)")] = get_float(b, "logit_bias (a bias)");
        }
      }
    } else if (key == "prompt_logprobs") {
      p.prompt_logprobs = none ? std::nullopt : std::optional(get_int(v, kc));
    } else if (key == "truncate_prompt_tokens") {
      p.truncate_prompt_tokens = none ? std::nullopt : std::optional(get_int(v, kc));
    } else if (key == "skip_special_tokens") {
      p.skip_special_tokens = get_as<bool>(v, kc);
    } else if (key == "detokenize") {
      p.detokenize = get_as<bool>(v, kc);
    } else if (key == "structured") {
      if (!none) {
        const auto so = get_as<nb::dict>(v, kc);
        if (!so.contains("schema_type") || !so.contains("schema")) {
          raise_value("SamplingParams.structured must have 'schema_type' and 'schema'");
        }
        p.structured = SamplingParams::StructuredOutput{
            get_as<std::string>(so["schema_type"], "structured.schema_type"),
            get_as<std::string>(so["schema"], "structured.schema")};
      }
    } else {
      raise_value("SamplingParams: unknown parameter '" + key + "'");
    }
  }
  return p;
}

nb::list logprobs_to_list(const std::vector<TokenLogprobs>& lps) {
  nb::list out;
  for (const TokenLogprobs& lp : lps) {
    nb::dict e;
    e["token"] = lp.token;
    e["logprob"] = lp.logprob;
    e["rank"] = lp.rank;
    nb::list top;
    for (const auto& [t, l] : lp.top) top.append(nb::make_tuple(t, l));
    e["top"] = top;
    out.append(e);
  }
  return out;
}

nb::dict output_to_dict(const RequestOutput& o) {
  nb::dict d;
  d["num_cached_tokens"] = o.num_cached_tokens;
  d["prompt_logprobs"] = o.prompt_logprobs.empty()
                             ? nb::object(nb::none())
                             : nb::object(logprobs_to_list(o.prompt_logprobs));
  d["id"] = o.id;
  d["prompt"] = o.prompt;
  d["prompt_token_ids"] = o.prompt_token_ids;
  d["finished"] = o.finished;
  d["error"] = o.error;
  nb::list outs;
  for (const CompletionOutput& c : o.outputs) {
    nb::dict cd;
    cd["index"] = c.index;
    cd["text"] = c.text;
    cd["token_ids"] = c.token_ids;
    cd["finish_reason"] = c.finish_reason;
    cd["stop_reason"] = c.stop_reason;
    cd["error"] = c.error;
    cd["num_preemptions"] = c.num_preemptions;
    if (!c.logprobs.empty()) {
      cd["logprobs"] = logprobs_to_list(c.logprobs);
    } else {
      cd["logprobs"] = nb::none();
    }
    outs.append(cd);
  }
  d["outputs"] = outs;
  return d;
}

using PyCallback = std::function<void(int32_t, std::string, std::vector<int32_t>, bool)>;

Engine::StreamCallback wrap(std::optional<PyCallback> cb) {
  if (!cb) return {};
  return
      [f = std::move(*cb)](const StreamDelta& d) { f(d.index, d.text, d.token_ids, d.finished); };
}

// Engine is neither copyable nor movable (it owns the model): Python holds it by pointer.
struct PyEngine {
  std::unique_ptr<Engine> e;
};

nb::dict stats_to_dict(const EngineStats& s) {
  nb::dict d;
  d["steps"] = s.steps;
  d["prompt_tokens"] = s.prompt_tokens;
  d["generated_tokens"] = s.generated_tokens;
  d["preemptions"] = s.preemptions;
  d["forward_seconds"] = s.forward_seconds;
  d["host_seconds"] = s.host_seconds;
  d["sample_seconds"] = s.sample_seconds;
  d["gap_seconds"] = s.gap_seconds;
  d["prefix_hit_tokens"] = s.prefix_hit_tokens;
  d["prefix_restores"] = s.prefix_restores;
  d["prefix_recomputes"] = s.prefix_recomputes;
  d["replay_skipped_rows"] = s.replay_skipped_rows;
  d["prefix_window_replays"] = s.prefix_window_replays;
  d["prefix_window_replay_tokens"] = s.prefix_window_replay_tokens;
  d["spec_verify_steps"] = s.spec_verify_steps;
  d["spec_draft_tokens"] = s.spec_draft_tokens;
  d["spec_accepted_tokens"] = s.spec_accepted_tokens;
  d["spec_grammar_cut_tokens"] = s.spec_grammar_cut_tokens;
  d["spec_draft_window_restarts"] = s.spec_draft_window_restarts;
  d["spec_varlen_probes_passed"] = s.spec_varlen_probes_passed;
  d["spec_varlen_probes_failed"] = s.spec_varlen_probes_failed;
  d["spec_varlen_paused_plans"] = s.spec_varlen_paused_plans;
  d["graph_setup_steps"] = s.graph_setup_steps;
  d["graph_setup_seconds"] = s.graph_setup_seconds;
  d["graph_captures"] = s.graph_captures;
  d["graph_replays"] = s.graph_replays;
  d["graph_drops"] = s.graph_drops;
  d["graph_startup_seconds"] = s.graph_startup_seconds;
  nb::list curve;
  for (const auto& [tokens, seconds] : s.spec_step_cost_seconds) {
    curve.append(nb::make_tuple(tokens, seconds));
  }
  d["spec_step_cost_seconds"] = curve;
  nb::list share;
  for (const auto& [tokens, part] : s.spec_draft_context_share) {
    share.append(nb::make_tuple(tokens, part));
  }
  d["spec_draft_context_share"] = share;
  nb::list probes;
  for (const EngineStats::SpecProbe& p : s.spec_varlen_recent_probes) {
    nb::dict e;
    e["plan_step"] = p.plan_step;
    e["decodes"] = p.decodes;
    e["steps"] = p.steps;
    e["ratio"] = p.ratio;
    e["passed"] = p.passed;
    e["tokens"] = p.tokens;
    e["spent_seconds"] = p.spent_seconds;
    e["plain_seconds"] = p.plain_seconds;
    e["draft_cost_seconds"] = p.draft_cost_seconds;
    e["draft_spent_seconds"] = p.draft_spent_seconds;
    e["plain_sample_seconds"] = p.plain_sample_seconds;
    e["rank"] = p.rank;
    probes.append(e);
  }
  d["spec_varlen_recent_probes"] = probes;
  d["draft_seconds"] = s.draft_seconds;
  d["kv_bytes_reserved"] = s.kv_bytes_reserved;
  d["kv_bytes_in_use_peak"] = s.kv_bytes_in_use_peak;
  d["num_running"] = s.num_running;
  d["num_waiting"] = s.num_waiting;
  d["kv_blocks_total"] = s.kv_blocks_total;
  d["kv_blocks_in_use"] = s.kv_blocks_in_use;
  d["kv_bytes_in_use"] = s.kv_bytes_in_use;
  d["eplb_rebalances"] = s.eplb_rebalances;
  d["eplb_experts_bound"] = s.eplb_experts_bound;
  d["eplb_balance_before"] = s.eplb_balance_before;
  d["eplb_balance_after"] = s.eplb_balance_after;
  return d;
}

nb::dict event_to_dict(const RequestEvent& ev) {
  nb::dict d;
  d["id"] = ev.id;
  d["done"] = ev.done;
  if (ev.done) {
    d["rejected"] = ev.rejected;
    d["output"] = output_to_dict(ev.output);
    nb::dict u;
    u["prompt_tokens"] = ev.usage.prompt_tokens;
    u["completion_tokens"] = ev.usage.completion_tokens;
    u["cached_tokens"] = ev.usage.cached_tokens;
    d["usage"] = u;
    return d;
  }
  d["index"] = ev.delta.index;
  d["text"] = ev.delta.text;
  d["token_ids"] = ev.delta.token_ids;
  d["finished"] = ev.delta.finished;
  d["finish_reason"] = ev.delta.finish_reason;
  d["logprobs"] = logprobs_to_list(ev.delta.logprobs);
  d["error"] = ev.delta.error;
  return d;
}

// EngineLoop for Python: the engine runs on its own thread; waiting releases the GIL. Final
// events of requests submitted without a stream go to one queue (LLM.generate's), streams
// have their own.
struct PyLoop {
  std::unique_ptr<EngineLoop> loop;
  struct DoneQueue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<RequestEvent> events;
  };
  std::shared_ptr<DoneQueue> done = std::make_shared<DoneQueue>();
};

struct PyStream {
  std::unique_ptr<RequestStream> s;
};

// EngineOptions from the keyword arguments both Python engines take (LLM's names; llm.py says
// what each does), in one table: a name not in it (nor in `extra`, the caller's own) raises
// TypeError, a value of the wrong type raises too; the values themselves are checked by
// Engine::create. What is not given keeps EngineOptions' default.
template <auto Field>
void set_option(EngineOptions& o, nb::handle v) {
  o.*Field = nb::cast<std::remove_reference_t<decltype(o.*Field)>>(v);
}

EngineOptions engine_options(const std::string& model_dir, const nb::kwargs& kwargs,
                             std::initializer_list<std::string_view> extra = {}) {
  using Setter = void (*)(EngineOptions&, nb::handle);
  static const std::map<std::string, Setter, std::less<>> kOptions = {
      {"tokenizer_path", &set_option<&EngineOptions::tokenizer_path>},
      {"max_num_seqs", &set_option<&EngineOptions::max_num_seqs>},
      {"max_num_batched_tokens", &set_option<&EngineOptions::max_num_batched_tokens>},
      {"max_model_len", &set_option<&EngineOptions::max_model_len>},
      {"num_kv_blocks", &set_option<&EngineOptions::num_kv_blocks>},
      {"kv_block_size", &set_option<&EngineOptions::kv_block_size>},
      {"num_threads", &set_option<&EngineOptions::num_threads>},  // -1: DEEPINFER_NUM_THREADS
      {"async_scheduling", &set_option<&EngineOptions::async_scheduling>},
      {"batch_invariant", &set_option<&EngineOptions::batch_invariant>},  // None: the knob
      {"enable_prefix_caching", &set_option<&EngineOptions::enable_prefix_caching>},
      {"prefix_cache_bytes", &set_option<&EngineOptions::prefix_cache_bytes>},
      {"backend", &set_option<&EngineOptions::backend>},  // "": DEEPINFER_ACCELERATOR
      {"sampling_threads", &set_option<&EngineOptions::sampling_threads>},
      {"sample_on", &set_option<&EngineOptions::sample_on>},
      {"speculative_method", &set_option<&EngineOptions::speculative_method>},
      {"num_speculative_tokens", &set_option<&EngineOptions::num_speculative_tokens>},
      {"speculative_varlen", &set_option<&EngineOptions::speculative_varlen>},
      {"speculative_trace", &set_option<&EngineOptions::speculative_trace>},
      {"speculative_acceptance", &set_option<&EngineOptions::speculative_acceptance>},
      {"load_format", &set_option<&EngineOptions::load_format>},  // "auto" | "dummy"
      {"data_parallel_size", &set_option<&EngineOptions::data_parallel_size>},
      {"enable_expert_parallel", &set_option<&EngineOptions::enable_expert_parallel>},
      {"tensor_parallel_size", &set_option<&EngineOptions::tensor_parallel_size>},
      {"context_parallel_size", &set_option<&EngineOptions::context_parallel_size>},
      {"cuda_devices", &set_option<&EngineOptions::cuda_devices>},
      {"enable_eplb", &set_option<&EngineOptions::enable_eplb>},
      {"num_redundant_experts", &set_option<&EngineOptions::num_redundant_experts>},
      {"eplb_step_interval", &set_option<&EngineOptions::eplb_step_interval>},
      {"eplb_window_size", &set_option<&EngineOptions::eplb_window_size>},
  };
  EngineOptions o;
  o.model_dir = model_dir;
  for (const auto& [key, value] : kwargs) {
    const std::string name = nb::cast<std::string>(key);
    const auto it = kOptions.find(name);
    if (it != kOptions.end()) {
      try {
        it->second(o, value);
      } catch (const nb::cast_error&) {
        throw nb::type_error(("engine option '" + name + "' got a value of the wrong type (" +
                              nb::cast<std::string>(nb::str(value.type())) + ")")
                                 .c_str());
      }
    } else if (std::find(extra.begin(), extra.end(), name) == extra.end()) {
      throw nb::type_error(("engine option '" + name + "' is unknown").c_str());
    }
  }
  return o;
}

}  // namespace

void bind_engine_loop(nb::module_& m) {
  nb::class_<PyStream>(m, "RequestStream", "The events of one request (EngineLoop.submit_stream).")
      .def_prop_ro("id", [](const PyStream& ps) { return ps.s->id(); })
      .def(
          "next",
          [](PyStream& ps, int64_t timeout_ms) -> nb::object {
            std::optional<RequestEvent> ev;
            {
              nb::gil_scoped_release release;
              ev = ps.s->next(std::chrono::milliseconds(timeout_ms));
            }
            if (!ev) return nb::none();
            return event_to_dict(*ev);
          },
          nb::arg("timeout_ms") = 100,
          "The next event (a dict), or None after `timeout_ms` or after the final event.")
      .def_prop_ro("done", [](const PyStream& ps) { return ps.s->done(); });

  nb::class_<PyLoop>(m, "EngineLoop",
                     "The engine on its own thread (include/deepinfer/engine_loop.h).")
      .def(
          "__init__",
          [](PyLoop* self, const std::string& model_dir, const nb::kwargs& kwargs) {
            const EngineOptions o = engine_options(model_dir, kwargs, {"max_waiting"});
            const int64_t max_waiting =
                kwargs.contains("max_waiting") ? nb::cast<int64_t>(kwargs["max_waiting"]) : 0;
            EngineLoopOptions lo;
            lo.max_waiting = max_waiting > 0 ? max_waiting : int64_t{1} << 40;  // offline: no cap
            Expected<std::unique_ptr<EngineLoop>> l = invalid_argument("unset");
            {
              nb::gil_scoped_release release;
              l = EngineLoop::create(o, lo);
            }
            if (!l.ok()) raise(l.status());
            new (self) PyLoop{std::move(*l)};
          },
          "EngineLoop(model_dir, **options): EngineOptions by LLM's keyword names (llm.py), and "
          "max_waiting (0: no cap).")
      .def(
          "submit",
          [](PyLoop& pl, std::vector<int32_t> ids, const nb::dict& params,
             const std::string& text) {
            auto q = pl.done;
            auto h = pl.loop->submit(
                std::move(ids), params_from_dict(params),
                [q](RequestEvent&& ev) {
                  if (!ev.done) return;
                  std::lock_guard<std::mutex> lock(q->mu);
                  q->events.push_back(std::move(ev));
                  q->cv.notify_all();
                },
                text);
            if (!h.ok()) raise(h.status());
            return *h;
          },
          nb::arg("prompt_token_ids"), nb::arg("params"), nb::arg("prompt") = "",
          "Queue a request whose final event goes to wait_done().")
      .def(
          "wait_done",
          [](PyLoop& pl, int64_t timeout_ms) {
            std::deque<RequestEvent> got;
            {
              nb::gil_scoped_release release;
              std::unique_lock<std::mutex> lock(pl.done->mu);
              pl.done->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                   [&] { return !pl.done->events.empty(); });
              got.swap(pl.done->events);
            }
            nb::list out;
            for (const RequestEvent& ev : got) out.append(event_to_dict(ev));
            return out;
          },
          nb::arg("timeout_ms") = 100,
          "Final events of submit()ted requests that ended (waits up to timeout_ms).")
      .def(
          "submit_stream",
          [](PyLoop& pl, std::vector<int32_t> ids, const nb::dict& params,
             const std::string& text) {
            auto s = pl.loop->submit_stream(std::move(ids), params_from_dict(params), text);
            if (!s.ok()) raise(s.status());
            return new PyStream{std::move(*s)};
          },
          nb::arg("prompt_token_ids"), nb::arg("params"), nb::arg("prompt") = "",
          nb::rv_policy::take_ownership)
      .def("abort",
           [](PyLoop& pl, int64_t h) {
             const Status st = pl.loop->abort(h);
             if (!st.ok()) raise(st);
           })
      .def(
          "rebalance_experts",
          [](PyLoop& pl) {
            Status st;
            {
              nb::gil_scoped_release release;
              st = pl.loop->rebalance_experts();
            }
            if (!st.ok()) raise(st);
          },
          "EPLB: re-place the experts from the counted loads now (Engine::rebalance_experts).")
      .def(
          "shutdown",
          [](PyLoop& pl, bool drain) {
            nb::gil_scoped_release release;
            pl.loop->shutdown(drain);
          },
          nb::arg("drain") = false)
      .def_prop_ro("vocab_size", [](const PyLoop& pl) { return pl.loop->vocab_size(); })
      .def_prop_ro("max_model_len", [](const PyLoop& pl) { return pl.loop->max_model_len(); })
      .def_prop_ro("has_tokenizer", [](const PyLoop& pl) { return pl.loop->has_tokenizer(); })
      .def_prop_ro("no_tokenizer_reason",
                   [](const PyLoop& pl) { return pl.loop->no_tokenizer_reason(); })
      .def("encode", [](const PyLoop& pl, const std::string& t) { return pl.loop->encode(t); })
      .def("decode",
           [](const PyLoop& pl, const std::vector<int32_t>& ids) { return pl.loop->decode(ids); })
      .def("describe", [](const PyLoop& pl) { return pl.loop->describe(); })
      .def("stats", [](const PyLoop& pl) { return stats_to_dict(pl.loop->stats()); });
}

void bind_engine(nb::module_& m) {
  bind_engine_loop(m);
  m.def(
      "validate_sampling_params",
      [](const nb::dict& d) {
        const Status st = params_from_dict(d).validate();
        if (!st.ok()) raise(st);
      },
      nb::arg("params"), "Raise ValueError naming the first invalid sampling parameter.");
  m.def(
      "env_hf_model_dir",
      []() -> std::optional<std::string> {
        const auto& env = env_options();
        if (!env.ok()) raise(env.status());
        return env->hf_model_dir;
      },
      "DEEPINFER_HF_MODEL_DIR as parsed by the typed options (None when unset).");

  nb::class_<PyEngine>(m, "Engine",
                       "The C++ engine (continuous batching; backend: the `backend` argument, "
                       "else DEEPINFER_ACCELERATOR).")
      .def(
          "__init__",
          [](PyEngine* self, const std::string& model_dir, const nb::kwargs& kwargs) {
            const EngineOptions o = engine_options(model_dir, kwargs);
            Expected<std::unique_ptr<Engine>> e = invalid_argument("unset");
            {
              nb::gil_scoped_release release;
              e = Engine::create(o);
            }
            if (!e.ok()) raise(e.status());
            new (self) PyEngine{std::move(*e)};
          },
          "Engine(model_dir, **options): EngineOptions by LLM's keyword names (llm.py).")
      .def(
          "submit",
          [](PyEngine& pe, const std::vector<int32_t>& ids, const nb::dict& params,
             std::optional<PyCallback> cb) {
            auto h = pe.e->submit(ids, params_from_dict(params), wrap(std::move(cb)));
            if (!h.ok()) raise(h.status());
            return *h;
          },
          nb::arg("prompt_token_ids"), nb::arg("params"), nb::arg("on_delta") = nb::none())
      .def(
          "submit_text",
          [](PyEngine& pe, const std::string& text, const nb::dict& params,
             std::optional<PyCallback> cb) {
            auto h = pe.e->submit_text(text, params_from_dict(params), wrap(std::move(cb)));
            if (!h.ok()) raise(h.status());
            return *h;
          },
          nb::arg("prompt"), nb::arg("params"), nb::arg("on_delta") = nb::none())
      .def("abort",
           [](PyEngine& pe, int64_t h) {
             const Status st = pe.e->abort(h);
             if (!st.ok()) raise(st);
           })
      .def("step",
           [](PyEngine& pe) {
             nb::list out;
             for (const RequestOutput& o : pe.e->step()) out.append(output_to_dict(o));
             return out;
           })
      .def("has_unfinished", [](const PyEngine& pe) { return pe.e->has_unfinished(); })
      .def_prop_ro("vocab_size", [](const PyEngine& pe) { return pe.e->vocab_size(); })
      .def_prop_ro("max_model_len", [](const PyEngine& pe) { return pe.e->max_model_len(); })
      .def_prop_ro("has_tokenizer", [](const PyEngine& pe) { return pe.e->has_tokenizer(); })
      .def_prop_ro("no_tokenizer_reason",
                   [](const PyEngine& pe) { return pe.e->no_tokenizer_reason(); })
      .def("encode", [](const PyEngine& pe, const std::string& t) { return pe.e->encode(t); })
      .def("decode",
           [](const PyEngine& pe, const std::vector<int32_t>& ids) { return pe.e->decode(ids); })
      .def("describe", [](const PyEngine& pe) { return pe.e->describe(); })
      .def("stats", [](const PyEngine& pe) { return stats_to_dict(pe.e->stats()); });
}

}  // namespace deepinfer::python
