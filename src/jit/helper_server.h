#pragma once
// The compiler helper's side of helper_protocol.h: the body of the `mlajit-compiler-helper`
// executable (helper/main.cpp). Loads NVRTC once, says HELO, then answers each CMPL with a
// RSLT or FAIL until its input ends. Single-threaded, and holds no CUDA context.
namespace mlajit::jit::helper {

// Uses descriptor 0 (a socket: requests in, answers out), moves it off the standard
// descriptors, sends stdout to stderr (nothing NVRTC prints may corrupt an answer) and closes
// every other inherited descriptor. Returns the process exit status: 0 at end of input, 2 for
// a garbled or truncated request, 3 when the answer cannot be written (the library is gone).
int serve_compiles();

}  // namespace mlajit::jit::helper
