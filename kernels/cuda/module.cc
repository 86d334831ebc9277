// The module's face: the extern "C" pvllm_cuda_* functions that leave
// libpvllm_cuda.so (cuda_backend.map), probing for a usable device, and
// creating the backend: its checks of the options and the model, then
// init, which sets the device, the stream and cuBLAS up and has the
// weights, buffers and KV pool allocated.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "core/backend/backend.h"
#include "core/backend/cuda_module_interface.h"
#include "core/model/model.h"
#include "kernels/cuda/attention_generic.h"
#include "kernels/cuda/common/device_buffer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/head_norm.h"
#include "kernels/cuda/rope.h"

namespace pvllm::cuda {
namespace {

// Names why no device is usable: no driver, or none present.
Status device_count(int32_t* count) {
  *count = 0;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaErrorInsufficientDriver) {
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
      return Unsupported("no CUDA driver is installed (libcuda.so.1 not found)");
    }
    return Unsupported("the CUDA driver supports CUDA " + std::to_string(driver / 1000) + "." +
                       std::to_string(driver % 1000 / 10) + ", older than the CUDA " +
                       std::to_string(CUDART_VERSION / 1000) + "." +
                       std::to_string(CUDART_VERSION % 1000 / 10) +
                       " runtime this module was built with; update the driver");
  }
  if (e == cudaErrorNoDevice) return Unsupported("no CUDA device present");
  if (e != cudaSuccess) return cuda_status(e, "cudaGetDeviceCount");
  *count = n;
  return Status::Ok();
}

// The module holds sm_90 code and compute_90 PTX: devices of compute
// capability 9.0 and newer run it; older ones would fail at the first launch.
constexpr int kMinComputeCapability = 90;

// Unsupported, naming the reason, unless `device` exists and can run the
// kernels.
Status check_device(int32_t device) {
  int32_t count = 0;
  PVLLM_RETURN_IF_ERROR(device_count(&count));
  if (device < 0 || device >= count) {
    return Unsupported("CUDA device " + std::to_string(device) + " does not exist (" +
                       std::to_string(count) + " devices)");
  }
  cudaDeviceProp prop{};
  PVLLM_CUDA_TRY(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  if (prop.major * 10 + prop.minor < kMinComputeCapability) {
    return Unsupported("CUDA device " + std::to_string(device) + " (" + prop.name +
                       ") has compute capability " + std::to_string(prop.major) + "." +
                       std::to_string(prop.minor) + "; the kernels need 9.0 or newer");
  }
  return Status::Ok();
}

int32_t fail(const Status& s, char* err, size_t err_len) {
  if (err != nullptr && err_len > 0) std::snprintf(err, err_len, "%s", s.message().c_str());
  return static_cast<int32_t>(s.code());
}

}  // namespace

CudaBackend::~CudaBackend() {
  cudaSetDevice(opt_.device_index);
  // Nothing may still run on the stream when its graphs, handle and
  // buffers go (every step syncs already; this covers a failed init).
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (auto& [batch, g] : graphs_) {
    if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
  }
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status CudaBackend::check_shapes() const {
  if (opt_.dtype < 0 || opt_.dtype > 3) {
    return InvalidArgument("dtype must be 0 (auto), 1 (bf16), 2 (fp16) or 3 (fp32), got " +
                           std::to_string(opt_.dtype));
  }
  // Quantized weights (GGUF) run on the CPU backend; their CUDA matmuls
  // are not written yet.
  std::string quantized;
  model_.for_each_weight([&](const Tensor& t) {
    if (quantized.empty() && dtype_is_quantized(t.dtype)) {
      quantized = t.name + " is " + dtype_name(t.dtype);
    }
  });
  if (!quantized.empty()) {
    return Unsupported("the CUDA backend serves F32, F16 and BF16 weights; " + quantized +
                       " (quantized weights run on the cpu backend)");
  }
  const int32_t d = cfg_.head_dim;
  if (!pvllm_cuda_rope_serves_head_dim(d)) {  // attention serves 1 to 256
    return Unsupported(
        "the CUDA kernels serve head_dim 8, 16, 32, 64, 80, 96, 112, 128, 192 and 256; the model "
        "has " +
        std::to_string(d));
  }
  if (cfg_.num_kv_heads <= 0 || cfg_.num_heads % cfg_.num_kv_heads != 0) {
    return CorruptModel("num_heads must be a multiple of num_kv_heads");
  }
  // The pool stores the activation dtype, or 8-bit codes with their scales.
  const DType dtype = cuda_activation_dtype(opt_.dtype, model_.weights.embed.dtype);
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;
  PVLLM_RETURN_IF_ERROR(
      cuda_kv_cache_dtype(static_cast<KvCacheDtype>(opt_.kv_cache_dtype), dtype, &kv_dtype));
  // The fast attention kernels (fp16 / bf16 caches at head_dim 64 and 128)
  // ask more; the generic ones (fp32, 8-bit caches, other head dims) take
  // any block size and group.
  if (!generic_attention::serves(dtype, d, kv_dtype)) {
    const int32_t bs = opt_.block_size;
    if (bs != 16 && bs != 32 && bs != 256) {
      return Unsupported("the CUDA attention kernels serve block_size 16, 32 and 256 in " +
                         std::string(dtype_name(dtype)) + " at head_dim " + std::to_string(d) +
                         "; got " + std::to_string(bs));
    }
    if (cfg_.num_heads / cfg_.num_kv_heads > kDecodeMaxGroupSize) {
      return Unsupported("the CUDA decode kernel serves GQA groups up to " +
                         std::to_string(kDecodeMaxGroupSize) + " in " +
                         std::string(dtype_name(dtype)) + " at head_dim " + std::to_string(d));
    }
  }
  if (!(opt_.gpu_memory_utilization > 0.0f && opt_.gpu_memory_utilization <= 1.0f)) {
    return InvalidArgument("gpu_memory_utilization must be in (0, 1], got " +
                           std::to_string(opt_.gpu_memory_utilization));
  }
  return Status::Ok();
}

// The architecture features of the config that this backend runs: every
// other value is refused here rather than ignored. Weights the config does
// not ask for would be ignored too, so they are refused as well.
Status CudaBackend::check_features() const {
  using Type = RopeScaling::Type;
  const Type type = cfg_.rope_scaling.type;
  if (type != Type::kNone && type != Type::kLinear && type != Type::kLlama3 &&
      type != Type::kDynamic) {
    return Unsupported("the CUDA backend does not implement RoPE scaling type " +
                       std::to_string(static_cast<int>(type)));
  }
  if (type == Type::kDynamic && !(cfg_.rope_scaling.factor > 0.0f &&
                                  cfg_.rope_scaling.original_max_position_embeddings > 0)) {
    return InvalidArgument(
        "dynamic RoPE scaling needs factor > 0 and "
        "original_max_position_embeddings > 0");
  }
  if (cfg_.rope_style != RopeStyle::kInterleaved && cfg_.rope_style != RopeStyle::kRotateHalf) {
    return Unsupported("the CUDA backend does not implement RoPE style " +
                       std::to_string(static_cast<int>(cfg_.rope_style)));
  }
  if (cfg_.sliding_window < 0) {
    return InvalidArgument("sliding_window must be >= 0 (0 = full attention), got " +
                           std::to_string(cfg_.sliding_window));
  }
  if (cfg_.qk_norm && cfg_.head_dim > kHeadNormMaxHeadDim) {
    return Unsupported("the CUDA q/k norm serves head_dim up to " +
                       std::to_string(kHeadNormMaxHeadDim));
  }
  for (size_t i = 0; i < model_.weights.layers.size(); ++i) {
    const LayerWeights& w = model_.weights.layers[i];
    const char* extra = nullptr;
    if (!cfg_.qkv_bias && (!w.bq.empty() || !w.bk.empty() || !w.bv.empty())) {
      extra = "q/k/v bias tensors but the config has no qkv_bias";
    } else if (!cfg_.o_bias && !w.bo.empty()) {
      extra = "an o_proj bias but the config has no o_bias";
    } else if (!cfg_.qk_norm && (!w.q_norm.empty() || !w.k_norm.empty())) {
      extra = "q/k norm weights but the config has no qk_norm";
    }
    if (extra != nullptr) {
      return CorruptModel("layer " + std::to_string(i) + " has " + extra +
                          "; the CUDA backend would ignore them");
    }
  }
  return Status::Ok();
}

Status CudaBackend::init() {
  PVLLM_RETURN_IF_ERROR(check_shapes());
  PVLLM_RETURN_IF_ERROR(check_features());
  if (const char* env = std::getenv("PVLLM_CUDA_PREFILL_KERNEL"); env != nullptr && *env != '\0') {
    const std::string want = env;
    if (want == "wmma") {
      prefill_variant_ = PrefillVariant::kWmma;
    } else if (want != "mma") {
      return InvalidArgument("PVLLM_CUDA_PREFILL_KERNEL=" + want +
                             " names no prefill attention kernel (mma, wmma)");
    }
  }
  PVLLM_RETURN_IF_ERROR(check_device(opt_.device_index));
  PVLLM_CUDA_TRY(cudaSetDevice(opt_.device_index), "cudaSetDevice");
  dtype_ = cuda_activation_dtype(opt_.dtype, model_.weights.embed.dtype);
  PVLLM_RETURN_IF_ERROR(
      cuda_kv_cache_dtype(static_cast<KvCacheDtype>(opt_.kv_cache_dtype), dtype_, &kv_dtype_));
  PVLLM_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream");
  const cublasStatus_t cs = cublasCreate(&cublas_);
  if (cs != CUBLAS_STATUS_SUCCESS) return cublas_status(cs, "cublasCreate");
  PVLLM_RETURN_IF_ERROR(upload_weights());
  PVLLM_RETURN_IF_ERROR(allocate_buffers());
  cublasStatus_t s = cublasSetStream(cublas_, stream_);
  if (s == CUBLAS_STATUS_SUCCESS) {
    // An explicit workspace keeps cuBLAS from allocating inside a graph capture.
    s = cublasSetWorkspace(cublas_, cublas_ws_.get(), cublas_ws_.bytes());
  }
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH);
  if (s != CUBLAS_STATUS_SUCCESS) return cublas_status(s, "configuring cuBLAS");
  PVLLM_RETURN_IF_ERROR(allocate_kv());
  PVLLM_CUDA_TRY(cudaDeviceSynchronize(), "initialising the CUDA backend");
  return Status::Ok();
}

}  // namespace pvllm::cuda

#define PVLLM_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

PVLLM_CUDA_EXPORT int32_t pvllm_cuda_module_interface_version() {
  return pvllm::kCudaModuleInterfaceVersion;
}

PVLLM_CUDA_EXPORT int32_t pvllm_cuda_device_count(int32_t* count, char* err, size_t err_len) {
  return pvllm::cuda::fail(pvllm::cuda::device_count(count), err, err_len);
}

PVLLM_CUDA_EXPORT int32_t pvllm_cuda_mem_info(int32_t device, size_t* free_bytes,
                                              size_t* total_bytes, char* err, size_t err_len) {
  int32_t n = 0;
  pvllm::Status s = pvllm::cuda::device_count(&n);
  if (s.ok() && (device < 0 || device >= n)) {
    s = pvllm::Unsupported("CUDA device " + std::to_string(device) + " does not exist (" +
                           std::to_string(n) + " devices)");
  }
  if (s.ok()) {
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaMemGetInfo(free_bytes, total_bytes);
    if (e != cudaSuccess) s = pvllm::cuda_status(e, "cudaMemGetInfo");
  }
  return pvllm::cuda::fail(s, err, err_len);
}

PVLLM_CUDA_EXPORT int32_t pvllm_cuda_backend_create(const pvllm::Model* model,
                                                    const pvllm::CudaBackendOptions* options,
                                                    pvllm::Backend** out, char* err,
                                                    size_t err_len) {
  if (model == nullptr || options == nullptr || out == nullptr) {
    return pvllm::cuda::fail(pvllm::InvalidArgument("null argument"), err, err_len);
  }
  *out = nullptr;
  pvllm::set_alloc_fault_hook(options->fail_device_alloc);
  // No exception may cross the C boundary (host allocations can throw).
  try {
    auto backend = std::make_unique<pvllm::cuda::CudaBackend>(*model, *options);
    const pvllm::Status s = backend->init();
    if (!s.ok()) return pvllm::cuda::fail(s, err, err_len);
    *out = backend.release();
  } catch (const std::bad_alloc&) {
    return pvllm::cuda::fail(pvllm::OutOfMemory("creating the CUDA backend: out of host memory"),
                             err, err_len);
  } catch (const std::exception& e) {
    return pvllm::cuda::fail(pvllm::Internal(std::string("creating the CUDA backend: ") + e.what()),
                             err, err_len);
  }
  return 0;
}
