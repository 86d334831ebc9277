#include "core/backend/registry.h"

#include <atomic>
#include <map>
#include <mutex>

namespace pvllm {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, BackendFactory> factories;
};

// Built on first use, so registrations from static initialisers in any
// order find it ready.
Registry& registry() {
  static Registry r;
  return r;
}

std::atomic<CpuIsaQuery>& cpu_isa_query() {
  static std::atomic<CpuIsaQuery> query{nullptr};
  return query;
}

}  // namespace

bool register_backend(const std::string& name, BackendFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[name] = factory;
  return true;
}

std::vector<std::string> registered_backends() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

Status create_backend(const std::string& name, const Model& model, const BackendOptions& options,
                      std::unique_ptr<Backend>* out) {
  BackendFactory factory = nullptr;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (auto it = r.factories.find(name); it != r.factories.end()) factory = it->second;
  }
  if (factory == nullptr) {
    std::string names;
    for (const std::string& n : registered_backends()) names += (names.empty() ? "" : ", ") + n;
    return Unsupported("no backend \"" + name + "\" is linked into this program (linked: " +
                       (names.empty() ? "none" : names) + ")");
  }
  return factory(model, options, out);
}

bool register_cpu_backend_isa(CpuIsaQuery query) {
  cpu_isa_query().store(query, std::memory_order_release);
  return true;
}

const char* cpu_backend_isa() {
  const CpuIsaQuery query = cpu_isa_query().load(std::memory_order_acquire);
  return query != nullptr ? query() : "none";
}

}  // namespace pvllm
