// mlajit_attention_*: the C handle is a BatchMlaAttention behind an opaque pointer.
#include <cstring>

#include <fmt/format.h>

#include "capi/c_conversions.h"
#include "capi/c_status.h"
#include "capi/c_structs.h"
#include "mlajit/attention.h"
#include "mlajit/mlajit.h"

struct mlajit_attention {
  mlajit::BatchMlaAttention object;
};

namespace {

using mlajit::capi::fail;
using mlajit::capi::guarded;

mlajit_status null_handle(const char* function) noexcept {
  return guarded([&]() -> void {
    throw mlajit::Error(mlajit::ErrorCode::kInvalidArgument,
                        fmt::format("{}: attention is NULL (create one with "
                                    "mlajit_attention_create)",
                                    function));
  });
}

}  // namespace

extern "C" {

mlajit_status mlajit_shape_init_sized(mlajit_shape* shape, size_t struct_size) {
  return mlajit::capi::init_struct_guarded(shape, struct_size, mlajit::capi::default_shape,
                                           "mlajit_shape_init_sized",
                                           mlajit::capi::kShapeFirstLayout);
}
mlajit_status mlajit_options_init_sized(mlajit_options* options, size_t struct_size) {
  return mlajit::capi::init_struct_guarded(options, struct_size, mlajit::capi::default_options,
                                           "mlajit_options_init_sized",
                                           mlajit::capi::kOptionsFirstLayout);
}
mlajit_status mlajit_batch_init_sized(mlajit_batch* batch, size_t struct_size) {
  return mlajit::capi::init_struct_guarded(batch, struct_size, mlajit::capi::default_batch,
                                           "mlajit_batch_init_sized",
                                           mlajit::capi::kBatchFirstLayout);
}
mlajit_status mlajit_run_args_init_sized(mlajit_run_args* args, size_t struct_size) {
  return mlajit::capi::init_struct_guarded(args, struct_size, mlajit::capi::default_run_args,
                                           "mlajit_run_args_init_sized",
                                           mlajit::capi::kRunArgsFirstLayout);
}

// The unsized symbols (the header's mlajit_*_init are macros; the parentheses keep them from
// expanding here).
void(mlajit_shape_init)(mlajit_shape* shape) {
  if (shape != nullptr) mlajit_shape_init_sized(shape, mlajit::capi::kShapeUnsizedInit);
}
void(mlajit_options_init)(mlajit_options* options) {
  if (options != nullptr) mlajit_options_init_sized(options, mlajit::capi::kOptionsUnsizedInit);
}
void(mlajit_batch_init)(mlajit_batch* batch) {
  if (batch != nullptr) mlajit_batch_init_sized(batch, mlajit::capi::kBatchUnsizedInit);
}
void(mlajit_run_args_init)(mlajit_run_args* args) {
  if (args != nullptr) mlajit_run_args_init_sized(args, mlajit::capi::kRunArgsUnsizedInit);
}

mlajit_status mlajit_attention_create(const mlajit_shape* shape, const mlajit_options* options,
                                      mlajit_attention_t** out) {
  if (out == nullptr) return fail(MLAJIT_ERROR_INVALID_ARGUMENT, "mlajit_attention_create: out is NULL");
  *out = nullptr;
  return guarded([&] {
    const mlajit::MlaShape cpp_shape = mlajit::capi::to_shape(shape);
    const mlajit::MlaOptions cpp_options = mlajit::capi::to_options(options);
    *out = new mlajit_attention{mlajit::BatchMlaAttention(cpp_shape, cpp_options)};
  });
}

void mlajit_attention_destroy(mlajit_attention_t* attention) {
  delete attention;  // the destructor frees device memory and never throws
}

mlajit_status mlajit_attention_plan(mlajit_attention_t* attention, const mlajit_batch* batch,
                                    void* stream) {
  if (attention == nullptr) return null_handle("mlajit_attention_plan");
  return guarded([&] { attention->object.plan(mlajit::capi::to_batch(batch), stream); });
}

mlajit_status mlajit_attention_run(mlajit_attention_t* attention, const mlajit_run_args* args,
                                   void* stream) {
  if (attention == nullptr) return null_handle("mlajit_attention_run");
  return guarded([&] { attention->object.run(mlajit::capi::to_run_args(args), stream); });
}

mlajit_status mlajit_attention_plan_info(const mlajit_attention_t* attention,
                                         mlajit_plan_info* info) {
  if (attention == nullptr) return null_handle("mlajit_attention_plan_info");
  return guarded([&] {
    const mlajit::MlaPlanInfo cpp = attention->object.plan_info();
    mlajit_plan_info c{};
    c.cluster_size = cpp.cluster_size;
    c.grid_ctas = cpp.grid_ctas;
    c.work_items = cpp.work_items;
    c.split_tiles_rows = cpp.split_tiles_rows;
    c.tier = cpp.tier;
    c.two_launch = cpp.two_launch ? 1 : 0;
    c.busiest_to_mean = cpp.busiest_to_mean;
    c.workspace_bytes = cpp.workspace_bytes;
    c.workspace_bytes_needed = cpp.workspace_bytes_needed;
    mlajit::capi::write_struct(info, c, "info", offsetof(mlajit_plan_info, workspace_bytes));
  });
}

mlajit_status mlajit_attention_spec_text(const mlajit_attention_t* attention, char* buffer,
                                         size_t size, size_t* needed) {
  if (attention == nullptr) return null_handle("mlajit_attention_spec_text");
  return guarded([&] {
    const std::string text = attention->object.spec_text();
    if (needed != nullptr) *needed = text.size() + 1;
    if (buffer == nullptr || size < text.size() + 1) {
      throw mlajit::Error(mlajit::ErrorCode::kInvalidArgument,
                          fmt::format("mlajit_attention_spec_text: buffer of {} bytes is too "
                                      "small: the text needs {}",
                                      buffer == nullptr ? 0 : size, text.size() + 1));
    }
    std::memcpy(buffer, text.c_str(), text.size() + 1);
  });
}

}  // extern "C"
