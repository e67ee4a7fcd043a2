#include "jit/cache_file_io.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "mlajit/error.h"

namespace mlajit::jit {
namespace {

// Closes a descriptor on scope exit unless released.
struct FdGuard {
  int fd = -1;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

[[noreturn]] void throw_io(const std::string& step, const std::string& path, int err) {
  throw Error(ErrorCode::kIoError, fmt::format("{} {} failed: {}", step, path, errno_text(err)));
}

void write_all(int fd, const std::vector<uint8_t>& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("write", path, errno);
    }
    if (n == 0) throw_io("write (no progress)", path, EIO);
    done += static_cast<size_t>(n);
  }
}

// Without this the rename itself may be lost on a crash: the new directory entry lives in the
// directory's data, which rename does not flush.
void fsync_directory(const std::string& dir) {
  FdGuard d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd < 0) throw_io("open directory", dir, errno);
  if (::fsync(d.fd) != 0 && errno != EINVAL) throw_io("fsync directory", dir, errno);
}

}  // namespace

std::string errno_text(int err) { return fmt::format("{} (errno {})", std::strerror(err), err); }

ReadStatus read_file_bounded(const std::string& path, uint64_t max_bytes,
                             std::vector<uint8_t>* out, std::string* problem) {
  // O_NONBLOCK: a FIFO planted at an entry path must not block the reader forever (found by a
  // reliability test); for a regular file it changes nothing, and fstat below refuses the rest.
  FdGuard f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return ReadStatus::kMissing;
    *problem = fmt::format("cannot open: {}", errno_text(errno));
    return errno == EACCES || errno == EPERM ? ReadStatus::kUnreadable : ReadStatus::kError;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    *problem = fmt::format("cannot stat: {}", errno_text(errno));
    return ReadStatus::kError;
  }
  if (!S_ISREG(st.st_mode)) {
    *problem = "not a regular file";
    return ReadStatus::kError;
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    *problem = fmt::format("file is {} bytes, more than the {}-byte limit for an entry",
                           st.st_size, max_bytes);
    return ReadStatus::kError;
  }
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    const ssize_t n = ::read(f.fd, out->data() + done, out->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *problem = fmt::format("read failed: {}", errno_text(errno));
      return ReadStatus::kError;
    }
    if (n == 0) break;  // shrank under us: decode will report the truncation
    done += static_cast<size_t>(n);
  }
  out->resize(done);
  return ReadStatus::kOk;
}

mode_t new_file_mode() {
  // The umask can only be read by setting it, which races with other threads creating files;
  // Linux reports it in /proc/self/status instead. Read once: a process rarely changes it.
  static const mode_t mode = [] {
    mode_t mask = 022;
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Umask:", 0) == 0) {
        mask = static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8)) & 0777;
        break;
      }
    }
    return static_cast<mode_t>(0666 & ~mask);
  }();
  return mode;
}

void write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes,
                           const std::function<void()>& before_rename) {
  const std::string dir = parent_dir(path);
  const std::string base = path.substr(path.find_last_of('/') + 1);
  // Dot-prefixed so listings skip it; unique per writer so concurrent writers never share one.
  std::string temp = dir + "/." + base + ".tmp.XXXXXX";
  FdGuard f{::mkostemp(temp.data(), O_CLOEXEC)};
  if (f.fd < 0) throw_io("create temp file", temp, errno);
  try {
    // mkostemp makes the file 0600; an entry gets the mode any new file of this process would
    // (0644 under the usual umask), so a cache precompiled by one account can be shipped to
    // and read by another.
    if (::fchmod(f.fd, new_file_mode()) != 0) throw_io("chmod", temp, errno);
    write_all(f.fd, bytes, temp);
    // fsync before rename: otherwise a crash can leave the final name pointing at an empty or
    // partial file, and on distributed file systems close() alone does not make the data
    // visible to other nodes.
    if (::fsync(f.fd) != 0) throw_io("fsync", temp, errno);
    const int fd = f.fd;
    f.fd = -1;
    if (::close(fd) != 0) throw_io("close", temp, errno);
    if (before_rename) before_rename();
    if (::rename(temp.c_str(), path.c_str()) != 0) throw_io("rename to " + path, temp, errno);
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  fsync_directory(dir);
}

bool make_directories(const std::string& path, std::string* problem) {
  if (path.empty()) {
    *problem = "empty directory path";
    return false;
  }
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) == 0 || errno == EEXIST) continue;
    *problem = fmt::format("cannot create directory {}: {}", prefix, errno_text(errno));
    return false;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *problem = fmt::format("{} exists but is not a directory", path);
    return false;
  }
  return true;
}

bool probe_writable(const std::string& dir, std::string* problem) {
  std::string temp = dir + "/.probe.XXXXXX";
  FdGuard f{::mkostemp(temp.data(), O_CLOEXEC)};
  if (f.fd < 0) {
    *problem = fmt::format("cannot create a file in {}: {}", dir, errno_text(errno));
    return false;
  }
  const char byte = 0;
  const bool wrote = ::write(f.fd, &byte, 1) == 1;
  const int err = errno;
  ::unlink(temp.c_str());
  if (!wrote) *problem = fmt::format("cannot write a file in {}: {}", dir, errno_text(err));
  return wrote;
}

bool touch_last_use(const std::string& path) {
  return ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0) == 0;
}

std::string quarantine_file(const std::string& path, const std::string& quarantine_dir,
                            const std::string& name, std::string* problem) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::string target = fmt::format(
      "{}/{}.{}", quarantine_dir, name,
      std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
  std::string mkdir_problem;
  if (make_directories(quarantine_dir, &mkdir_problem) &&
      ::rename(path.c_str(), target.c_str()) == 0) {
    return target;
  }
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return "";
  *problem = fmt::format("could neither move nor delete {}: {}", path, errno_text(errno));
  return "";
}

}  // namespace mlajit::jit
