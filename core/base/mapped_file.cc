// Read-only mmap of a whole file. The mapping is private and read-only, so
// nothing a loader does can write back into a checkpoint.
#include "core/base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/base/fault_injection.h"

namespace pvllm {

namespace {

Status os_error(const std::string& path, const char* what, int err) {
  std::string message = path + ": " + what + ": " + std::strerror(err);
  if (err == ENOENT || err == ENOTDIR) return NotFound(message);
  return IoError(message);
}

}  // namespace

Status MappedFile::open(const std::string& path, std::shared_ptr<MappedFile>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return os_error(path, "cannot open", errno);

  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return os_error(path, "cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError(path + ": not a regular file");
  }

  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  // Injected fault (tests): the read comes up short, by half.
  if (fault::should_fail(fault::Site::kFileRead)) file->size_ /= 2;
  if (file->size_ > 0) {
    void* addr = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return os_error(path, "cannot mmap", err);
    }
    file->data_ = static_cast<const unsigned char*>(addr);
  }
  // The mapping keeps the pages reachable; the descriptor is no longer needed.
  ::close(fd);
  *out = std::move(file);
  return Status::Ok();
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
}

}  // namespace pvllm
