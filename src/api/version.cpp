#include "mlajit/runtime.h"

namespace mlajit {

// MLAJIT_VERSION_STRING comes from the build (project(mlajit VERSION ...)); CMake checks that
// include/mlajit/version.h says the same.
const char* version() noexcept { return MLAJIT_VERSION_STRING; }

}  // namespace mlajit
