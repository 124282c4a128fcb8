// signal: DFT and STFT as direct O(n^2) transforms in double (one thread
// per output point; twiddles from (k*t) mod n, like the CPU backend's
// direct path), and Col2Im gathered per image element in the CPU's
// summation order. DftParams, StftParams and Col2ImParams are rlx-cuda's
// (kernels/signal.rs).

#define RLX_PI 3.14159265358979323846

// Line point t of a DFT input: the first `len_in` values, zero past them;
// for the inverse real FFT the Hermitian spectrum rebuilt from n/2+1 points.
template <typename T>
__device__ __forceinline__ void dft_point(const T* x, const DftParams& p, unsigned long long o,
                                          unsigned long long i, unsigned int t, double* re,
                                          double* im) {
    unsigned int k = t;
    bool conj = false;
    if (p.irfft && t > p.n / 2u) {
        k = p.n - t;
        conj = true;
    }
    if (k >= p.len_in) {
        *re = 0.0;
        *im = 0.0;
        return;
    }
    const T* at = x + ((o * p.len_in + k) * p.inner + i) * p.comps;
    *re = to_f64(at[0]);
    *im = p.comps == 2u ? to_f64(at[1]) : 0.0;
    if (conj) {
        *im = -*im;
    }
}

template <typename T>
__device__ __forceinline__ void dft_body(const T* __restrict__ x, T* __restrict__ y,
                                         const DftParams& p) {
    double sign = p.inverse ? 1.0 : -1.0;
    for (unsigned long long e = rlx_thread(); e < p.count; e += rlx_threads()) {
        unsigned long long i = e % p.inner;
        unsigned long long ok = e / p.inner;
        unsigned int k = (unsigned int)(ok % p.out_len);
        unsigned long long o = ok / p.out_len;
        double ar = 0.0, ai = 0.0;
        for (unsigned int t = 0; t < p.n; ++t) {
            double re, im;
            dft_point<T>(x, p, o, i, t, &re, &im);
            unsigned long long kt = ((unsigned long long)k * t) % p.n;
            double s, c;
            sincos(sign * 2.0 * RLX_PI * (double)kt / (double)p.n, &s, &c);
            ar += re * c - im * s;
            ai += re * s + im * c;
        }
        if (p.inverse) {
            double sc = 1.0 / (double)p.n;
            ar *= sc;
            ai *= sc;
        }
        T* out = y + e * p.out_comps;
        out[0] = from_f64<T>(ar);
        if (p.out_comps == 2u) {
            out[1] = from_f64<T>(ai);
        }
    }
}

#define DFT(T)                                                                         \
    extern "C" __global__ void dft_##T(const T* x, T* y, DftParams p) {                \
        rlx_grid_wait();                                                               \
        dft_body<T>(x, y, p);                                                          \
    }
DFT(f32)
DFT(f64)
DFT(f16)
DFT(bf16)

// STFT of signal [B, L, comps] into [B, frames, bins, 2], frames `step`
// apart, each windowed (a window of ones without one).
template <typename T>
__device__ __forceinline__ void stft_body(const T* __restrict__ x, const T* __restrict__ win,
                                          T* __restrict__ y, const StftParams& p) {
    for (unsigned long long e = rlx_thread(); e < p.count; e += rlx_threads()) {
        unsigned int k = (unsigned int)(e % p.bins);
        unsigned long long bf = e / p.bins;
        unsigned long long f = bf % p.frames, b = bf / p.frames;
        double ar = 0.0, ai = 0.0;
        for (unsigned int j = 0; j < p.n; ++j) {
            unsigned long long t = f * p.step + j;
            double re = 0.0, im = 0.0;
            if (t < p.len && j < p.win_len) {
                double w = p.has_window ? to_f64(win[j]) : 1.0;
                const T* at = x + (b * p.len + t) * p.comps;
                re = to_f64(at[0]) * w;
                im = p.comps == 2u ? to_f64(at[1]) * w : 0.0;
            }
            unsigned long long kt = ((unsigned long long)k * j) % p.n;
            double s, c;
            sincos(-2.0 * RLX_PI * (double)kt / (double)p.n, &s, &c);
            ar += re * c - im * s;
            ai += re * s + im * c;
        }
        y[e * 2ull] = from_f64<T>(ar);
        y[e * 2ull + 1ull] = from_f64<T>(ai);
    }
}

#define STFT(T)                                                                                \
    extern "C" __global__ void stft_##T(const T* x, const T* win, T* y, StftParams p) {        \
        rlx_grid_wait();                                                                       \
        stft_body<T>(x, win, y, p);                                                            \
    }
STFT(f32)
STFT(f64)
STFT(f16)
STFT(bf16)

// Col2Im of [N, C*kprod, L] into [N, C, image...] (1 to 3 image dims): each
// image element sums, in block-offset order, the columns that cover it.
template <typename T>
__device__ __forceinline__ void col2im_body(const T* __restrict__ x, T* __restrict__ y,
                                            const Col2ImParams& p) {
    unsigned int nd = p.rank;
    for (unsigned long long e = rlx_thread(); e < p.count; e += rlx_threads()) {
        unsigned long long nc = e / p.plane;
        unsigned long long rest = e % p.plane;
        unsigned int pos[3];
        for (int d = (int)nd - 1; d >= 0; --d) {
            pos[d] = (unsigned int)(rest % p.image[d]);
            rest /= p.image[d];
        }
        const T* src = x + nc * p.kprod * p.blocks_total;
        double acc = 0.0;
        for (unsigned int kf = 0; kf < p.kprod; ++kf) {
            unsigned int kk[3];
            unsigned int r = kf;
            for (int d = (int)nd - 1; d >= 0; --d) {
                kk[d] = r % p.block[d];
                r /= p.block[d];
            }
            unsigned long long bf = 0;
            bool inside = true;
            for (unsigned int d = 0; d < nd; ++d) {
                long long q = (long long)pos[d] + p.pad_begin[d] - (long long)kk[d] * p.dilations[d];
                if (q < 0 || q % p.strides[d] != 0 || q / p.strides[d] >= p.blocks[d]) {
                    inside = false;
                    break;
                }
                bf = bf * p.blocks[d] + (unsigned long long)(q / p.strides[d]);
            }
            if (inside) {
                acc += to_f64(src[(unsigned long long)kf * p.blocks_total + bf]);
            }
        }
        y[e] = from_f64<T>(acc);
    }
}

#define COL2IM(T)                                                                              \
    extern "C" __global__ void col2im_##T(const T* x, T* y, Col2ImParams p) {                  \
        rlx_grid_wait();                                                                       \
        col2im_body<T>(x, y, p);                                                               \
    }
COL2IM(f32)
COL2IM(f64)
COL2IM(f16)
COL2IM(bf16)
