// maskbench DATA_DIR TOKENIZER_DIR [--json OUT] [options]: MaskBench
// (guidance-ai/jsonschemabench, folder maskbench/data) through pvllm's
// constraint engine, by the protocol of the benchmark's runner.py
// (protocol.h). Schemas run one after another in worker processes (--jobs
// of them), each schema under a time limit (wall clock) and each worker
// under an address-space limit: a worker that crashes, runs out of time or
// past the limit is counted against the schema it was on and replaced.
// Prints the benchmark's table: passing schemas, compile errors by the
// keyword refused, validation errors (a valid instance stopped),
// invalidation errors (an invalid instance let through), crashes,
// timeouts, and the percentiles of mask time (every token of every test)
// and compile time (every schema that compiled).
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/maskbench/protocol.h"

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using pvllm::maskbench::SchemaResult;

namespace {

struct Options {
  std::string data_dir, tokenizer_dir, json_out, filter, files_from;
  int time_limit_s = 60;
  double mem_limit_gb = 8;
  int jobs = 1;
  size_t limit = 0;
  bool whitespace = true;
};

void usage() {
  std::fprintf(stderr,
               "usage: maskbench DATA_DIR TOKENIZER_DIR [--json OUT] [--time-limit S (60)]\n"
               "       [--mem-limit GB (8)] [--jobs N (1)] [--filter SUBSTRING] [--limit N]\n"
               "       [--files-from LIST]\n"
               "DATA_DIR: maskbench/data of guidance-ai/jsonschemabench; TOKENIZER_DIR: the\n"
               "folder of a tokenizer.json (Llama 3.1's, as the benchmark uses).\n");
}

bool parse_args(int argc, char** argv, Options* o) {
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](std::string* v) {
      if (i + 1 >= argc) return false;
      *v = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--json") {
      if (!next(&o->json_out)) return false;
    } else if (a == "--filter") {
      if (!next(&o->filter)) return false;
    } else if (a == "--files-from") {
      if (!next(&o->files_from)) return false;
    } else if (a == "--time-limit" && next(&v)) {
      o->time_limit_s = std::atoi(v.c_str());
    } else if (a == "--mem-limit" && next(&v)) {
      o->mem_limit_gb = std::atof(v.c_str());
    } else if (a == "--jobs" && next(&v)) {
      o->jobs = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--limit" && next(&v)) {
      o->limit = static_cast<size_t>(std::atoll(v.c_str()));
    } else if (!a.empty() && a[0] == '-') {
      return false;
    } else {
      pos.push_back(a);
    }
  }
  if (pos.size() != 2 || o->time_limit_s <= 0 || o->mem_limit_gb <= 0) return false;
  o->data_dir = pos[0];
  o->tokenizer_dir = pos[1];
  return true;
}

std::vector<fs::path> list_files(const Options& o) {
  std::vector<fs::path> files;
  if (!o.files_from.empty()) {
    std::ifstream in(o.files_from);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line[0] != '#') files.push_back(fs::path(o.data_dir) / line);
    }
  } else {
    for (const auto& e : fs::directory_iterator(o.data_dir)) {
      if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
  }
  if (!o.filter.empty()) {
    std::erase_if(files, [&](const fs::path& p) {
      return p.filename().string().find(o.filter) == std::string::npos;
    });
  }
  if (o.limit && files.size() > o.limit) files.resize(o.limit);
  return files;
}

// A worker: reads schema indexes from `in`, runs each under the time
// limit, writes its result to scratch/<index>.json and the index to `out`.
[[noreturn]] void worker(const Options& o, const std::vector<fs::path>& files,
                         const fs::path& scratch, int in, int out,
                         pvllm::structured::ConstraintCompiler* compiler,
                         const pvllm::Tokenizer& tokenizer) {
  rlimit as{};
  as.rlim_cur = as.rlim_max = static_cast<rlim_t>(o.mem_limit_gb * (1ull << 30));
  setrlimit(RLIMIT_AS, &as);
  FILE* requests = fdopen(in, "r");
  for (size_t i; std::fscanf(requests, "%zu", &i) == 1;) {
    const fs::path& file = files[i];
    alarm(static_cast<unsigned>(o.time_limit_s));
    try {
      std::ifstream input(file);
      Json data = Json::parse(input);
      SchemaResult r =
          pvllm::maskbench::run_schema(file.filename().string(), data, compiler, tokenizer);
      std::ofstream(scratch / (std::to_string(i) + ".json")) << r.to_json(true).dump();
    } catch (const std::bad_alloc&) {
      _exit(3);  // past the memory limit
    } catch (const std::exception& e) {
      Json j;
      j["id"] = file.filename().string();
      j["num_tests"] = 0;
      j["compile_error"] = std::string("benchmark file: ") + e.what();
      j["compile_keyword"] = "(unreadable file)";
      std::ofstream(scratch / (std::to_string(i) + ".json")) << j.dump();
    }
    alarm(0);
    compiler->clear_cache();  // each schema's masks are its own
    std::string line = std::to_string(i) + "\n";
    if (write(out, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(4);
  }
  _exit(0);
}

struct Worker {
  pid_t pid = -1;
  FILE* to = nullptr;   // schema indexes
  int from = -1;        // finished indexes
  std::string pending;  // bytes read from `from`, not yet a whole line
  long current = -1;    // the schema it is on
};

struct Outcome {
  SchemaResult result;
  std::string failure;  // "timeout", "crash: ...", "" when the schema finished
};

int64_t percentile(std::vector<int64_t>* v, double p) {
  if (v->empty()) return 0;
  size_t k = static_cast<size_t>(p / 100.0 * static_cast<double>(v->size() - 1) + 0.5);
  std::nth_element(v->begin(), v->begin() + static_cast<long>(k), v->end());
  return (*v)[k];
}

std::string percentiles(std::vector<int64_t> v) {
  std::string out;
  for (double p : {25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 100.0}) {
    out += (out.empty() ? "" : " / ") + std::to_string(percentile(&v, p));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, &o)) {
    usage();
    return 2;
  }
  std::unique_ptr<pvllm::Tokenizer> tokenizer;
  pvllm::Status s = pvllm::Tokenizer::load(o.tokenizer_dir, &tokenizer);
  if (!s.ok()) {
    std::fprintf(stderr, "maskbench: %s\n", s.message().c_str());
    return 1;
  }
  pvllm::structured::ConstraintCompiler compiler(
      pvllm::maskbench::compiler_token_bytes(*tokenizer));
  {  // the vocabulary trie, built once here rather than in each compile
    std::shared_ptr<const pvllm::structured::CompiledConstraint> warm;
    pvllm::structured::ConstraintSpec spec;
    spec.kind = pvllm::structured::ConstraintKind::kJsonObject;
    (void)compiler.compile(spec, &warm);
  }
  std::vector<fs::path> files = list_files(o);
  if (files.empty()) {
    std::fprintf(stderr, "maskbench: no files in %s\n", o.data_dir.c_str());
    return 1;
  }
  fs::path scratch = fs::temp_directory_path() / ("maskbench-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  std::fprintf(stderr, "%zu files, %d s and %.1f GB per schema, %d job(s)\n", files.size(),
               o.time_limit_s, o.mem_limit_gb, o.jobs);

  std::vector<Outcome> outcomes(files.size());
  size_t next = 0, done = 0;
  auto start = std::chrono::steady_clock::now();
  auto spawn = [&](Worker* w) -> bool {
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0) return false;
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      close(down[1]);
      close(up[0]);
      worker(o, files, scratch, down[0], up[1], &compiler, *tokenizer);
    }
    close(down[0]);
    close(up[1]);
    *w = Worker{};
    w->pid = pid;
    w->to = fdopen(down[1], "w");
    w->from = up[0];
    return true;
  };
  auto assign = [&](Worker* w) {
    if (next >= files.size()) return;
    w->current = static_cast<long>(next++);
    std::fprintf(w->to, "%ld\n", w->current);
    std::fflush(w->to);
  };
  auto finish = [&](size_t i) {
    Outcome& oc = outcomes[i];
    oc.result.id = files[i].filename().string();
    fs::path out = scratch / (std::to_string(i) + ".json");
    std::ifstream in(out);
    oc.result = SchemaResult::from_json(Json::parse(in));
    fs::remove(out);
    if (++done % 500 == 0) {
      double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "%zu / %zu (%.0f s)\n", done, files.size(), el);
    }
  };
  std::vector<Worker> workers(std::min<size_t>(static_cast<size_t>(o.jobs), files.size()));
  for (Worker& w : workers) {
    if (!spawn(&w)) {
      std::perror("maskbench: worker");
      return 1;
    }
    assign(&w);
  }
  while (done < files.size()) {
    std::vector<pollfd> fds;
    for (const Worker& w : workers) fds.push_back({w.from, POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      std::perror("maskbench: poll");
      return 1;
    }
    for (size_t k = 0; k < workers.size(); ++k) {
      if (!fds[k].revents) continue;
      Worker& w = workers[k];
      char buf[256];
      ssize_t n = read(w.from, buf, sizeof buf);
      if (n > 0) {
        w.pending.append(buf, static_cast<size_t>(n));
        for (size_t nl; (nl = w.pending.find('\n')) != std::string::npos;) {
          finish(std::stoul(w.pending.substr(0, nl)));
          w.pending.erase(0, nl + 1);
          w.current = -1;
          assign(&w);
        }
        continue;
      }
      // The worker ended: on a schema, that schema crashed or ran out of time.
      int status = 0;
      waitpid(w.pid, &status, 0);
      fclose(w.to);
      close(w.from);
      if (w.current >= 0) {
        const auto i = static_cast<size_t>(w.current);
        Outcome& oc = outcomes[i];
        oc.result.id = files[i].filename().string();
        if (WIFSIGNALED(status)) {
          int sig = WTERMSIG(status);
          oc.failure = sig == SIGALRM ? "timeout" : std::string("crash: ") + strsignal(sig);
        } else if (WEXITSTATUS(status) == 3) {
          oc.failure = "crash: out of memory (the limit)";
        } else {
          oc.failure = "crash: exit " + std::to_string(WEXITSTATUS(status));
        }
        ++done;
      }
      if (next < files.size()) {
        if (!spawn(&w)) {
          std::perror("maskbench: worker");
          return 1;
        }
        assign(&w);
      } else {
        w.from = -1;  // poll ignores it
      }
    }
  }
  for (Worker& w : workers) {
    if (w.from < 0) continue;
    fclose(w.to);  // the worker reads EOF and exits
    close(w.from);
    waitpid(w.pid, nullptr, 0);
  }
  fs::remove_all(scratch);

  // The table.
  size_t passing = 0, compile_errors = 0, validation = 0, invalidation = 0, crashes = 0,
         timeouts = 0, engine_errors = 0;
  std::map<std::string, size_t> by_keyword;
  std::vector<int64_t> masks, compiles;
  int64_t tokens = 0;
  Json per_schema = Json::array();
  for (const Outcome& oc : outcomes) {
    const SchemaResult& r = oc.result;
    Json j = oc.failure.empty() ? r.to_json(false) : Json{{"id", r.id}, {"failure", oc.failure}};
    if (!oc.failure.empty()) {
      (oc.failure == "timeout" ? timeouts : crashes)++;
    } else if (!r.compiled) {
      ++compile_errors;
      ++by_keyword[r.compile_keyword];
    } else {
      compiles.push_back(r.compile_us);
      for (int32_t us : r.mask_us) masks.push_back(us);
      tokens += r.num_tokens;
      if (!r.engine_error.empty()) ++engine_errors;
      if (r.validation_error.find("should reject") != std::string::npos) {
        ++invalidation;
      } else if (!r.validation_error.empty()) {
        ++validation;
      } else if (r.engine_error.empty()) {
        ++passing;
      }
    }
    per_schema.push_back(j);
  }
  std::printf("MaskBench: %zu schemas from %s, tokenizer %s\n\n", files.size(), o.data_dir.c_str(),
              o.tokenizer_dir.c_str());
  std::printf(
      "| passing | compile error | validation error | invalidation error | engine error | "
      "crash | timeout |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  std::printf("| %zu | %zu | %zu | %zu | %zu | %zu | %zu |\n\n", passing, compile_errors,
              validation, invalidation, engine_errors, crashes, timeouts);
  std::printf("mask time (µs, %zu masks) p25 / p50 / p75 / p90 / p95 / p99 / p100: %s\n",
              masks.size(), percentiles(masks).c_str());
  std::printf("compile time (µs, %zu schemas) p25 / p50 / p75 / p90 / p95 / p99 / p100: %s\n\n",
              compiles.size(), percentiles(compiles).c_str());
  std::vector<std::pair<size_t, std::string>> kw;
  for (const auto& [k, n] : by_keyword) kw.emplace_back(n, k);
  std::sort(kw.rbegin(), kw.rend());
  std::printf("compile errors by keyword:\n");
  for (const auto& [n, k] : kw) std::printf("  %6zu  %s\n", n, k.c_str());

  if (!o.json_out.empty()) {
    Json j;
    j["schemas"] = files.size();
    j["passing"] = passing;
    j["compile_errors"] = compile_errors;
    j["validation_errors"] = validation;
    j["invalidation_errors"] = invalidation;
    j["engine_errors"] = engine_errors;
    j["crashes"] = crashes;
    j["timeouts"] = timeouts;
    j["num_masks"] = masks.size();
    j["num_tokens"] = tokens;
    Json mp, cp;
    for (double p : {25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 100.0}) {
      std::string name = "p" + std::to_string(static_cast<int>(p));
      mp[name] = percentile(&masks, p);
      cp[name] = percentile(&compiles, p);
    }
    j["mask_us"] = mp;
    j["compile_us"] = cp;
    Json k = Json::object();
    for (const auto& [n, key] : kw) k[key] = n;
    j["compile_errors_by_keyword"] = k;
    j["time_limit_s"] = o.time_limit_s;
    j["mem_limit_gb"] = o.mem_limit_gb;
    j["results"] = per_schema;
    std::ofstream(o.json_out) << j.dump(1) << "\n";
  }
  return 0;
}
