// Products of a few rows against a wide matrix: `c = act(a b + bias)` with
// a [m, k] (row stride lda, m at most R), b [k, n] row-major (ldb), c [m, n]
// (ldc), as a decoder's step multiplies each layer's weights by one row per
// sequence. Such a product reads b once and is bound by memory, so the work
// is cut for as many loads in flight as the device holds: a block of
// RG_WARPS warps covers LR * V columns. A warp's lanes form 32 / LR groups
// of LR lanes; each group reads one row of k (LR lanes of V consecutive
// columns, one 16-byte load where V fills it: a 128-byte line at LR 8), so
// one warp step reads 32 / LR rows, and the warps of a block interleave
// over its share of k (warp w takes row groups w, w + RG_WARPS, ...).
// Blocks along k (`splits`) divide k further. Narrow column tiles (small
// LR) give a matrix of few columns (n = 768) enough blocks without more
// splits. The block's slice of a goes to shared memory first (as float),
// where the lanes of a group read it by broadcast.
//
// Sums stay in float whatever T is. A warp's row groups meet by shuffles,
// the warps' partial sums in shared memory, in a fixed order; with one split
// the block stores c. Else each block writes its sums to `part` ([splits,
// m, n] floats) and takes a ticket of its column tile (`tickets`, one
// counter a tile, zero when the plan's constants are uploaded); the block
// that takes the last ticket adds the tile's partial sums in a fixed order
// (the same every run), stores c, and puts the counter back to zero for the
// next launch. One launch: no merge kernel behind each product. The linear
// block index (folded grids: x + y * grid_x) is split-major, then column
// tile.

#define RG_WARPS 8
#define RG_KCHUNK 1024

template <typename T, int V>
struct __align__(sizeof(T) * V) RgPack {
    T v[V];
};

template <typename T, int V, int R, int LR>
__device__ __forceinline__ void row_gemv(const T* a, const T* b, T* c, const T* bias, float* part,
                                         unsigned int* tickets, const RowGemvParams& p) {
    constexpr int COLS = LR * V;
    // Rows of k a warp step reads (one a lane group).
    constexpr int KR = 32 / LR;
    // a's slice, then the warps' sums, RR rows at a time.
    constexpr int SMEM = R * RG_KCHUNK > RG_WARPS * COLS ? R * RG_KCHUNK : RG_WARPS * COLS;
    constexpr int RR = SMEM / (RG_WARPS * COLS) < R ? SMEM / (RG_WARPS * COLS) : R;
    __shared__ float as[SMEM];
    const unsigned int block = blockIdx.x + blockIdx.y * gridDim.x;
    const unsigned int tile = block % p.tiles, split = block / p.tiles;
    // A folded grid may hold more blocks than work: the whole block leaves.
    if (split >= p.splits) return;
    const unsigned int k0 = split * p.kchunk;
    const unsigned int kn = (p.k - k0 < p.kchunk) ? p.k - k0 : p.kchunk;
    const unsigned int warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
    const unsigned int kr = lane / (unsigned int)LR, cl = lane % (unsigned int)LR;
    const unsigned int col0 = tile * COLS + cl * V;
    // With V > 1 the host asks n and ldb to be multiples of V, so a lane's
    // vector is whole or wholly past n. Steps go U at a time, their loads
    // issued before any is used (a loop that tests its bound between loads
    // keeps one in flight a lane), and the next U are loaded while these
    // are summed. The first U go out before a's slice is staged. A lane's
    // rows of k: first + i * kstride for i < steps.
    // Scalar lanes (V = 1: n odd, a logits head) keep more loads in flight.
    constexpr int U = V == 1 ? 16 : R == 1 ? 8 : 4;
    const bool live = col0 < p.n;
    const unsigned int first = warp * KR + kr, kstride = RG_WARPS * KR;
    const unsigned int steps = live && kn > first ? (kn - first + kstride - 1) / kstride : 0u;
    const unsigned long long step = (unsigned long long)kstride * p.ldb;
    const T* bp = b + (unsigned long long)(k0 + first) * p.ldb + col0;
    RgPack<T, V> w[U];
    if (steps >= (unsigned int)U) {
#pragma unroll
        for (int u = 0; u < U; ++u) w[u] = *(const RgPack<T, V>*)(bp + u * step);
    }
    // a's slice, eight loads a thread in flight at once: one at a time they
    // were a chain of round trips to L2 (24 a thread at eight rows of 768).
    const unsigned int staged = p.m * kn;
    for (unsigned int i0 = 0; i0 < staged; i0 += 8u * blockDim.x) {
        float x[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const unsigned int i = i0 + j * blockDim.x + threadIdx.x;
            x[j] = i < staged ? (float)a[(unsigned long long)(i / kn) * p.lda + k0 + i % kn] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const unsigned int i = i0 + j * blockDim.x + threadIdx.x;
            if (i < staged) as[(i / kn) * RG_KCHUNK + i % kn] = x[j];
        }
    }
    __syncthreads();
    float acc[R][V];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int v = 0; v < V; ++v) acc[r][v] = 0.0f;
    unsigned int s = 0;
    for (; s + U <= steps; s += U, bp += U * step) {
        // The next U steps, or these again at the last full batch (cached:
        // a load with no condition keeps both batches in registers).
        const T* np = s + 2 * U <= steps ? bp + U * step : bp;
        RgPack<T, V> nx[U];
#pragma unroll
        for (int u = 0; u < U; ++u) nx[u] = *(const RgPack<T, V>*)(np + u * step);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const unsigned int t = first + (s + u) * kstride;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const float x = as[r * RG_KCHUNK + t];
#pragma unroll
                for (int v = 0; v < V; ++v) acc[r][v] += x * (float)w[u].v[v];
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) w[u] = nx[u];
    }
    for (; s < steps; ++s, bp += step) {
        const RgPack<T, V> x1 = *(const RgPack<T, V>*)bp;
        const unsigned int t = first + s * kstride;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float x = as[r * RG_KCHUNK + t];
#pragma unroll
            for (int v = 0; v < V; ++v) acc[r][v] += x * (float)x1.v[v];
        }
    }
    // The warp's row groups: lanes cl, cl + LR, ... hold the same columns.
#pragma unroll
    for (int o = LR; o < 32; o *= 2) {
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int v = 0; v < V; ++v) acc[r][v] += __shfl_xor_sync(0xffffffffu, acc[r][v], o);
    }
    // The warps' sums meet in shared memory (a's slice is done with: its
    // memory holds them), RR rows at once (every row, for all but 16-bit
    // wide tiles), one barrier either side rather than two a row.
    float* red = as;
#pragma unroll
    for (int r0 = 0; r0 < R; r0 += RR) {
        if ((unsigned int)r0 >= p.m) break;
        __syncthreads();
        if (kr == 0u) {
#pragma unroll
            for (int r = 0; r < RR; ++r) {
                if (r0 + r >= R || (unsigned int)(r0 + r) >= p.m) break;
#pragma unroll
                for (int v = 0; v < V; ++v) red[(warp * RR + r) * COLS + cl * V + v] = acc[r0 + r][v];
            }
        }
        __syncthreads();
        const unsigned int rows = p.m - r0 < (unsigned int)RR ? p.m - r0 : (unsigned int)RR;
        for (unsigned int i = threadIdx.x; i < rows * (unsigned int)COLS; i += blockDim.x) {
            const unsigned int r = i / COLS, col = tile * COLS + i % COLS;
            if (col < p.n) {
                float s = 0.0f;
#pragma unroll
                for (int w = 0; w < RG_WARPS; ++w) s += red[(w * RR + r) * COLS + i % COLS];
                const unsigned int row = r0 + r;
                if (p.splits == 1u) {
                    if (p.flags & 1u) s += (float)bias[col];
                    c[(unsigned long long)row * p.ldc + col] = (T)epi_act<float>(s, p.act);
                } else {
                    part[((unsigned long long)split * p.m + row) * p.n + col] = s;
                }
            }
        }
    }
    if (p.splits == 1u) return;
    // Every thread's partial sums out (each fenced, then all at the
    // barrier) before the ticket is taken.
    __threadfence();
    __syncthreads();
    __shared__ unsigned int rg_last;
    if (threadIdx.x == 0) rg_last = atomicAdd(&tickets[tile], 1u) == p.splits - 1u;
    __syncthreads();
    if (!rg_last) return;
    __threadfence();
    const unsigned long long stride = (unsigned long long)p.m * p.n;
    for (unsigned int i = threadIdx.x; i < p.m * (unsigned int)COLS; i += blockDim.x) {
        const unsigned int r = i / COLS, col = tile * COLS + i % COLS;
        if (col >= p.n) continue;
        // Other blocks' sums, past this multiprocessor's L1 (__ldcg), eight
        // splits' loads in flight at once.
        const float* src = part + (unsigned long long)r * p.n + col;
        float q[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        unsigned int sp = 0;
        for (; sp + 8 <= p.splits; sp += 8) {
#pragma unroll
            for (int j = 0; j < 8; ++j) q[j] += __ldcg(src + (sp + j) * stride);
        }
        for (; sp < p.splits; ++sp) q[0] += __ldcg(src + sp * stride);
        float s = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
        if (p.flags & 1u) s += (float)bias[col];
        c[(unsigned long long)r * p.ldc + col] = (T)epi_act<float>(s, p.act);
    }
    if (threadIdx.x == 0) tickets[tile] = 0u;
}

#define RLX_ROW_GEMV(NAME, T, V, R, LR)                                                                 \
    extern "C" __global__ void __launch_bounds__(RG_WARPS * 32, 2)                                       \
        row_gemv_##NAME(const T* a, const T* b, T* c, const T* bias, float* part, unsigned int* tickets,  \
                        RowGemvParams p) {                                                              \
        rlx_grid_wait();                                                                                \
        row_gemv<T, V, R, LR>(a, b, c, bias, part, tickets, p);                                         \
    }

// Entries: dtype, then the lane's columns (a 16-byte vector, or one where n
// or ldb is not a multiple of it), the rows (one, or up to eight), and the
// lanes that share a row of k (32: a warp reads one row a step; 8: four).
#define RLX_ROW_GEMV_LANES(NAME, T, V, R)          \
    RLX_ROW_GEMV(NAME##_l32, T, V, R, 32)          \
    RLX_ROW_GEMV(NAME##_l8, T, V, R, 8)

RLX_ROW_GEMV_LANES(f32_v4_r1, float, 4, 1)
RLX_ROW_GEMV_LANES(f32_v4_r8, float, 4, 8)
RLX_ROW_GEMV_LANES(f32_v1_r1, float, 1, 1)
RLX_ROW_GEMV_LANES(f32_v1_r8, float, 1, 8)
RLX_ROW_GEMV_LANES(f16_v8_r1, rlx_f16, 8, 1)
RLX_ROW_GEMV_LANES(f16_v8_r8, rlx_f16, 8, 8)
RLX_ROW_GEMV_LANES(f16_v1_r1, rlx_f16, 1, 1)
RLX_ROW_GEMV_LANES(f16_v1_r8, rlx_f16, 1, 8)
RLX_ROW_GEMV_LANES(bf16_v8_r1, rlx_bf16, 8, 1)
RLX_ROW_GEMV_LANES(bf16_v8_r8, rlx_bf16, 8, 8)
RLX_ROW_GEMV_LANES(bf16_v1_r1, rlx_bf16, 1, 1)
RLX_ROW_GEMV_LANES(bf16_v1_r8, rlx_bf16, 1, 8)
