#pragma once
// The file operations the disk cache is built from: bounded reads, durable atomic writes,
// directory creation, last-use stamps. Nothing here knows the entry format.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mlajit::jit {

// kUnreadable: the file exists but this process may not open it (another user's entry in a
// shared directory): not the entry's fault, so not a reason to quarantine it.
enum class ReadStatus { kOk, kMissing, kUnreadable, kError };

// Reads a whole file, refusing (kError, with `problem`) files larger than `max_bytes` before
// allocating anything. kMissing when the file does not exist.
ReadStatus read_file_bounded(const std::string& path, uint64_t max_bytes,
                             std::vector<uint8_t>* out, std::string* problem);

// The mode a file this process creates gets: 0666 less the umask (0644 under the usual 022).
mode_t new_file_mode();

// Writes `bytes` to `path` so that a reader sees either no file or the complete file:
// unique temp file in the same directory, write, fsync, rename over `path`, fsync the
// directory. On any failure the temp file is removed and Error(kIoError) is thrown naming the
// step and errno. `before_rename` (tests only) runs after the data is durable, before rename.
void write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes,
                           const std::function<void()>& before_rename = {});

// mkdir -p; returns false and fills `problem` on failure.
bool make_directories(const std::string& path, std::string* problem);

// Proves a directory is writable by creating, writing and removing a temp file in it.
bool probe_writable(const std::string& dir, std::string* problem);

// Sets the file's mtime (and atime) to now: the entry's last-use time for LRU. Best effort.
bool touch_last_use(const std::string& path);

// Moves a bad file out of the way into `quarantine_dir` as <name>.<unix-ns>; deletes it when the
// move fails. Returns where it went ("" when deleted, or when both failed: see `problem`).
std::string quarantine_file(const std::string& path, const std::string& quarantine_dir,
                            const std::string& name, std::string* problem);

std::string errno_text(int err);

}  // namespace mlajit::jit
