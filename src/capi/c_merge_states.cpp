// mlajit_merge_states: the C form of merge_states (mlajit/merge_states.h).
#include <vector>

#include "capi/c_conversions.h"
#include "capi/c_status.h"
#include "capi/c_structs.h"
#include "mlajit/merge_states.h"
#include "mlajit/mlajit.h"

namespace {

static_assert(MLAJIT_MAX_MERGE_STATE_PARTS == mlajit::kMaxMergeStateParts,
              "the C bound on parts is the C++ one");

mlajit_merge_states_args default_merge_states_args() {
  const mlajit::MergeStatesArgs cpp;
  mlajit_merge_states_args c{};
  c.struct_size = sizeof(c);
  c.head_dim = cpp.head_dim;
  c.dtype = MLAJIT_BFLOAT16;
  c.lse_base = MLAJIT_LSE_BASE2;
  c.device = cpp.device;
  return c;
}

// The parts are copied only after num_parts is known to be in range, so a huge count cannot
// make the copy read (or allocate) far past the caller's array.
std::vector<mlajit::AttentionState> to_parts(const mlajit_merge_states_args& c) {
  std::vector<mlajit::AttentionState> parts;
  if (c.parts == nullptr || c.num_parts < 1 || c.num_parts > MLAJIT_MAX_MERGE_STATE_PARTS) {
    return parts;  // merge_states refuses the count or the null array, naming it
  }
  for (int32_t i = 0; i < c.num_parts; ++i) {
    const mlajit_attention_state& part = c.parts[i];
    parts.push_back({part.out, part.out_stride_token, part.out_stride_head, part.lse});
  }
  return parts;
}

}  // namespace

extern "C" {

mlajit_status mlajit_merge_states_args_init_sized(mlajit_merge_states_args* args,
                                                  size_t struct_size) {
  return mlajit::capi::init_struct_guarded(args, struct_size, default_merge_states_args,
                                           "mlajit_merge_states_args_init_sized",
                                           mlajit::capi::kMergeStatesArgsFirstLayout);
}

void(mlajit_merge_states_args_init)(mlajit_merge_states_args* args) {  // the unsized symbol
  if (args != nullptr) {
    mlajit_merge_states_args_init_sized(args, mlajit::capi::kMergeStatesArgsUnsizedInit);
  }
}

mlajit_status mlajit_merge_states(const mlajit_merge_states_args* args, void* stream) {
  return mlajit::capi::guarded([&] {
    const mlajit_merge_states_args c =
        mlajit::capi::read_struct(args, default_merge_states_args(), "args",
                                   mlajit::capi::kMergeStatesArgsFirstLayout);
    const std::vector<mlajit::AttentionState> parts = to_parts(c);
    mlajit::MergeStatesArgs cpp;
    cpp.parts = parts.empty() ? nullptr : parts.data();
    cpp.num_parts = c.num_parts;
    cpp.out = c.out;
    cpp.out_stride_token = c.out_stride_token;
    cpp.out_stride_head = c.out_stride_head;
    cpp.lse = c.lse;
    cpp.num_tokens = c.num_tokens;
    cpp.num_heads = c.num_heads;
    cpp.head_dim = c.head_dim;
    cpp.dtype = mlajit::capi::to_dtype(c.dtype, "args->dtype");
    cpp.lse_base = mlajit::capi::to_lse_base(c.lse_base, "args->lse_base");
    cpp.device = c.device;
    mlajit::merge_states(cpp, stream);
  });
}

}  // extern "C"
