// topk: the k largest (or smallest) elements of each row and their i64
// indices, sorted, ties to the lower index, as the CPU backend's stable
// sort orders them (NaN compares as the bit patterns order it, where the
// CPU's comparison leaves it unordered). TopKParams is rlx-gpu's
// (kernels/topk.rs). One block per row bitonic-sorts the row's (key,
// index) pairs, padded to `pow2` with pairs that sort last: in shared
// memory (`topk_shared_<T>`, rows up to TK_SHARED) or in the node's
// scratch (`topk_global_<T>`, pow2 pairs per row). Keys are the elements
// mapped to 64-bit integers of the same order (floats by their flipped
// bits, signed integers with the sign bit flipped); values are copied from
// the input at the kept indices.

#define TK_SHARED 4096u

template <typename T> __device__ __forceinline__ unsigned long long tk_key(T v) {
    return (unsigned long long)v;
}
__device__ __forceinline__ unsigned long long tk_fkey(float f) {
    unsigned int u = __float_as_uint(f);
    return (unsigned long long)(u ^ ((u >> 31) ? 0xffffffffu : 0x80000000u));
}
template <> __device__ __forceinline__ unsigned long long tk_key<f32>(f32 v) { return tk_fkey(v); }
template <> __device__ __forceinline__ unsigned long long tk_key<f16>(f16 v) {
    return tk_fkey(to_f32(v));
}
template <> __device__ __forceinline__ unsigned long long tk_key<bf16>(bf16 v) {
    return tk_fkey(to_f32(v));
}
template <> __device__ __forceinline__ unsigned long long tk_key<f64>(f64 v) {
    unsigned long long u = (unsigned long long)__double_as_longlong(v);
    return u ^ ((u >> 63) ? ~0ull : 0x8000000000000000ull);
}
#define TK_SIGNED(T)                                                                 \
    template <> __device__ __forceinline__ unsigned long long tk_key<T>(T v) {       \
        return (unsigned long long)(long long)v ^ 0x8000000000000000ull;             \
    }
TK_SIGNED(i8)
TK_SIGNED(i16)
TK_SIGNED(i32)
TK_SIGNED(i64)

// Whether pair a comes before pair b.
__device__ __forceinline__ bool tk_before(unsigned long long ka, unsigned int ia,
                                          unsigned long long kb, unsigned int ib,
                                          bool largest) {
    if (ka != kb) {
        return largest ? ka > kb : ka < kb;
    }
    return ia < ib;
}

template <typename T>
__device__ void tk_row(const T* __restrict__ x, T* __restrict__ vals, long long* __restrict__ idx,
                       unsigned long long* keys, unsigned int* ids, unsigned int row,
                       const TopKParams& p) {
    const bool largest = p.largest != 0u;
    const unsigned long long o = row / p.inner, in = row % p.inner;
    const T* xr = x + o * p.len * p.inner + in;
    for (unsigned int j = threadIdx.x; j < p.pow2; j += blockDim.x) {
        if (j < p.len) {
            keys[j] = tk_key<T>(xr[(unsigned long long)j * p.inner]);
            ids[j] = j;
        } else {
            keys[j] = largest ? 0ull : ~0ull;
            ids[j] = 0xffffffffu;
        }
    }
    __syncthreads();
    for (unsigned int k = 2u; k <= p.pow2; k <<= 1) {
        for (unsigned int j = k >> 1; j > 0u; j >>= 1) {
            for (unsigned int i = threadIdx.x; i < p.pow2; i += blockDim.x) {
                unsigned int l = i ^ j;
                if (l > i) {
                    unsigned long long ki = keys[i], kl = keys[l];
                    unsigned int ii = ids[i], il = ids[l];
                    bool up = (i & k) == 0u;
                    if (up ? tk_before(kl, il, ki, ii, largest) : tk_before(ki, ii, kl, il, largest)) {
                        keys[i] = kl;
                        keys[l] = ki;
                        ids[i] = il;
                        ids[l] = ii;
                    }
                }
            }
            __syncthreads();
        }
    }
    T* vr = vals + o * p.k * p.inner + in;
    long long* ir = idx + o * p.k * p.inner + in;
    for (unsigned int r = threadIdx.x; r < p.k; r += blockDim.x) {
        unsigned int j = ids[r];
        vr[(unsigned long long)r * p.inner] = xr[(unsigned long long)j * p.inner];
        ir[(unsigned long long)r * p.inner] = (long long)j;
    }
    __syncthreads();
}

template <typename T>
__device__ __forceinline__ void tk_shared(const T* x, T* vals, long long* idx, const TopKParams& p) {
    __shared__ unsigned long long keys[TK_SHARED];
    __shared__ unsigned int ids[TK_SHARED];
    for (unsigned int row = blockIdx.x + blockIdx.y * gridDim.x; row < p.rows;
         row += gridDim.x * gridDim.y) {
        tk_row<T>(x, vals, idx, keys, ids, row, p);
    }
}

// Scratch: for each row, pow2 keys (u64) then pow2 ids (u32).
template <typename T>
__device__ __forceinline__ void tk_global(const T* x, T* vals, long long* idx, unsigned char* scratch,
                                          const TopKParams& p) {
    for (unsigned int row = blockIdx.x + blockIdx.y * gridDim.x; row < p.rows;
         row += gridDim.x * gridDim.y) {
        unsigned char* base = scratch + (unsigned long long)row * p.pow2 * 12ull;
        unsigned long long* keys = (unsigned long long*)base;
        unsigned int* ids = (unsigned int*)(base + (unsigned long long)p.pow2 * 8ull);
        tk_row<T>(x, vals, idx, keys, ids, row, p);
    }
}

#define RLX_TOPK(T)                                                                          \
    extern "C" __global__ void topk_shared_##T(const T* x, T* vals, long long* idx,          \
                                               unsigned char* scratch, TopKParams p) {       \
        rlx_grid_wait();                                                                     \
        tk_shared<T>(x, vals, idx, p);                                                       \
    }                                                                                        \
    extern "C" __global__ void topk_global_##T(const T* x, T* vals, long long* idx,          \
                                               unsigned char* scratch, TopKParams p) {       \
        rlx_grid_wait();                                                                     \
        tk_global<T>(x, vals, idx, scratch, p);                                              \
    }

RLX_TOPK(f32)
RLX_TOPK(f64)
RLX_TOPK(f16)
RLX_TOPK(bf16)
RLX_TOPK(i8)
RLX_TOPK(i16)
RLX_TOPK(i32)
RLX_TOPK(i64)
RLX_TOPK(u8)
RLX_TOPK(u16)
RLX_TOPK(u32)
RLX_TOPK(u64)
