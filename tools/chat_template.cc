// `pvllm chat-template PATH --messages FILE`: prints the prompt a model's
// chat template makes of a conversation. It needs no engine (and loads no
// weights), so it reads the template with the core's chat library directly.
#include "core/chat/chat_template.h"

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
  bool no_generation_prompt = false;
};

int fail(const std::string& what, const pvllm::Status& st) {
  std::fprintf(stderr, "pvllm: %s: %s\n", what.c_str(), st.message().c_str());
  return 1;
}

int run_chat_template(const ChatTemplateOptions& o) {
  std::string messages;
  if (!read_text_input(o.messages_file, &messages)) return 1;
  std::string tools;
  if (!o.tools_file.empty() && !read_text_input(o.tools_file, &tools)) return 1;
  std::string extra;
  if (!vars_to_json(o.vars, &extra)) return 2;

  pvllm::chat::ChatRequest request;
  pvllm::Status st = pvllm::chat::parse_chat_request(
      messages.c_str(), o.tools_file.empty() ? nullptr : tools.c_str(), extra.c_str(), &request);
  if (!st.ok()) return fail("bad input", st);
  request.add_generation_prompt = !o.no_generation_prompt;
  request.template_name = o.template_name;
  pvllm::chat::ChatTemplates templates;
  st = pvllm::chat::ChatTemplates::load(o.path, &templates);
  if (!st.ok()) return fail("cannot read the chat template", st);
  std::string prompt;
  st = templates.apply(request, &prompt);
  if (!st.ok()) return fail("cannot render the chat template", st);
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
      "Example:\n"
      "  echo '[{\"role\": \"user\", \"content\": \"Hi\"}]' | pvllm chat-template models/Qwen3 "
      "--messages - --var enable_thinking=false");
  sub->add_option("path", o->path,
                  "A model folder (or any folder with tokenizer_config.json or "
                  "chat_template.jinja), or a llama2.c .bin beside one")
      ->required();
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
  sub->add_flag("--no-generation-prompt", o->no_generation_prompt,
                "Do not end with the header that opens the assistant's turn");
  sub->callback([o, exit_code] { *exit_code = run_chat_template(*o); });
}

}  // namespace pvllm_cli
