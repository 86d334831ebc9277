// `pvllm chat MODEL`: an interactive chat. Each line read from stdin is a
// user turn; the whole conversation goes through the model's chat template
// (pvllm_apply_chat_template), and the reply streams to stdout as it is
// generated and joins the conversation. /reset starts over, /exit (or the
// end of input) ends. The rendered prompt holds its own BOS, so it is
// submitted with add_special_tokens = 0.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli.h"

namespace pvllm_cli {
namespace {

struct ChatOptions {
  std::string model;
  std::string system;
  std::vector<std::string> vars;
  std::string template_name;
  std::string template_file;
  pvllm_sampling_params sampling;
  uint64_t seed = 0;
  CLI::Option* seed_option = nullptr;
  std::string device = "auto";
  int32_t num_threads = 0;
  int32_t max_model_len = 0;
  std::string quantize;                 // --quantize: a scheme, "" for none
  std::string kv_cache_dtype = "auto";  // --kv-cache-dtype
  bool print_prompt = false;
  bool quiet = false;
};

class ChatSession {
 public:
  explicit ChatSession(const ChatOptions& o) : o_(o) {}

  int run() {
    if (!vars_to_json(o_.vars, &extra_json_)) return 2;
    if (!o_.template_file.empty() && !read_text_input(o_.template_file, &chat_template_)) return 1;
    pvllm_engine_params params = pvllm::cxx::defaults<pvllm_engine_params>();
    params.model_path = o_.model.c_str();
    params.device = o_.device.c_str();
    params.num_threads = o_.num_threads;
    params.max_model_len = o_.max_model_len;
    params.quantize = quantize_value(o_.quantize);
    params.kv_cache_dtype = kv_cache_dtype_value(o_.kv_cache_dtype);
    LoadProgress progress;
    if (!o_.quiet) show_load_progress(&params, &progress);
    try {
      // The end of a turn as the template writes it ("<|im_end|>", "</s>")
      // stops a reply, also where the model's EOS id is another token.
      eos_ = pvllm::cxx::Tokenizer::open(o_.model).info().eos_token;
      engine_ = pvllm::cxx::Engine(params);
    } catch (const pvllm::cxx::Error& e) {
      return report_error("cannot create the engine", e);
    }
    reset();
    const bool interactive = isatty(STDIN_FILENO) != 0;
    std::string line;
    for (;;) {
      if (interactive) std::fputs("> ", stderr);
      if (!std::getline(std::cin, line)) break;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line == "/exit") break;
      if (line == "/reset") {
        reset();
        std::fprintf(stderr, "pvllm: the conversation starts over\n");
        continue;
      }
      if (line.empty()) continue;
      messages_.push_back({{"role", "user"}, {"content", line}});
      std::string reply;
      if (int rc = respond(&reply); rc != 0) return rc;
      messages_.push_back({{"role", "assistant"}, {"content", reply}});
    }
    return 0;
  }

 private:
  void reset() {
    messages_ = nlohmann::json::array();
    if (!o_.system.empty()) messages_.push_back({{"role", "system"}, {"content", o_.system}});
  }

  // The conversation's prompt, as the chat template writes it (its BOS
  // included).
  std::string render_prompt() const {
    const std::string messages = messages_.dump();
    pvllm_chat_template_params params = pvllm::cxx::defaults<pvllm_chat_template_params>();
    params.messages_json = messages.c_str();
    params.extra_context_json = extra_json_.c_str();
    params.template_name = o_.template_name.empty() ? nullptr : o_.template_name.c_str();
    params.chat_template = o_.template_file.empty() ? nullptr : chat_template_.c_str();
    const std::string prompt = engine_.apply_chat_template(params);
    if (o_.print_prompt) std::fprintf(stderr, "--- prompt ---\n%s\n--- end ---\n", prompt.c_str());
    return prompt;
  }

  int respond(std::string* reply) {
    pvllm_sampling_params sampling = o_.sampling;
    sampling.has_seed = o_.seed_option->count() > 0 ? 1 : 0;
    sampling.seed = o_.seed;
    const char* stop[] = {eos_.c_str()};
    if (!eos_.empty()) {
      sampling.stop = stop;
      sampling.num_stop = 1;
    }
    try {
      const std::string prompt = render_prompt();
      pvllm_request request = pvllm::cxx::defaults<pvllm_request>();
      request.prompt_text = prompt.c_str();
      request.add_special_tokens = 0;
      request.sampling = &sampling;
      engine_.submit(request);
      for (bool finished = false; !finished;) {
        engine_.step();
        for (const pvllm_output& event : engine_.poll()) {
          std::fwrite(event.text, 1, event.text_len, stdout);
          reply->append(event.text, event.text_len);
          if (event.finish_reason == PVLLM_FINISH_ERROR) {
            std::fprintf(stderr, "pvllm: generation failed: %s\n", event.error_message);
          }
          finished = finished || event.finish_reason != PVLLM_FINISH_NONE;
        }
        std::fflush(stdout);
      }
    } catch (const pvllm::cxx::Error& e) {
      return report_error("cannot answer", e);
    }
    std::fputc('\n', stdout);
    std::fflush(stdout);
    return 0;
  }

  const ChatOptions& o_;
  pvllm::cxx::Engine engine_;
  nlohmann::json messages_;
  std::string extra_json_;
  std::string chat_template_;  // --chat-template's file
  std::string eos_;
};

}  // namespace

void add_chat_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ChatOptions>();
  o->sampling = pvllm::cxx::defaults<pvllm_sampling_params>();
  o->sampling.max_tokens = 256;
  CLI::App* sub = app.add_subcommand(
      "chat",
      "Chat with a model through its chat template: each stdin line is a user turn, the reply "
      "streams to stdout. /reset starts over, /exit or end of input quits.");
  sub->footer(
      "Examples:\n"
      "  pvllm chat models/stories260K --chat-template examples/chat_template.jinja\n"
      "  pvllm chat models/TinyLlama-1.1B-Chat --system \"You are terse.\" --temperature 0.7");
  sub->add_option("model", o->model,
                  "A model with a chat template (tokenizer_config.json, chat_template.jinja, "
                  "or --chat-template): any path `generate` takes")
      ->required();
  sub->add_option("--system", o->system, "A system message that opens the conversation");
  sub->add_option("--var", o->vars,
                  "A template variable as key=json, e.g. enable_thinking=false; repeatable")
      ->allow_extra_args(false);
  sub->add_option("--template-name", o->template_name, "A named template of the model");
  sub->add_option("--chat-template", o->template_file,
                  "A Jinja chat template file to use instead of the model's (for a model that "
                  "ships none)");
  sub->add_flag("-q,--quiet", o->quiet, "Print no load progress on stderr");
  sub->add_flag("--print-prompt", o->print_prompt, "Print each rendered prompt on stderr");
  const char* sampling = "Sampling";
  sub->add_option("--max-tokens", o->sampling.max_tokens, "Tokens per reply at most")
      ->capture_default_str()
      ->group(sampling);
  sub->add_option("-t,--temperature", o->sampling.temperature, "Sampling temperature; 0 = greedy")
      ->capture_default_str()
      ->group(sampling);
  sub->add_option("--top-p", o->sampling.top_p, "Nucleus sampling mass; 1 = off")
      ->capture_default_str()
      ->group(sampling);
  sub->add_option("--top-k", o->sampling.top_k, "Keep the k most likely tokens; 0 = off")
      ->capture_default_str()
      ->group(sampling);
  sub->add_option("--min-p", o->sampling.min_p, "Drop tokens below min-p times the best; 0 = off")
      ->capture_default_str()
      ->group(sampling);
  sub->add_option("--repetition-penalty", o->sampling.repetition_penalty,
                  "Divide the logits of tokens already seen; 1 = off")
      ->capture_default_str()
      ->group(sampling);
  o->seed_option =
      sub->add_option("--seed", o->seed, "Random seed (default: random)")->group(sampling);
  const char* engine = "Engine";
  sub->add_option("--device", o->device, kDeviceOption)->capture_default_str()->group(engine);
  sub->add_option("--threads", o->num_threads, "CPU threads; 0 = all cores")->group(engine);
  sub->add_option("--max-model-len", o->max_model_len, "Context length; 0 = the model's")
      ->group(engine);
  add_quantize_option(sub, &o->quantize, engine);
  add_kv_cache_dtype_option(sub, &o->kv_cache_dtype, engine);
  sub->callback([o, exit_code] { *exit_code = ChatSession(*o).run(); });
}

}  // namespace pvllm_cli
