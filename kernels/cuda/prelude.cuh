// Shared by every rlx-onnx CUDA module (prepended before the parameter
// structs, whose generated checks use offsetof).

// NVRTC has no <cstddef> and no __builtin_offsetof; its front end (EDG)
// folds __INTADDR__ to a constant, so this offsetof works in static_assert.
#ifndef offsetof
#define offsetof(T, m) ((unsigned long long)__INTADDR__(&(((T*)0)->m)))
#endif

// The linear index of this thread in a grid whose blocks may be folded into y
// (grid x up to 65535, kernels recover the block as x + y * grid_x).
__device__ __forceinline__ unsigned long long rlx_thread() {
    unsigned long long block =
        (unsigned long long)blockIdx.x + (unsigned long long)blockIdx.y * gridDim.x;
    return block * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ unsigned long long rlx_threads() {
    return (unsigned long long)gridDim.x * gridDim.y * blockDim.x;
}
