// sequence: LinearAttention (linear, gated, delta and gated-delta rules),
// CausalConvWithState and RotaryEmbedding, as the CPU backend computes them.
// LinearAttentionParams, CausalConvParams and RotaryParams are rlx-cuda's
// (kernels/sequence.rs).

// LinearAttention: every column m of a (batch, kv head)'s dk x dv state
// evolves on its own, so one thread per (batch, kv head, m) walks the
// tokens, its column kept in double in `work` ([B, Hkv, dk, dv], columns
// adjacent for coalescing), and writes the output of each query head of its
// group; the final state goes to `state`.
template <typename T, typename S>
__device__ __forceinline__ void linear_attention_body(
    const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
    const S* __restrict__ past, const T* __restrict__ decay, const T* __restrict__ beta,
    T* __restrict__ y, S* __restrict__ state, double* __restrict__ work,
    const LinearAttentionParams& p) {
    unsigned long long cols = (unsigned long long)p.batch * p.hkv * p.dv;
    unsigned int group = p.hq / p.hkv;
    for (unsigned long long c = rlx_thread(); c < cols; c += rlx_threads()) {
        unsigned int m = (unsigned int)(c % p.dv);
        unsigned long long bh = c / p.dv;
        unsigned int h = (unsigned int)(bh % p.hkv);
        unsigned long long bi = bh / p.hkv;
        unsigned long long base = bh * p.dk * p.dv + m;
        for (unsigned int i = 0; i < p.dk; ++i) {
            unsigned long long at = base + (unsigned long long)i * p.dv;
            work[at] = p.has_past ? to_f64(past[at]) : 0.0;
        }
        for (unsigned int t = 0; t < p.tokens; ++t) {
            unsigned long long row = bi * p.tokens + t;
            const T* kr = k + (row * p.hkv + h) * p.dk;
            double vm = to_f64(v[(row * p.hkv + h) * p.dv + m]);
            if (p.decay_last != 0u) {
                for (unsigned int i = 0; i < p.dk; ++i) {
                    double g = p.decay_last == p.hkv ? to_f64(decay[row * p.hkv + h])
                                                     : to_f64(decay[(row * p.hkv + h) * p.dk + i]);
                    work[base + (unsigned long long)i * p.dv] *= exp(g);
                }
            }
            if (p.beta_last != 0u) {
                double bt = to_f64(beta[row * p.beta_last + (p.beta_last == 1u ? 0u : h)]);
                double got = 0.0;
                for (unsigned int i = 0; i < p.dk; ++i) {
                    got += work[base + (unsigned long long)i * p.dv] * to_f64(kr[i]);
                }
                vm = bt * (vm - got);
            }
            for (unsigned int i = 0; i < p.dk; ++i) {
                work[base + (unsigned long long)i * p.dv] += to_f64(kr[i]) * vm;
            }
            for (unsigned int j = h * group; j < (h + 1u) * group; ++j) {
                const T* qr = q + (row * p.hq + j) * p.dk;
                double s = 0.0;
                for (unsigned int i = 0; i < p.dk; ++i) {
                    s += to_f64(qr[i]) * work[base + (unsigned long long)i * p.dv];
                }
                y[(row * p.hq + j) * p.dv + m] = from_f64<T>(p.scale * s);
            }
        }
        for (unsigned int i = 0; i < p.dk; ++i) {
            unsigned long long at = base + (unsigned long long)i * p.dv;
            state[at] = from_f64<S>(work[at]);
        }
    }
}

#define LINEAR_ATTENTION(T, S)                                                                 \
    extern "C" __global__ void linear_attention_##T##_##S(                                      \
        const T* q, const T* k, const T* v, const S* past, const T* decay, const T* beta, T* y, \
        S* state, double* work, LinearAttentionParams p) {                                     \
        rlx_grid_wait();                                                                       \
        linear_attention_body<T, S>(q, k, v, past, decay, beta, y, state, work, p);            \
    }
#define LINEAR_ATTENTION_ALL(T)                                                                \
    LINEAR_ATTENTION(T, f32) LINEAR_ATTENTION(T, f64) LINEAR_ATTENTION(T, f16) LINEAR_ATTENTION(T, bf16)
LINEAR_ATTENTION_ALL(f32)
LINEAR_ATTENTION_ALL(f64)
LINEAR_ATTENTION_ALL(f16)
LINEAR_ATTENTION_ALL(bf16)

// CausalConvWithState over x [B, C, L], weight [C, 1, K] and past [B, C,
// K-1]: item o < B*C*L is an output (the convolution over [past, x],
// rounded to the dtype before the activation), past that one of the new
// state's B*C*(K-1) elements (the last K-1 of [past, x]).
template <typename T>
__device__ __forceinline__ T causal_padded(const T* x, const T* past, const CausalConvParams& p,
                                           unsigned long long row, unsigned int i) {
    unsigned int k1 = p.kernel - 1u;
    if (i < k1) {
        return p.has_past ? past[row * k1 + i] : from_f64<T>(0.0);
    }
    return x[row * p.len + (i - k1)];
}

template <typename T>
__device__ __forceinline__ void causal_conv_body(const T* __restrict__ x, const T* __restrict__ w,
                                                 const T* __restrict__ bias,
                                                 const T* __restrict__ past, T* __restrict__ y,
                                                 T* __restrict__ state, const CausalConvParams& p) {
    unsigned long long outs = (unsigned long long)p.rows * p.len;
    unsigned int k1 = p.kernel - 1u;
    unsigned long long total = outs + (unsigned long long)p.rows * k1;
    for (unsigned long long o = rlx_thread(); o < total; o += rlx_threads()) {
        if (o >= outs) {
            unsigned long long s = o - outs;
            unsigned long long row = s / k1;
            unsigned int i = (unsigned int)(s % k1);
            state[s] = causal_padded<T>(x, past, p, row, p.len + i);
            continue;
        }
        unsigned long long row = o / p.len;
        unsigned int t = (unsigned int)(o % p.len);
        unsigned int c = (unsigned int)(row % p.channels);
        double acc = 0.0;
        for (unsigned int j = 0; j < p.kernel; ++j) {
            acc += to_f64(w[(unsigned long long)c * p.kernel + j]) *
                   to_f64(causal_padded<T>(x, past, p, row, t + j));
        }
        double b0 = p.has_bias ? to_f64(bias[c]) : 0.0;
        T v = from_f64<T>(acc + b0);
        if (p.silu) {
            double d = to_f64(v);
            v = from_f64<T>(d * (1.0 / (1.0 + exp(-d))));
        }
        y[o] = v;
    }
}

#define CAUSAL_CONV(T)                                                                          \
    extern "C" __global__ void causal_conv_##T(const T* x, const T* w, const T* bias,            \
                                               const T* past, T* y, T* state,                    \
                                               CausalConvParams p) {                             \
        rlx_grid_wait();                                                                        \
        causal_conv_body<T>(x, w, bias, past, y, state, p);                                     \
    }
CAUSAL_CONV(f32)
CAUSAL_CONV(f64)
CAUSAL_CONV(f16)
CAUSAL_CONV(bf16)

// RotaryEmbedding: one thread per output element of head vectors of `head`
// (rows in the input's own order), pairs rotated in f32 (f64 for f64) like
// the CPU backend, the features past the rotary dims copied.
__device__ __forceinline__ float rot_up(f32 v) { return v; }
__device__ __forceinline__ float rot_up(f16 v) { return to_f32(v); }
__device__ __forceinline__ float rot_up(bf16 v) { return to_f32(v); }
__device__ __forceinline__ double rot_up(f64 v) { return v; }

template <typename T>
__device__ __forceinline__ void rotary_body(const T* __restrict__ x, const T* __restrict__ cosc,
                                            const T* __restrict__ sinc, const void* ids,
                                            T* __restrict__ y, const RotaryParams& p) {
    for (unsigned long long o = rlx_thread(); o < p.count; o += rlx_threads()) {
        unsigned int e = (unsigned int)(o % p.head);
        unsigned long long row = o / p.head;
        if (e >= 2u * p.half) {
            y[o] = x[o];
            continue;
        }
        unsigned long long bi, si;
        if (p.four) {
            bi = row / ((unsigned long long)p.heads * p.seq);
            si = row % p.seq;
        } else {
            bi = row / ((unsigned long long)p.seq * p.heads);
            si = row / p.heads % p.seq;
        }
        unsigned long long pos = bi * p.seq + si;
        unsigned long long crow = pos;
        if (p.has_ids) {
            long long id = p.ids_wide ? ((const long long*)ids)[pos] : (long long)((const int*)ids)[pos];
            crow = id < 0 ? 0ull : (unsigned long long)id;
            if (crow >= p.cache_rows) {
                crow = p.cache_rows - 1u;
            }
        }
        unsigned int i, a, b;
        bool first;
        if (p.interleaved) {
            i = e / 2u;
            a = 2u * i;
            b = a + 1u;
            first = (e & 1u) == 0u;
        } else {
            first = e < p.half;
            i = first ? e : e - p.half;
            a = i;
            b = i + p.half;
        }
        const T* xv = x + row * p.head;
        auto c = rot_up(cosc[crow * p.half + i]);
        auto s = rot_up(sinc[crow * p.half + i]);
        auto x1 = rot_up(xv[a]);
        auto x2 = rot_up(xv[b]);
        auto r = first ? c * x1 - s * x2 : s * x1 + c * x2;
        y[o] = from_f64<T>((double)r);
    }
}

#define ROTARY(T)                                                                                \
    extern "C" __global__ void rotary_##T(const T* x, const T* cosc, const T* sinc,              \
                                          const void* ids, T* y, RotaryParams p) {               \
        rlx_grid_wait();                                                                         \
        rotary_body<T>(x, cosc, sinc, ids, y, p);                                                \
    }
ROTARY(f32)
ROTARY(f64)
ROTARY(f16)
ROTARY(bf16)
