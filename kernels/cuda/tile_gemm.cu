// Tile GEMM: `c = act(a b + bias)` for products too small for cuBLASLt to
// pay its way (a transformer's projections at a few tokens: cuBLASLt's
// kernels for 8x16x16 take about 10 us each on the H100, this one about
// two). Row-major, no transposes: a [m, k] (row stride lda), b [k, n]
// (ldb), c [m, n] (ldc), `batch` such products `stride_*` elements apart.
//
// One block of 256 threads per 16x16 tile of c, a thread per element; the
// k dim goes through shared memory 16 at a time. The block's linear index
// (folded grids: x + y * grid_x) is batch-major, then tile rows, then tile
// columns. f16 and bf16 accumulate in float, f64 in double; f32 in fp32
// (exact: no TF32). flags bit 0: add bias[col] (a bias along n); `act` is
// activation.cuh's code.

#define RLX_TILE 16

template <typename T, typename C>
__device__ __forceinline__ void tile_gemm(const T* a, const T* b, T* c, const T* bias,
                                          const TileGemmParams& p) {
    __shared__ C as[RLX_TILE][RLX_TILE + 1];
    __shared__ C bs[RLX_TILE][RLX_TILE + 1];
    const unsigned int block = blockIdx.x + blockIdx.y * gridDim.x;
    const unsigned int tn = block % p.tiles_n;
    const unsigned int rest = block / p.tiles_n;
    const unsigned int tm = rest % p.tiles_m;
    const unsigned int z = rest / p.tiles_m;
    // A folded grid may hold more blocks than tiles: the whole block leaves.
    if (z >= p.batch) return;
    const unsigned int tx = threadIdx.x % RLX_TILE, ty = threadIdx.x / RLX_TILE;
    const unsigned int row = tm * RLX_TILE + ty, col = tn * RLX_TILE + tx;
    a += (unsigned long long)z * p.stride_a;
    b += (unsigned long long)z * p.stride_b;
    c += (unsigned long long)z * p.stride_c;
    // The A element this thread stages: row tm*16+ty, k column k0+tx.
    const bool a_row = row < p.m, b_col = col < p.n;
    C acc = (C)0;
    for (unsigned int k0 = 0; k0 < p.k; k0 += RLX_TILE) {
        const unsigned int ka = k0 + tx, kb = k0 + ty;
        as[ty][tx] = a_row && ka < p.k ? (C)a[(unsigned long long)row * p.lda + ka] : (C)0;
        bs[ty][tx] = b_col && kb < p.k ? (C)b[(unsigned long long)kb * p.ldb + col] : (C)0;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < RLX_TILE; ++j) acc += as[ty][j] * bs[j][tx];
        __syncthreads();
    }
    if (a_row && b_col) {
        if (p.flags & 1u) acc += (C)bias[col];
        c[(unsigned long long)row * p.ldc + col] = (T)(epi_act<C>(acc, p.act));
    }
}

#define RLX_TILE_GEMM(NAME, T, C)                                                               \
    extern "C" __global__ void __launch_bounds__(RLX_TILE * RLX_TILE)                           \
        tile_gemm_##NAME(const T* a, const T* b, T* c, const T* bias, TileGemmParams p) {       \
        rlx_grid_wait();                                                                        \
        tile_gemm<T, C>(a, b, c, bias, p);                                                      \
    }

RLX_TILE_GEMM(f32, float, float)
RLX_TILE_GEMM(f64, double, double)
RLX_TILE_GEMM(f16, rlx_f16, float)
RLX_TILE_GEMM(bf16, rlx_bf16, float)
