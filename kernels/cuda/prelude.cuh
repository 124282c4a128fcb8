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

// Programmatic dependent launch (sm_90 and newer): every kernel's first
// statement. The executable launches a kernel whose PTX waits here before
// any memory access (device.rs checks each entry's PTX, dependent.rs) with
// programmatic stream serialization, so its blocks are placed on the SMs
// while the kernel before it still runs, and each waits here until that
// kernel has finished and its writes are visible. Each kernel lets the next
// one launch as soon as its own blocks have all started (launch_dependents
// first): the chain's launch latency overlaps the work, where a plain launch
// starts the next grid only once the last block of this one has exited.
// A kernel that waits for its predecessor also orders everything before it,
// so writes two kernels back are visible too. Older architectures compile
// both away, and their launches stay plain.
__device__ __forceinline__ void rlx_grid_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// f16 and bf16 storage without <cuda_fp16.h> / <cuda_bf16.h> (NVRTC ships
// no headers): two-byte structs converted to and from float with PTX
// (round to nearest even; bf16 conversions need sm_80). Kernels compute in
// float: the structs convert implicitly both ways, or through the functions
// below.
struct __align__(2) rlx_half {
    unsigned short x;
    __device__ __forceinline__ rlx_half() {}
    __device__ __forceinline__ rlx_half(float f) { asm("cvt.rn.f16.f32 %0, %1;" : "=h"(x) : "f"(f)); }
    __device__ __forceinline__ operator float() const {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
        return f;
    }
};
struct __align__(2) rlx_bf16 {
    unsigned short x;
    __device__ __forceinline__ rlx_bf16() {}
    __device__ __forceinline__ rlx_bf16(float f) { asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(x) : "f"(f)); }
    __device__ __forceinline__ operator float() const { return __int_as_float(((unsigned int)x) << 16); }
};
typedef rlx_half rlx_f16;

__device__ __forceinline__ float rlx_h2f(rlx_half h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.x));
    return f;
}
__device__ __forceinline__ rlx_half rlx_f2h(float f) {
    rlx_half h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f));
    return h;
}
__device__ __forceinline__ float rlx_b2f(rlx_bf16 b) { return __int_as_float(((unsigned int)b.x) << 16); }
__device__ __forceinline__ rlx_bf16 rlx_f2b(float f) {
    rlx_bf16 b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.x) : "f"(f));
    return b;
}
