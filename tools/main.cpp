// mlajit: the command-line tool of the library. Exit codes: 0 ok, 1 failure, 2 usage.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_support.h"
#include "commands.h"
#include "mlajit/error.h"
#include "mlajit/runtime.h"

namespace {

using namespace mlajit::cli;

// CLI11 messages can span lines; the usage error is promised on one line.
std::string one_line(std::string text) {
  for (auto& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

std::string command_name(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) return "mlajit " + sub->get_name();
  return "mlajit";
}

int run_command(const std::string& name, const Command& command) {
  try {
    return command.run();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: usage error: %s (see %s --help)\n", name.c_str(),
                 one_line(e.what()).c_str(), name.c_str());
    return kExitUsage;
  } catch (const mlajit::Error& e) {
    std::fprintf(stderr, "%s: error (%s): %s\n", name.c_str(), mlajit::error_code_name(e.code()),
                 e.what());
    return kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
    return kExitFailure;
  }
}

// CLI11 reports an unknown command word as "A subcommand is required": name it instead.
std::string unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  std::string known;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == argv[1]) return "";
    known += (known.empty() ? "" : ", ") + sub->get_name();
  }
  return std::string("unknown command '") + argv[1] + "'; commands: " + known;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mlajit: precompile, inspect and check the JIT-compiled MLA attention kernels.\n"
               "Exit codes: 0 ok, 1 failure, 2 usage error.",
               "mlajit"};
  app.set_version_flag("--version", std::string(mlajit::version()));  // the loaded library's
  app.require_subcommand(1);
  const std::vector<Command> commands{add_precompile_command(app), add_list_command(app),
                                      add_info_command(app),       add_verify_command(app),
                                      add_bench_command(app),      add_prune_command(app)};
  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    std::fprintf(stderr, "mlajit: usage error: %s (see mlajit --help)\n", unknown.c_str());
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    const std::string name = command_name(app);
    std::fprintf(stderr, "%s: usage error: %s (see %s --help)\n", name.c_str(),
                 one_line(e.what()).c_str(), name.c_str());
    return kExitUsage;
  } catch (const std::exception& e) {
    // A validator that threw something other than a CLI11 error: still a usage problem of
    // this command line, never an abort.
    const std::string name = command_name(app);
    std::fprintf(stderr, "%s: usage error: %s (see %s --help)\n", name.c_str(),
                 one_line(e.what()).c_str(), name.c_str());
    return kExitUsage;
  }
  for (const Command& command : commands) {
    if (command.app->parsed()) return run_command("mlajit " + command.app->get_name(), command);
  }
  return kExitUsage;  // unreachable: require_subcommand(1)
}
