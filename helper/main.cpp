// mlajit-compiler-helper: compiles kernels with NVRTC for libmlajit in a process of its own,
// so that an NVRTC crash or hang costs the library an error instead of its host process.
// Started by the library (src/jit/compiler_helper.cpp) with a socket on descriptor 0; not
// meant to be run by hand. The protocol is in src/jit/helper_protocol.h.
#include "jit/helper_server.h"

// In sanitizer builds (scripts/ci-sanitizers.sh builds the helper with the tests' sanitizers),
// a crash inside NVRTC must still end the helper with its signal, as in a release build, so
// that the library reports "killed by signal 11 (SIGSEGV)" the same way: the sanitizers'
// own fatal-signal handlers would turn it into "exited with status 1". ASAN_OPTIONS /
// TSAN_OPTIONS set by the caller still override these defaults.
#define MLAJIT_HELPER_SANITIZER_DEFAULTS \
  "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:handle_abort=0"
extern "C" {
__attribute__((visibility("default"), used)) const char* __asan_default_options() {
  return MLAJIT_HELPER_SANITIZER_DEFAULTS;
}
__attribute__((visibility("default"), used)) const char* __tsan_default_options() {
  return MLAJIT_HELPER_SANITIZER_DEFAULTS;
}
__attribute__((visibility("default"), used)) const char* __ubsan_default_options() {
  return MLAJIT_HELPER_SANITIZER_DEFAULTS;
}
}

int main() { return mlajit::jit::helper::serve_compiles(); }
