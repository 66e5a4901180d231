// `deepinfer inspect MODEL_DIR [--json] [--config-only]`: opens and validates a DeepSeek-V4 or
// V4.1 checkpoint the way the engine will (config.json + every expected tensor), then prints the
// config summary, layer kinds, parameters and bytes per dtype and group, quantization, KV cache
// per token and the warnings. --json prints the same as one JSON object (include/deepinfer/
// inspect.h); the text is drawn from that object.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "deepinfer/inspect.h"

namespace deepinfer::cli {
namespace {

using nlohmann::json;

struct InspectArgs {
  std::string model_dir;
  bool json_output = false;
  bool config_only = false;
};

std::string human_count(double n) {
  char buf[32];
  if (n >= 1e9)
    std::snprintf(buf, sizeof(buf), "%.2fB", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(buf, sizeof(buf), "%.2fM", n / 1e6);
  else if (n >= 1e3)
    std::snprintf(buf, sizeof(buf), "%.1fK", n / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.0f", n);
  return buf;
}

std::string human_bytes(double b) {
  char buf[32];
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

std::string num(const json& v) {
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v.get<double>());
    return buf;
  }
  return v.dump();
}

std::string rope_text(const json& r) {
  std::string s = "theta " + num(r["theta"]);
  if (r["yarn"].get<bool>()) {
    s += " + YaRN (factor " + num(r["factor"]) + ", original " + num(r["original_max_position"]) +
         ", beta " + num(r["beta_fast"]) + "/" + num(r["beta_slow"]) + ")";
  }
  return s;
}

void print_text(const json& r) {
  const json& c = r["config"];
  const bool checkpoint = r.contains("model_dir");
  const bool v41 = r["family"] == "deepseek_v41";
  std::printf("DeepSeek-V4%s model: %s\n", v41 ? ".1" : "",
              checkpoint ? r["model_dir"].get<std::string>().c_str()
                         : c["source"].get<std::string>().c_str());
  std::printf("  config.json: %s naming (%s)\n", r["config_naming"].get<std::string>().c_str(),
              c["source"].get<std::string>().c_str());
  if (checkpoint) {
    std::printf("  tensors: %s names, %s, %s file(s)\n",
                r["name_family"].get<std::string>().c_str(), r["layout"].get<std::string>().c_str(),
                num(r["files"]).c_str());
  }
  std::printf("\nConfig\n");
  std::printf("  hidden %s, %s layers (+%s MTP), vocab %s\n", num(c["hidden_size"]).c_str(),
              num(c["num_layers"]).c_str(), num(c["num_mtp_layers"]).c_str(),
              num(c["vocab_size"]).c_str());
  std::printf("  attention: %s heads x %s (rope %s), q_lora %s, output %s groups x %s, window %s\n",
              num(c["num_heads"]).c_str(), num(c["head_dim"]).c_str(),
              num(c["rope_head_dim"]).c_str(), num(c["q_lora_rank"]).c_str(),
              num(c["o_groups"]).c_str(), num(c["o_lora_rank"]).c_str(),
              num(c["sliding_window"]).c_str());
  std::printf("  indexer: %s heads x %s, top-%s\n", num(c["index_n_heads"]).c_str(),
              num(c["index_head_dim"]).c_str(), num(c["index_topk"]).c_str());
  std::printf(
      "  experts: %s routed (top-%s, %s, scale %s) + %s shared, width %s, swiglu limit %s\n",
      num(c["n_routed_experts"]).c_str(), num(c["num_experts_per_tok"]).c_str(),
      c["scoring_func"].get<std::string>().c_str(), num(c["routed_scaling_factor"]).c_str(),
      num(c["n_shared_experts"]).c_str(), num(c["moe_intermediate_size"]).c_str(),
      num(c["swiglu_limit"]).c_str());
  std::printf("  rope: SWA %s; CSA/HCA %s\n", rope_text(c["main_rope"]).c_str(),
              rope_text(c["compress_rope"]).c_str());
  std::printf("  mHC: %s streams, %s Sinkhorn iterations, eps %s; rms_norm_eps %s\n",
              num(c["hc_mult"]).c_str(), num(c["hc_sinkhorn_iters"]).c_str(),
              num(c["hc_eps"]).c_str(), num(c["rms_norm_eps"]).c_str());
  std::printf("\nLayer kinds\n");
  std::printf("  attention: %s\n", r["layer_kinds"]["attention"].get<std::string>().c_str());
  if (v41) {
    std::printf("  roles:     %s\n", r["layer_kinds"]["roles"].get<std::string>().c_str());
    std::string engram = r["layer_kinds"]["engram"].get<std::string>();
    if (r.contains("engram_tables")) {
      engram += ", " + num(r["engram_tables"]["tables"]) + " table(s) of " +
                human_bytes(r["engram_tables"]["bytes"].get<double>()) +
                " (host memory, memory-mapped)";
    }
    std::printf("  Engram:    %s\n", engram.c_str());
  }
  std::printf("  MoE:       %s\n", r["layer_kinds"]["moe"].get<std::string>().c_str());
  std::printf("  %s %s\n", v41 ? "drafter:  " : "MTP:      ",
              r["layer_kinds"]["mtp"].get<std::string>().c_str());

  std::printf("\nQuantization\n  declared: %s\n",
              r["quantization_declared"].get<std::string>().c_str());
  if (checkpoint) {
    std::string found;
    for (const auto& [k, v] : r["quantization_found"].items()) {
      found += (found.empty() ? "" : ", ") + k + " " + num(v);
    }
    std::printf("  found:    %s (weights per format)\n", found.c_str());
  }

  const json& pc = r["parameters_from_config"];
  std::printf("\nParameters\n  from config: %s (main %s + MTP %s)\n",
              human_count(pc["total"].get<double>()).c_str(),
              human_count(pc["main"].get<double>()).c_str(),
              human_count(pc["mtp"].get<double>()).c_str());
  if (checkpoint) {
    const json& p = r["parameters"];
    std::printf("  stored: %s parameters, %s of weights\n",
                human_count(p["total"].get<double>()).c_str(),
                human_bytes(p["bytes"].get<double>()).c_str());
    std::printf("  by dtype:\n");
    for (const auto& d : p["by_dtype"]) {
      std::printf("    %-18s %8s elements %12s  (%s tensors)\n",
                  d["dtype"].get<std::string>().c_str(),
                  human_count(d["elements"].get<double>()).c_str(),
                  human_bytes(d["bytes"].get<double>()).c_str(), num(d["tensors"]).c_str());
    }
    std::printf("  by group:\n");
    for (const auto& [g, v] : p["by_group"].items()) {
      std::printf("    %-18s %8s params   %12s\n", g.c_str(),
                  human_count(v["params"].get<double>()).c_str(),
                  human_bytes(v["bytes"].get<double>()).c_str());
    }
  }

  const json& kv = r["kv_cache"];
  std::printf("\nKV cache (per sequence)\n");
  std::printf("  per token of context: %s elements = %s compressed + %s indexer (%s at BF16)\n",
              num(kv["elements_per_token"]).c_str(),
              num(kv["compressed_elements_per_token"]).c_str(),
              num(kv["indexer_elements_per_token"]).c_str(),
              human_bytes(kv["bytes_per_token_bf16"].get<double>()).c_str());
  std::printf("  fixed: sliding windows %s (BF16), %s windows %s, compressor state %s (F32)\n",
              human_bytes(kv["window_bytes_per_sequence_bf16"].get<double>()).c_str(),
              v41 ? "drafter" : "MTP",
              human_bytes(kv["mtp_window_bytes_per_sequence_bf16"].get<double>()).c_str(),
              human_bytes(kv["compressor_state_bytes_per_sequence_f32"].get<double>()).c_str());

  if (checkpoint) {
    std::printf("\n%s: %s\n", v41 ? "DSpark drafter" : "MTP",
                r["mtp"]["available"].get<bool>() ? "available" : "unavailable");
    const json& t = r["tensors"];
    std::printf("Tensors: %s stored, %s expected, %s found, %s unknown\n", num(t["stored"]).c_str(),
                num(t["expected"]).c_str(), num(t["found"]).c_str(), num(t["unknown"]).c_str());
    if (!r["warnings"].empty()) {
      std::printf("\nWarnings\n");
      for (const auto& w : r["warnings"]) std::printf("  - %s\n", w.get<std::string>().c_str());
    }
  }
}

int run(const InspectArgs& a) {
  auto report = inspect_model_json(a.model_dir, a.config_only, a.json_output ? 2 : -1);
  if (!report.ok()) {
    std::fprintf(stderr, "deepinfer inspect: error: %s\n", report.status().message().c_str());
    return 1;
  }
  if (a.json_output) {
    std::printf("%s\n", report->c_str());
  } else {
    print_text(json::parse(*report));
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

void register_inspect_command(CLI::App& app, CommandAction& action) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect",
                                     "Validate a DeepSeek-V4 / V4.1 model directory and summarise "
                                     "its config, weights and KV cache");
  cmd->add_option(
         "MODEL_DIR", args->model_dir,
         "model directory (config.json + safetensors); with --config-only also a config.json")
      ->required();
  cmd->add_flag("--json", args->json_output, "print one JSON object instead of text");
  cmd->add_flag("--config-only", args->config_only,
                "read only config.json (no tensors): sizes, layer kinds, KV cache");
  cmd->callback([args, &action] { action = [args] { return run(*args); }; });
}

}  // namespace deepinfer::cli
