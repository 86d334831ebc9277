// Shared declarations of the pvllm command. The command uses only the
// public C ABI (pvllm/pvllm.h), through its C++ header pvllm/pvllm.hpp: it
// is the first client of libpvllm.
#pragma once

#include <CLI/CLI.hpp>
#include <pvllm/pvllm.hpp>
#include <string>

namespace pvllm_cli {

// Registers the `generate` subcommand. When the command line selects it,
// app.parse() runs it and stores its exit status in *exit_code.
void add_generate_command(CLI::App& app, int* exit_code);

// Registers the `inspect` subcommand, likewise.
void add_inspect_command(CLI::App& app, int* exit_code);

// Registers the `bench` subcommand (tools/bench.cc), likewise.
void add_bench_command(CLI::App& app, int* exit_code);

// Registers the `tokenize` and `detokenize` subcommands (tools/tokenize.cc),
// likewise. They use the core tokenizer library directly.
void add_tokenize_commands(CLI::App& app, int* exit_code);

// Prints "pvllm: <what>: <message> (<status name>)" to stderr and returns
// the exit status for a failure (1).
int report_error(const std::string& what, const pvllm::cxx::Error& error);

}  // namespace pvllm_cli
