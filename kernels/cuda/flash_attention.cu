// Attention, the tiled kernels (flash-style): one block of 128 threads per
// (batch, query head, tile of query rows). Key and value tiles are staged in
// shared memory and scored against the whole query tile with an online
// softmax (running max m and sum l per row, rescaled per tile), so K and V
// are read once per query tile, not once per query row, and any key length
// runs in fixed memory.
// - f16/bf16 (flash_mma): tensor cores, mma.sync m16n8k16 with f32
//   accumulation. Four warps of 16 query rows, or, where that makes too few
//   blocks, four warps over one 16-row tile (two over 32 rows for D = 128)
//   splitting each key tile and merged at the end; fragments by ldmatrix;
//   the probabilities P stay in registers as the A operand of P.V. A mask
//   the same for every query row (padding) costs one load per key. Each
//   entry comes in three forms (per-score rules compiled in, `_plain`
//   without them, `_unmasked` without a mask either; flash_mma.cu).
// - f32 (flash_f32): exact fp32 FMAs. 32 query rows; each thread holds 4 rows
//   x 2 keys of the scores and 4 rows x D/16 features of the output; P goes
//   through shared memory.
// Q, K, V and Y are read and written through their element strides (3-D
// [B,S,H*D] or 4-D [B,H,S,D]; query heads share key heads by `group`); head
// sizes are padded with zeros to the kernel's D. Masks, causality, key
// windows, key lengths and softcap follow attention.cuh; key tiles that no
// row of the query tile can see (causal, window, lengths) are skipped, tiles
// every rule passes (fa_plain) skip the rules. The f32 kernel stages a mask
// tile in shared memory by coalesced loads; the tensor-core kernel reads it
// in place (staging it before each tile measured slower there: the loads
// sit on the path to the tile's barrier). The QK output and f64 run on the
// row kernel (attention.cu).

#define FA_THREADS 128

struct FaTile {
    unsigned int b, h, kvh, q0;
    // Keys [k0, k1) that some row of the tile may see (key lengths and the
    // mask's length already folded in).
    unsigned int k0, k1;
    // Query position minus query row (bottom-right aligned).
    long long off;
};

__device__ __forceinline__ FaTile fa_tile(const AttentionParams& p, const int* nonpad, unsigned int bq) {
    const unsigned int tiles = (p.sq + bq - 1) / bq;
    FaTile t;
    if (gridDim.y == 1u) {
        // 32-bit division (a 64-bit one is a long call on the critical path
        // of a short kernel).
        const unsigned int blk = blockIdx.x, bh = blk / tiles;
        t.q0 = (blk - bh * tiles) * bq;
        t.h = bh % p.hq;
        t.b = bh / p.hq;
    } else {
        const unsigned long long blk = (unsigned long long)blockIdx.x + (unsigned long long)blockIdx.y * gridDim.x;
        t.q0 = (unsigned int)(blk % tiles) * bq;
        t.h = (unsigned int)((blk / tiles) % p.hq);
        t.b = (unsigned int)(blk / ((unsigned long long)tiles * p.hq));
    }
    t.kvh = t.h / p.group;
    long long lo = 0, hi = p.keys;
    long long np = 0;
    if (p.flags & 8u) {
        np = (p.flags & 16u) ? ((const long long*)nonpad)[t.b] : (long long)nonpad[t.b];
        hi = np < hi ? np : hi;
    }
    if ((p.flags & 1u) && (long long)p.mask_len < hi) hi = p.mask_len;
    const long long off = (p.flags & 64u) ? np - (long long)p.sq : (long long)p.past;
    const long long last = (long long)(t.q0 + bq - 1 < p.sq - 1 ? t.q0 + bq - 1 : p.sq - 1);
    if (p.flags & 4u) {
        const long long c = last + off + 1;
        hi = c < hi ? c : hi;
    }
    if (p.right >= 0) {
        const long long c = last + off + p.right + 1;
        hi = c < hi ? c : hi;
    }
    if (p.left >= 0) {
        const long long c = (long long)t.q0 + off - p.left;
        lo = c > lo ? c : lo;
    }
    if (hi < 0) hi = 0;
    if (lo > hi) lo = hi;
    t.k0 = (unsigned int)lo;
    t.k1 = (unsigned int)hi;
    t.off = off;
    return t;
}

// Rows [0, R) x features [0, D) of a tile into shared memory (row stride LD),
// from `g` (row stride `rs` elements): rows past `rows` and features past
// `cols` are zeros. 16-byte moves where `vec` says the operand allows them.
template <typename T, int R, int D, int LD, int NT = FA_THREADS>
__device__ __forceinline__ void fa_stage(T* s, const T* g, unsigned long long rs, unsigned int rows,
                                         unsigned int cols, bool vec) {
    constexpr int V = 16 / sizeof(T), C = D / V, N = R * C;
    if (vec) {
#pragma unroll
        for (int i = 0; i < (N + NT - 1) / NT; ++i) {
            const unsigned int x = threadIdx.x + i * NT;
            if (N % NT != 0 && x >= (unsigned int)N) break;
            const unsigned int r = x / C, c = (x % C) * V;
            uint4 w = make_uint4(0u, 0u, 0u, 0u);
            if (r < rows && c < cols) w = *(const uint4*)(g + r * rs + c);
            *(uint4*)(s + r * LD + c) = w;
        }
    } else {
        for (unsigned int x = threadIdx.x; x < (unsigned int)(R * D); x += NT) {
            const unsigned int r = x / D, c = x % D;
            s[r * LD + c] = (r < rows && c < cols) ? g[r * rs + c] : T(0.0f);
        }
    }
}

// Whether an operand can move in 16-byte pieces: its base and every stride
// a multiple of 16 bytes, and its head size whole pieces.
template <typename T>
__device__ __forceinline__ bool fa_vec(const T* base, const unsigned int* st, unsigned int d) {
    constexpr unsigned int V = 16 / sizeof(T);
    return (((unsigned long long)base) % 16u) == 0u && ((st[0] | st[1] | st[2] | d) % V) == 0u;
}

template <typename T>
__device__ __forceinline__ const T* fa_at(const T* x, const unsigned int* st, unsigned int b, unsigned int h,
                                          unsigned int s) {
    return x + (unsigned long long)b * st[0] + (unsigned long long)h * st[1] + (unsigned long long)s * st[2];
}

// One query row's share of the score rules: its position and whether it
// exists. Built once per row; `fa_apply` then costs a compare or two per
// score in the common cases.
struct FaRow {
    long long pos;
    // Where the row's mask starts (the tensor-core kernel reads it in place).
    unsigned long long mrow;
    bool live;
};

__device__ __forceinline__ FaRow fa_row(const AttentionParams& p, const FaTile& t, unsigned int i) {
    FaRow r;
    r.live = i < p.sq;
    r.pos = (long long)i + t.off;
    r.mrow = (unsigned long long)t.b * p.mask_s[0] + (unsigned long long)t.h * p.mask_s[1] +
             (unsigned long long)i * p.mask_s[2];
    return r;
}

// The mask's bias at key j of row r, read in place (a bool mask's false as
// -inf); 0 past the row or the tile's keys, which fa_apply hides anyway.
template <typename T>
__device__ __forceinline__ float fa_mask_at(const AttentionParams& p, const unsigned char* mask, const FaTile& t,
                                            const FaRow& r, unsigned int j) {
    if (!r.live || j >= t.k1) return 0.0f;
    const unsigned long long mi = r.mrow + (unsigned long long)j * p.mask_s[3];
    if (p.flags & 2u) return mask[mi] != 0 ? 0.0f : -att_inf<float>();
    return (float)((const T*)mask)[mi];
}

// The mask's bias at key j of the row whose mask starts at `mrow`, without
// checks (the caller knows the row and key exist).
template <typename T>
__device__ __forceinline__ float fa_bias(const AttentionParams& p, const unsigned char* mask,
                                         unsigned long long mrow, unsigned int j) {
    const unsigned long long mi = mrow + (unsigned long long)j * p.mask_s[3];
    if (p.flags & 2u) return mask[mi] != 0 ? 0.0f : -att_inf<float>();
    return (float)((const T*)mask)[mi];
}

// The mask over rows [i0, i0 + R) x keys [j0, j0 + BK) into shared memory
// as additive biases of T (a bool mask's false as -inf), read along keys so
// the loads coalesce; entries past the rows or keys are not read later.
template <typename T, int R, int BK>
__device__ __forceinline__ void fa_stage_mask(T* ms, const AttentionParams& p, const unsigned char* mask,
                                              const FaTile& t, unsigned int i0, unsigned int j0) {
    const unsigned long long base = (unsigned long long)t.b * p.mask_s[0] + (unsigned long long)t.h * p.mask_s[1];
    for (unsigned int x = threadIdx.x; x < (unsigned int)(R * BK); x += FA_THREADS) {
        const unsigned int r = x / BK, c = x % BK, i = i0 + r, j = j0 + c;
        float v = 0.0f;
        if (i < p.sq && j < t.k1) {
            const unsigned long long mi =
                base + (unsigned long long)i * p.mask_s[2] + (unsigned long long)j * p.mask_s[3];
            if (p.flags & 2u) {
                v = mask[mi] != 0 ? 0.0f : -att_inf<float>();
            } else {
                v = (float)((const T*)mask)[mi];
            }
        }
        ms[x] = T(v);
    }
}

// Whether every score of key tile [j0, j0 + n) x rows [i0, i1) passes the
// positional rules: every key in [k0, k1), and the causal bound and the
// window hold for every pair. Rows past the query count need no rule (their
// queries are zeros and their outputs are not written), but they have no
// mask row either. fa_plain: also no mask, so the tile needs no per-score
// work at all.
__device__ __forceinline__ bool fa_rules_pass(const AttentionParams& p, const FaTile& t, unsigned int j0,
                                              unsigned int n, unsigned int i0, unsigned int i1) {
    if (j0 < t.k0 || j0 + n > t.k1) return false;
    const long long first = (long long)i0 + t.off, last = (long long)i1 - 1 + t.off;
    const long long jl = (long long)j0 + n - 1;
    if ((p.flags & 4u) && jl > first) return false;
    if (p.right >= 0 && jl - first > p.right) return false;
    if (p.left >= 0 && last - (long long)j0 > p.left) return false;
    return true;
}

__device__ __forceinline__ bool fa_plain(const AttentionParams& p, const FaTile& t, unsigned int j0, unsigned int n,
                                         unsigned int i0, unsigned int i1) {
    return !(p.flags & 1u) && fa_rules_pass(p, t, j0, n, i0, i1);
}

// Score x (scaled, before the softcap) of key j for row r: capped, then
// -inf where a rule hides the key, plus the staged mask bias `mb`.
__device__ __forceinline__ float fa_apply(const AttentionParams& p, const FaTile& t, const FaRow& r, unsigned int j,
                                          float x, float mb) {
    if (p.softcap > 0.0f) x = att_cap<float>(p, x);
    const long long diff = r.pos - (long long)j;
    bool ok = r.live && j >= t.k0 && j < t.k1;
    if (p.flags & 4u) ok = ok && diff >= 0;
    if (p.left >= 0) ok = ok && diff <= p.left;
    if (p.right >= 0) ok = ok && -diff <= p.right;
    return ok ? x + mb : -att_inf<float>();
}

#define FA_MASKED (-3.0e38f)

// ---------------------------------------------------------------- f32, exact

template <int D>
__device__ __forceinline__ void flash_f32(float* y, const float* q, const float* k, const float* v,
                                          const unsigned char* mask, const int* nonpad, const AttentionParams& p) {
    constexpr int BQ = 32, BK = 32, LD = D + 4, LP = BK + 4, U = D / 64;
    __shared__ __align__(16) float qs[BQ * LD];
    __shared__ __align__(16) float kv[BK * LD];
    __shared__ __align__(16) float ps[BQ * LP];
    __shared__ float msk[BQ * BK];
    const FaTile t = fa_tile(p, nonpad, BQ);
    const unsigned int tid = threadIdx.x, ty = tid / 16u, tx = tid % 16u;
    const float* qb = fa_at(q, p.q_s, t.b, t.h, t.q0);
    const unsigned int qrows = p.sq - t.q0 < (unsigned int)BQ ? p.sq - t.q0 : (unsigned int)BQ;
    fa_stage<float, BQ, D, LD>(qs, qb, p.q_s[2], qrows, p.dk, fa_vec(q, p.q_s, p.dk));
    __syncthreads();
    // Q scaled once, as the row kernel does.
    for (unsigned int x = tid; x < (unsigned int)(BQ * D); x += FA_THREADS) qs[(x / D) * LD + x % D] *= p.scale;
    const bool kvec = fa_vec(k, p.k_s, p.dk), vvec = fa_vec(v, p.v_s, p.dv);
    const unsigned int i0 = t.q0 + ty * 4u;
    FaRow rows[4];
    for (int r = 0; r < 4; ++r) rows[r] = fa_row(p, t, i0 + r);
    float m[4], l[4];
    float4 o[4][U];
    for (int r = 0; r < 4; ++r) {
        m[r] = -att_inf<float>();
        l[r] = 0.0f;
        for (int u = 0; u < U; ++u) o[r][u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    for (unsigned int j0 = t.k0; j0 < t.k1; j0 += BK) {
        const unsigned int n = t.k1 - j0 < (unsigned int)BK ? t.k1 - j0 : (unsigned int)BK;
        __syncthreads();
        fa_stage<float, BK, D, LD>(kv, fa_at(k, p.k_s, t.b, t.kvh, j0), p.k_s[2], n, p.dk, kvec);
        if (p.flags & 1u) fa_stage_mask<float, BQ, BK>(msk, p, mask, t, t.q0, j0);
        __syncthreads();
        float s[4][2];
        for (int r = 0; r < 4; ++r) s[r][0] = s[r][1] = 0.0f;
#pragma unroll 4
        for (int d = 0; d < D; d += 4) {
            const float4 k0 = *(const float4*)&kv[tx * LD + d];
            const float4 k1 = *(const float4*)&kv[(tx + 16u) * LD + d];
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const float4 a = *(const float4*)&qs[(ty * 4u + r) * LD + d];
                s[r][0] += a.x * k0.x + a.y * k0.y + a.z * k0.z + a.w * k0.w;
                s[r][1] += a.x * k1.x + a.y * k1.y + a.z * k1.z + a.w * k1.w;
            }
        }
        const bool plain = fa_plain(p, t, j0, BK, i0, i0 + 4u);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            float x0 = s[r][0], x1 = s[r][1];
            if (!plain) {
                const bool mk = (p.flags & 1u) != 0u;
                const float* mr = msk + (ty * 4u + r) * BK;
                x0 = fa_apply(p, t, rows[r], j0 + tx, x0, mk ? mr[tx] : 0.0f);
                x1 = fa_apply(p, t, rows[r], j0 + tx + 16u, x1, mk ? mr[tx + 16u] : 0.0f);
            } else if (p.softcap > 0.0f) {
                x0 = att_cap<float>(p, x0);
                x1 = att_cap<float>(p, x1);
            }
            float mx = x0 > x1 ? x0 : x1;
            for (int w = 8; w > 0; w >>= 1) {
                const float z = __shfl_xor_sync(0xffffffffu, mx, w);
                mx = z > mx ? z : mx;
            }
            const float mnew = m[r] > mx ? m[r] : mx;
            const bool live = mnew > FA_MASKED;
            const float p0 = (live && x0 > FA_MASKED) ? expf(x0 - mnew) : 0.0f;
            const float p1 = (live && x1 > FA_MASKED) ? expf(x1 - mnew) : 0.0f;
            const float alpha = live ? (m[r] > FA_MASKED ? expf(m[r] - mnew) : 0.0f) : 1.0f;
            l[r] = l[r] * alpha + p0 + p1;
            for (int u = 0; u < U; ++u) {
                o[r][u].x *= alpha;
                o[r][u].y *= alpha;
                o[r][u].z *= alpha;
                o[r][u].w *= alpha;
            }
            if (live) m[r] = mnew;
            ps[(ty * 4u + r) * LP + tx] = p0;
            ps[(ty * 4u + r) * LP + tx + 16u] = p1;
        }
        __syncthreads();
        fa_stage<float, BK, D, LD>(kv, fa_at(v, p.v_s, t.b, t.kvh, j0), p.v_s[2], n, p.dv, vvec);
        __syncthreads();
#pragma unroll 2
        for (int j = 0; j < BK; j += 4) {
            float4 pr[4];
#pragma unroll
            for (int r = 0; r < 4; ++r) pr[r] = *(const float4*)&ps[(ty * 4u + r) * LP + j];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const float4 v0 = *(const float4*)&kv[(j + 0) * LD + 4u * tx + 64u * u];
                const float4 v1 = *(const float4*)&kv[(j + 1) * LD + 4u * tx + 64u * u];
                const float4 v2 = *(const float4*)&kv[(j + 2) * LD + 4u * tx + 64u * u];
                const float4 v3 = *(const float4*)&kv[(j + 3) * LD + 4u * tx + 64u * u];
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    float4& a = o[r][u];
                    a.x += pr[r].x * v0.x + pr[r].y * v1.x + pr[r].z * v2.x + pr[r].w * v3.x;
                    a.y += pr[r].x * v0.y + pr[r].y * v1.y + pr[r].z * v2.y + pr[r].w * v3.y;
                    a.z += pr[r].x * v0.z + pr[r].y * v1.z + pr[r].z * v2.z + pr[r].w * v3.z;
                    a.w += pr[r].x * v0.w + pr[r].y * v1.w + pr[r].z * v2.w + pr[r].w * v3.w;
                }
            }
        }
    }
    for (int r = 0; r < 4; ++r) {
        float sum = l[r];
        for (int w = 8; w > 0; w >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, w);
        const unsigned int i = t.q0 + ty * 4u + r;
        if (i >= p.sq) continue;
        float* yr = y + (unsigned long long)t.b * p.y_s[0] + (unsigned long long)t.h * p.y_s[1] +
                    (unsigned long long)i * p.y_s[2];
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        for (int u = 0; u < U; ++u) {
            const unsigned int f = 4u * tx + 64u * u;
            const float w[4] = {o[r][u].x * inv, o[r][u].y * inv, o[r][u].z * inv, o[r][u].w * inv};
            for (int e = 0; e < 4; ++e) {
                if (f + e < p.dv) yr[f + e] = w[e];
            }
        }
    }
}

// One entry: __launch_bounds__ its thread count and the blocks a
// multiprocessor should hold (which caps the registers a thread).
#define FA_ENTRY(name, T, threads, blocks, body)                                                            \
    extern "C" __global__ void __launch_bounds__(threads, blocks)                                           \
        name(T* y, const T* q, const T* k, const T* v, const unsigned char* mask, const int* nonpad, T* qk, \
             AttentionParams p) {                                                                           \
        rlx_grid_wait();                                                                                    \
        body(y, q, k, v, mask, nonpad, p);                                                                  \
    }
// One module per element type (FA_F32, FA_F16 or FA_BF16 defined before
// these files), so a model compiles only the entries it can use.
#ifdef FA_F32
FA_ENTRY(flash_attention_f32_d64, float, FA_THREADS, 3, flash_f32<64>)
FA_ENTRY(flash_attention_f32_d128, float, FA_THREADS, 2, flash_f32<128>)
#endif
