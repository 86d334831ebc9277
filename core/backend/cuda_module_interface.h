// The interface between libpvllm and its CUDA backend module
// (libpvllm_cuda.so, built from kernels/cuda/ and opened by
// core/backend/backend_loader.h): what the module is created with and the
// C functions it exports. Plain data and C function types only: they cross
// the dlopen boundary, so struct fields are only ever appended and any
// change bumps kCudaModuleInterfaceVersion.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pvllm {

class Backend;  // core/backend/backend.h
struct Model;   // core/model/model.h

// What the CUDA backend module is created with.
struct CudaBackendOptions {
  int32_t device_index = 0;
  int32_t block_size = 16;  // the attention kernels serve 16, 32 and 256
  // > 0: exactly this many KV blocks; 0: as many as
  // free memory * gpu_memory_utilization - reserve buys after the weights
  // and activation buffers are allocated.
  int32_t num_blocks = 0;
  float gpu_memory_utilization = 0.90f;
  int32_t dtype = 0;  // 0 = auto (bf16 unless the checkpoint is f16), 1 = bf16, 2 = fp16, 3 = fp32
  // A KvCacheDtype value: 0 = auto (the activation dtype), 3 = int8,
  // 4 = fp8_e4m3, or the activation dtype's own (1 f16, 2 bf16, 5 f32).
  int32_t kv_cache_dtype = 0;
  int32_t max_num_batched_tokens = 2048;  // activation buffers hold this many rows
  int32_t max_num_seqs = 256;             // logits rows per step, at most
  int32_t max_model_len = 0;              // block-table width of the decode graphs
  int32_t enable_cuda_graphs = 1;         // capture pure-decode steps per batch-size bucket
  // Fault injection (core/base/fault_injection.h): the module calls it
  // before each device or pinned-host allocation and fails that allocation
  // as out of memory when it returns true. libpvllm passes its own site
  // (the module's copy of the fault state would never be armed); nullptr:
  // never fail.
  bool (*fail_device_alloc)() = nullptr;
};

// Memory the CUDA backend keeps free of the KV pool (cuBLAS workspace, CUDA
// graphs, the allocator's slack), in bytes.
constexpr size_t kCudaReservedBytes = size_t{256} << 20;

// The version of the interface between libpvllm and its CUDA module: the
// Backend class (core/backend/backend.h, and the BatchMetadata, BlockCopy
// and sampler types its calls take), CudaBackendOptions and the functions
// below. A module built from another version is refused at load (it would
// call into a different vtable). Bump it with any change to them.
constexpr int32_t kCudaModuleInterfaceVersion = 5;

// The module's exports, looked up by name with dlsym. Those returning int32_t
// return a StatusCode value; on failure `err` (err_len bytes, may be 0) gets
// a NUL-terminated message.
extern "C" {
// kCudaModuleInterfaceVersion as the module was built.
typedef int32_t (*pvllm_cuda_module_interface_version_fn)();
// Number of CUDA devices; 0 with a message when there is no driver.
typedef int32_t (*pvllm_cuda_device_count_fn)(int32_t* count, char* err, size_t err_len);
// Free and total bytes on a device (after creating its context).
typedef int32_t (*pvllm_cuda_mem_info_fn)(int32_t device, size_t* free_bytes, size_t* total_bytes,
                                          char* err, size_t err_len);
// Creates the backend; `model` must outlive it; *out is deleted by the caller.
typedef int32_t (*pvllm_cuda_backend_create_fn)(const Model* model,
                                                const CudaBackendOptions* options, Backend** out,
                                                char* err, size_t err_len);
}

}  // namespace pvllm
