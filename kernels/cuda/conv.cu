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
    rlx_grid_wait();
    conv_pad<unsigned short>(y, x, p);
}
extern "C" __global__ void conv_pad_4(unsigned int* y, const unsigned int* x, PadParams p) {
    rlx_grid_wait();
    conv_pad<unsigned int>(y, x, p);
}
extern "C" __global__ void conv_pad_8(unsigned long long* y, const unsigned long long* x, PadParams p) {
    rlx_grid_wait();
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
    rlx_grid_wait();
    conv_crop<unsigned short>(y, x, p);
}
extern "C" __global__ void conv_crop_4(unsigned int* y, const unsigned int* x, CropParams p) {
    rlx_grid_wait();
    conv_crop<unsigned int>(y, x, p);
}
extern "C" __global__ void conv_crop_8(unsigned long long* y, const unsigned long long* x, CropParams p) {
    rlx_grid_wait();
    conv_crop<unsigned long long>(y, x, p);
}

// im2col: the unfolded image of one 2-D convolution input, columns p0 ..
// p0 + cols of col[c * kh * kw + y * kw + x][q] (zero where the window reads
// padding). Im2colParams: total (rows * cols), c, h, w, kh, kw, ow, strides
// sh/sw, dilations dh/dw, begin pads pt/pl, p0, cols. A 2-D grid: blocks
// along y walk the rows (one channel and tap each, decoded once per row),
// threads along x the columns, so a thread divides once per element.
template <typename T>
__device__ __forceinline__ void conv_im2col(const T* x, T* col, const Im2colParams& p) {
    unsigned int rows = p.total / p.cols;
    for (unsigned int r = blockIdx.y; r < rows; r += gridDim.y) {
        unsigned int kr = r / p.kw, kx = r - kr * p.kw;
        unsigned int c = kr / p.kh, ky = kr - c * p.kh;
        const T* xc = x + (unsigned long long)c * p.h * p.w;
        T* out = col + (unsigned long long)r * p.cols;
        long long dy = (long long)ky * p.dh - (long long)p.pt;
        long long dx = (long long)kx * p.dw - (long long)p.pl;
        for (unsigned int q = blockIdx.x * blockDim.x + threadIdx.x; q < p.cols;
             q += gridDim.x * blockDim.x) {
            unsigned int pos = p.p0 + q;
            unsigned int oy = pos / p.ow, ox = pos - oy * p.ow;
            long long iy = (long long)oy * p.sh + dy, ix = (long long)ox * p.sw + dx;
            bool inside = iy >= 0 && iy < (long long)p.h && ix >= 0 && ix < (long long)p.w;
            out[q] = inside ? xc[iy * p.w + ix] : (T)0;
        }
    }
}

extern "C" __global__ void conv_im2col_2(const unsigned short* x, unsigned short* col, Im2colParams p) {
    rlx_grid_wait();
    conv_im2col<unsigned short>(x, col, p);
}
extern "C" __global__ void conv_im2col_4(const unsigned int* x, unsigned int* col, Im2colParams p) {
    rlx_grid_wait();
    conv_im2col<unsigned int>(x, col, p);
}
extern "C" __global__ void conv_im2col_8(const unsigned long long* x, unsigned long long* col, Im2colParams p) {
    rlx_grid_wait();
    conv_im2col<unsigned long long>(x, col, p);
}
