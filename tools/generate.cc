// `pvllm generate`: submits every prompt as a concurrent request, steps the
// engine until all of them finish and prints what they generated.
//
// One request without --json streams its text as it is generated; several
// requests (or samples) print each text, labelled, when it finishes; --json
// prints one object per line per finished sample.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cli.h"

namespace pvllm_cli {
namespace {

struct GenerateOptions {
  std::string model;
  std::string random_weights;  // a shape name: random bf16 weights, no tokenizer
  std::vector<std::string> prompts;
  std::vector<std::string> prompt_ids;  // "1,2,3": token-id prompts, one per request
  std::string prompts_file;
  pvllm_sampling_params sampling;
  pvllm_engine_params engine;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  // Structured output: at most one of these.
  std::string json_schema_file;
  bool json_object = false;
  std::string grammar_file;
  std::string regex;
  std::vector<std::string> choices;
  bool json_whitespace = false;           // --json-whitespace
  bool json_unlisted_properties = false;  // --json-unlisted-properties
  bool json_any_order = false;            // --json-any-order
  bool ignore_eos = false;
  std::string early_stopping = "heuristic";  // --early-stopping: heuristic, true or never
  CLI::Option* temperature_option = nullptr;
  uint64_t seed = 0;
  CLI::Option* seed_option = nullptr;
  int32_t priority = 0;
  std::string device = "auto";
  std::string model_checksums = "full";  // a .pvllm file's: full, lazy or none
  std::string dtype = "auto";            // --dtype
  std::string quantize;                  // --quantize: a scheme, "" for none
  SpeculativeFlags speculative;          // --speculative, --speculative-tokens, ...
  std::string kv_cache_dtype = "auto";   // --kv-cache-dtype
  int64_t kv_cache_mb = 0;
  bool no_prefix_caching = false;
  bool json = false;
  bool quiet = false;
};

struct TokenLogprobs {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<pvllm_logprob> top;  // best first
};

struct Sample {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprobs> logprobs;  // one per token when --logprobs was given
  int32_t finish_reason = PVLLM_FINISH_NONE;
  std::string error;
  double score = 0.0;  // a beam search hypothesis'
};

struct RequestState {
  size_t index = 0;
  std::string prompt;
  std::vector<Sample> samples;  // [n]
};

const char* finish_reason_name(int32_t reason) {
  switch (reason) {
    case PVLLM_FINISH_NONE:
      return "none";
    case PVLLM_FINISH_STOP:
      return "stop";
    case PVLLM_FINISH_LENGTH:
      return "length";
    case PVLLM_FINISH_ABORT:
      return "abort";
    case PVLLM_FINISH_ERROR:
      return "error";
  }
  return "unknown";
}

// JSON that stores floats as float: a logprob prints as the shortest text
// that reads back as the same float (-0.0317028), not as the double it
// widens to (-0.031702801585197449), and an infinite one as null. Keys keep
// their insertion order.
using Json = nlohmann::basic_json<nlohmann::ordered_map, std::vector, std::string, bool,
                                  std::int64_t, std::uint64_t, float>;

std::string sample_json(const RequestState& r, size_t sample_index, bool with_logprobs,
                        bool beam_search) {
  const Sample& s = r.samples[sample_index];
  Json j;
  j["request"] = r.index;
  j["sample"] = sample_index;
  j["prompt"] = r.prompt;
  j["text"] = s.text;
  j["token_ids"] = s.token_ids;
  j["finish_reason"] = finish_reason_name(s.finish_reason);
  if (beam_search) j["score"] = s.score;
  if (with_logprobs) {
    Json logprobs = Json::array();
    for (const TokenLogprobs& lp : s.logprobs) {
      Json top = Json::array();
      for (const pvllm_logprob& alt : lp.top) {
        top.push_back({{"token_id", alt.token_id}, {"logprob", alt.logprob}});
      }
      logprobs.push_back({{"token_id", lp.token_id}, {"logprob", lp.logprob}, {"top", top}});
    }
    j["logprobs"] = std::move(logprobs);
  }
  if (s.finish_reason == PVLLM_FINISH_ERROR) j["error"] = s.error;
  // The library's text is valid UTF-8, a prompt read from a file may not
  // be: its invalid bytes print as U+FFFD instead of throwing.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool collect_prompts(const GenerateOptions& o, std::vector<std::string>* prompts) {
  *prompts = o.prompts;
  if (o.prompts_file.empty()) return true;
  std::ifstream file_in;
  std::istream* in = &std::cin;
  if (o.prompts_file != "-") {
    file_in.open(o.prompts_file);
    if (!file_in) {
      std::fprintf(stderr, "pvllm: cannot read prompts file %s\n", o.prompts_file.c_str());
      return false;
    }
    in = &file_in;
  }
  std::string line;
  while (std::getline(*in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) prompts->push_back(line);
  }
  return true;
}

// "1,2,3" -> {1, 2, 3}; false for anything else.
bool parse_ids(const std::string& text, std::vector<int32_t>* ids) {
  ids->clear();
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos ||
        item.size() > 9) {
      return false;
    }
    ids->push_back(static_cast<int32_t>(std::stol(item)));
    pos = comma + 1;
  }
  return !ids->empty();
}

class Generator {
 public:
  Generator(const GenerateOptions& o, std::vector<std::string> prompts)
      : o_(o), prompts_(std::move(prompts)) {}

  int run() {
    if (int rc = create_engine(); rc != 0) return rc;
    if (int rc = submit_all(); rc != 0) return rc;
    const auto start = std::chrono::steady_clock::now();
    if (int rc = step_until_done(); rc != 0) return rc;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!o_.quiet) print_summary(seconds);
    return any_sample_failed_ ? 1 : 0;
  }

 private:
  int create_engine() {
    pvllm_engine_params params = o_.engine;
    params.model_path = o_.model.empty() ? nullptr : o_.model.c_str();
    params.random_weights = o_.random_weights.empty() ? nullptr : o_.random_weights.c_str();
    params.device = o_.device.c_str();
    params.kv_cache_bytes = o_.kv_cache_mb * (int64_t{1} << 20);
    params.enable_prefix_caching = o_.no_prefix_caching ? 0 : 1;
    params.dtype = dtype_value(o_.dtype);
    params.quantize = quantize_value(o_.quantize);
    params.kv_cache_dtype = kv_cache_dtype_value(o_.kv_cache_dtype);
    apply_speculative(o_.speculative, &params);
    params.model_checksums = o_.model_checksums == "lazy"   ? PVLLM_MODEL_CHECKSUMS_LAZY
                             : o_.model_checksums == "none" ? PVLLM_MODEL_CHECKSUMS_NONE
                                                            : PVLLM_MODEL_CHECKSUMS_FULL;
    if (!o_.quiet) show_load_progress(&params, &progress_);
    try {
      engine_ = pvllm::cxx::Engine(params);
    } catch (const pvllm::cxx::Error& e) {
      return report_error("cannot create the engine", e);
    }
    return 0;
  }

  // --json-schema, --json-object, --grammar, --regex or --choice: the
  // sampling params' constraint (files read here; `choices` keeps the
  // pointers alive).
  int set_constraint(pvllm_sampling_params* sampling, std::vector<const char*>* choices) {
    int given = !o_.json_schema_file.empty() + o_.json_object + !o_.grammar_file.empty() +
                !o_.regex.empty() + !o_.choices.empty();
    if (given > 1) {
      std::fprintf(stderr,
                   "pvllm: give at most one of --json-schema, --json-object, --grammar, --regex "
                   "and --choice\n");
      return 2;
    }
    const std::string& file = !o_.json_schema_file.empty() ? o_.json_schema_file : o_.grammar_file;
    if (!file.empty()) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "pvllm: cannot read %s\n", file.c_str());
        return 1;
      }
      constraint_text_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      sampling->constraint_kind =
          o_.json_schema_file.empty() ? PVLLM_CONSTRAINT_GRAMMAR : PVLLM_CONSTRAINT_JSON_SCHEMA;
      sampling->constraint = constraint_text_.c_str();
    } else if (o_.json_object) {
      sampling->constraint_kind = PVLLM_CONSTRAINT_JSON_OBJECT;
    } else if (!o_.regex.empty()) {
      sampling->constraint_kind = PVLLM_CONSTRAINT_REGEX;
      sampling->constraint = o_.regex.c_str();
    } else if (!o_.choices.empty()) {
      for (const std::string& c : o_.choices) choices->push_back(c.c_str());
      sampling->constraint_kind = PVLLM_CONSTRAINT_CHOICE;
      sampling->choices = choices->data();
      sampling->num_choices = choices->size();
    }
    const bool json = !o_.json_schema_file.empty() || o_.json_object;
    if ((o_.json_whitespace || o_.json_unlisted_properties || o_.json_any_order) && !json) {
      std::fprintf(stderr,
                   "pvllm: --json-whitespace, --json-unlisted-properties and --json-any-order go "
                   "with --json-schema or --json-object\n");
      return 2;
    }
    sampling->constraint_flags =
        (o_.json_whitespace ? PVLLM_CONSTRAINT_JSON_WHITESPACE : 0u) |
        (o_.json_unlisted_properties ? PVLLM_CONSTRAINT_JSON_UNLISTED_PROPERTIES : 0u) |
        (o_.json_any_order ? PVLLM_CONSTRAINT_JSON_ANY_ORDER : 0u);
    return 0;
  }

  int submit_all() {
    pvllm_sampling_params sampling = o_.sampling;
    sampling.ignore_eos = o_.ignore_eos ? 1 : 0;
    sampling.has_seed = o_.seed_option->count() > 0 ? 1 : 0;
    sampling.seed = o_.seed;
    if (sampling.beam_width > 0) {
      // Beam search ranks the raw distribution: greedy unless asked.
      if (o_.temperature_option->count() == 0) sampling.temperature = 0.0f;
      sampling.early_stopping = o_.early_stopping == "true"    ? PVLLM_EARLY_STOPPING_TRUE
                                : o_.early_stopping == "never" ? PVLLM_EARLY_STOPPING_NEVER
                                                               : PVLLM_EARLY_STOPPING_HEURISTIC;
    }
    std::vector<const char*> stop;
    for (const std::string& s : o_.stop) stop.push_back(s.c_str());
    sampling.stop = stop.empty() ? nullptr : stop.data();
    sampling.num_stop = stop.size();
    sampling.stop_token_ids = o_.stop_token_ids.empty() ? nullptr : o_.stop_token_ids.data();
    sampling.num_stop_token_ids = o_.stop_token_ids.size();
    std::vector<const char*> choices;
    if (int rc = set_constraint(&sampling, &choices); rc != 0) return rc;
    const size_t num_samples = sampling.n > 0 ? static_cast<size_t>(sampling.n) : 1;

    for (size_t i = 0; i < prompts_.size(); ++i) {
      pvllm_request request = pvllm::cxx::defaults<pvllm_request>();
      std::vector<int32_t> ids;
      if (!o_.prompt_ids.empty()) {
        if (!parse_ids(prompts_[i], &ids)) {
          std::fprintf(stderr, "pvllm: --prompt-ids \"%s\" is not a comma-separated id list\n",
                       prompts_[i].c_str());
          return 1;
        }
        request.prompt_token_ids = ids.data();
        request.num_prompt_token_ids = ids.size();
      } else {
        request.prompt_text = prompts_[i].c_str();
      }
      request.sampling = &sampling;
      request.priority = o_.priority;
      uint64_t id = 0;
      try {
        id = engine_.submit(request);
      } catch (const pvllm::cxx::Error& e) {
        return report_error("cannot submit prompt " + std::to_string(i), e);
      }
      RequestState& r = requests_[id];
      r.index = i;
      r.prompt = prompts_[i];
      r.samples.resize(num_samples);
      num_samples_left_ += num_samples;
    }
    streaming_ = requests_.size() == 1 && num_samples == 1 && !o_.json && o_.prompt_ids.empty() &&
                 sampling.beam_width == 0;
    if (streaming_) {
      // The continuation reads on from the prompt, as in the labelled form.
      std::fputs(prompts_[0].c_str(), stdout);
      std::fflush(stdout);
    }
    return 0;
  }

  int step_until_done() {
    while (num_samples_left_ > 0) {
      int32_t num_unfinished = -1;  // unknown after a failed step
      try {
        num_unfinished = engine_.step();
      } catch (const pvllm::cxx::Error& e) {
        // The failed requests end with FINISH_ERROR events; keep stepping
        // the others.
        report_error("step failed", e);
      }
      if (int rc = drain(); rc != 0) return rc;
      if (num_unfinished == 0 && num_samples_left_ > 0) {
        std::fprintf(stderr, "pvllm: the engine has no work left but %zu samples never finished\n",
                     num_samples_left_);
        return 1;
      }
    }
    return 0;
  }

  int drain() {
    pvllm::cxx::OutputBatch batch;
    try {
      batch = engine_.poll();
    } catch (const pvllm::cxx::Error& e) {
      return report_error("poll failed", e);
    }
    for (const pvllm_output& event : batch) handle(event);
    return 0;
  }

  void handle(const pvllm_output& event) {
    auto it = requests_.find(event.request_id);
    if (it == requests_.end() || event.sample_index < 0 ||
        static_cast<size_t>(event.sample_index) >= it->second.samples.size()) {
      std::fprintf(stderr, "pvllm: ignoring an event for unknown request %llu\n",
                   static_cast<unsigned long long>(event.request_id));
      return;
    }
    RequestState& r = it->second;
    Sample& s = r.samples[event.sample_index];
    s.token_ids.insert(s.token_ids.end(), event.token_ids, event.token_ids + event.num_token_ids);
    s.text.append(event.text, event.text_len);
    if (event.logprobs != nullptr) {
      for (size_t t = 0; t < event.num_token_ids; ++t) {
        const pvllm_token_logprobs& lp = event.logprobs[t];
        s.logprobs.push_back({lp.token_id, lp.logprob, {lp.top, lp.top + lp.num_top}});
      }
    }
    if (streaming_ && event.text_len > 0) {
      std::fwrite(event.text, 1, event.text_len, stdout);
      std::fflush(stdout);
    }
    if (event.finish_reason == PVLLM_FINISH_NONE) return;
    s.finish_reason = event.finish_reason;
    s.error = event.error_message != nullptr ? event.error_message : "";
    s.score = event.score;
    --num_samples_left_;
    finish(r, static_cast<size_t>(event.sample_index));
  }

  void finish(const RequestState& r, size_t sample_index) {
    const Sample& s = r.samples[sample_index];
    if (s.finish_reason == PVLLM_FINISH_ERROR) {
      any_sample_failed_ = true;
      std::fprintf(stderr, "pvllm: request %zu sample %zu failed: %s\n", r.index, sample_index,
                   s.error.c_str());
    }
    if (o_.json) {
      std::printf("%s\n", sample_json(r, sample_index, o_.sampling.logprobs >= 0,
                                      o_.sampling.beam_width > 0)
                              .c_str());
    } else if (streaming_) {
      std::printf("\n");
    } else if (!o_.prompt_ids.empty()) {
      // Token-id prompts (random-weights models have no tokenizer): ids out.
      std::string ids;
      for (int32_t t : s.token_ids) {
        if (!ids.empty()) ids += ',';
        ids += std::to_string(t);
      }
      std::printf("--- request %zu, sample %zu (%s) ---\n[%s] -> [%s]\n", r.index, sample_index,
                  finish_reason_name(s.finish_reason), r.prompt.c_str(), ids.c_str());
    } else if (o_.sampling.beam_width > 0) {
      std::printf("--- request %zu, hypothesis %zu (%s, score %.4f) ---\n%s%s\n", r.index,
                  sample_index, finish_reason_name(s.finish_reason), s.score, r.prompt.c_str(),
                  s.text.c_str());
    } else {
      std::printf("--- request %zu, sample %zu (%s) ---\n%s%s\n", r.index, sample_index,
                  finish_reason_name(s.finish_reason), r.prompt.c_str(), s.text.c_str());
    }
    std::fflush(stdout);
  }

  void print_summary(double seconds) {
    pvllm_stats stats;
    try {
      stats = engine_.stats();
    } catch (const pvllm::cxx::Error& e) {
      report_error("cannot read statistics", e);
      return;
    }
    const double safe_seconds = seconds > 0.0 ? seconds : 1e-9;
    const double num_generated = static_cast<double>(stats.num_generation_tokens);
    const double num_prompt = static_cast<double>(stats.num_prompt_tokens_processed);
    std::fprintf(stderr,
                 "pvllm: %zu requests, %.0f generated tokens in %.3f s: %.1f generated tokens/s; "
                 "%.0f prompt tokens prefilled (%lld from the prefix cache), %.1f total tokens/s; "
                 "%lld preemptions\n",
                 requests_.size(), num_generated, seconds, num_generated / safe_seconds, num_prompt,
                 static_cast<long long>(stats.num_cached_prompt_tokens),
                 (num_generated + num_prompt) / safe_seconds,
                 static_cast<long long>(stats.num_preemptions));
    if (stats.num_spec_drafts > 0) {
      std::fprintf(stderr,
                   "pvllm: speculative decoding: %lld of %lld proposed tokens accepted over %lld "
                   "drafts\n",
                   static_cast<long long>(stats.num_spec_accepted_tokens),
                   static_cast<long long>(stats.num_spec_proposed_tokens),
                   static_cast<long long>(stats.num_spec_drafts));
    }
  }

  const GenerateOptions& o_;
  std::vector<std::string> prompts_;
  pvllm::cxx::Engine engine_;
  std::unordered_map<uint64_t, RequestState> requests_;
  size_t num_samples_left_ = 0;
  bool streaming_ = false;
  std::string constraint_text_;  // --json-schema's or --grammar's file
  LoadProgress progress_;
  bool any_sample_failed_ = false;
};

int run_generate(const GenerateOptions& o) {
  if (o.model.empty() && o.random_weights.empty()) {
    std::fprintf(stderr, "pvllm: give --model PATH or --random-weights SHAPE\n");
    return 2;
  }
  std::vector<std::string> prompts;
  if (!o.prompt_ids.empty()) {
    prompts = o.prompt_ids;
  } else if (!collect_prompts(o, &prompts)) {
    return 1;
  }
  if (prompts.empty()) {
    std::fprintf(stderr,
                 "pvllm: no prompt; give --prompt TEXT, --prompts-file FILE or --prompt-ids IDS\n");
    return 1;
  }
  return Generator(o, std::move(prompts)).run();
}

}  // namespace

void add_generate_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<GenerateOptions>();
  o->sampling = pvllm::cxx::defaults<pvllm_sampling_params>();
  o->engine = pvllm::cxx::defaults<pvllm_engine_params>();
  o->kv_cache_mb = o->engine.kv_cache_bytes >> 20;

  CLI::App* sub = app.add_subcommand(
      "generate",
      "Generate text for one or more prompts. Several prompts run as concurrent requests "
      "(continuous batching).");
  sub->footer(
      "Examples:\n"
      "  pvllm generate --model models/stories260K --prompt \"Once upon a time\" --temperature 0\n"
      "  pvllm generate --model models/stories260K --prompt \"Lily\" --beam-width 4 -n 2\n"
      "  pvllm generate --model TinyLlama-1.1B --prompts-file prompts.txt --max-tokens 64 "
      "--json > out.jsonl");

  sub->add_option("-m,--model", o->model,
                  "Model to load: a Hugging Face folder (config.json, *.safetensors, "
                  "tokenizer.model), a llama2.c .bin with a tokenizer.model beside it, a "
                  ".pvllm file (pvllm convert) or a GGUF file (.gguf; quantized ones too)");
  sub->add_option("--random-weights", o->random_weights,
                  "Instead of --model, build a model of this shape with random bf16 weights "
                  "(tiny, tinyllama-1.1b, llama-2-7b, llama-3-8b); it has no tokenizer, so "
                  "give --prompt-ids");
  sub->add_option("--prompt-ids", o->prompt_ids,
                  "A prompt as comma-separated token ids (e.g. 1,450,4996); repeat for several "
                  "requests; outputs are printed as ids")
      ->allow_extra_args(false);
  sub->add_option("-p,--prompt", o->prompts, "A prompt; repeat the option for several requests")
      ->allow_extra_args(false);
  sub->add_option("--prompts-file", o->prompts_file,
                  "A file with one prompt per line (empty lines are skipped; - reads stdin)");

  const char* sampling_group = "Sampling";
  sub->add_option("--max-tokens", o->sampling.max_tokens, "Tokens to generate at most")
      ->capture_default_str()
      ->group(sampling_group);
  o->temperature_option =
      sub->add_option("-t,--temperature", o->sampling.temperature,
                      "Sampling temperature; 0 = greedy (the default with --beam-width)")
          ->capture_default_str()
          ->group(sampling_group);
  sub->add_option("--top-p", o->sampling.top_p,
                  "Nucleus sampling: keep the most likely tokens up to this probability mass; "
                  "1 = off")
      ->capture_default_str()
      ->group(sampling_group);
  sub->add_option("--top-k", o->sampling.top_k, "Keep only the k most likely tokens; 0 = off")
      ->capture_default_str()
      ->group(sampling_group);
  sub->add_option("--min-p", o->sampling.min_p,
                  "Drop tokens less likely than min-p times the most likely one; 0 = off")
      ->capture_default_str()
      ->group(sampling_group);
  sub->add_option("--repetition-penalty", o->sampling.repetition_penalty,
                  "Divide logits of tokens already seen (> 1 discourages repeats); 1 = off")
      ->capture_default_str()
      ->group(sampling_group);
  sub->add_option("--presence-penalty", o->sampling.presence_penalty,
                  "Subtracted once from the logit of every token generated so far")
      ->capture_default_str()
      ->group(sampling_group);
  sub->add_option("--frequency-penalty", o->sampling.frequency_penalty,
                  "Subtracted from a token's logit per time it was generated")
      ->capture_default_str()
      ->group(sampling_group);
  o->seed_option =
      sub->add_option("--seed", o->seed, "Random seed for reproducible sampling (default: random)")
          ->group(sampling_group);
  sub->add_option("-n,--num-samples", o->sampling.n,
                  "Independent samples per prompt; with --beam-width, the best n hypotheses")
      ->capture_default_str()
      ->group(sampling_group);
  const char* beam_group = "Beam search";
  sub->add_option("--beam-width", o->sampling.beam_width,
                  "Beam search with this many beams (1-10; 0 = off); deterministic, over the "
                  "raw distribution (no top-k/top-p/penalties, no stop strings)")
      ->check(CLI::Range(0, 10))
      ->capture_default_str()
      ->group(beam_group);
  sub->add_option("--length-penalty", o->sampling.length_penalty,
                  "A hypothesis scores its summed logprob over its length to this power")
      ->capture_default_str()
      ->group(beam_group);
  sub->add_option("--early-stopping", o->early_stopping,
                  "When beam search stops (Hugging Face's early_stopping): heuristic (False), "
                  "true (True) or never (\"never\")")
      ->check(CLI::IsMember({"heuristic", "true", "never"}))
      ->capture_default_str()
      ->group(beam_group);
  sub->add_option("--stop", o->stop,
                  "A string that ends generation (not included in the output); repeatable")
      ->allow_extra_args(false)
      ->group(sampling_group);
  sub->add_option("--stop-token-id", o->stop_token_ids,
                  "A token id that ends generation, besides EOS; repeatable")
      ->allow_extra_args(false)
      ->group(sampling_group);
  const std::string structured = "Structured output (at most one)";
  sub->add_option("--json-schema", o->json_schema_file,
                  "A JSON schema file: the output is JSON (compact unless --json-whitespace) "
                  "that validates against it")
      ->group(structured);
  sub->add_flag("--json-object", o->json_object,
                "The output is a JSON object (compact unless --json-whitespace)")
      ->group(structured);
  sub->add_option("--grammar", o->grammar_file,
                  "A GBNF grammar file (rules `name ::= ...`, starting at `root`)")
      ->group(structured);
  sub->add_option("--regex", o->regex, "A regular expression the whole output matches")
      ->group(structured);
  sub->add_option("--choice", o->choices, "The output is one of these strings; repeatable")
      ->allow_extra_args(false)
      ->group(structured);
  const std::string json_options = "JSON output (with --json-schema or --json-object)";
  sub->add_flag("--json-whitespace", o->json_whitespace,
                "Allow JSON's whitespace (spaces, tabs, newlines) between tokens, as in "
                "pretty-printed JSON; without it the JSON is compact")
      ->group(json_options);
  sub->add_flag("--json-unlisted-properties", o->json_unlisted_properties,
                "--json-schema: allow members the schema does not list where its "
                "additionalProperties or patternProperties allow them, as JSON Schema reads it; "
                "without it an object whose schema lists properties gets only those")
      ->group(json_options);
  sub->add_flag("--json-any-order", o->json_any_order,
                "--json-schema: allow an object's members in any order (each at most once, the "
                "required ones present), as JSON Schema reads it; without it they come in the "
                "order the schema lists them")
      ->group(json_options);
  sub->add_flag("--ignore-eos", o->ignore_eos,
                "Keep generating past EOS until --max-tokens (useful for benchmarks)")
      ->group(sampling_group);
  sub->add_option("--logprobs", o->sampling.logprobs,
                  "Report log-probabilities (with --json): -1 = none, 0 = the chosen token, "
                  "k = plus the k most likely alternatives (k <= 20)")
      ->capture_default_str()
      ->group(sampling_group);
  sub->add_option("--priority", o->priority,
                  "Priority of the requests; lower values are served first and preempted last")
      ->capture_default_str()
      ->group(sampling_group);

  const char* engine_group = "Engine";
  sub->add_option("--device", o->device, kDeviceOption)->capture_default_str()->group(engine_group);
  sub->add_option("--block-size", o->engine.block_size,
                  "Tokens per KV-cache block (a power of two, 8..256)")
      ->capture_default_str()
      ->group(engine_group);
  sub->add_option("--kv-cache-mb", o->kv_cache_mb, "Memory for the KV cache, in MiB")
      ->check(CLI::Range(int64_t{1}, INT64_MAX >> 20))
      ->capture_default_str()
      ->group(engine_group);
  sub->add_option("--max-num-seqs", o->engine.max_num_seqs, "Sequences running at once")
      ->capture_default_str()
      ->group(engine_group);
  sub->add_option("--max-num-batched-tokens", o->engine.max_num_batched_tokens,
                  "Tokens fed to the model per step (long prompts are prefilled in chunks)")
      ->capture_default_str()
      ->group(engine_group);
  sub->add_option("--max-model-len", o->engine.max_model_len,
                  "Context length in tokens; 0 = the model's")
      ->capture_default_str()
      ->group(engine_group);
  sub->add_flag("--no-prefix-caching", o->no_prefix_caching,
                "Do not reuse the KV cache of shared prompt prefixes")
      ->group(engine_group);
  sub->add_option("--threads", o->engine.num_threads, "CPU threads; 0 = all cores")
      ->capture_default_str()
      ->group(engine_group);
  sub->add_option("--model-checksums", o->model_checksums,
                  "A .pvllm file's tensor checksums: full (checked while loading), lazy (as "
                  "the engine first reads each tensor) or none")
      ->check(CLI::IsMember({"full", "lazy", "none"}))
      ->capture_default_str()
      ->group(engine_group);
  add_dtype_option(sub, &o->dtype, engine_group);
  add_quantize_option(sub, &o->quantize, engine_group);
  add_speculative_options(sub, &o->speculative, engine_group);
  add_kv_cache_dtype_option(sub, &o->kv_cache_dtype, engine_group);

  const char* output_group = "Output";
  sub->add_flag("--json", o->json,
                "Print one JSON object per line per finished sample (request, sample, prompt, "
                "text, token_ids, finish_reason, logprobs)")
      ->group(output_group);
  sub->add_flag("-q,--quiet", o->quiet, "Print no load progress and no summary on stderr")
      ->group(output_group);

  sub->callback([o, exit_code] { *exit_code = run_generate(*o); });
}

}  // namespace pvllm_cli
