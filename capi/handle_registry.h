// HandleRegistry: the set of live handles of one kind (engines, output
// batches, errors, model infos), so that every entry point can tell a live
// handle from a destroyed, freed or foreign pointer before touching it.
//
// Why a registry and not only a magic number in the object: a magic number
// must be read from the object, and reading a freed object is itself
// undefined behaviour (and, once its memory is reused, can read as live).
// Membership is decided from the pointer value alone, so a second destroy,
// a stale handle and a pointer of the wrong kind are all detected without
// reading freed memory. Each handle also carries a magic value (see
// HandleMagic), checked after membership, which catches memory corruption
// of a live handle.
//
// What cannot be detected: a freed handle whose address has since been
// given to a new handle of the same kind is that new handle (the registry
// sees a live pointer); and a destroy that races another call on the same
// handle (the contract forbids it).
//
// Cost: one uncontended mutex and a hash lookup per call (tens of
// nanoseconds), small beside any call that does work.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_set>

namespace pvllm {

// A value every live handle holds in its first member; destroy overwrites
// it with kDead before the memory is released.
struct HandleMagic {
  static constexpr uint64_t kDead = 0xdeaddeaddeaddeadULL;
  explicit HandleMagic(uint64_t v) : value(v) {}
  ~HandleMagic() { value = kDead; }
  HandleMagic(const HandleMagic&) = delete;
  HandleMagic& operator=(const HandleMagic&) = delete;
  volatile uint64_t value;
};

template <typename T>
class HandleRegistry {
 public:
  void add(const T* handle) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(handle);
  }

  // True when `handle` was live (and is no longer): the caller may delete
  // it. False for NULL, a second release, or a pointer never added.
  bool remove(const T* handle) {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.erase(handle) == 1;
  }

  // True for a live handle whose magic value is intact.
  bool is_live(const T* handle) const {
    if (handle == nullptr) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (live_.count(handle) == 0) return false;
    }
    return handle->magic.value == T::kMagic;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_set<const T*> live_;
};

}  // namespace pvllm
