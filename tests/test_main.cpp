#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <sys/stat.h>

int main(int argc, char** argv) {
  // One umask for every run, before any test thread or cache exists: the file-mode test
  // expects 0644 entries, and under a caller's umask 077 the mode it guards against (0600)
  // would be the expected one too. Worker processes inherit it.
  ::umask(022);
  return Catch::Session().run(argc, argv);
}
