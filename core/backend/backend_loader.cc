// Device parsing, dlopen of libpvllm_cuda.so, and the choice of backend.
#include "core/backend/backend_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include "core/backend/registry.h"
#include "core/model/model.h"

namespace pvllm {

namespace {

constexpr const char* kModuleName = "libpvllm_cuda.so";

Status from_module(int32_t code, const char* err) {
  if (code == 0) return Status::Ok();
  if (code < 0 || code > static_cast<int32_t>(StatusCode::kBufferTooSmall)) {
    return Internal(std::string("CUDA module: ") + err);
  }
  return Status(static_cast<StatusCode>(code), err);
}

// The folder of the shared object (libpvllm.so, or a test executable that
// links the core statically) that holds this function.
std::string own_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_dir), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// A host backend: the caller's factory, or the registered CPU backend, with
// the pool the caller's plan gives.
Status open_host_backend(const Model& model, const OpenBackendOptions& options,
                         std::unique_ptr<Backend>* out) {
  if (!options.host_num_blocks) {
    return InvalidArgument("open_backend: a host backend needs options.host_num_blocks");
  }
  BackendOptions bo;
  PVLLM_RETURN_IF_ERROR(options.host_num_blocks(&bo.num_blocks));
  bo.block_size = options.block_size;
  bo.num_threads = options.num_threads;
  bo.kv_cache_dtype = options.kv_cache_dtype;
  if (!options.factory) return create_backend("cpu", model, bo, out);
  PVLLM_RETURN_IF_ERROR(options.factory(model, bo, out));
  if (!*out) return Internal("the backend factory returned no backend");
  return Status::Ok();
}

// The CUDA module's backend, given the weights row-major. *opened is false
// when "auto" found no module or a model shape the module does not serve
// (UNSUPPORTED): the CPU serves it instead.
Status open_cuda_backend(const DeviceSpec& device, Model* model, const OpenBackendOptions& options,
                         std::unique_ptr<Backend>* out, bool* opened) {
  CudaBackendOptions co = options.cuda;
  co.device_index = device.index;
  co.block_size = options.block_size;
  const CudaModule* module = nullptr;
  Status st = CudaModule::get(&module);
  if (st.ok()) st = unpack_weights(model);
  if (st.ok()) st = module->create_backend(*model, co, out);
  *opened = st.ok();
  if (device.kind == DeviceSpec::Kind::kAuto && st.code() == StatusCode::kUnsupported) {
    return Status::Ok();
  }
  return st;
}

}  // namespace

Status parse_device(const std::string& device, DeviceSpec* out) {
  const Status bad = InvalidArgument(
      "device must be \"cpu\", \"auto\", \"cuda\" or \"cuda:N\", got \"" + device + "\"");
  if (device == "cpu") {
    *out = {DeviceSpec::Kind::kCpu, 0};
  } else if (device == "auto") {
    *out = {DeviceSpec::Kind::kAuto, 0};
  } else if (device == "cuda") {
    *out = {DeviceSpec::Kind::kCuda, 0};
  } else if (device.rfind("cuda:", 0) == 0) {
    const std::string digits = device.substr(5);
    if (digits.empty() || digits.size() > 4 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      return bad;
    }
    *out = {DeviceSpec::Kind::kCuda, std::atoi(digits.c_str())};
  } else {
    return bad;
  }
  return Status::Ok();
}

Status CudaModule::get(const CudaModule** out) {
  static std::mutex mu;
  static std::unique_ptr<CudaModule> module;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mu);
  if (!module && failure.empty()) {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("PVLLM_CUDA_BACKEND"); env != nullptr && *env != '\0') {
      candidates.push_back(env);
    }
    const std::string dir = own_dir();
    if (!dir.empty()) {
      candidates.push_back(dir + "/" + kModuleName);
      // The bundle/install layout: programs in bin/, libraries in lib/.
      candidates.push_back(dir + "/../lib/" + kModuleName);
    }
    candidates.push_back(kModuleName);
    std::string tried;
    for (const std::string& path : candidates) {
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* e = dlerror();
        tried += "\n  " + path + ": " + (e != nullptr ? e : "not found");
        continue;
      }
      auto m = std::unique_ptr<CudaModule>(new CudaModule());
      m->path_ = path;
      m->device_count_ =
          reinterpret_cast<pvllm_cuda_device_count_fn>(dlsym(handle, "pvllm_cuda_device_count"));
      m->mem_info_ = reinterpret_cast<pvllm_cuda_mem_info_fn>(dlsym(handle, "pvllm_cuda_mem_info"));
      m->create_ = reinterpret_cast<pvllm_cuda_backend_create_fn>(
          dlsym(handle, "pvllm_cuda_backend_create"));
      const auto version = reinterpret_cast<pvllm_cuda_module_interface_version_fn>(
          dlsym(handle, "pvllm_cuda_module_interface_version"));
      if (m->device_count_ == nullptr || m->mem_info_ == nullptr || m->create_ == nullptr ||
          version == nullptr) {
        tried += "\n  " + path + ": not a pvllm CUDA backend module (missing exports)";
        dlclose(handle);
        continue;
      }
      // A module from another build would call into another Backend vtable.
      if (const int32_t v = version(); v != kCudaModuleInterfaceVersion) {
        tried += "\n  " + path + ": built for module interface " + std::to_string(v) +
                 ", this library needs " + std::to_string(kCudaModuleInterfaceVersion) +
                 " (a libpvllm_cuda.so from another pvllm version)";
        dlclose(handle);
        continue;
      }
      module = std::move(m);  // the handle stays open for the process
      break;
    }
    if (!module) {
      failure = std::string("the CUDA backend module ") + kModuleName +
                " could not be loaded (set PVLLM_CUDA_BACKEND to its path); tried:" + tried;
    }
  }
  if (!module) return Unsupported(failure);
  *out = module.get();
  return Status::Ok();
}

Status CudaModule::device_count(int32_t* count) const {
  char err[512] = "";
  return from_module(device_count_(count, err, sizeof(err)), err);
}

Status CudaModule::mem_info(int32_t device, size_t* free_bytes, size_t* total_bytes) const {
  char err[512] = "";
  return from_module(mem_info_(device, free_bytes, total_bytes, err, sizeof(err)), err);
}

Status CudaModule::create_backend(const Model& model, const CudaBackendOptions& options,
                                  std::unique_ptr<Backend>* out) const {
  char err[1024] = "";
  Backend* raw = nullptr;
  PVLLM_RETURN_IF_ERROR(from_module(create_(&model, &options, &raw, err, sizeof(err)), err));
  out->reset(raw);
  return Status::Ok();
}

// Whether the NVIDIA driver's library can be loaded at all: without it no
// CUDA device can exist, and "auto" need not load the CUDA module (and
// cuBLAS with it, a tenth of a second) to learn that.
bool cuda_driver_present() {
  static const bool present = [] {
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver == nullptr) return false;
    dlclose(driver);
    return true;
  }();
  return present;
}

Status resolve_cuda(const DeviceSpec& spec, bool* use_cuda) {
  *use_cuda = false;
  if (spec.kind == DeviceSpec::Kind::kCpu) return Status::Ok();
  if (spec.kind == DeviceSpec::Kind::kAuto && !cuda_driver_present()) return Status::Ok();
  const CudaModule* module = nullptr;
  Status s = CudaModule::get(&module);
  int32_t count = 0;
  if (s.ok()) s = module->device_count(&count);
  if (s.ok() && spec.kind == DeviceSpec::Kind::kCuda && spec.index >= count) {
    s = Unsupported("CUDA device " + std::to_string(spec.index) + " does not exist (" +
                    std::to_string(count) + " devices)");
  }
  if (spec.kind == DeviceSpec::Kind::kAuto) {
    *use_cuda = s.ok() && count > 0;  // otherwise the CPU serves
    return Status::Ok();
  }
  if (!s.ok())
    return Status(s.code(), "device \"cuda:" + std::to_string(spec.index) + "\": " + s.message());
  *use_cuda = true;
  return Status::Ok();
}

Status select_device(const std::string& device, DeviceSpec* out) {
  DeviceSpec spec;
  PVLLM_RETURN_IF_ERROR(parse_device(device, &spec));
  bool use_cuda = false;
  PVLLM_RETURN_IF_ERROR(resolve_cuda(spec, &use_cuda));
  if (!use_cuda) spec = {DeviceSpec::Kind::kCpu, 0};
  *out = spec;
  return Status::Ok();
}

Status open_backend(const DeviceSpec& device, Model* model, const OpenBackendOptions& options,
                    std::unique_ptr<Backend>* out, bool* on_cuda) {
  if (on_cuda != nullptr) *on_cuda = false;
  std::unique_ptr<Backend> backend;
  bool opened = false;
  if (options.factory) {
    // Only the CPU backend reads matrices in the panel layout; any other
    // gets them row-major (a copy, which it uploads or reads as it would any).
    PVLLM_RETURN_IF_ERROR(unpack_weights(model));
  } else if (device.kind != DeviceSpec::Kind::kCpu) {
    PVLLM_RETURN_IF_ERROR(open_cuda_backend(device, model, options, &backend, &opened));
  }
  if (!opened) PVLLM_RETURN_IF_ERROR(open_host_backend(*model, options, &backend));
  if (on_cuda != nullptr) *on_cuda = opened;
  *out = std::move(backend);
  return Status::Ok();
}

}  // namespace pvllm
