// Prompt rendering for DeepSeek-V4; see render.h. Comments name the function of
// encoding_dsv4.py each rule comes from.
#include "tokenizer/chat/render.h"

#include <algorithm>
#include <map>

#include "tokenizer/chat/dsml.h"
#include "tokenizer/chat/special_tokens.h"

namespace deepinfer::chat {

const char* role_name(Role role) {
  switch (role) {
    case Role::kSystem:
      return "system";
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
    case Role::kTool:
      return "tool";
    case Role::kDeveloper:
      return "developer";
    case Role::kLatestReminder:
      return "latest_reminder";
  }
  return "?";
}

namespace {

// REASONING_EFFORT_MAX (preview) = REASONING_EFFORT_PROMPTS["high"] (0731).
constexpr std::string_view kEffortAbsoluteMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n";
// REASONING_EFFORT_PROMPTS["max"] (0731 only).
constexpr std::string_view kEffortBeyondMax =
    "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: "
    "exhaustively decompose the problem into its most fundamental components, trace every causal "
    "chain to its root, and resolve the underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple "
    "angles and are certain that no assumption remains unchecked and no error remains "
    "undiscovered.\n\n";

constexpr std::string_view kResponseFormatHead =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

// A user turn after merge_tool_messages: text and tool_result blocks joined with "\n\n".
struct ContentBlock {
  bool is_tool_result = false;
  std::string text;
  std::string tool_use_id;
};

struct Item {
  ChatMessage msg;
  std::vector<ContentBlock> blocks;  // user items only (every user item has blocks after merge)
  std::size_t origin = 0;            // index in the caller's list, for error messages
};

std::string where(std::size_t i) { return "messages[" + std::to_string(i) + "]"; }

Status validate(const std::vector<ChatMessage>& messages) {
  std::size_t last_assistant = messages.size();  // none yet
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (!m.task.empty() && task_token(m.task).empty()) {
      return invalid_argument(where(i) + ".task: unknown task '" + m.task +
                              "' (expected action, query, authority, domain, title or read_url)");
    }
    if (!m.tools.empty() && m.role != Role::kSystem && m.role != Role::kDeveloper) {
      return invalid_argument(where(i) + ".tools: only system and developer messages carry tools");
    }
    if (!m.tool_calls.empty() && m.role != Role::kAssistant) {
      return invalid_argument(where(i) + ".tool_calls: only assistant messages carry tool calls");
    }
    for (std::size_t j = 0; j < m.tool_calls.size(); ++j) {
      if (m.tool_calls[j].name.empty()) {
        return invalid_argument(where(i) + ".tool_calls[" + std::to_string(j) +
                                "].function.name: missing or empty");
      }
    }
    if (m.role == Role::kDeveloper && m.content.empty()) {
      // render_message asserts `content` for developer messages.
      return invalid_argument(where(i) + ".content: a developer message needs non-empty content");
    }
    if (m.role == Role::kTool) {
      if (last_assistant == messages.size() || messages[last_assistant].tool_calls.empty()) {
        return invalid_argument(where(i) +
                                ": tool message without a preceding assistant message with "
                                "tool_calls");
      }
      const auto& calls = messages[last_assistant].tool_calls;
      const bool any_id =
          std::any_of(calls.begin(), calls.end(), [](const ToolCall& c) { return !c.id.empty(); });
      if (any_id && !m.tool_call_id.empty() &&
          std::none_of(calls.begin(), calls.end(),
                       [&](const ToolCall& c) { return c.id == m.tool_call_id; })) {
        return invalid_argument(where(i) + ".tool_call_id: '" + m.tool_call_id +
                                "' matches no tool call of " + where(last_assistant));
      }
    }
    if (m.role == Role::kAssistant) last_assistant = i;
  }
  return Status::ok_status();
}

// merge_tool_messages: tool results become tool_result blocks of a user turn; a user message
// joins a preceding user turn unless that turn carries a task.
std::vector<Item> merge_tool_messages(const std::vector<ChatMessage>& messages,
                                      const std::vector<std::size_t>& origin) {
  std::vector<Item> merged;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == Role::kTool) {
      ContentBlock block{true, m.content, m.tool_call_id};
      if (!merged.empty() && merged.back().msg.role == Role::kUser) {
        merged.back().blocks.push_back(std::move(block));
      } else {
        Item item;
        item.msg.role = Role::kUser;
        item.blocks.push_back(std::move(block));
        item.origin = origin[i];
        merged.push_back(std::move(item));
      }
    } else if (m.role == Role::kUser) {
      ContentBlock block{false, m.content, {}};
      if (!merged.empty() && merged.back().msg.role == Role::kUser &&
          merged.back().msg.task.empty()) {
        merged.back().blocks.push_back(std::move(block));
      } else {
        Item item;
        item.msg = m;
        item.blocks.push_back(std::move(block));
        item.origin = origin[i];
        merged.push_back(std::move(item));
      }
    } else {
      merged.push_back(Item{m, {}, origin[i]});
    }
  }
  return merged;
}

// sort_tool_results_by_call_order: within a user turn, tool_result blocks follow the order of
// the latest assistant tool_calls (unknown ids sort as position 0; the sort is stable).
void sort_tool_results_by_call_order(std::vector<Item>& items) {
  std::map<std::string, std::size_t> order;
  for (Item& item : items) {
    if (item.msg.role == Role::kAssistant && !item.msg.tool_calls.empty()) {
      order.clear();
      for (std::size_t j = 0; j < item.msg.tool_calls.size(); ++j) {
        if (!item.msg.tool_calls[j].id.empty()) order[item.msg.tool_calls[j].id] = j;
      }
    } else if (item.msg.role == Role::kUser && !order.empty()) {
      std::vector<ContentBlock> results;
      for (const auto& b : item.blocks) {
        if (b.is_tool_result) results.push_back(b);
      }
      if (results.size() < 2) continue;
      auto rank = [&](const ContentBlock& b) {
        auto it = order.find(b.tool_use_id);
        return it == order.end() ? std::size_t{0} : it->second;
      };
      std::stable_sort(
          results.begin(), results.end(),
          [&](const ContentBlock& a, const ContentBlock& b) { return rank(a) < rank(b); });
      std::size_t k = 0;
      for (auto& b : item.blocks) {
        if (b.is_tool_result) b = results[k++];
      }
    }
  }
}

long find_last_user_index(const std::vector<Item>& items) {
  for (std::size_t i = items.size(); i-- > 0;) {
    if (items[i].msg.role == Role::kUser || items[i].msg.role == Role::kDeveloper) {
      return static_cast<long>(i);
    }
  }
  return -1;
}

// _drop_thinking_messages: before the last user turn, assistants lose their reasoning and
// developer messages are removed.
std::vector<Item> drop_thinking_messages(std::vector<Item> items) {
  const long last_user = find_last_user_index(items);
  std::vector<Item> out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Role role = items[i].msg.role;
    if (role == Role::kUser || role == Role::kSystem || role == Role::kLatestReminder ||
        static_cast<long>(i) >= last_user) {
      out.push_back(std::move(items[i]));
    } else if (role == Role::kAssistant) {
      items[i].msg.reasoning_content.reset();
      out.push_back(std::move(items[i]));
    }
  }
  return out;
}

std::string system_like_suffix(const ChatMessage& m) {
  std::string out;
  if (!m.tools.empty()) out += "\n\n" + render_tools_section(m.tools);
  if (!m.response_format_json.empty()) {
    out += "\n\n";
    out += kResponseFormatHead;
    out += m.response_format_json;
  }
  return out;
}

struct RenderContext {
  bool thinking = false;
  bool drop_thinking = true;
  bool add_generation_prompt = true;
  long last_user = -1;
  std::string preamble;
};

// render_message: one message plus the transition that follows it.
Status render_message(std::size_t index, const std::vector<Item>& items, const RenderContext& ctx,
                      std::string& prompt) {
  const Item& item = items[index];
  const ChatMessage& m = item.msg;
  const long idx = static_cast<long>(index);
  if (index == 0 && ctx.thinking) prompt += ctx.preamble;

  switch (m.role) {
    case Role::kSystem:
      prompt += m.content;
      prompt += system_like_suffix(m);
      break;
    case Role::kDeveloper:
      prompt += kUserToken;
      prompt += m.content;
      prompt += system_like_suffix(m);
      break;
    case Role::kUser:
      prompt += kUserToken;
      for (std::size_t b = 0; b < item.blocks.size(); ++b) {
        if (b > 0) prompt += "\n\n";
        const ContentBlock& block = item.blocks[b];
        prompt +=
            block.is_tool_result ? "<tool_result>" + block.text + "</tool_result>" : block.text;
      }
      break;
    case Role::kLatestReminder:
      prompt += kLatestReminderToken;
      prompt += m.content;
      break;
    case Role::kTool:  // merged away above
      return internal_error("tool message survived merge_tool_messages");
    case Role::kAssistant: {
      const bool prev_has_task = index > 0 && !items[index - 1].msg.task.empty();
      if (ctx.thinking && !prev_has_task && (!ctx.drop_thinking || idx > ctx.last_user)) {
        prompt += m.reasoning_content.value_or("");
        prompt += kThinkEnd;
      }
      prompt += m.content;
      if (!m.tool_calls.empty()) {
        DI_ASSIGN_OR_RETURN(std::string calls, render_tool_calls(m.tool_calls, where(item.origin)));
        prompt += calls;
      }
      if (!m.wo_eos) prompt += kEosToken;
      break;
    }
  }

  // Transition: only before an assistant / latest_reminder message or at the end.
  if (index + 1 < items.size()) {
    const Role next = items[index + 1].msg.role;
    if (next != Role::kAssistant && next != Role::kLatestReminder) return Status::ok_status();
  } else if (!ctx.add_generation_prompt) {
    return Status::ok_status();
  }
  if (!m.task.empty()) {
    if (m.task == "action") {
      prompt += kAssistantToken;
      prompt += ctx.thinking ? kThinkStart : kThinkEnd;
    }
    prompt += task_token(m.task);
  } else if (m.role == Role::kUser || m.role == Role::kDeveloper) {
    prompt += kAssistantToken;
    const bool open_thinking = ctx.thinking && (!ctx.drop_thinking || idx >= ctx.last_user);
    prompt += open_thinking ? kThinkStart : kThinkEnd;
  }
  return Status::ok_status();
}

}  // namespace

Expected<std::string> reasoning_effort_preamble(ReasoningEffort effort, EffortProfile profile) {
  if (profile == EffortProfile::kPreview) {
    switch (effort) {
      case ReasoningEffort::kNone:
      case ReasoningEffort::kHigh:
        return std::string();
      case ReasoningEffort::kMax:
        return std::string(kEffortAbsoluteMax);
      case ReasoningEffort::kLow:
        return invalid_argument(
            "reasoning_effort 'low' is not defined by the DeepSeek-V4 preview chat format "
            "(it accepts high or max); use the 0731 effort profile for low/high/max");
    }
  }
  switch (effort) {
    case ReasoningEffort::kNone:
    case ReasoningEffort::kLow:
      return std::string();
    case ReasoningEffort::kHigh:
      return std::string(kEffortAbsoluteMax);
    case ReasoningEffort::kMax:
      return std::string(kEffortBeyondMax);
  }
  return std::string();
}

Expected<std::string> render_prompt(const std::vector<ChatMessage>& messages,
                                    const RenderOptions& options) {
  DI_TRY(validate(messages));
  RenderContext ctx;
  ctx.thinking = options.thinking;
  ctx.add_generation_prompt = options.add_generation_prompt;
  DI_ASSIGN_OR_RETURN(ctx.preamble,
                      reasoning_effort_preamble(options.reasoning_effort, options.effort_profile));

  // Request-level tools (vLLM's placement, see RenderOptions::tools).
  std::vector<ChatMessage> msgs = messages;
  std::vector<std::size_t> origin;
  origin.reserve(msgs.size() + 1);
  if (!options.tools.empty()) {
    if (!msgs.empty() && (msgs[0].role == Role::kSystem || msgs[0].role == Role::kDeveloper)) {
      msgs[0].tools = options.tools;
    } else {
      ChatMessage system;
      system.role = Role::kSystem;
      system.tools = options.tools;
      msgs.insert(msgs.begin(), std::move(system));
      origin.push_back(0);  // the inserted message reports as messages[0]
    }
  }
  for (std::size_t i = 0; i < messages.size(); ++i) origin.push_back(i);
  if (options.continue_final_message) {
    if (msgs.empty() || msgs.back().role != Role::kAssistant) {
      return invalid_argument(
          "continue_final_message: the last message must be an assistant message to continue");
    }
    msgs.back().wo_eos = true;
  }

  std::vector<Item> items = merge_tool_messages(msgs, origin);
  sort_tool_results_by_call_order(items);

  // encode_messages: any message with tools disables drop_thinking.
  const bool has_tools =
      std::any_of(items.begin(), items.end(), [](const Item& it) { return !it.msg.tools.empty(); });
  ctx.drop_thinking = options.drop_thinking && !has_tools;
  if (ctx.thinking && ctx.drop_thinking) items = drop_thinking_messages(std::move(items));
  ctx.last_user = find_last_user_index(items);

  std::string prompt = options.add_bos ? std::string(kBosToken) : std::string();
  for (std::size_t i = 0; i < items.size(); ++i) {
    DI_TRY(render_message(i, items, ctx, prompt));
  }
  return prompt;
}

}  // namespace deepinfer::chat
