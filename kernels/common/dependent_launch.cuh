// Programmatic dependent launch (sm_90 and later; no-ops below): a grid launched with
// programmatic stream serialization may start while the grid before it in the stream still
// runs, and waits for it only where it says so.
#pragma once

namespace mlajit_kernel {

// Lets the stream's next grid, if it was launched as a programmatic dependent, be scheduled
// once every CTA of this grid has come here or exited. Its wait still waits for this grid's end.
__device__ __forceinline__ void launch_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Returns once the previous grid in the stream has completed and its writes are visible; a
// no-op when this grid was not launched as a programmatic dependent.
__device__ __forceinline__ void wait_for_previous_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace mlajit_kernel
