// Attention, the row kernel: one warp per (batch, query head, query row), 4
// rows per block; keys go by in tiles of 32 with an online softmax (running
// max m and sum l, rescaled per tile), so any key length runs in fixed
// memory. Each lane scores one key of the tile and accumulates up to 8
// output features (head sizes up to 256), reading V rows coalesced. It
// serves what the tiled kernels (flash_attention.cu) do not: the QK output
// and f64. Score rules: attention.cuh.
//
// AttentionParams (rlx-gpu kernels/attention.rs): hq, group (query heads per
// key head), sq, keys, dk, dv, element strides (b, h, s) q_s, k_s, v_s, y_s,
// mask strides (b, h, i, j) mask_s and mask_len, flags, past (the first query
// row's position), left and right (the key window, -1 unbounded), mode
// (qk_matmul_output_mode), scale, softcap, rows.

#define ATT_WARPS 4
#define ATT_MAX_HEAD 256

template <typename T, typename C>
__device__ __forceinline__ void att_score(const AttentionParams& p, const C* qrow, const T* k,
                                          const unsigned char* mask, const int* nonpad,
                                          unsigned int b, unsigned int h, unsigned int i,
                                          unsigned int j, C* raw_out, C* capped_out, C* biased_out) {
    const unsigned int kvh = h / p.group;
    const T* kr = k + (unsigned long long)b * p.k_s[0] + (unsigned long long)kvh * p.k_s[1] +
                  (unsigned long long)j * p.k_s[2];
    C raw = (C)0;
    for (unsigned int d = 0; d < p.dk; ++d) {
        raw += qrow[d] * (C)kr[d];
    }
    const C capped = att_cap<C>(p, raw);
    *raw_out = raw;
    *capped_out = capped;
    *biased_out = capped + att_bias<T, C>(p, mask, nonpad, b, h, i, j);
}

template <typename C>
__device__ __forceinline__ C att_warp_max(C v) {
    for (int o = 16; o > 0; o >>= 1) {
        C w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    return v;
}

template <typename C>
__device__ __forceinline__ C att_warp_sum(C v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Keys [t_begin, t_end) of query row (b, h, i) into its online softmax:
// running max m, sum l and output features acc (lane + 32c), in tiles of 32
// keys, lane j scoring key t0 + j. Writes the QK output of modes 0-2 where
// `qk` is given (the row kernel's).
template <typename T, typename C>
__device__ __forceinline__ void att_keys(const AttentionParams& p, const C* qrow, const T* k, const T* vb,
                                         const unsigned char* mask, const int* nonpad, T* qk,
                                         unsigned long long qk_row, unsigned int b, unsigned int h,
                                         unsigned int i, unsigned int t_begin, unsigned int t_end,
                                         C& m, C& l, C* acc) {
    const unsigned int lane = threadIdx.x % 32u;
    const C MASKED = (C)-3.0e38f;
    for (unsigned int t0 = t_begin; t0 < t_end; t0 += 32u) {
        const unsigned int j = t0 + lane;
        C s = -att_inf<C>();
        if (j < t_end) {
            C raw, capped, biased;
            att_score<T, C>(p, qrow, k, mask, nonpad, b, h, i, j, &raw, &capped, &biased);
            s = biased;
            if (qk != nullptr && p.mode < 3u) {
                qk[qk_row + j] = (T)(p.mode == 0u ? raw : (p.mode == 1u ? capped : biased));
            }
        }
        const C tmax = att_warp_max<C>(s);
        const C mnew = m > tmax ? m : tmax;
        const bool live = mnew > MASKED;
        const C pr = (live && s > MASKED) ? exp(s - mnew) : (C)0;
        const C alpha = live ? (m > MASKED ? exp(m - mnew) : (C)0) : (C)1;
        l = l * alpha + att_warp_sum<C>(pr);
        const unsigned int n = t_end - t0 < 32u ? t_end - t0 : 32u;
        for (int c = 0; c < 8; ++c) {
            const unsigned int d = lane + 32u * c;
            C a = acc[c] * alpha;
            for (unsigned int jj = 0; jj < n; ++jj) {
                const C pj = __shfl_sync(0xffffffffu, pr, jj);
                if (d < p.dv) a += pj * (C)vb[(unsigned long long)(t0 + jj) * p.v_s[2] + d];
            }
            acc[c] = a;
            if (32u * (c + 1) >= p.dv) break;
        }
        if (live) m = mnew;
    }
}

template <typename T, typename C>
__device__ __forceinline__ void attention(T* y, const T* q, const T* k, const T* v,
                                          const unsigned char* mask, const int* nonpad, T* qk,
                                          const AttentionParams& p) {
    __shared__ C qs[ATT_WARPS][ATT_MAX_HEAD];
    const unsigned int warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
    const unsigned long long block = (unsigned long long)blockIdx.x + (unsigned long long)blockIdx.y * gridDim.x;
    const unsigned long long row = block * ATT_WARPS + warp;
    if (row >= p.rows) return;
    const unsigned int i = (unsigned int)(row % p.sq);
    const unsigned int h = (unsigned int)((row / p.sq) % p.hq);
    const unsigned int b = (unsigned int)(row / ((unsigned long long)p.sq * p.hq));
    const unsigned int kvh = h / p.group;
    C* qrow = qs[warp];
    const T* qr = q + (unsigned long long)b * p.q_s[0] + (unsigned long long)h * p.q_s[1] +
                  (unsigned long long)i * p.q_s[2];
    for (unsigned int d = lane; d < p.dk; d += 32u) qrow[d] = (C)qr[d] * (C)p.scale;
    __syncwarp();
    const bool qk_out = (p.flags & 32u) != 0u;
    const unsigned long long qk_row = row * p.keys;
    const C MASKED = (C)-3.0e38f;
    C m = -att_inf<C>(), l = (C)0;
    C acc[8];
    for (int c = 0; c < 8; ++c) acc[c] = (C)0;
    const T* vb = v + (unsigned long long)b * p.v_s[0] + (unsigned long long)kvh * p.v_s[1];
    att_keys<T, C>(p, qrow, k, vb, mask, nonpad, qk_out ? qk : nullptr, qk_row, b, h, i, 0, p.keys, m, l, acc);
    T* yr = y + (unsigned long long)b * p.y_s[0] + (unsigned long long)h * p.y_s[1] +
            (unsigned long long)i * p.y_s[2];
    for (int c = 0; c < 8; ++c) {
        const unsigned int d = lane + 32u * c;
        if (d < p.dv) yr[d] = (T)(l > (C)0 ? acc[c] / l : (C)0);
    }
    if (qk_out && p.mode == 3u) {
        for (unsigned int j = lane; j < p.keys; j += 32u) {
            C raw, capped, biased;
            att_score<T, C>(p, qrow, k, mask, nonpad, b, h, i, j, &raw, &capped, &biased);
            C pr = (C)0;
            if (l > (C)0 && biased > MASKED) pr = exp(biased - m) / l;
            qk[qk_row + j] = (T)pr;
        }
    }
}

// Split keys (decode: few query rows, many keys): one block of ATT_WARPS
// warps per (query row, span of ATT_SPLIT keys). The warps score the span's
// keys together, each lane a slice of the head and ATT_SPLIT_BATCH keys'
// loads in flight at once (a warp sum per key), so the K rows stream in at
// memory speed rather than one dependent load after another; the block
// takes the span's max and sum, then each thread accumulates output
// features over the span's keys, their V rows read coalesced. The span's
// max m, sum l and unnormalized output go to `part` (f32, dv + 2 per row
// and span); attention_merge then rescales the spans to their common max
// and divides. The tiled kernels' 32- or 64-row query tiles would leave all
// but one row idle and one block per head.
#define ATT_SPLIT 64u
#define ATT_SPLIT_BATCH 8

// The block's maximum (op 0) or sum (op 1) of v, on every thread.
template <typename C>
__device__ __forceinline__ C att_block_reduce(C v, C* red, int op) {
    const unsigned int warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
    v = op == 0 ? att_warp_max<C>(v) : att_warp_sum<C>(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    C r = red[0];
    for (unsigned int w = 1; w < ATT_WARPS; ++w) r = op == 0 ? (red[w] > r ? red[w] : r) : r + red[w];
    return r;
}

template <typename T, typename C>
__device__ __forceinline__ void attention_split(float* part, const T* q, const T* k, const T* v,
                                                const unsigned char* mask, const int* nonpad,
                                                const AttentionParams& p) {
    __shared__ C qs[ATT_MAX_HEAD];
    __shared__ C ps[ATT_SPLIT];
    __shared__ C red[ATT_WARPS];
    const unsigned int warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
    const unsigned int threads = 32u * ATT_WARPS;
    const unsigned long long item = (unsigned long long)blockIdx.x + (unsigned long long)blockIdx.y * gridDim.x;
    const unsigned int spans = (p.keys + ATT_SPLIT - 1u) / ATT_SPLIT;
    if (item >= p.rows * (unsigned long long)spans) return;
    const unsigned long long row = item / spans;
    const unsigned int span = (unsigned int)(item % spans);
    const unsigned int i = (unsigned int)(row % p.sq);
    const unsigned int h = (unsigned int)((row / p.sq) % p.hq);
    const unsigned int b = (unsigned int)(row / ((unsigned long long)p.sq * p.hq));
    const unsigned int kvh = h / p.group;
    const T* qr = q + (unsigned long long)b * p.q_s[0] + (unsigned long long)h * p.q_s[1] +
                  (unsigned long long)i * p.q_s[2];
    for (unsigned int d = threadIdx.x; d < p.dk; d += threads) qs[d] = (C)qr[d] * (C)p.scale;
    __syncthreads();
    const unsigned int j0 = span * ATT_SPLIT;
    const unsigned int n = p.keys - j0 < ATT_SPLIT ? p.keys - j0 : ATT_SPLIT;
    const C MASKED = (C)-3.0e38f;
    // The keys' biases first: a span the mask hides whole (the unwritten
    // end of a decoder's cache) reads no K or V, and the merge skips it.
    C bmax = -att_inf<C>();
    for (unsigned int jj = threadIdx.x; jj < n; jj += threads) {
        const C bj = att_bias<T, C>(p, mask, nonpad, b, h, i, j0 + jj);
        ps[jj] = bj;
        bmax = bj > bmax ? bj : bmax;
    }
    if (att_block_reduce<C>(bmax, red, 0) <= MASKED) {
        float* out = part + item * (unsigned long long)(p.dv + 2u);
        for (unsigned int d = threadIdx.x; d < p.dv; d += threads) out[2 + d] = 0.0f;
        if (threadIdx.x == 0) {
            out[0] = (float)MASKED;
            out[1] = 0.0f;
        }
        return;
    }
    // att_block_reduce's barriers order the biases' writes before the
    // reads below.
    const T* kb = k + (unsigned long long)b * p.k_s[0] + (unsigned long long)kvh * p.k_s[1];
    for (unsigned int base = warp; base < n; base += ATT_WARPS * ATT_SPLIT_BATCH) {
        C s[ATT_SPLIT_BATCH];
#pragma unroll
        for (int u = 0; u < ATT_SPLIT_BATCH; ++u) s[u] = (C)0;
        for (unsigned int d = lane; d < p.dk; d += 32u) {
            const C qd = qs[d];
#pragma unroll
            for (int u = 0; u < ATT_SPLIT_BATCH; ++u) {
                const unsigned int jj = base + (unsigned int)u * ATT_WARPS;
                if (jj < n) s[u] += qd * (C)kb[(unsigned long long)(j0 + jj) * p.k_s[2] + d];
            }
        }
#pragma unroll
        for (int u = 0; u < ATT_SPLIT_BATCH; ++u) {
            const C raw = att_warp_sum<C>(s[u]);
            const unsigned int jj = base + (unsigned int)u * ATT_WARPS;
            if (lane == 0 && jj < n) {
                ps[jj] = att_cap<C>(p, raw) + ps[jj];
            }
        }
    }
    __syncthreads();
    C mx = -att_inf<C>();
    for (unsigned int jj = threadIdx.x; jj < n; jj += threads) mx = ps[jj] > mx ? ps[jj] : mx;
    const C m = att_block_reduce<C>(mx, red, 0);
    C sum = (C)0;
    for (unsigned int jj = threadIdx.x; jj < n; jj += threads) {
        const C e = (m > MASKED && ps[jj] > MASKED) ? exp(ps[jj] - m) : (C)0;
        ps[jj] = e;
        sum += e;
    }
    const C l = att_block_reduce<C>(sum, red, 1);
    // att_block_reduce's barriers also order the writes of ps above before
    // the reads below.
    float* out = part + item * (unsigned long long)(p.dv + 2u);
    const T* vb = v + (unsigned long long)b * p.v_s[0] + (unsigned long long)kvh * p.v_s[1] +
                  (unsigned long long)j0 * p.v_s[2];
    for (unsigned int d = threadIdx.x; d < p.dv; d += threads) {
        C a[ATT_SPLIT_BATCH];
#pragma unroll
        for (int u = 0; u < ATT_SPLIT_BATCH; ++u) a[u] = (C)0;
        unsigned int jj = 0;
        for (; jj + ATT_SPLIT_BATCH <= n; jj += ATT_SPLIT_BATCH) {
#pragma unroll
            for (int u = 0; u < ATT_SPLIT_BATCH; ++u) {
                a[u] += ps[jj + u] * (C)vb[(unsigned long long)(jj + u) * p.v_s[2] + d];
            }
        }
        for (; jj < n; ++jj) a[0] += ps[jj] * (C)vb[(unsigned long long)jj * p.v_s[2] + d];
        C total = (C)0;
#pragma unroll
        for (int u = 0; u < ATT_SPLIT_BATCH; ++u) total += a[u];
        out[2 + d] = (float)total;
    }
    if (threadIdx.x == 0) {
        out[0] = (float)(m > MASKED ? m : MASKED);
        out[1] = (float)l;
    }
}

// The spans of a row into its output: a warp per query row.
template <typename T>
__device__ __forceinline__ void attention_merge(T* y, const float* part, const AttentionParams& p) {
    const unsigned int warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
    const unsigned long long block = (unsigned long long)blockIdx.x + (unsigned long long)blockIdx.y * gridDim.x;
    const unsigned long long row = block * ATT_WARPS + warp;
    if (row >= p.rows) return;
    const unsigned int spans = (p.keys + ATT_SPLIT - 1u) / ATT_SPLIT;
    const unsigned long long w = p.dv + 2u;
    const float* r = part + row * spans * w;
    float m = -3.0e38f;
    for (unsigned int s = 0; s < spans; ++s) {
        if (r[s * w + 1] > 0.0f && r[s * w] > m) m = r[s * w];
    }
    float l = 0.0f;
    for (unsigned int s = 0; s < spans; ++s) {
        if (r[s * w + 1] > 0.0f) l += r[s * w + 1] * __expf(r[s * w] - m);
    }
    const unsigned int i = (unsigned int)(row % p.sq);
    const unsigned int h = (unsigned int)((row / p.sq) % p.hq);
    const unsigned int b = (unsigned int)(row / ((unsigned long long)p.sq * p.hq));
    T* yr = y + (unsigned long long)b * p.y_s[0] + (unsigned long long)h * p.y_s[1] +
            (unsigned long long)i * p.y_s[2];
    for (unsigned int d = lane; d < p.dv; d += 32u) {
        float a = 0.0f;
        for (unsigned int s = 0; s < spans; ++s) {
            if (r[s * w + 1] > 0.0f) a += r[s * w + 2 + d] * __expf(r[s * w] - m);
        }
        yr[d] = (T)(l > 0.0f ? a / l : 0.0f);
    }
}

#define ATT_SPLIT_ENTRY(t, T)                                                                     \
    extern "C" __global__ void __launch_bounds__(32 * ATT_WARPS)                                \
        attention_split_##t(float* part, const T* q, const T* k, const T* v,                   \
                            const unsigned char* mask, const int* nonpad, AttentionParams p) {  \
        rlx_grid_wait();                                                                        \
        attention_split<T, float>(part, q, k, v, mask, nonpad, p);                              \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(32 * ATT_WARPS)                                \
        attention_merge_##t(T* y, const float* part, AttentionParams p) {                       \
        rlx_grid_wait();                                                                        \
        attention_merge<T>(y, part, p);                                                         \
    }
ATT_SPLIT_ENTRY(f32, float)
ATT_SPLIT_ENTRY(f16, rlx_f16)
ATT_SPLIT_ENTRY(bf16, rlx_bf16)

#define ATT_ENTRY(name, T, C)                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * ATT_WARPS)                                \
        name(T* y, const T* q, const T* k, const T* v, const unsigned char* mask,              \
             const int* nonpad, T* qk, AttentionParams p) {                                     \
        rlx_grid_wait();                                                                        \
        attention<T, C>(y, q, k, v, mask, nonpad, qk, p);                                       \
    }
ATT_ENTRY(attention_f32, float, float)
ATT_ENTRY(attention_f64, double, double)
ATT_ENTRY(attention_f16, rlx_f16, float)
ATT_ENTRY(attention_bf16, rlx_bf16, float)
