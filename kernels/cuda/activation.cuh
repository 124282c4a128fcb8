// Activations of fused epilogues (the epilogue kernels, the tile GEMM), by
// code: 0 none, 1 relu, 2 sigmoid, 3 tanh, 4 gelu (erf), 5 gelu (tanh), 6
// silu, 7 hard swish, 8 relu6 (clip to [0, 6]). They follow the CPU backend (relu keeps NaN; the sigmoids in the
// form 1 / (1 + e^-x)). C is float or double.

template <typename C>
__device__ __forceinline__ C epi_act(C x, unsigned int act) {
    const C one = (C)1;
    switch (act) {
    case 1u: return x < (C)0 ? (C)0 : x;
    case 2u: return one / (one + exp(-x));
    case 3u: return tanh(x);
    case 4u: return (C)0.5 * x * (one + erf(x * (C)0.70710678118654752440));
    case 5u: return (C)0.5 * x * (one + tanh((C)0.79788456080286535588 * (x + (C)0.044715 * x * x * x)));
    case 6u: return x / (one + exp(-x));
    case 7u: {
        const C t = x * (one / (C)6) + (C)0.5;
        return x * (t < (C)0 ? (C)0 : (t > one ? one : t));
    }
    case 8u: {
        // As ONNX Clip: a NaN stays NaN.
        const C v = x < (C)0 ? (C)0 : x;
        return v > (C)6 ? (C)6 : v;
    }
    default: return x;
    }
}


// `v[0..V)` through activation `act`, the switch taken once for the whole
// vector: each case is straight-line code over V independent elements, which
// the compiler interleaves (a switch per element kept the eight erf-GELUs of
// an f16 vector one after another: a 128 x 3072 epilogue ran 440 instructions
// a warp at one issue every 10 cycles).
template <typename C, int V, unsigned int ACT>
__device__ __forceinline__ void epi_act_fixed(C* v) {
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = epi_act<C>(v[j], ACT);
}

template <typename C, int V>
__device__ __forceinline__ void epi_act_vec(C* v, unsigned int act) {
    switch (act) {
    case 1u: epi_act_fixed<C, V, 1u>(v); break;
    case 2u: epi_act_fixed<C, V, 2u>(v); break;
    case 3u: epi_act_fixed<C, V, 3u>(v); break;
    case 4u: epi_act_fixed<C, V, 4u>(v); break;
    case 5u: epi_act_fixed<C, V, 5u>(v); break;
    case 6u: epi_act_fixed<C, V, 6u>(v); break;
    case 7u: epi_act_fixed<C, V, 7u>(v); break;
    case 8u: epi_act_fixed<C, V, 8u>(v); break;
    default: break;
    }
}
