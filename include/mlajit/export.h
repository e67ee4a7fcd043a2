#pragma once
// MLAJIT_API marks what libmlajit.so exports. The library is built with -fvisibility=hidden
// (and a linker version script), so everything not marked stays inside it: the fmt/spdlog
// code compiled into it, the std:: templates it instantiates, the internal layers.
#if defined(_WIN32)
#define MLAJIT_API
#elif defined(__GNUC__) || defined(__clang__)
#define MLAJIT_API __attribute__((visibility("default")))
#else
#define MLAJIT_API
#endif
