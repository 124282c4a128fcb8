// Control-flow kernels: the slab copy that moves values into and out of
// subgraph bodies (optionally at a slice picked by the loop counter) and the
// loop counter itself. Parameter structs: SlabCopyParams and CounterParams
// (rlx-gpu control.rs), prepended by the host from their layouts.

// Copies `rows` rows of `inner` bytes; row r of the source starts at
// src + r * src_stride (+ src_step * idx with flag 1), of the destination
// likewise (flag 2). idx is the i64 loop counter (flag 8), reversed as
// len - 1 - counter with flag 4. A grid-stride loop over destination units
// (words when every offset, stride and step is 4-byte aligned, else bytes):
// any grid is correct.
extern "C" __global__ void slab_copy(unsigned char* dst, const unsigned char* src,
                                     const long long* counter, SlabCopyParams p) {
    rlx_grid_wait();
    unsigned long long idx = 0;
    if (p.flags & 8u) {
        idx = (unsigned long long)counter[0];
        if (p.flags & 4u) {
            idx = (unsigned long long)p.len - 1ull - idx;
        }
    }
    const unsigned char* s0 = src + ((p.flags & 1u) ? idx * p.src_step : 0ull);
    unsigned char* d0 = dst + ((p.flags & 2u) ? idx * p.dst_step : 0ull);
    unsigned long long span =
        (unsigned long long)(p.rows - 1u) * p.dst_stride + p.inner;
    unsigned long long align = (unsigned long long)s0 | (unsigned long long)d0 |
                               p.inner | p.src_stride | p.dst_stride;
    if ((align & 3ull) == 0ull) {
        for (unsigned long long q = rlx_thread() * 4ull; q < span; q += rlx_threads() * 4ull) {
            unsigned long long r = q / p.dst_stride;
            unsigned long long j = q - r * p.dst_stride;
            if (j < p.inner) {
                *(unsigned int*)(d0 + q) = *(const unsigned int*)(s0 + r * p.src_stride + j);
            }
        }
        return;
    }
    for (unsigned long long q = rlx_thread(); q < span; q += rlx_threads()) {
        unsigned long long r = q / p.dst_stride;
        unsigned long long j = q - r * p.dst_stride;
        if (j < p.inner) {
            d0[q] = s0[r * p.src_stride + j];
        }
    }
}

// Sets the i64 loop counter to zero (increment == 0) or adds one.
extern "C" __global__ void counter(long long* counter, CounterParams p) {
    rlx_grid_wait();
    if (p.increment == 0u) {
        counter[0] = 0;
    } else {
        counter[0] += 1;
    }
}
