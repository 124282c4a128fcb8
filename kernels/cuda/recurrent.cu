// recurrent: the element-wise halves of the RNN, GRU and LSTM layers (f32).
// The matrix products run as cuBLASLt GEMMs planned around these kernels:
// `xw` holds X·Wᵀ of every time step and direction ([dirs][rows][gates*H],
// rows in X's own order), `hr` the step's h·Rᵀ ([dirs][batch][gates*H]),
// `rr` GRU's (r⊙h)·R_hᵀ ([dirs][batch][H]). The state h (and c) lives in
// scratch as [dirs][batch][H]. As on the CPU backend (and ONNX Runtime),
// Y is zero past each sequence's length and Y_h / Y_c are zero for a
// sequence of length 0. RecurrentParams is rlx-cuda's
// (kernels/recurrent.rs). Every entry takes the same operands:
// xw, hr, bias, lens, peep, h0, c0, h, c, y, yh, yc, rh, z, rr.

#define RNN_OPERANDS                                                                  \
    const float *__restrict__ xw, const float *__restrict__ hr,                       \
        const float *__restrict__ bias, const void *lens, const float *__restrict__ peep, \
        const float *__restrict__ h0, const float *__restrict__ c0, float *h, float *c,  \
        float *__restrict__ y, float *__restrict__ yh, float *__restrict__ yc, float *rh, \
        float *z, const float *__restrict__ rr

__device__ __forceinline__ float rnn_act(const RecurrentParams& p, unsigned int i, float x) {
    float a = p.alpha[i], b = p.beta[i];
    switch (p.acts[i]) {
    case 0u: return fmaxf(x, 0.0f);
    case 1u: return tanhf(x);
    case 2u: return 1.0f / (1.0f + expf(-x));
    case 3u: return a * x + b;
    case 4u: return x >= 0.0f ? x : a * x;
    case 5u: return x >= a ? x : 0.0f;
    case 6u: return a * tanhf(b * x);
    case 7u: return fminf(fmaxf(a * x + b, 0.0f), 1.0f);
    case 8u: return x >= 0.0f ? x : a * expm1f(x);
    case 9u: return x / (1.0f + fabsf(x));
    default: return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));
    }
}

__device__ __forceinline__ float rnn_clip(const RecurrentParams& p, float x) {
    return p.has_clip ? fminf(fmaxf(x, -p.clip), p.clip) : x;
}

// The sequence length of batch entry b (the whole sequence without lens).
__device__ __forceinline__ unsigned int rnn_len(const RecurrentParams& p, const void* lens,
                                                unsigned int b) {
    if (!p.has_lens) {
        return p.seq;
    }
    long long l = p.lens_wide ? ((const long long*)lens)[b] : (long long)((const int*)lens)[b];
    return l < 0 ? 0u : (l > (long long)p.seq ? p.seq : (unsigned int)l);
}

// Row of a [*, dirs, *, H] state tensor (initial_h, Y_h) for (d, b).
__device__ __forceinline__ unsigned long long rnn_state_row(const RecurrentParams& p,
                                                            unsigned int d, unsigned int b) {
    return p.layout ? (unsigned long long)b * p.dirs + d : (unsigned long long)d * p.batch + b;
}

// Row of Y for (t, d, b).
__device__ __forceinline__ unsigned long long rnn_y_row(const RecurrentParams& p, unsigned int t,
                                                        unsigned int d, unsigned int b) {
    return p.layout ? ((unsigned long long)b * p.seq + t) * p.dirs + d
                    : ((unsigned long long)t * p.dirs + d) * p.batch + b;
}

struct RnnAt {
    unsigned int d, b, j, len, t;
    unsigned long long s;  // state element: (d * batch + b) * H + j
    const float* x;        // this step's row of xw
    const float* r;        // this step's row of hr
    const float* wb;       // input bias (null without)
    const float* rb;       // recurrence bias
};

// Decodes thread item `i` into (d, b, j) at step p.step; false past the length.
__device__ __forceinline__ bool rnn_at(const RecurrentParams& p, const float* xw, const float* hr,
                                       const float* bias, const void* lens,
                                       unsigned long long i, RnnAt* a) {
    unsigned int hs = p.hidden;
    a->j = (unsigned int)(i % hs);
    unsigned long long db = i / hs;
    a->b = (unsigned int)(db % p.batch);
    a->d = (unsigned int)(db / p.batch);
    a->s = i;
    a->len = rnn_len(p, lens, a->b);
    if (p.step >= a->len) {
        return false;
    }
    bool rev = (p.reverse >> a->d) & 1u;
    a->t = rev ? a->len - 1u - p.step : p.step;
    unsigned long long xrow =
        p.layout ? (unsigned long long)a->b * p.seq + a->t : (unsigned long long)a->t * p.batch + a->b;
    unsigned long long rows = (unsigned long long)p.seq * p.batch;
    a->x = xw + ((unsigned long long)a->d * rows + xrow) * p.gh;
    a->r = hr + db * p.gh;
    a->wb = p.has_bias ? bias + (unsigned long long)a->d * 2ull * p.gh : 0;
    a->rb = p.has_bias ? a->wb + p.gh : 0;
    return true;
}

__device__ __forceinline__ float rnn_wb(const RnnAt& a, unsigned int k) { return a.wb ? a.wb[k] : 0.0f; }
__device__ __forceinline__ float rnn_rb(const RnnAt& a, unsigned int k) { return a.rb ? a.rb[k] : 0.0f; }

// The state from initial_h / initial_c, or zeros.
extern "C" __global__ void rnn_init(RNN_OPERANDS, RecurrentParams p) {
    rlx_grid_wait();
    unsigned long long n = (unsigned long long)p.dirs * p.batch * p.hidden;
    for (unsigned long long i = rlx_thread(); i < n; i += rlx_threads()) {
        unsigned int j = (unsigned int)(i % p.hidden);
        unsigned long long db = i / p.hidden;
        unsigned int b = (unsigned int)(db % p.batch), d = (unsigned int)(db / p.batch);
        unsigned long long at = rnn_state_row(p, d, b) * p.hidden + j;
        h[i] = p.has_h0 ? h0[at] : 0.0f;
        if (p.kind == 2u) {
            c[i] = p.has_c0 ? c0[at] : 0.0f;
        }
    }
}

// One time step of RNN and LSTM, and of GRU with linear_before_reset.
extern "C" __global__ void rnn_step(RNN_OPERANDS, RecurrentParams p) {
    rlx_grid_wait();
    unsigned long long n = (unsigned long long)p.dirs * p.batch * p.hidden;
    unsigned int hs = p.hidden;
    for (unsigned long long i = rlx_thread(); i < n; i += rlx_threads()) {
        RnnAt a;
        if (!rnn_at(p, xw, hr, bias, lens, i, &a)) {
            y[rnn_y_row(p, p.step, a.d, a.b) * hs + a.j] = 0.0f;
            continue;
        }
        unsigned int j = a.j, f = a.d * p.per_dir;
        float pre0 = a.x[j] + rnn_wb(a, j) + a.r[j] + rnn_rb(a, j);
        float hv;
        if (p.kind == 0u) {
            hv = rnn_act(p, f, rnn_clip(p, pre0));
        } else if (p.kind == 1u) {
            unsigned int kr = hs + j, kh = 2u * hs + j;
            float zg = rnn_act(p, f, rnn_clip(p, pre0));
            float rg = rnn_act(p, f, rnn_clip(p, a.x[kr] + rnn_wb(a, kr) + a.r[kr] + rnn_rb(a, kr)));
            float hh = rnn_act(p, f + 1u,
                               rnn_clip(p, a.x[kh] + rnn_wb(a, kh) + rg * (a.r[kh] + rnn_rb(a, kh))));
            hv = (1.0f - zg) * hh + zg * h[i];
        } else {
            const float* pp = p.has_peep ? peep + (unsigned long long)a.d * 3ull * hs : 0;
            float cv = c[i];
            auto pre = [&](unsigned int g) {
                unsigned int k = g * hs + j;
                return a.x[k] + rnn_wb(a, k) + a.r[k] + rnn_rb(a, k);
            };
            auto pe = [&](unsigned int g) { return pp ? pp[g * hs + j] : 0.0f; };
            float ig = rnn_act(p, f, rnn_clip(p, pre0 + pe(0) * cv));
            float fg = p.input_forget ? 1.0f - ig : rnn_act(p, f, rnn_clip(p, pre(2) + pe(2) * cv));
            float ct = rnn_act(p, f + 1u, rnn_clip(p, pre(3)));
            cv = fg * cv + ig * ct;
            float og = rnn_act(p, f, rnn_clip(p, pre(1) + pe(1) * cv));
            hv = og * rnn_act(p, f + 2u, cv);
            c[i] = cv;
        }
        h[i] = hv;
        y[rnn_y_row(p, a.t, a.d, a.b) * hs + j] = hv;
    }
}

// GRU (reset after the product): the update and reset gates; z kept, r⊙h
// for the GEMM with R_h.
extern "C" __global__ void rnn_gru_gates(RNN_OPERANDS, RecurrentParams p) {
    rlx_grid_wait();
    unsigned long long n = (unsigned long long)p.dirs * p.batch * p.hidden;
    unsigned int hs = p.hidden;
    for (unsigned long long i = rlx_thread(); i < n; i += rlx_threads()) {
        RnnAt a;
        if (!rnn_at(p, xw, hr, bias, lens, i, &a)) {
            rh[i] = 0.0f;
            continue;
        }
        unsigned int j = a.j, f = a.d * p.per_dir, kr = hs + j;
        z[i] = rnn_act(p, f, rnn_clip(p, a.x[j] + rnn_wb(a, j) + a.r[j] + rnn_rb(a, j)));
        float rg = rnn_act(p, f, rnn_clip(p, a.x[kr] + rnn_wb(a, kr) + a.r[kr] + rnn_rb(a, kr)));
        rh[i] = rg * h[i];
    }
}

// GRU (reset after the product): the candidate and the new state.
extern "C" __global__ void rnn_gru_update(RNN_OPERANDS, RecurrentParams p) {
    rlx_grid_wait();
    unsigned long long n = (unsigned long long)p.dirs * p.batch * p.hidden;
    unsigned int hs = p.hidden;
    for (unsigned long long i = rlx_thread(); i < n; i += rlx_threads()) {
        RnnAt a;
        if (!rnn_at(p, xw, hr, bias, lens, i, &a)) {
            y[rnn_y_row(p, p.step, a.d, a.b) * hs + a.j] = 0.0f;
            continue;
        }
        unsigned int j = a.j, f = a.d * p.per_dir, kh = 2u * hs + j;
        float hh = rnn_act(p, f + 1u, rnn_clip(p, a.x[kh] + rnn_wb(a, kh) + rr[i] + rnn_rb(a, kh)));
        float zg = z[i];
        float hv = (1.0f - zg) * hh + zg * h[i];
        h[i] = hv;
        y[rnn_y_row(p, a.t, a.d, a.b) * hs + j] = hv;
    }
}

// Y_h (and Y_c): the final state, zero for a sequence of length 0.
extern "C" __global__ void rnn_finish(RNN_OPERANDS, RecurrentParams p) {
    rlx_grid_wait();
    unsigned long long n = (unsigned long long)p.dirs * p.batch * p.hidden;
    for (unsigned long long i = rlx_thread(); i < n; i += rlx_threads()) {
        unsigned int j = (unsigned int)(i % p.hidden);
        unsigned long long db = i / p.hidden;
        unsigned int b = (unsigned int)(db % p.batch), d = (unsigned int)(db / p.batch);
        unsigned long long at = rnn_state_row(p, d, b) * p.hidden + j;
        bool empty = rnn_len(p, lens, b) == 0u;
        if (p.outputs > 1u) {
            yh[at] = empty ? 0.0f : h[i];
        }
        if (p.outputs > 2u) {
            yc[at] = empty ? 0.0f : c[i];
        }
    }
}
