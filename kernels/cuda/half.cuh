// f16 and bf16 storage types for NVRTC without the toolkit's headers
// (cuda_fp16.h is not built into every NVRTC): 16 bits with conversions to
// and from float (f16 by the PTX cvt instructions, bf16 by bits, rounding
// to nearest even, NaN kept quiet). Kernels compute in float.

struct rlx_f16 {
    unsigned short bits;
    __device__ __forceinline__ rlx_f16() {}
    __device__ __forceinline__ rlx_f16(float f) { asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(f)); }
    __device__ __forceinline__ operator float() const {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
        return f;
    }
};

struct rlx_bf16 {
    unsigned short bits;
    __device__ __forceinline__ rlx_bf16() {}
    __device__ __forceinline__ rlx_bf16(float f) {
        unsigned int u = __float_as_uint(f);
        if ((u & 0x7fffffffu) > 0x7f800000u) {
            bits = (unsigned short)((u >> 16) | 0x40u);
        } else {
            bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        }
    }
    __device__ __forceinline__ operator float() const { return __uint_as_float((unsigned int)bits << 16); }
};
