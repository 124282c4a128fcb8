// movement: strided copies (transpose, slice, concat, split, expand,
// depth/space rearrangement) and padding (constant, edge, reflect, wrap;
// tile is wrap padding). CopyParams and PadParams are rlx-gpu's
// (kernels/movement.rs). One thread per output element over a grid-stride
// loop, coordinates in 32 bits (counts are u32), offsets in 64. Instantiated
// per element size: copy_1/2/4/8, pad_1/2/4/8, and pad_value_1/2/4/8 (the
// constant read on the device, its first element).

template <typename T>
__device__ __forceinline__ void copy_body(const T* __restrict__ x, T* __restrict__ y,
                                          const CopyParams& p) {
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned int r = (unsigned int)i;
        long long xo = (long long)p.x_start;
        unsigned long long yo = p.y_start;
        for (int d = (int)p.rank - 1; d >= 0; --d) {
            unsigned int c = r % p.dims[d];
            r /= p.dims[d];
            xo += (long long)c * p.x_strides[d];
            yo += (unsigned long long)c * p.y_strides[d];
        }
        y[yo] = x[xo];
    }
}

// The source coordinate of padded coordinate q (begin pad removed) on an
// axis of n, or -1 for the constant.
__device__ __forceinline__ long long pad_source(unsigned int mode, long long q, long long n) {
    if (q >= 0 && q < n) {
        return q;
    }
    if (n == 0 || mode == 0u) {
        return -1;
    }
    if (mode == 1u) {
        return q < 0 ? 0 : n - 1;
    }
    if (mode == 3u) {
        long long m = q % n;
        return m < 0 ? m + n : m;
    }
    if (n == 1) {
        return 0;
    }
    long long period = 2 * (n - 1);
    long long m = q % period;
    if (m < 0) {
        m += period;
    }
    return m < n ? m : period - m;
}

template <typename T>
__device__ __forceinline__ void pad_body(const T* __restrict__ x, T* __restrict__ y,
                                         const PadParams& p, const T* pad_value) {
    unsigned long long bits = (unsigned long long)p.value[0] | ((unsigned long long)p.value[1] << 32);
    T value;
    memcpy(&value, &bits, sizeof(T));
    if (pad_value) {
        value = pad_value[0];
    }
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned int r = (unsigned int)i;
        unsigned long long off = 0, stride = 1;
        bool inside = true;
        for (int d = (int)p.rank - 1; d >= 0; --d) {
            unsigned int c = r % p.out_dims[d];
            r /= p.out_dims[d];
            long long s = pad_source(p.mode, (long long)c - p.pad_begin[d], p.in_dims[d]);
            inside = inside && s >= 0;
            off += (unsigned long long)(s < 0 ? 0 : s) * stride;
            stride *= p.in_dims[d];
        }
        y[i] = inside ? x[off] : value;
    }
}

#define RLX_MOVEMENT(S)                                                                   \
    extern "C" __global__ void copy_##S(const b##S* x, b##S* y, CopyParams p) {           \
        rlx_grid_wait();                                                                  \
        copy_body<b##S>(x, y, p);                                                         \
    }                                                                                     \
    extern "C" __global__ void pad_##S(const b##S* x, b##S* y, PadParams p) {             \
        rlx_grid_wait();                                                                  \
        pad_body<b##S>(x, y, p, (const b##S*)0);                                          \
    }                                                                                     \
    extern "C" __global__ void pad_value_##S(const b##S* x, const b##S* v, b##S* y,       \
                                             PadParams p) {                               \
        rlx_grid_wait();                                                                  \
        pad_body<b##S>(x, y, p, v);                                                       \
    }
RLX_MOVEMENT(1)
RLX_MOVEMENT(2)
RLX_MOVEMENT(4)
RLX_MOVEMENT(8)
