// Attention's score rules, shared by the row kernel (attention.cu) and the
// tiled kernels (flash_attention.cu): the bias a score gets from key
// lengths, causality, the key window and the mask, and the softcap. Flags of
// AttentionParams: 1 mask, 2 bool mask, 4 causal, 8 nonpad lengths, 16
// nonpad is i64, 32 QK output, 64 the first query row sits at
// nonpad[b] - sq. A score is raw = (q . k) * scale; capped = softcap *
// tanh(raw / softcap); biased = capped + bias (-inf where masked). A row
// whose every key is masked gives zeros, as on the CPU.

template <typename C>
__device__ __forceinline__ C att_inf() { return (C)__int_as_float(0x7f800000); }

// The bias of score (b, h, i, j): -inf where a key length, the causal
// bound, a key window or a bool mask excludes the key, plus a float mask.
template <typename T, typename C>
__device__ __forceinline__ C att_bias(const AttentionParams& p, const unsigned char* mask, const int* nonpad,
                                      unsigned int b, unsigned int h, unsigned int i, unsigned int j) {
    C bias = (C)0;
    long long np = 0;
    if (p.flags & 8u) {
        np = (p.flags & 16u) ? ((const long long*)nonpad)[b] : (long long)nonpad[b];
        if ((long long)j >= np) return -att_inf<C>();
    }
    // Query position minus key position, bottom-right aligned.
    const long long off = (p.flags & 64u) ? np - (long long)p.sq : (long long)p.past;
    const long long diff = (long long)i + off - (long long)j;
    if (((p.flags & 4u) && diff < 0) || (p.left >= 0 && diff > p.left) || (p.right >= 0 && -diff > p.right)) {
        return -att_inf<C>();
    }
    if (p.flags & 1u) {
        if (j >= p.mask_len) return -att_inf<C>();
        unsigned long long mi = (unsigned long long)b * p.mask_s[0] + (unsigned long long)h * p.mask_s[1] +
                                (unsigned long long)i * p.mask_s[2] + (unsigned long long)j * p.mask_s[3];
        if (p.flags & 2u) {
            if (mask[mi] == 0) return -att_inf<C>();
        } else {
            bias += (C)((const T*)mask)[mi];
        }
    }
    return bias;
}

template <typename C>
__device__ __forceinline__ C att_cap(const AttentionParams& p, C raw) {
    return p.softcap > 0.0f ? (C)p.softcap * tanh(raw / (C)p.softcap) : raw;
}

