// `pvllm chat-template PATH --messages FILE`: prints the prompt a model's
// chat template makes of a conversation. It needs no engine (and loads no
// weights): it renders through pvllm_tokenizer.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"

namespace pvllm_cli {
namespace {

struct ChatTemplateOptions {
  std::string path;
  std::string messages_file;
  std::string tools_file;
  std::vector<std::string> vars;
  std::string template_name;
  std::string template_file;
  bool no_generation_prompt = false;
};

int run_chat_template(const ChatTemplateOptions& o) {
  std::string messages;
  if (!read_text_input(o.messages_file, &messages)) return 1;
  std::string tools;
  if (!o.tools_file.empty() && !read_text_input(o.tools_file, &tools)) return 1;
  std::string extra;
  if (!vars_to_json(o.vars, &extra)) return 2;
  std::string chat_template;
  if (!o.template_file.empty() && !read_text_input(o.template_file, &chat_template)) return 1;

  pvllm_chat_template_params params = pvllm::cxx::defaults<pvllm_chat_template_params>();
  params.messages_json = messages.c_str();
  params.tools_json = o.tools_file.empty() ? nullptr : tools.c_str();
  params.extra_context_json = extra.c_str();
  params.add_generation_prompt = o.no_generation_prompt ? 0 : 1;
  params.template_name = o.template_name.empty() ? nullptr : o.template_name.c_str();
  params.chat_template = o.template_file.empty() ? nullptr : chat_template.c_str();
  std::string prompt;
  try {
    prompt = pvllm::cxx::Tokenizer::open(o.path).apply_chat_template(params);
  } catch (const pvllm::cxx::Error& e) {
    return report_error("cannot render the chat template", e);
  }
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  return 0;
}

}  // namespace

bool read_text_input(const std::string& file, std::string* out) {
  std::stringstream buf;
  if (file == "-") {
    buf << std::cin.rdbuf();
  } else {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "pvllm: cannot read %s\n", file.c_str());
      return false;
    }
    buf << in.rdbuf();
  }
  *out = buf.str();
  return true;
}

bool vars_to_json(const std::vector<std::string>& vars, std::string* out) {
  std::string json = "{";
  for (size_t i = 0; i < vars.size(); ++i) {
    const size_t eq = vars[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "pvllm: --var %s is not key=json\n", vars[i].c_str());
      return false;
    }
    const std::string key = vars[i].substr(0, eq);
    if (key.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") !=
        std::string::npos) {
      std::fprintf(stderr, "pvllm: --var %s: the key must be a variable name\n", vars[i].c_str());
      return false;
    }
    json += (i > 0 ? ", \"" : "\"") + key + "\": " + vars[i].substr(eq + 1);
  }
  *out = json + "}";
  return true;
}

void add_chat_template_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ChatTemplateOptions>();
  CLI::App* sub = app.add_subcommand(
      "chat-template", "Print the prompt a model's chat template makes of a conversation.");
  sub->footer(
      "Examples:\n"
      "  echo '[{\"role\": \"user\", \"content\": \"Hi\"}]' | pvllm chat-template "
      "models/stories260K --messages - --chat-template examples/chat_template.jinja\n"
      "  echo '[{\"role\": \"user\", \"content\": \"Hi\"}]' | pvllm chat-template models/Qwen3 "
      "--messages - --var enable_thinking=false");
  sub->add_option("path", o->path, kModelPathOption)->required();
  sub->add_option("--messages", o->messages_file,
                  "A JSON array of OpenAI-style messages; - reads stdin")
      ->required();
  sub->add_option("--tools", o->tools_file, "A JSON array of tool schemas");
  sub->add_option("--var", o->vars,
                  "A template variable as key=json, e.g. enable_thinking=false; repeatable")
      ->allow_extra_args(false);
  sub->add_option("--template-name", o->template_name,
                  "A named template of a model that ships several (default: tool_use when "
                  "--tools is given and the model has it, else default)");
  sub->add_option("--chat-template", o->template_file,
                  "A Jinja chat template file to render instead of the model's");
  sub->add_flag("--no-generation-prompt", o->no_generation_prompt,
                "Do not end with the header that opens the assistant's turn");
  sub->callback([o, exit_code] { *exit_code = run_chat_template(*o); });
}

}  // namespace pvllm_cli
