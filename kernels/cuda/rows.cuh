// rows: helpers of the row kernels (softmax, norm): loads and stores of
// every float storage type (computing in float, double for f64), and sums
// and maxima over a warp or a block through shuffles. A row is reduced by
// one warp (32 threads) or one whole block; `rw_*_block` must be called by
// every thread of the block and returns the result in every thread.

__device__ __forceinline__ float rw_up(float x) { return x; }
__device__ __forceinline__ double rw_up(double x) { return x; }
__device__ __forceinline__ float rw_up(rlx_half x) { return rlx_h2f(x); }
__device__ __forceinline__ float rw_up(rlx_bf16 x) { return rlx_b2f(x); }

__device__ __forceinline__ void rw_store(float* y, float v) { *y = v; }
__device__ __forceinline__ void rw_store(double* y, double v) { *y = v; }
__device__ __forceinline__ void rw_store(rlx_half* y, float v) { *y = rlx_f2h(v); }
__device__ __forceinline__ void rw_store(rlx_bf16* y, float v) { *y = rlx_f2b(v); }

// The compute type of a storage type.
template <typename T> struct RwAcc { typedef float type; };
template <> struct RwAcc<double> { typedef double type; };

__device__ __forceinline__ float rw_exp(float x) { return expf(x); }
__device__ __forceinline__ double rw_exp(double x) { return exp(x); }
__device__ __forceinline__ float rw_log(float x) { return logf(x); }
__device__ __forceinline__ double rw_log(double x) { return log(x); }
__device__ __forceinline__ float rw_rsqrt(float x) { return 1.0f / sqrtf(x); }
__device__ __forceinline__ double rw_rsqrt(double x) { return 1.0 / sqrt(x); }

// max ignoring NaN (Rust's f64::max).
template <typename A> __device__ __forceinline__ A rw_max(A a, A b) {
    return a != a ? b : (b != b ? a : (a > b ? a : b));
}

template <typename A> __device__ __forceinline__ A rw_sum_warp(A v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

template <typename A> __device__ __forceinline__ A rw_max_warp(A v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = rw_max(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

template <typename A> __device__ __forceinline__ A rw_sum_block(A v) {
    __shared__ A part[32];
    v = rw_sum_warp(v);
    const unsigned int warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
    if (lane == 0u) part[warp] = v;
    __syncthreads();
    v = lane < (blockDim.x + 31u) / 32u ? part[lane] : (A)0;
    v = rw_sum_warp(v);
    __syncthreads();
    return v;
}

template <typename A> __device__ __forceinline__ A rw_max_block(A v) {
    __shared__ A part[32];
    v = rw_max_warp(v);
    const unsigned int warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
    if (lane == 0u) part[warp] = v;
    __syncthreads();
    v = lane < (blockDim.x + 31u) / 32u ? part[lane] : part[0];
    v = rw_max_warp(v);
    __syncthreads();
    return v;
}

// How many threads share a row.
enum RwMode { RW_THREAD = 0, RW_WARP = 1, RW_BLOCK = 2 };

// A sum (maximum) over the threads sharing a row.
template <typename A> __device__ __forceinline__ A rw_sum(A v, int mode) {
    return mode == RW_THREAD ? v : (mode == RW_WARP ? rw_sum_warp(v) : rw_sum_block(v));
}
template <typename A> __device__ __forceinline__ A rw_maxg(A v, int mode) {
    return mode == RW_THREAD ? v : (mode == RW_WARP ? rw_max_warp(v) : rw_max_block(v));
}

// The rows of a launch, grid-stride: this thread's group (a thread, a
// warp or the block) owns rows first, first + step, ...; `lane` is the
// thread's place in its group of `group` threads.
struct RwRows {
    unsigned long long first, step;
    unsigned int lane, group;
    __device__ __forceinline__ RwRows(int mode) {
        const unsigned long long block =
            (unsigned long long)blockIdx.x + (unsigned long long)blockIdx.y * gridDim.x;
        group = mode == RW_THREAD ? 1u : (mode == RW_WARP ? 32u : blockDim.x);
        const unsigned long long per = blockDim.x / group;
        lane = threadIdx.x % group;
        first = block * per + threadIdx.x / group;
        step = (unsigned long long)gridDim.x * gridDim.y * per;
    }
};
