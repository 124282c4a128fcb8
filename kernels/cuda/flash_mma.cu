// Attention, the tensor-core kernel (f16/bf16; flash_attention.cu has the
// tile rules it shares with the f32 kernel). mma.sync m16n8k16 with f32
// accumulation, fragments by ldmatrix, K/V tiles double-buffered by
// cp.async, the probabilities P kept in registers as the A operand of P.V.

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
template <typename T, int R, int D, int LD, int NT>
__device__ __forceinline__ void fa_stage_async(T* s, const T* g, unsigned long long rs, unsigned int rows,
                                               unsigned int cols) {
    constexpr int V = 16 / sizeof(T), C = D / V, RI = NT / C;
    static_assert(NT % C == 0, "whole rows a pass");
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
template <typename T, int BK, int D, int LD, int NT>
__device__ __forceinline__ void fa_stage_kv(T* ks, T* vs, const T* k, const T* v, const AttentionParams& p,
                                            const FaTile& t, unsigned int j0, bool async) {
    const unsigned int n = t.k1 - j0 < (unsigned int)BK ? t.k1 - j0 : (unsigned int)BK;
    const T* kb = fa_at(k, p.k_s, t.b, t.kvh, j0);
    const T* vb = fa_at(v, p.v_s, t.b, t.kvh, j0);
    if (async) {
        fa_stage_async<T, BK, D, LD, NT>(ks, kb, p.k_s[2], n, p.dk);
        fa_stage_async<T, BK, D, LD, NT>(vs, vb, p.v_s[2], n, p.dv);
    } else {
        fa_stage<T, BK, D, LD, NT>(ks, kb, p.k_s[2], n, p.dk, fa_vec(k, p.k_s, p.dk));
        fa_stage<T, BK, D, LD, NT>(vs, vb, p.v_s[2], n, p.dv, fa_vec(v, p.v_s, p.dv));
    }
}

// A padding mask's biases (one per key, the same for every query row of
// the tile's batch entry and head) of keys [j0, j0 + BK) into `mb`, in the log2
// domain, 0 past the last key (hidden there anyway). Plain loads, issued
// before the wait for the K/V tile they go with: a score's bias is then a
// shared-memory read, where loading it there (with its 64-bit address) put
// global latency and a dozen instructions a key on every tile's path.
template <typename T, int BK, int NT>
__device__ __forceinline__ void fa_stage_keyed(float* mb, const AttentionParams& p, const unsigned char* mask,
                                               const FaTile& t, unsigned int j0) {
    const float l2e = 1.4426950408889634f;
    // Recomputed at each stage rather than held: the 64-row tile's
    // registers are all spoken for.
    const unsigned long long mrow = fa_row(p, t, 0u).mrow;
    for (unsigned int x = threadIdx.x; x < (unsigned int)BK; x += NT) {
        const unsigned int j = j0 + x;
        mb[x] = j < t.k1 ? fa_bias<T>(p, mask, mrow, j) * l2e : 0.0f;
    }
}

// The tensor-core kernel's tile shape: WQ x WK warps, WQ over the query
// tile (16 rows each: BQ = 16 WQ) and WK over each BK-key tile (KW = BK / WK
// keys each; the warps' running maxima, sums and outputs merged through
// shared memory at the end). WQ = 4, WK = 1 (64 rows, each warp over whole
// tiles) where the grid has blocks enough; WK = 4 or 2 (16 or 32 rows) where
// 64-row tiles would leave most multiprocessors idle. Shared memory is
// dynamic: Q's staging area (the second K/V buffer: Q moves to registers
// before that buffer is first filled) and two K/V buffers, SE elements,
// which the host's `MmaShape::shared` (attention.rs) passes to the launch.
// A padding mask's biases of each key tile are staged with it in a static
// array of two tiles (at a constant address: no register holds it).
template <typename T, int D, int BK, int WQ, int WK>
struct FaShape {
    static constexpr int NT = 32 * WQ * WK, BQ = 16 * WQ, KW = BK / WK;
    static constexpr int LD = D + 8, KD = D / 16, NK = KW / 8, ND = D / 8;
    static constexpr int QE = BQ * LD, KVE = 2 * BK * LD;
    static constexpr int SE = (QE > KVE ? QE : KVE) + KVE;
    // Whether a padding mask's biases are staged per key tile (below heads
    // of 128, whose 16-row key-split tile then spills) or read in place.
    static constexpr bool STAGE_KEYS = D <= 64;
    // The merge's rows of partial outputs (row stride OD floats), maxima and sums.
    static constexpr int OD = D + 4;
    static_assert(KW % 16 == 0, "whole 16-key steps a warp");
    static_assert(WK == 1 || (WK * BQ * (OD + 2)) * 4 <= SE * (int)sizeof(T), "the merge fits");
};

__device__ __forceinline__ unsigned int fa_dynamic_smem() {
    unsigned int r;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}

// RULES: whether a per-score rule (causality, a key window, softcap) may
// hide or change scores; MASKS: whether a mask may. Without rules
// (`_plain` entries: encoders), every span is scored on the fast paths and
// the per-score path is not compiled: it made the kernel 9,664
// instructions, and a BERT-base layer's warps waited on instruction
// fetches 45% of their stalls (ncu, H200). Without a mask either
// (`_unmasked`: ViT), the d64 entry is 2,557 PTX lines against 4,151.
template <typename T, int D, int BK, int WQ, int WK, bool RULES, bool MASKS>
__device__ __forceinline__ void flash_mma(T* y, const T* q, const T* k, const T* v, const unsigned char* mask,
                                          const int* nonpad, const AttentionParams& p) {
    using S = FaShape<T, D, BK, WQ, WK>;
    constexpr int NT = S::NT, BQ = S::BQ, KW = S::KW, LD = S::LD, KD = S::KD, NK = S::NK, ND = S::ND;
    constexpr int KVE = S::KVE, OD = S::OD;
    extern __shared__ __align__(16) unsigned char fa_dyn[];
    // A launch without the shared memory this shape needs is a planner bug:
    // fail loudly rather than write past the allocation.
    if (fa_dynamic_smem() < (unsigned int)(S::SE * sizeof(T))) __trap();
    T* const sm = (T*)fa_dyn;
    T* const qs = sm + KVE;
    __shared__ __align__(16) float mbs[2 * BK];
    const FaTile t = fa_tile(p, nonpad, BQ);
    const unsigned int warp = threadIdx.x / 32u, lane = threadIdx.x % 32u, g = lane / 4u, tq = lane % 4u;
    const unsigned int wq = warp % WQ, wk = warp / WQ;
    const unsigned int qrows = p.sq - t.q0 < (unsigned int)BQ ? p.sq - t.q0 : (unsigned int)BQ;
    const bool async = fa_vec(k, p.k_s, p.dk) && fa_vec(v, p.v_s, p.dv);
    const bool masked = MASKS && (p.flags & 1u) != 0u;
    // A mask that is the same for every query row (a padding mask): one
    // bias per key serves every row, staged per key tile into `mbs`.
    const bool keyed = masked && p.mask_s[2] == 0u;
    const bool staged = S::STAGE_KEYS && keyed;
    // The first K/V tile goes in flight with Q.
    if (t.k0 < t.k1) fa_stage_kv<T, BK, D, LD, NT>(sm, sm + BK * LD, k, v, p, t, t.k0, async);
    if (staged && t.k0 < t.k1) fa_stage_keyed<T, BK, NT>(mbs, p, mask, t, t.k0);
    fa_stage<T, BQ, D, LD, NT>(qs, fa_at(q, p.q_s, t.b, t.h, t.q0), p.q_s[2], qrows, p.dk, fa_vec(q, p.q_s, p.dk));
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
    // Running maxima and sums in the log2 domain, of rows row0 and row0 + 8
    // (the warp's rows: [wr0, wr0 + 16)).
    float m[2] = {-att_inf<float>(), -att_inf<float>()}, l[2] = {0.0f, 0.0f};
    const unsigned int wr0 = t.q0 + wq * 16u, row0 = wr0 + g;
    // Where the mask's rows of row0 and row0 + 8 start (one row where keyed),
    // where the mask is read in place; a row past the queries reads the
    // last one's (its scores are never stored).
    const unsigned int last = p.sq - 1u;
    const unsigned long long m0 = masked && !staged ? fa_row(p, t, row0 < last ? row0 : last).mrow : 0ull;
    const unsigned long long m1 = masked && !keyed ? fa_row(p, t, row0 + 8u < last ? row0 + 8u : last).mrow : m0;
    unsigned int cur = 0;
    for (unsigned int j0 = t.k0; j0 < t.k1; j0 += BK) {
        // Next tile in flight while this one is scored.
        const bool more = j0 + BK < t.k1;
        T* const kb = sm + cur * KVE;
        if (more && async) {
            T* const nb = sm + (cur ^ 1u) * KVE;
            fa_stage_kv<T, BK, D, LD, NT>(nb, nb + BK * LD, k, v, p, t, j0 + BK, true);
            if (staged) fa_stage_keyed<T, BK, NT>(mbs + (cur ^ 1u) * BK, p, mask, t, j0 + BK);
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
            // jw + c*8 + 2tq + e%2, toward the log2 domain. The form is
            // chosen per span (the same for the whole warp) so that the
            // common ones are straight-line code: where every positional rule
            // passes, the raw score (its scale folds into the exponent's FMA
            // below: `mul`), or one FMA with the mask's bias (a padding mask:
            // one bias per key for both rows), and in a tail span (the keys
            // end inside it) -inf past the last key; else every rule per
            // score. Rows past the query count need no rule (nor, without a
            // mask per row, a mask).
            const unsigned int kn = t.k1 - jw < (unsigned int)KW ? t.k1 - jw : (unsigned int)KW;
            const bool tail = kn < (unsigned int)KW;
            const bool fast = !RULES || (fa_rules_pass(p, t, jw, kn, wr0, wr0 + 16u) && p.softcap <= 0.0f &&
                                         (keyed || !masked || wr0 + 16u <= p.sq));
            // A staged tile of zero biases (a padding mask over keys that
            // are all there: every key of an unpadded sequence) is scored as
            // without a mask (the encoder at 1536 positions spent 91 us a
            // layer where the same shapes unmasked take 63).
            bool unmasked = !masked;
            if (staged && fast && !tail) {
                const float* const mw = mbs + cur * BK + wk * KW;
                bool bias = false;
#pragma unroll
                for (int x = 0; x < KW; x += 32) bias |= x + (int)lane < KW && mw[x + lane] != 0.0f;
                unmasked = !__any_sync(0xffffffffu, bias);
            }
            const bool raw = fast && unmasked && !tail && sl2 > 0.0f;
            // Each score x becomes 2^(x * mul - ref), ref its row's maximum of x * mul.
            const float mul = raw ? sl2 : 1.0f;
            float mx[2] = {-att_inf<float>(), -att_inf<float>()};
            if (raw) {
#pragma unroll
                for (int c = 0; c < NK; ++c) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) mx[e / 2] = fmaxf(mx[e / 2], s[c][e]);
                }
            } else if (fast) {
                // A padding mask's biases: read from the staged tile as
                // each score takes its own (an array of them held 16
                // registers, and the 64-row tile spilled), or loaded here.
                const float* const mt = mbs + cur * BK + wk * KW + 2u * tq;
                float km[NK][2];
                if constexpr (!S::STAGE_KEYS) {
                    if (keyed) {
#pragma unroll
                        for (int c = 0; c < NK; ++c) {
#pragma unroll
                            for (int e = 0; e < 2; ++e) {
                                const unsigned int j = jw + c * 8u + 2u * tq + e;
                                km[c][e] = j < t.k1 ? fa_bias<T>(p, mask, m0, j) * l2e : 0.0f;
                            }
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
                            const float bias = staged     ? mt[c * 8 + e % 2]
                                               : keyed    ? km[c][e % 2]
                                               : j < t.k1 ? fa_bias<T>(p, mask, e < 2 ? m0 : m1, j) * l2e
                                                          : 0.0f;
                            x = fmaf(s[c][e], sl2, bias);
                        }
                        if (tail && j >= t.k1) x = -att_inf<float>();
                        s[c][e] = x;
                        mx[e / 2] = fmaxf(mx[e / 2], x);
                    }
                }
            } else if constexpr (RULES) {
                const FaRow rows[2] = {fa_row(p, t, row0), fa_row(p, t, row0 + 8u)};
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
            float alpha[2], ref[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float x = mx[r];
                x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
                x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
                // mul > 0: the maximum of x * mul is max(x) * mul (-inf stays -inf).
                const float mnew = fmaxf(m[r], x * mul);
                const bool live = mnew > FA_MASKED;
                ref[r] = live ? mnew : 0.0f;
                // m is -inf or above FA_MASKED: 2^(m - ref) is 0 for -inf.
                alpha[r] = live ? fa_exp2(m[r] - ref[r]) : 1.0f;
                m[r] = live ? mnew : m[r];
                l[r] *= alpha[r];
            }
#pragma unroll
            for (int c = 0; c < NK; ++c) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    // 0 for a score at or below FA_MASKED: below a live
                    // row's maximum by far more than 2^-126 reaches, or, in
                    // a row not live, 2^score itself.
                    s[c][e] = fa_exp2(fmaf(s[c][e], mul, -ref[e / 2]));
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
        if (more && !async) {
            fa_stage_kv<T, BK, D, LD, NT>(kb, kb + BK * LD, k, v, p, t, j0 + BK, false);
            if (staged) fa_stage_keyed<T, BK, NT>(mbs + cur * BK, p, mask, t, j0 + BK);
        }
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
        for (unsigned int x = threadIdx.x; x < (unsigned int)(BQ * D); x += NT) {
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

// An entry per (type, shape): its name, element type, head size D, key
// tile BK, warps over queries WQ and over keys WK (FaShape), and the blocks
// a multiprocessor should hold, which caps the registers a thread. The
// host's table (attention.rs, `flash_entry`) names the same shapes.
// Measured on an H200 (scripts/attention_bench.py): the 64-row D = 64 tile
// at three blocks (168 registers) against two (181): 61 against 79 us at
// 12 x 1536 queries; D = 128 with 64-key tiles (70 KiB of shared memory,
// two blocks) against 32-key ones: 171 against 209 us at 16 x 2048.
// A module defining FA_PLAIN holds the entries without per-score rules,
// named with `_plain` after the shape; FA_UNMASKED, without rules or a mask
// (`_unmasked`).
#if defined(FA_UNMASKED)
#define FA_FORM false, false
#define FA_NAME(name) name##_unmasked
#elif defined(FA_PLAIN)
#define FA_FORM false, true
#define FA_NAME(name) name##_plain
#else
#define FA_FORM true, true
#define FA_NAME(name) name
#endif
#define FA_MMA(name, T, D, BK, WQ, WK, BLOCKS) \
    FA_ENTRY(FA_NAME(name), T, 32 * WQ * WK, BLOCKS, (flash_mma<T, D, BK, WQ, WK, FA_FORM>))
#define FA_TYPE(t, T)                                           \
    FA_MMA(flash_attention_##t##_d32, T, 32, 64, 4, 1, 3)       \
    FA_MMA(flash_attention_##t##_d64, T, 64, 64, 4, 1, 3)       \
    FA_MMA(flash_attention_##t##_d128, T, 128, 64, 4, 1, 2)
// Key-split entries (FA_SPLIT) in a module of their own: 16-row (32 for
// D = 128) tiles, for grids too small to fill the device.
#define FA_TYPE_SPLIT(t, T)                                         \
    FA_MMA(flash_attention_##t##_d32_split, T, 32, 64, 1, 4, 3)     \
    FA_MMA(flash_attention_##t##_d64_split, T, 64, 64, 1, 4, 3)     \
    FA_MMA(flash_attention_##t##_d128_split, T, 128, 32, 2, 2, 3)
#if defined(FA_F16) && !defined(FA_SPLIT)
FA_TYPE(f16, rlx_half)
#endif
#if defined(FA_F16) && defined(FA_SPLIT)
FA_TYPE_SPLIT(f16, rlx_half)
#endif
#if defined(FA_BF16) && !defined(FA_SPLIT)
FA_TYPE(bf16, rlx_bf16)
#endif
#if defined(FA_BF16) && defined(FA_SPLIT)
FA_TYPE_SPLIT(bf16, rlx_bf16)
#endif
