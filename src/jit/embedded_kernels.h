#pragma once
// The kernel sources under kernels/, embedded at build time (see cmake/EmbedFiles.cmake).
#include <map>
#include <string>
#include <string_view>

namespace mlajit::jit {

// Path below kernels/ (e.g. "portable/mla_fa2.cuh", the name #include directives use) ->
// contents, as they were when the library was built.
const std::map<std::string, std::string_view>& embedded_kernel_files();

}  // namespace mlajit::jit
