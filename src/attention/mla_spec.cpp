#include "attention/mla_spec.h"

#include "jit/tile_config.h"

namespace mlajit {

KernelSpec mla_spec_for(const MlaShape& shape, const std::string& arch, int smem_per_sm,
                        int smem_per_block_optin, int force_tier) {
  KernelSpec spec;
  spec.family = "mla_fa2";
  spec.q_dtype = spec.kv_dtype = spec.o_dtype = shape.dtype;
  spec.head_dim_ckv = shape.head_dim_ckv;
  spec.head_dim_kpe = shape.head_dim_kpe;
  spec.causal = shape.causal;
  spec.arch = arch;
  spec.tile = force_tier != 0 ? jit::tile_tier(force_tier)
                              : jit::select_tile_config(spec, smem_per_sm, smem_per_block_optin);
  return spec;
}

}  // namespace mlajit
