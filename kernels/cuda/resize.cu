// resize: separable resampling, one axis per launch (rlx-gpu
// kernels/resize.rs `passes`). ResizeAxisParams is rlx-gpu's; the tap table
// of the pass is constant data in the buffer (operand `taps`): `n_out * k`
// f64 weights, then as many u32 input positions, unused taps weighing 0 and
// a first position of 0xffffffff marking an extrapolated output (`fill`).
// Accumulates in double; entry resize_<in>_<out>: the first pass reads the
// input dtype, the last writes the output dtype, passes between use f32
// scratch (f64 for f64 and integer data, which round half to even and
// saturate at the end, like the CPU backend).

template <typename X, typename Y>
__device__ __forceinline__ void resize_body(const X* __restrict__ x,
                                            const unsigned char* __restrict__ taps,
                                            Y* __restrict__ y, const ResizeAxisParams& p) {
    const double* w = (const double*)taps;
    const unsigned int* ix = (const unsigned int*)(w + (unsigned long long)p.n_out * p.k);
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned long long in = i % p.inner;
        unsigned long long r = i / p.inner;
        unsigned long long yo = r % p.n_out;
        unsigned long long base = (r / p.n_out) * p.n_in * p.inner + in;
        const unsigned int* t = ix + yo * p.k;
        double acc;
        if (t[0] == 0xffffffffu) {
            acc = (double)p.fill;
        } else {
            acc = 0.0;
            const double* tw = w + yo * p.k;
            for (unsigned int q = 0; q < p.k; ++q) {
                acc += tw[q] * to_f64(x[base + (unsigned long long)t[q] * p.inner]);
            }
        }
        y[i] = from_f64<Y>(acc);
    }
}

#define RLX_RESIZE(X, Y)                                                                       \
    extern "C" __global__ void resize_##X##_##Y(const X* x, const unsigned char* taps, Y* y,   \
                                                ResizeAxisParams p) {                          \
        rlx_grid_wait();                                                                       \
        resize_body<X, Y>(x, taps, y, p);                                                      \
    }
#define RLX_RESIZE_VIA(T, M)                                                                   \
    RLX_RESIZE(T, T)                                                                           \
    RLX_RESIZE(T, M)                                                                           \
    RLX_RESIZE(M, T)
RLX_RESIZE(f32, f32)
RLX_RESIZE(f64, f64)
RLX_RESIZE_VIA(f16, f32)
RLX_RESIZE_VIA(bf16, f32)
RLX_RESIZE_VIA(i8, f64)
RLX_RESIZE_VIA(i16, f64)
RLX_RESIZE_VIA(i32, f64)
RLX_RESIZE_VIA(i64, f64)
RLX_RESIZE_VIA(u8, f64)
RLX_RESIZE_VIA(u16, f64)
RLX_RESIZE_VIA(u32, f64)
RLX_RESIZE_VIA(u64, f64)
