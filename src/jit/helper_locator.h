#pragma once
// Finds the compiler helper executable: $MLAJIT_COMPILER_HELPER when set, else
// `mlajit-compiler-helper` next to the file that holds this code (libmlajit.so in an install
// or a build tree; the executable itself where mlajit is linked statically, as the CLI and the
// tests are), else in the library folder seen from an installed executable (bin/../lib).
#include <string>
#include <vector>

namespace mlajit::jit {

struct HelperLocation {
  std::string path;                // the executable found, "" when none
  std::vector<std::string> tried;  // each candidate with why it was not taken
  std::string problem() const;     // one sentence naming what was tried, for warnings and errors
};

// `explicit_path` (IsolationOptions::helper_path): when not empty, the only candidate.
HelperLocation locate_compiler_helper(const std::string& explicit_path);

// The folder of the file (shared library or executable) that holds this code.
std::string folder_of_this_code();

}  // namespace mlajit::jit
