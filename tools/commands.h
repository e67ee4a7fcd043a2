#pragma once
// The CLI's subcommands. Each add_*_command registers its options on `parent` and returns
// the subcommand with the function that runs it once the command line has been parsed.
// A run function returns the exit code, throws UsageError for a bad option value (exit 2)
// and mlajit::Error for a failure (exit 1).
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace mlajit::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_precompile_command(CLI::App& parent);
Command add_list_command(CLI::App& parent);
Command add_info_command(CLI::App& parent);
Command add_verify_command(CLI::App& parent);
Command add_bench_command(CLI::App& parent);
Command add_prune_command(CLI::App& parent);

// Throws Error(kNoDriver / kNoDevice) saying that `command` needs a GPU and why there is none.
void require_gpu(const char* command, int device);

}  // namespace mlajit::cli
