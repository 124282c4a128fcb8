// Convolution helpers around cuDNN: the explicit zero padding of an input
// whose pads are asymmetric (cuDNN takes one pad per spatial dim; the
// symmetric part stays with cuDNN, the rest is padded here into scratch).
// PadParams: n output elements, rank (4 or 5), out_dims, in_dims, begin
// (leading pad per dim). Elements move as bytes of their size (2, 4, 8).

template <typename T>
__device__ __forceinline__ void conv_pad(T* y, const T* x, const PadParams& p) {
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned long long rem = i, src = 0, scale = 1;
        bool inside = true;
        for (int d = (int)p.rank - 1; d >= 0; --d) {
            unsigned long long o = rem % p.out_dims[d];
            rem /= p.out_dims[d];
            long long s = (long long)o - (long long)p.begin[d];
            if (s < 0 || s >= (long long)p.in_dims[d]) {
                inside = false;
            }
            src += (unsigned long long)s * scale;
            scale *= p.in_dims[d];
        }
        y[i] = inside ? x[src] : (T)0;
    }
}

extern "C" __global__ void conv_pad_2(unsigned short* y, const unsigned short* x, PadParams p) {
    conv_pad<unsigned short>(y, x, p);
}
extern "C" __global__ void conv_pad_4(unsigned int* y, const unsigned int* x, PadParams p) {
    conv_pad<unsigned int>(y, x, p);
}
extern "C" __global__ void conv_pad_8(unsigned long long* y, const unsigned long long* x, PadParams p) {
    conv_pad<unsigned long long>(y, x, p);
}

// The window of a transposed convolution's full output (CropParams: n output
// elements, rank, out_dims, in_dims, begin): output `o` copies input
// `o + begin` per dim, zero past the input's end (output padding).
template <typename T>
__device__ __forceinline__ void conv_crop(T* y, const T* x, const CropParams& p) {
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned long long rem = i, src = 0, scale = 1;
        bool inside = true;
        for (int d = (int)p.rank - 1; d >= 0; --d) {
            unsigned long long o = rem % p.out_dims[d];
            rem /= p.out_dims[d];
            unsigned long long s = o + p.begin[d];
            if (s >= p.in_dims[d]) {
                inside = false;
            }
            src += s * scale;
            scale *= p.in_dims[d];
        }
        y[i] = inside ? x[src] : (T)0;
    }
}

extern "C" __global__ void conv_crop_2(unsigned short* y, const unsigned short* x, CropParams p) {
    conv_crop<unsigned short>(y, x, p);
}
extern "C" __global__ void conv_crop_4(unsigned int* y, const unsigned int* x, CropParams p) {
    conv_crop<unsigned int>(y, x, p);
}
extern "C" __global__ void conv_crop_8(unsigned long long* y, const unsigned long long* x, CropParams p) {
    conv_crop<unsigned long long>(y, x, p);
}
