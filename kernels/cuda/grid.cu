// grid: GridSample (1 to 3 spatial dims; nearest, linear and Keys cubic
// taps; zeros, border and reflection padding) and AffineGrid (2-D and 3-D),
// as the CPU backend computes them: taps and sums in double, the grid
// denormalized in the grid's own precision (f64, else f32) as the ONNX
// reference does. One thread per output element. GridSampleParams and
// AffineGridParams are rlx-cuda's (kernels/grid.rs).

// Reflects x into [lo, hi] by bouncing off the borders.
__device__ __forceinline__ double grid_reflect(double x, double lo, double hi) {
    double range = hi - lo;
    if (range <= 0.0) {
        return lo;
    }
    double d, near, far, dir;
    if (x < lo) {
        d = lo - x; near = lo; far = hi; dir = 1.0;
    } else if (x > hi) {
        d = x - hi; near = hi; far = lo; dir = -1.0;
    } else {
        return x;
    }
    double n = floor(d / range);
    double r = d - n * range;
    return fmod(n, 2.0) == 0.0 ? near + dir * r : far - dir * r;
}

// The input index a tap at integer position i reads, or -1 for a zero.
__device__ __forceinline__ long long grid_fetch(double i, unsigned int len, double lo, double hi,
                                                unsigned int pad) {
    double last = (double)len - 1.0;
    if (pad == 1u) {
        i = fmin(fmax(i, 0.0), last);
    } else if (pad == 2u) {
        i = fmin(fmax(trunc(grid_reflect(i, lo, hi)), 0.0), last);
    }
    return (i >= 0.0 && i <= last) ? (long long)i : -1ll;
}

// The taps along one axis at input coordinate x: up to 4 (index, weight).
__device__ __forceinline__ int grid_taps(const GridSampleParams& p, unsigned int len, double x,
                                         long long* idx, double* w) {
    double lo = p.align ? 0.0 : -0.5;
    double hi = p.align ? (double)len - 1.0 : (double)len - 0.5;
    if (p.mode == 0u) {
        x = rint(x);
    }
    if (x < lo || x > hi) {
        if (p.padding == 1u) {
            x = fmin(fmax(x, 0.0), (double)len - 1.0);
        } else if (p.padding == 2u) {
            x = grid_reflect(x, lo, hi);
        }
    }
    if (p.mode == 0u) {
        idx[0] = grid_fetch(trunc(x), len, lo, hi, p.padding);
        w[0] = 1.0;
        return 1;
    }
    double x0 = floor(x), t = x - x0;
    if (p.mode == 1u) {
        idx[0] = grid_fetch(x0, len, lo, hi, p.padding);
        idx[1] = grid_fetch(x0 + 1.0, len, lo, hi, p.padding);
        w[0] = 1.0 - t;
        w[1] = t;
        return 2;
    }
    const double a = -0.75;
    double u;
    u = t + 1.0;
    w[0] = ((a * u - 5.0 * a) * u + 8.0 * a) * u - 4.0 * a;
    u = t;
    w[1] = ((a + 2.0) * u - (a + 3.0)) * u * u + 1.0;
    u = 1.0 - t;
    w[2] = ((a + 2.0) * u - (a + 3.0)) * u * u + 1.0;
    u = 2.0 - t;
    w[3] = ((a * u - 5.0 * a) * u + 8.0 * a) * u - 4.0 * a;
    for (int k = 0; k < 4; ++k) {
        idx[k] = grid_fetch(x0 + (double)k - 1.0, len, lo, hi, p.padding);
    }
    return 4;
}

// Normalized [-1, 1] coordinate to an input position, in the grid's
// precision (rounded operations, never contracted into FMAs).
template <typename G> __device__ __forceinline__ double grid_denorm(G v, unsigned int len, bool align) {
    float n1 = __fadd_rn((float)to_f64(v), 1.0f), l = (float)len;
    return (double)(align ? __fmul_rn(__fdiv_rn(n1, 2.0f), __fsub_rn(l, 1.0f))
                          : __fdiv_rn(__fsub_rn(__fmul_rn(n1, l), 1.0f), 2.0f));
}
template <> __device__ __forceinline__ double grid_denorm<f64>(f64 n, unsigned int len, bool align) {
    double n1 = __dadd_rn(n, 1.0), l = (double)len;
    return (double)(float)(align ? __dmul_rn(n1 / 2.0, __dsub_rn(l, 1.0))
                                 : __dsub_rn(__dmul_rn(n1, l), 1.0) / 2.0);
}

template <typename T, typename G>
__device__ __forceinline__ void grid_sample_body(const T* __restrict__ x, const G* __restrict__ grid,
                                                 T* __restrict__ y, const GridSampleParams& p) {
    unsigned int r = p.rank;
    for (unsigned long long o = rlx_thread(); o < p.count; o += rlx_threads()) {
        unsigned long long pos = o % p.npos;
        unsigned long long bc = o / p.npos;
        unsigned long long b = bc / p.channels;
        const G* coords = grid + (b * p.npos + pos) * r;
        long long idx[3][4];
        double w[3][4];
        int n[3] = {1, 1, 1};
        for (unsigned int a = 0; a < r; ++a) {
            double xv = grid_denorm<G>(coords[r - 1u - a], p.in_dims[a], p.align != 0u);
            n[a] = grid_taps(p, p.in_dims[a], xv, idx[a], w[a]);
        }
        for (unsigned int a = r; a < 3u; ++a) {
            idx[a][0] = 0;
            w[a][0] = 1.0;
        }
        const T* plane = x + bc * p.plane;
        double acc = 0.0;
        for (int i = 0; i < n[0]; ++i) {
            for (int j = 0; j < n[1]; ++j) {
                for (int k = 0; k < n[2]; ++k) {
                    if (idx[0][i] < 0 || idx[1][j] < 0 || idx[2][k] < 0) {
                        continue;
                    }
                    double wt = w[0][i] * w[1][j] * w[2][k];
                    if (wt != 0.0) {
                        unsigned long long off = (unsigned long long)idx[0][i] * p.in_strides[0] +
                                                 (unsigned long long)idx[1][j] * p.in_strides[1] +
                                                 (unsigned long long)idx[2][k] * p.in_strides[2];
                        acc += wt * to_f64(plane[off]);
                    }
                }
            }
        }
        y[o] = from_f64<T>(acc);
    }
}

#define GRID_SAMPLE(T, G)                                                                      \
    extern "C" __global__ void grid_sample_##T##_##G(const T* x, const G* grid, T* y,         \
                                                    GridSampleParams p) {                     \
        rlx_grid_wait();                                                                       \
        grid_sample_body<T, G>(x, grid, y, p);                                                 \
    }
#define GRID_SAMPLE_ALL(T) GRID_SAMPLE(T, f32) GRID_SAMPLE(T, f64) GRID_SAMPLE(T, f16) GRID_SAMPLE(T, bf16)
GRID_SAMPLE_ALL(f32)
GRID_SAMPLE_ALL(f64)
GRID_SAMPLE_ALL(f16)
GRID_SAMPLE_ALL(bf16)

// Output [N, spatial..., r]: element k of position p is theta[b, k, :] ·
// (x, y[, z], 1), x running along the last spatial axis.
template <typename T>
__device__ __forceinline__ void affine_grid_body(const T* __restrict__ theta, T* __restrict__ y,
                                                 const AffineGridParams& p) {
    unsigned int r = p.rank;
    for (unsigned long long o = rlx_thread(); o < p.count; o += rlx_threads()) {
        unsigned int k = (unsigned int)(o % r);
        unsigned long long row = o / r;
        unsigned long long pos = row % p.npos, b = row / p.npos;
        double h[4];
        h[r] = 1.0;
        unsigned long long rest = pos;
        for (int a = (int)r - 1; a >= 0; --a) {
            unsigned int len = p.dims[a];
            unsigned long long i = rest % len;
            rest /= len;
            double v;
            if (p.align) {
                v = len == 1u ? -1.0 : -1.0 + 2.0 * (double)i / (double)(len - 1u);
            } else {
                v = -1.0 + (double)(2ull * i + 1ull) / (double)len;
            }
            h[r - 1u - (unsigned int)a] = v;
        }
        const T* t = theta + (b * r + k) * (r + 1u);
        double s = 0.0;
        for (unsigned int j = 0; j <= r; ++j) {
            s += to_f64(t[j]) * h[j];
        }
        y[o] = from_f64<T>(s);
    }
}

#define AFFINE_GRID(T)                                                                         \
    extern "C" __global__ void affine_grid_##T(const T* theta, T* y, AffineGridParams p) {     \
        rlx_grid_wait();                                                                       \
        affine_grid_body<T>(theta, y, p);                                                      \
    }
AFFINE_GRID(f32)
AFFINE_GRID(f64)
AFFINE_GRID(f16)
AFFINE_GRID(bf16)

// DeformConv (2-D) im2col: row (channel, tap) of batch b's columns holds,
// per output position, the input bilinearly sampled (zeros outside) at the
// tap's regular position plus its learned offset, times the mask. Column
// matrix [N, C*kh*kw, oh*ow]; the weights multiply it by GEMMs.
__device__ __forceinline__ double deform_bilinear(const float* plane, unsigned int h, unsigned int w,
                                                  double y, double x) {
    if (!(y > -1.0 && y < (double)h && x > -1.0 && x < (double)w)) {
        return 0.0;
    }
    double y0 = floor(y), x0 = floor(x);
    double ly = y - y0, lx = x - x0;
    long long r0 = (long long)y0, c0 = (long long)x0;
    double v[4];
    for (int k = 0; k < 4; ++k) {
        long long r = r0 + (k >> 1), c = c0 + (k & 1);
        v[k] = (r >= 0 && c >= 0 && r < (long long)h && c < (long long)w)
                   ? (double)plane[(unsigned long long)r * w + (unsigned long long)c]
                   : 0.0;
    }
    return (1.0 - ly) * (1.0 - lx) * v[0] + (1.0 - ly) * lx * v[1] + ly * (1.0 - lx) * v[2] +
           ly * lx * v[3];
}

extern "C" __global__ void deform_im2col_f32(const float* __restrict__ x,
                                             const float* __restrict__ off,
                                             const float* __restrict__ mask,
                                             float* __restrict__ col, DeformParams p) {
    rlx_grid_wait();
    unsigned long long kk = (unsigned long long)p.kh * p.kw;
    unsigned long long sp = (unsigned long long)p.oh * p.ow;
    unsigned long long per_batch = (unsigned long long)p.channels * kk * sp;
    unsigned long long total = per_batch * p.batch;
    for (unsigned long long e = rlx_thread(); e < total; e += rlx_threads()) {
        unsigned long long b = e / per_batch;
        unsigned long long r = (e % per_batch) / sp, pos = e % sp;
        unsigned long long ch = r / kk, k = r % kk;
        double i = (double)(k / p.kw), j = (double)(k % p.kw);
        unsigned long long grp = ch / p.per_offset_group;
        const float* plane = x + (b * p.channels + ch) * p.ih * p.iw;
        unsigned long long tap = (b * p.offset_groups + grp) * kk + k;
        double py = (double)(pos / p.ow), px = (double)(pos % p.ow);
        double yy = py * p.stride_h - p.pad_t + i * p.dil_h + (double)off[2ull * tap * sp + pos];
        double xx = px * p.stride_w - p.pad_l + j * p.dil_w + (double)off[(2ull * tap + 1ull) * sp + pos];
        double s = deform_bilinear(plane, p.ih, p.iw, yy, xx);
        if (p.has_mask) {
            s *= (double)mask[tap * sp + pos];
        }
        col[e] = (float)s;
    }
}

// Adds the per-channel bias to y [N, OC, sp].
extern "C" __global__ void deform_bias_f32(const float* __restrict__ bias, float* __restrict__ y,
                                           DeformParams p) {
    rlx_grid_wait();
    unsigned long long sp = (unsigned long long)p.oh * p.ow;
    unsigned long long total = (unsigned long long)p.batch * p.out_channels * sp;
    for (unsigned long long e = rlx_thread(); e < total; e += rlx_threads()) {
        y[e] += bias[(e / sp) % p.out_channels];
    }
}
