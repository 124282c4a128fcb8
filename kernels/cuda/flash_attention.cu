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
//   the same for every query row (padding) costs one load per key.
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
template <typename T, int R, int D, int LD>
__device__ __forceinline__ void fa_stage(T* s, const T* g, unsigned long long rs, unsigned int rows,
                                         unsigned int cols, bool vec) {
    constexpr int V = 16 / sizeof(T), C = D / V, N = R * C;
    if (vec) {
#pragma unroll
        for (int i = 0; i < (N + FA_THREADS - 1) / FA_THREADS; ++i) {
            const unsigned int x = threadIdx.x + i * FA_THREADS;
            if (N % FA_THREADS != 0 && x >= (unsigned int)N) break;
            const unsigned int r = x / C, c = (x % C) * V;
            uint4 w = make_uint4(0u, 0u, 0u, 0u);
            if (r < rows && c < cols) w = *(const uint4*)(g + r * rs + c);
            *(uint4*)(s + r * LD + c) = w;
        }
    } else {
        for (unsigned int x = threadIdx.x; x < (unsigned int)(R * D); x += FA_THREADS) {
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

// ------------------------------------------------------ f16/bf16, tensor cores

__device__ __forceinline__ unsigned int fa_smem(const void* p) {
    return (unsigned int)__cvta_generic_to_shared(p);
}

// Four 8x8 matrices of 16-bit elements from shared memory (byte address
// `a`: the constant part of an address then folds into the instruction),
// plain or transposed.
__device__ __forceinline__ void fa_ldsm4(unsigned int* r, unsigned int a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

__device__ __forceinline__ void fa_ldsm4_t(unsigned int* r, unsigned int a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// d += a (16x16, row) * b (16x8, col), f32 accumulators.
template <typename T>
__device__ __forceinline__ void fa_mma(float* d, const unsigned int* a, unsigned int b0, unsigned int b1);

template <>
__device__ __forceinline__ void fa_mma<rlx_half>(float* d, const unsigned int* a, unsigned int b0, unsigned int b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void fa_mma<rlx_bf16>(float* d, const unsigned int* a, unsigned int b0, unsigned int b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as one register of two halves, `lo` at the lower address.
template <typename T>
__device__ __forceinline__ unsigned int fa_pack(float lo, float hi);

template <>
__device__ __forceinline__ unsigned int fa_pack<rlx_half>(float lo, float hi) {
    unsigned int r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

template <>
__device__ __forceinline__ unsigned int fa_pack<rlx_bf16>(float lo, float hi) {
    unsigned int r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// 2^x, the tensor-core path's exponential (ex2.approx: within 2 ulp, far
// below the half types' rounding of P).
__device__ __forceinline__ float fa_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Rows [0, R) x features [0, D) of a tile staged by cp.async (16 bytes a
// copy; rows past `rows`, features past `cols` zero-filled): completes at
// the next fa_wait. The operand must allow 16-byte moves (fa_vec).
template <typename T, int R, int D, int LD>
__device__ __forceinline__ void fa_stage_async(T* s, const T* g, unsigned long long rs, unsigned int rows,
                                               unsigned int cols) {
    constexpr int V = 16 / sizeof(T), C = D / V, RI = FA_THREADS / C;
    static_assert(FA_THREADS % C == 0, "whole rows a pass");
    // A fixed count of copies a thread, unrolled, each RI rows below the
    // last: on the path of every key tile, a loop's bookkeeping and address
    // arithmetic cost as much as the copies.
    const unsigned int r0 = threadIdx.x / C, c = (threadIdx.x % C) * V;
    const T* const src0 = g + r0 * rs + c;
    const unsigned long long step = RI * rs;
    const unsigned int dst0 = fa_smem(s + r0 * LD + c);
#pragma unroll
    for (int i = 0; i < (R + RI - 1) / RI; ++i) {
        const unsigned int r = r0 + i * RI;
        if (R % RI != 0 && r >= (unsigned int)R) break;
        const bool in = r < rows && c < cols;
        const T* src = in ? src0 + i * step : g;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst0 + i * RI * LD * (int)sizeof(T)),
                     "l"(src), "r"(in ? 16 : 0));
    }
    asm volatile("cp.async.commit_group;");
}

__device__ __forceinline__ void fa_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
__device__ __forceinline__ void fa_wait_one() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

// K and V tiles of keys [j0, j0 + BK) into `ks` and `vs`: by cp.async when
// both allow 16-byte moves, else by plain loads (complete on return).
template <typename T, int BK, int D, int LD>
__device__ __forceinline__ void fa_stage_kv(T* ks, T* vs, const T* k, const T* v, const AttentionParams& p,
                                            const FaTile& t, unsigned int j0, bool async) {
    const unsigned int n = t.k1 - j0 < (unsigned int)BK ? t.k1 - j0 : (unsigned int)BK;
    const T* kb = fa_at(k, p.k_s, t.b, t.kvh, j0);
    const T* vb = fa_at(v, p.v_s, t.b, t.kvh, j0);
    if (async) {
        fa_stage_async<T, BK, D, LD>(ks, kb, p.k_s[2], n, p.dk);
        fa_stage_async<T, BK, D, LD>(vs, vb, p.v_s[2], n, p.dv);
    } else {
        fa_stage<T, BK, D, LD>(ks, kb, p.k_s[2], n, p.dk, fa_vec(k, p.k_s, p.dk));
        fa_stage<T, BK, D, LD>(vs, vb, p.v_s[2], n, p.dv, fa_vec(v, p.v_s, p.dv));
    }
}

// The tensor-core kernel. A block's four warps cover WQ x 16 query rows and
// split each key tile WK = 4 / WQ ways. WQ = 4 (64 rows, each warp over the
// whole tile) where the grid has blocks enough; WQ = 1 or 2 (16 or 32 rows,
// the warps over quarters or halves of each tile, their running maxima,
// sums and outputs merged through shared memory at the end) where 64-row
// tiles would leave most multiprocessors idle.
template <typename T, int D, int BK, int WQ>
__device__ __forceinline__ void flash_mma(T* y, const T* q, const T* k, const T* v, const unsigned char* mask,
                                          const int* nonpad, const AttentionParams& p) {
    constexpr int WK = 4 / WQ, BQ = 16 * WQ, KW = BK / WK;
    constexpr int LD = D + 8, KD = D / 16, NK = KW / 8, ND = D / 8;
    static_assert(WQ * WK == 4 && KW % 16 == 0, "four warps, whole 16-key steps each");
    // Two K/V buffers; the second starts where Q is staged (Q is read into
    // registers before the second buffer is first filled).
    constexpr int QE = BQ * LD, KVE = 2 * BK * LD;
    constexpr int SE = (QE > KVE ? QE : KVE) + KVE;
    // The merge's rows of partial outputs (row stride OD floats), maxima and sums.
    constexpr int OD = D + 4;
    static_assert(WK == 1 || (WK * BQ * (OD + 2)) * 4 <= SE * (int)sizeof(T), "the merge fits");
    __shared__ __align__(16) T sm[SE];
    T* const qs = sm + KVE;
    const FaTile t = fa_tile(p, nonpad, BQ);
    const unsigned int warp = threadIdx.x / 32u, lane = threadIdx.x % 32u, g = lane / 4u, tq = lane % 4u;
    const unsigned int wq = warp % WQ, wk = warp / WQ;
    const unsigned int qrows = p.sq - t.q0 < (unsigned int)BQ ? p.sq - t.q0 : (unsigned int)BQ;
    const bool async = fa_vec(k, p.k_s, p.dk) && fa_vec(v, p.v_s, p.dv);
    // The first K/V tile goes in flight with Q.
    if (t.k0 < t.k1) fa_stage_kv<T, BK, D, LD>(sm, sm + BK * LD, k, v, p, t, t.k0, async);
    fa_stage<T, BQ, D, LD>(qs, fa_at(q, p.q_s, t.b, t.h, t.q0), p.q_s[2], qrows, p.dk, fa_vec(q, p.q_s, p.dk));
    __syncthreads();
    // ldmatrix: lanes 0-7, 8-15, 16-23, 24-31 address the rows of matrices
    // 0-3. Where this lane's ldmatrix reads, in bytes of shared memory: K's
    // fragment (keys c*16.., features kk*16..) and V's (keys c*16..,
    // features dp*16..) at (c*16*LD + kk*16 or dp*16) elements past ka and
    // va in the first buffer (the constant part folds into the instruction).
    constexpr unsigned int E = sizeof(T);
    const unsigned int lr = lane % 8u, lm = lane / 8u;
    const unsigned int ka = fa_smem(sm) + ((lr + (lm / 2u) * 8u + wk * KW) * LD + (lm % 2u) * 8u) * E;
    const unsigned int va = fa_smem(sm) + ((BK + lr + (lm % 2u) * 8u + wk * KW) * LD + (lm / 2u) * 8u) * E;
    // This warp's 16 query rows as A fragments, kept for every key tile.
    unsigned int qf[KD][4];
    const unsigned int qa = fa_smem(&qs[(wq * 16u + lr + (lm % 2u) * 8u) * LD + (lm / 2u) * 8u]);
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) fa_ldsm4(qf[kk], qa + kk * 16 * E);
    __syncthreads();
    const float l2e = 1.4426950408889634f, sl2 = p.scale * l2e;
    float o[ND][4];
#pragma unroll
    for (int n = 0; n < ND; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    // Running maxima and sums in the log2 domain, of rows row0 and row0 + 8.
    float m[2] = {-att_inf<float>(), -att_inf<float>()}, l[2] = {0.0f, 0.0f};
    const unsigned int row0 = t.q0 + wq * 16u + g;
    const FaRow rows[2] = {fa_row(p, t, row0), fa_row(p, t, row0 + 8u)};
    const bool masked = (p.flags & 1u) != 0u;
    // A mask that is the same for every query row (a padding mask): one
    // bias per key serves both of a thread's rows.
    const bool keyed = masked && p.mask_s[2] == 0u;
    unsigned int cur = 0;
    for (unsigned int j0 = t.k0; j0 < t.k1; j0 += BK) {
        // Next tile in flight while this one is scored.
        const bool more = j0 + BK < t.k1;
        T* const kb = sm + cur * KVE;
        if (more && async) {
            T* const nb = sm + (cur ^ 1u) * KVE;
            fa_stage_kv<T, BK, D, LD>(nb, nb + BK * LD, k, v, p, t, j0 + BK, true);
        }
        if (async) {
            if (more) fa_wait_one(); else fa_wait_all();
        }
        __syncthreads();
        // This warp's keys: [jw, jw + KW) (none past the tile's end).
        const unsigned int jw = j0 + wk * KW;
        if (jw < t.k1) {
            const unsigned int kt = ka + cur * KVE * E, vt = va + cur * KVE * E;
            float s[NK][4];
#pragma unroll
            for (int c = 0; c < NK; ++c) s[c][0] = s[c][1] = s[c][2] = s[c][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KD; ++kk) {
#pragma unroll
                for (int c = 0; c < NK / 2; ++c) {
                    unsigned int b[4];
                    fa_ldsm4(b, kt + (c * 16 * LD + kk * 16) * E);
                    fa_mma<T>(s[2 * c], qf[kk], b[0], b[1]);
                    fa_mma<T>(s[2 * c + 1], qf[kk], b[2], b[3]);
                }
            }
            // Scores of rows row0 (e < 2) and row0 + 8 (e >= 2), keys
            // jw + c*8 + 2tq + e%2, to the log2 domain. The form is chosen
            // per span (the same for the whole warp) so that the common ones
            // are straight-line code: where every positional rule passes, a
            // multiply, or one FMA with the mask's bias (a padding mask: one
            // bias per key for both rows), and in a tail span (the keys end
            // inside it) -inf past the last key; else every rule per score.
            // Rows past the query count need no rule (nor, without a mask
            // per row, a mask).
            const unsigned int kn = t.k1 - jw < (unsigned int)KW ? t.k1 - jw : (unsigned int)KW;
            const bool tail = kn < (unsigned int)KW;
            const bool fast = fa_rules_pass(p, t, jw, kn, row0 - g, row0 - g + 16u) && p.softcap <= 0.0f &&
                              (keyed || !masked || row0 - g + 16u <= p.sq);
            float mx[2] = {-att_inf<float>(), -att_inf<float>()};
            if (fast && !masked && !tail) {
#pragma unroll
                for (int c = 0; c < NK; ++c) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        s[c][e] *= sl2;
                        mx[e / 2] = fmaxf(mx[e / 2], s[c][e]);
                    }
                }
            } else if (fast) {
                float km[NK][2];
                if (keyed) {
#pragma unroll
                    for (int c = 0; c < NK; ++c) {
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const unsigned int j = jw + c * 8u + 2u * tq + e;
                            km[c][e] = j < t.k1 ? fa_bias<T>(p, mask, rows[0].mrow, j) * l2e : 0.0f;
                        }
                    }
                }
#pragma unroll
                for (int c = 0; c < NK; ++c) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const unsigned int j = jw + c * 8u + 2u * tq + (e % 2);
                        float x;
                        if (!masked) {
                            x = s[c][e] * sl2;
                        } else {
                            const float bias = keyed         ? km[c][e % 2]
                                               : j < t.k1 ? fa_bias<T>(p, mask, rows[e / 2].mrow, j) * l2e
                                                          : 0.0f;
                            x = fmaf(s[c][e], sl2, bias);
                        }
                        if (tail && j >= t.k1) x = -att_inf<float>();
                        s[c][e] = x;
                        mx[e / 2] = fmaxf(mx[e / 2], x);
                    }
                }
            } else {
#pragma unroll
                for (int c = 0; c < NK; ++c) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const unsigned int j = jw + c * 8u + 2u * tq + (e % 2);
                        const FaRow& row = rows[e / 2];
                        const float bias = masked ? fa_mask_at<T>(p, mask, t, row, j) : 0.0f;
                        s[c][e] = fa_apply(p, t, row, j, s[c][e] * p.scale, bias) * l2e;
                        mx[e / 2] = fmaxf(mx[e / 2], s[c][e]);
                    }
                }
            }
            // The online softmax, without branches: a row none of whose
            // scores so far is above FA_MASKED is not live (its maximum
            // stays -inf, its reference 0, every probability 0).
            float alpha[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float x = mx[r];
                x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
                x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
                const float mnew = fmaxf(m[r], x);
                const bool live = mnew > FA_MASKED;
                const float ref = live ? mnew : 0.0f;
                // m is -inf or above FA_MASKED: 2^(m - ref) is 0 for -inf.
                alpha[r] = live ? fa_exp2(m[r] - ref) : 1.0f;
                m[r] = live ? mnew : m[r];
                mx[r] = ref;
                l[r] *= alpha[r];
            }
#pragma unroll
            for (int c = 0; c < NK; ++c) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    // 0 for a score at or below FA_MASKED: below a live
                    // row's maximum by far more than 2^-126 reaches, or, in
                    // a row not live, 2^score itself.
                    s[c][e] = fa_exp2(s[c][e] - mx[e / 2]);
                    l[e / 2] += s[c][e];
                }
            }
#pragma unroll
            for (int n2 = 0; n2 < ND; ++n2) {
                o[n2][0] *= alpha[0];
                o[n2][1] *= alpha[0];
                o[n2][2] *= alpha[1];
                o[n2][3] *= alpha[1];
            }
#pragma unroll
            for (int c = 0; c < NK / 2; ++c) {
                // P over keys c*16..c*16+15 as an A fragment: the score tiles 2c and 2c+1.
                const unsigned int a[4] = {fa_pack<T>(s[2 * c][0], s[2 * c][1]),
                                           fa_pack<T>(s[2 * c][2], s[2 * c][3]),
                                           fa_pack<T>(s[2 * c + 1][0], s[2 * c + 1][1]),
                                           fa_pack<T>(s[2 * c + 1][2], s[2 * c + 1][3])};
#pragma unroll
                for (int dp = 0; dp < ND / 2; ++dp) {
                    unsigned int b[4];
                    fa_ldsm4_t(b, vt + (c * 16 * LD + dp * 16) * E);
                    fa_mma<T>(o[2 * dp], a, b[0], b[1]);
                    fa_mma<T>(o[2 * dp + 1], a, b[2], b[3]);
                }
            }
        }
        // Every warp is done with this buffer before it is filled again.
        __syncthreads();
        if (more && !async) fa_stage_kv<T, BK, D, LD>(kb, kb + BK * LD, k, v, p, t, j0 + BK, false);
        if (async) cur ^= 1u;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        for (int w = 1; w < 4; w <<= 1) l[r] += __shfl_xor_sync(0xffffffffu, l[r], w);
    }
    if constexpr (WK == 1) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const unsigned int i = row0 + r * 8u;
            if (i >= p.sq) continue;
            T* yr = y + (unsigned long long)t.b * p.y_s[0] + (unsigned long long)t.h * p.y_s[1] +
                    (unsigned long long)i * p.y_s[2];
            const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
#pragma unroll
            for (int n2 = 0; n2 < ND; ++n2) {
                const unsigned int f = n2 * 8u + 2u * tq;
                if (f < p.dv) yr[f] = T(o[n2][2 * r] * inv);
                if (f + 1u < p.dv) yr[f + 1u] = T(o[n2][2 * r + 1] * inv);
            }
        }
    } else {
        // Each warp's share of its rows (maxima, sums, unnormalised outputs)
        // into shared memory (free: the loop ends on a barrier), then every
        // thread merges whole output features, rescaled to the rows' maxima.
        float* const ob = (float*)sm;
        float* const mb = ob + WK * BQ * OD;
        float* const lb = mb + WK * BQ;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const unsigned int rr = wk * BQ + wq * 16u + g + 8u * r;
            if (tq == 0u) {
                mb[rr] = m[r];
                lb[rr] = l[r];
            }
#pragma unroll
            for (int n2 = 0; n2 < ND; ++n2) {
                *(float2*)&ob[rr * OD + n2 * 8 + 2u * tq] = make_float2(o[n2][2 * r], o[n2][2 * r + 1]);
            }
        }
        __syncthreads();
        for (unsigned int x = threadIdx.x; x < (unsigned int)(BQ * D); x += FA_THREADS) {
            const unsigned int r = x / D, f = x % D, i = t.q0 + r;
            if (i >= p.sq || f >= p.dv) continue;
            float mm = -att_inf<float>();
#pragma unroll
            for (int w = 0; w < WK; ++w) mm = fmaxf(mm, mb[w * BQ + r]);
            float acc = 0.0f, sum = 0.0f;
            if (mm > FA_MASKED) {
#pragma unroll
                for (int w = 0; w < WK; ++w) {
                    const float mw = mb[w * BQ + r];
                    if (mw > FA_MASKED) {
                        const float a = fa_exp2(mw - mm);
                        acc += a * ob[(w * BQ + r) * OD + f];
                        sum += a * lb[w * BQ + r];
                    }
                }
            }
            y[(unsigned long long)t.b * p.y_s[0] + (unsigned long long)t.h * p.y_s[1] +
              (unsigned long long)i * p.y_s[2] + f] = T(sum > 0.0f ? acc / sum : 0.0f);
        }
    }
}

#define FA_ENTRY(name, T, body)                                                                             \
    extern "C" __global__ void __launch_bounds__(FA_THREADS)                                                \
        name(T* y, const T* q, const T* k, const T* v, const unsigned char* mask, const int* nonpad, T* qk, \
             AttentionParams p) {                                                                           \
        body(y, q, k, v, mask, nonpad, p);                                                                  \
    }
// One module per element type (FA_F32, FA_F16 or FA_BF16 defined before this
// file), so a model compiles only the entries it can use.
#ifdef FA_F32
FA_ENTRY(flash_attention_f32_d64, float, flash_f32<64>)
FA_ENTRY(flash_attention_f32_d128, float, flash_f32<128>)
#endif
#define FA_MMA(T, D, BK, WQ) flash_mma<T, D, BK, WQ>
// Split-key entries (FA_SPLIT) in a module of their own: the 16-row (32 for
// D = 128) tiles, for grids too small to fill the device.
#if defined(FA_F16) && !defined(FA_SPLIT)
FA_ENTRY(flash_attention_f16_d32, rlx_f16, (FA_MMA(rlx_half, 32, 64, 4)))
FA_ENTRY(flash_attention_f16_d64, rlx_f16, (FA_MMA(rlx_half, 64, 64, 4)))
FA_ENTRY(flash_attention_f16_d128, rlx_f16, (FA_MMA(rlx_half, 128, 32, 4)))
#endif
#if defined(FA_F16) && defined(FA_SPLIT)
FA_ENTRY(flash_attention_f16_d32_split, rlx_f16, (FA_MMA(rlx_half, 32, 64, 1)))
FA_ENTRY(flash_attention_f16_d64_split, rlx_f16, (FA_MMA(rlx_half, 64, 64, 1)))
FA_ENTRY(flash_attention_f16_d128_split, rlx_f16, (FA_MMA(rlx_half, 128, 32, 2)))
#endif
#if defined(FA_BF16) && !defined(FA_SPLIT)
FA_ENTRY(flash_attention_bf16_d32, rlx_bf16, (FA_MMA(rlx_bf16, 32, 64, 4)))
FA_ENTRY(flash_attention_bf16_d64, rlx_bf16, (FA_MMA(rlx_bf16, 64, 64, 4)))
FA_ENTRY(flash_attention_bf16_d128, rlx_bf16, (FA_MMA(rlx_bf16, 128, 32, 4)))
#endif
#if defined(FA_BF16) && defined(FA_SPLIT)
FA_ENTRY(flash_attention_bf16_d32_split, rlx_bf16, (FA_MMA(rlx_bf16, 32, 64, 1)))
FA_ENTRY(flash_attention_bf16_d64_split, rlx_bf16, (FA_MMA(rlx_bf16, 64, 64, 1)))
FA_ENTRY(flash_attention_bf16_d128_split, rlx_bf16, (FA_MMA(rlx_bf16, 128, 32, 2)))
#endif
