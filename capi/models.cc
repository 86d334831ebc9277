// The C ABI's entry points for models: inspection and memory estimates (no
// engine needed).
#include <cstring>
#include <memory>
#include <string>

#include "capi/conversions.h"
#include "capi/handles.h"
#include "capi/struct_versions.h"
#include "core/model/random_model.h"
#include "pvllm/pvllm.h"

using namespace pvllm::capi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

/* ---------------------------------------------------------------- models */

void pvllm_model_config_init(pvllm_model_config* config, size_t struct_size) {
  init_struct(config, struct_size, zeroed_struct<pvllm_model_config>());
}

pvllm_status pvllm_model_inspect(const char* model_path, pvllm_model_info** out_info,
                                 pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_info != nullptr) *out_info = nullptr;
    if (model_path == nullptr) return null_argument("model_path");
    if (out_info == nullptr) return null_argument("out_info");
    if (model_path[0] == '\0') return invalid("model_path is empty");
    auto info = std::make_unique<pvllm_model_info>();
    PVLLM_RETURN_IF_ERROR(pvllm::inspect_model(model_path, &info->summary));
    *out_info = publish_handle(std::move(info));
    return Status::Ok();
  });
}

pvllm_status pvllm_model_inspect_random(const char* shape, pvllm_model_info** out_info,
                                        pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_info != nullptr) *out_info = nullptr;
    if (shape == nullptr) return null_argument("shape");
    if (out_info == nullptr) return null_argument("out_info");
    auto info = std::make_unique<pvllm_model_info>();
    PVLLM_RETURN_IF_ERROR(pvllm::inspect_random_model(shape, pvllm::DType::kBF16, &info->summary));
    *out_info = publish_handle(std::move(info));
    return Status::Ok();
  });
}

pvllm_status pvllm_model_info_config(const pvllm_model_info* info, pvllm_model_config* out_config,
                                     pvllm_error** error) {
  return guard(error, [&]() -> Status {
    PVLLM_RETURN_IF_ERROR(check_info(info));
    if (out_config == nullptr) return null_argument("out_config");
    PVLLM_RETURN_IF_ERROR(check_struct_size(out_config, "out_config"));
    pvllm_model_config out = zeroed_struct<pvllm_model_config>();
    const pvllm::ModelConfig& c = info->summary.config;
    copy_fixed(out.architecture, c.architecture);
    copy_fixed(out.format, format_name(info->summary.format));
    out.hidden_size = c.hidden_size;
    out.intermediate_size = c.intermediate_size;
    out.num_layers = c.num_layers;
    out.num_heads = c.num_heads;
    out.num_kv_heads = c.num_kv_heads;
    out.head_dim = c.head_dim;
    out.vocab_size = c.vocab_size;
    out.max_position_embeddings = c.max_position_embeddings;
    out.rms_norm_eps = c.rms_norm_eps;
    out.rope_theta = c.rope_theta;
    out.tie_word_embeddings = c.tie_word_embeddings ? 1 : 0;
    out.bos_token_id = c.bos_token_id;
    out.eos_token_id = c.eos_token_id;
    const pvllm::RopeScaling& rs = c.rope_scaling;
    out.rope_type = static_cast<int32_t>(rs.type);
    using Rope = pvllm::RopeScaling::Type;
    if (rs.type != Rope::kNone) out.rope_factor = rs.factor;
    if (rs.type == Rope::kLlama3) {
      out.rope_low_freq_factor = rs.low_freq_factor;
      out.rope_high_freq_factor = rs.high_freq_factor;
    }
    if (rs.type == Rope::kLlama3 || rs.type == Rope::kDynamic) {
      out.rope_original_max_position_embeddings = rs.original_max_position_embeddings;
    }
    out.sliding_window = c.sliding_window;
    out.qkv_bias = c.qkv_bias ? 1 : 0;
    out.o_bias = c.o_bias ? 1 : 0;
    out.qk_norm = c.qk_norm ? 1 : 0;
    out.num_stop_token_ids = static_cast<int32_t>(c.extra_stop_token_ids.size());
    constexpr size_t kMaxStops = sizeof(out.stop_token_ids) / sizeof(out.stop_token_ids[0]);
    for (size_t i = 0; i < c.extra_stop_token_ids.size() && i < kMaxStops; ++i) {
      out.stop_token_ids[i] = c.extra_stop_token_ids[i];
    }
    write_struct(out_config, out);
    return Status::Ok();
  });
}

size_t pvllm_model_info_num_tensors(const pvllm_model_info* info) {
  return registry<pvllm_model_info>().is_live(info) ? info->summary.tensors.size() : 0;
}

pvllm_status pvllm_model_info_tensor(const pvllm_model_info* info, size_t index,
                                     pvllm_tensor_info* out_tensor, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    PVLLM_RETURN_IF_ERROR(check_info(info));
    if (out_tensor == nullptr) return null_argument("out_tensor");
    const auto& tensors = info->summary.tensors;
    if (index >= tensors.size()) {
      return invalid("index " + std::to_string(index) + " is out of range; the model has " +
                     std::to_string(tensors.size()) + " tensors");
    }
    const pvllm::ModelSummary::TensorInfo& t = tensors[index];
    constexpr size_t kMaxDims = sizeof(out_tensor->shape) / sizeof(out_tensor->shape[0]);
    // Unreachable today: the loaders accept only the 1-D and 2-D shapes an
    // architecture dictates; kept for a future one. GCOVR_EXCL_START
    if (t.shape.size() > kMaxDims) {
      return pvllm::Unsupported("tensor " + t.name + " has " + std::to_string(t.shape.size()) +
                                " dimensions; pvllm_tensor_info holds at most " +
                                std::to_string(kMaxDims));
    }  // GCOVR_EXCL_STOP
    std::memset(out_tensor, 0, sizeof(*out_tensor));
    out_tensor->name = t.name.c_str();
    out_tensor->dtype = pvllm::dtype_name(t.dtype);
    out_tensor->num_dims = static_cast<int32_t>(t.shape.size());
    std::copy(t.shape.begin(), t.shape.end(), out_tensor->shape);
    return Status::Ok();
  });
}

void pvllm_model_info_free(pvllm_model_info* info) { release_handle(info); }

void pvllm_memory_estimate_init(pvllm_memory_estimate* estimate, size_t struct_size) {
  init_struct(estimate, struct_size, zeroed_struct<pvllm_memory_estimate>());
}

pvllm_status pvllm_estimate_memory(const pvllm_engine_params* params,
                                   pvllm_memory_estimate* out_estimate, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_estimate == nullptr) return null_argument("out_estimate");
    PVLLM_RETURN_IF_ERROR(check_struct_size(out_estimate, "out_estimate"));
    pvllm::EngineConfig config;
    PVLLM_RETURN_IF_ERROR(to_engine_config(params, &config));
    pvllm::MemoryEstimate e;
    pvllm_memory_estimate out = zeroed_struct<pvllm_memory_estimate>();
    PVLLM_RETURN_IF_ERROR(pvllm::estimate_memory(config, &e));
    out.weight_bytes = e.weight_bytes;
    out.kv_bytes_per_block = e.kv_bytes_per_block;
    out.num_blocks = e.num_blocks;
    out.kv_bytes_total = e.kv_bytes_total;
    out.max_tokens_in_cache = e.max_tokens_in_cache;
    out.activation_bytes = e.activation_bytes;
    out.swap_bytes = e.swap_bytes;
    write_struct(out_estimate, out);
    return Status::Ok();
  });
}

}  // extern "C"
