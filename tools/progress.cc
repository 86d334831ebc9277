// Load progress on stderr for pvllm_engine_params.progress.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "cli.h"

namespace pvllm_cli {
namespace {

// On a terminal: one line that redraws itself. Otherwise (a log, a pipe):
// one line when a stage starts and one when loading is done, so a log
// shows the stages and not a line per percent.
void print_progress(float fraction, const char* stage, void* user_data) {
  auto* state = static_cast<LoadProgress*>(user_data);
  const int percent = static_cast<int>(fraction * 100.0f + 0.5f);
  const bool done = fraction >= 1.0f;
  if (state->tty) {
    std::fprintf(stderr, "\r\033[Kpvllm: %s (%d%%)%s", stage, percent, done ? "\n" : "");
  } else if (state->last_stage != stage || done) {
    std::fprintf(stderr, "pvllm: %s (%d%%)\n", stage, percent);
  }
  state->last_stage = stage;
  std::fflush(stderr);
}

}  // namespace

void show_load_progress(pvllm_engine_params* params, LoadProgress* state) {
  state->tty = isatty(STDERR_FILENO) != 0;
  state->last_stage.clear();
  params->progress = print_progress;
  params->progress_user_data = state;
}

}  // namespace pvllm_cli
