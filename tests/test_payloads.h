#pragma once
// What the tests and the worker processes they start agree on: the payload a fake build of a
// key produces (so a test can tell whose build an entry holds), and a line-append that
// several processes can share.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace mlajit::test {

// The payload of a key in the disk-cache tests (tests/workers/cache_worker.cpp builds it too).
inline std::vector<uint8_t> payload_for(const std::string& key_text) {
  std::vector<uint8_t> p(4096);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(key_text[i % key_text.size()] + i);
  return p;
}

// The payload of a key in the stress test (tests/workers/stress_worker.cpp): the key only.
inline std::vector<uint8_t> stress_payload(const std::string& key_text) {
  std::vector<uint8_t> p(2048 + key_text.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(key_text[i % key_text.size()] * 31 + i);
  return p;
}

// O_APPEND: lines from concurrent processes land whole, one after another.
inline void append_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string text = line + "\n";
  if (::write(fd, text.data(), text.size()) < 0) std::perror("append");
  ::close(fd);
}

}  // namespace mlajit::test
