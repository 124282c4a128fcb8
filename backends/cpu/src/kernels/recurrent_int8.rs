//! The products of a quantized LSTM (ORT's DynamicQuantizeLSTM) in 8-bit
//! integers, as ONNX Runtime computes them: the activations (all of `X` for
//! the input projection, `h` at every step) quantized to uint8 over their own
//! range, the weights `q - zero_point` as signed bytes packed once for the
//! VNNI GEMM ([`int8_gemm`]), sums in i32, then `(Σ - zp_a · Σ_k w) ·
//! scale_a · scale_w` per output. A recurrent matrix of hidden 256 is 256 KiB
//! as bytes where it was 1 MiB as f32: every step's product reads it from L2
//! instead of L3. The sums equal those of the f32 path (integers below 2^24
//! are exact in f32), so results do not change.

use super::int8_gemm::{self, k_groups, PackedB};

/// One direction's weights as packed signed bytes.
#[derive(Debug)]
pub(super) struct PackedDir {
    /// `Wᵀ`: k = input, n = gates*hidden.
    pub w: PackedB,
    /// `Rᵀ` for the per-step products.
    pub r: Streamed,
}

/// Columns of one block of [`Streamed`]: eight 16-lane accumulators.
const BLOCK: usize = 8 * 16;

/// `B` (k x n signed bytes) laid out for a product with one row at a time
/// (a recurrent step's `h · Rᵀ`), read front to back in one stream: per
/// block of [`BLOCK`] columns, per group of 4 `k`, the block's 128 columns x
/// 4 bytes (512 contiguous bytes), zero past `k` and `n`. The panels of
/// [`PackedB`] would be eight streams 4 KiB apart.
#[derive(Debug)]
pub(super) struct Streamed {
    k: usize,
    n: usize,
    data: Vec<i8>,
    /// `Σ_k B[k][j]` per column.
    col_sums: Vec<i32>,
}

impl Streamed {
    fn new(k: usize, n: usize, b: impl Fn(usize, usize) -> i8) -> Streamed {
        let groups = k_groups(k) / 4;
        let blocks = n.div_ceil(BLOCK);
        let mut data = vec![0i8; blocks * groups * BLOCK * 4];
        let mut col_sums = vec![0i32; n];
        for j in 0..n {
            for kk in 0..k {
                let v = b(kk, j);
                let at = ((j / BLOCK * groups + kk / 4) * BLOCK + j % BLOCK) * 4 + kk % 4;
                data[at] = v;
                col_sums[j] += i32::from(v);
            }
        }
        Streamed {
            k,
            n,
            data,
            col_sums,
        }
    }

    /// `c[j] = Σ_k a[k] · B[k][j]` for one row `a` of [`k_groups`] bytes;
    /// `c` holds the blocks' padded width.
    fn row(&self, a: &[u8], c: &mut [i32]) {
        let groups = k_groups(self.k) / 4;
        assert!(a.len() >= groups * 4 && c.len() >= self.n.div_ceil(BLOCK) * BLOCK);
        #[cfg(target_arch = "x86_64")]
        if int8_gemm::vnni() {
            // SAFETY: the CPU has VNNI (checked just above); the sizes are
            // asserted above.
            unsafe { self.row_vnni(a, c, groups) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if super::vmath::avx2() {
            let blocks = self.n.div_ceil(BLOCK);
            // SAFETY: the CPU has AVX2; BLOCK is a multiple of 32 and the
            // sizes are asserted above (`data` is blocks x groups x BLOCK x 4).
            unsafe { super::int8_avx2::streamed_row(&self.data, groups, blocks, BLOCK, a, c) };
            return;
        }
        self.row_portable(a, c, groups);
    }

    /// [`Self::row`] one byte pair at a time (`pack` builds a `Streamed`
    /// only where VNNI or AVX2 exists; this keeps `row` total).
    fn row_portable(&self, a: &[u8], c: &mut [i32], groups: usize) {
        for (b, block) in c
            .chunks_exact_mut(BLOCK)
            .take(self.n.div_ceil(BLOCK))
            .enumerate()
        {
            block.fill(0);
            for g in 0..groups {
                let bytes = &self.data[(b * groups + g) * BLOCK * 4..][..BLOCK * 4];
                for (j, out) in block.iter_mut().enumerate() {
                    for q in 0..4 {
                        *out += i32::from(a[g * 4 + q]) * i32::from(bytes[j * 4 + q]);
                    }
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn row_vnni(&self, a: &[u8], c: &mut [i32], groups: usize) {
        use std::arch::x86_64::*;
        let mut b = self.data.as_ptr();
        for block in c.chunks_exact_mut(BLOCK).take(self.n.div_ceil(BLOCK)) {
            let mut acc = [_mm512_setzero_si512(); 8];
            for g in 0..groups {
                let av = _mm512_set1_epi32((a.as_ptr().add(g * 4) as *const i32).read_unaligned());
                for (q, acc) in acc.iter_mut().enumerate() {
                    let bv = _mm512_loadu_si512(b.add(q * 64) as *const _);
                    *acc = _mm512_dpbusd_epi32(*acc, av, bv);
                }
                b = b.add(BLOCK * 4);
            }
            for (q, acc) in acc.iter().enumerate() {
                _mm512_storeu_si512(block.as_mut_ptr().add(q * 16) as *mut _, *acc);
            }
        }
    }
}

/// Packs each direction of `w_int` (`[dirs, gh, input]`) and `r_int`
/// (`[dirs, gh, hidden]`), integers in f32; `None` when a value does not fit
/// a signed byte (uint8 weights, or a zero point off 0) or the CPU has
/// neither VNNI nor AVX2, where the f32 path stays.
pub(super) fn pack(
    w_int: &[f32],
    r_int: &[f32],
    dirs: usize,
    gh: usize,
    input: usize,
    hidden: usize,
) -> Option<Vec<PackedDir>> {
    let fits = |v: &[f32]| v.iter().all(|&x| (-128.0..=127.0).contains(&x));
    if !(int8_gemm::vnni() || super::vmath::avx2())
        || w_int.len() != dirs * gh * input
        || r_int.len() != dirs * gh * hidden
        || !fits(w_int)
        || !fits(r_int)
    {
        return None;
    }
    let transposed = |m: &[f32], k: usize| PackedB::new(k, gh, |kk, j| m[j * k + kk] as i8);
    Some(
        (0..dirs)
            .map(|d| PackedDir {
                w: transposed(&w_int[d * gh * input..][..gh * input], input),
                r: Streamed::new(hidden, gh, |kk, j| {
                    r_int[d * gh * hidden + j * hidden + kk] as i8
                }),
            })
            .collect(),
    )
}

/// `a [rows, k]` quantized to uint8 over its range (which takes in 0), as
/// ONNX Runtime quantizes a GEMM's activations: `scale = (max - min) / 255`,
/// `q = clamp(round(a / scale) + zp, 0, 255)`. Rows padded with zeros to
/// [`k_groups`]; returns the bytes, the zero point and the scale.
fn quantize(a: &[f32], rows: usize, k: usize) -> (Vec<u8>, i32, f32) {
    let (scale, zp) = super::recurrent_f32::u8_range(a);
    let k4 = k_groups(k);
    let mut q = vec![0u8; rows * k4];
    super::vmath::vectorized(|| {
        for (qr, ar) in q.chunks_exact_mut(k4).zip(a.chunks_exact(k)) {
            for (q, &x) in qr.iter_mut().zip(ar) {
                *q = (super::vmath::round_small(x / scale) + zp).clamp(0.0, 255.0) as u8;
            }
        }
    });
    (q, zp as i32, scale)
}

/// `out [rows, n] = (a · R) · scale_a · w_scale[j]` with `a` quantized
/// here, a row at a time (a recurrent step: `rows` is the batch).
pub(super) fn step_product(a: &[f32], rows: usize, r: &Streamed, w_scale: &[f32], out: &mut [f32]) {
    let (q, zp, scale) = quantize(a, rows, r.k);
    let (k4, n) = (k_groups(r.k), r.n);
    let mut acc = vec![0i32; n.div_ceil(BLOCK) * BLOCK];
    for (qa, o) in q.chunks_exact(k4).zip(out.chunks_exact_mut(n)) {
        r.row(qa, &mut acc);
        scale_sums(&acc[..n], zp, &r.col_sums, scale, w_scale, o);
    }
}

/// `out[j] = (acc[j] - zp · col_sums[j]) · scale · w_scale[j]`.
fn scale_sums(
    acc: &[i32],
    zp: i32,
    col_sums: &[i32],
    scale: f32,
    w_scale: &[f32],
    out: &mut [f32],
) {
    super::vmath::vectorized(|| {
        for (((o, &a), &s), &w) in out.iter_mut().zip(acc).zip(col_sums).zip(w_scale) {
            *o = a.wrapping_sub(zp.wrapping_mul(s)) as f32 * (scale * w);
        }
    })
}

/// `out [rows, n] = (a · B) · scale_a · w_scale[j]` with `a` quantized here.
pub(super) fn product(a: &[f32], rows: usize, b: &PackedB, w_scale: &[f32], out: &mut [f32]) {
    let (q, zp, scale) = quantize(a, rows, b.k);
    let (k4, n) = (k_groups(b.k), b.n);
    let block = |first: usize, out: &mut [f32]| {
        let m = out.len() / n;
        let mut acc = vec![0i32; m * n];
        int8_gemm::gemm(&q[first * k4..], m, b, &mut acc, n, int8_gemm::vnni());
        for (o, a) in out.chunks_exact_mut(n).zip(acc.chunks_exact(n)) {
            scale_sums(a, zp, &b.col_sums, scale, w_scale, o);
        }
    };
    // Row blocks, in parallel where there are threads: the input projection
    // over every time step. On one thread, blocks of many rows (each
    // streams `B` once).
    if rows > PRODUCT_ROWS && crate::par::parallel() {
        crate::par::chunks_mut(out, PRODUCT_ROWS * n, |i, o| block(i * PRODUCT_ROWS, o));
    } else {
        for (i, o) in out[..rows * n].chunks_mut(SERIAL_ROWS * n).enumerate() {
            block(i * SERIAL_ROWS, o);
        }
    }
}

/// Rows of `a` a task of a [`product`] multiplies.
const PRODUCT_ROWS: usize = 2 * int8_gemm::TILE_ROWS;

/// Rows of `a` a [`product`] on one thread multiplies at a time (eight
/// blocks of AMX tiles).
const SERIAL_ROWS: usize = 256;

/// Scratch a thread takes in a [`product`] of `rows` rows with `b`
/// ([`crate::scratch`]).
pub(super) fn product_scratch(rows: usize, b: &PackedB) -> usize {
    int8_gemm::scratch(rows.min(SERIAL_ROWS.max(PRODUCT_ROWS)), b.k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The f32 path's arithmetic: activations quantized by `quantize_u8`
    /// (`q - zp` as f32), sums of integer products, scaled per column.
    fn reference(a: &[f32], rows: usize, w: &[f32], k: usize, n: usize, ws: &[f32]) -> Vec<f32> {
        let (q, s) = super::super::recurrent_f32::quantize_u8(a);
        let mut out = vec![0f32; rows * n];
        for i in 0..rows {
            for j in 0..n {
                let sum: f64 = (0..k)
                    .map(|kk| f64::from(q[i * k + kk]) * f64::from(w[j * k + kk]))
                    .sum();
                out[i * n + j] = (sum as f32) * (s * ws[j]);
            }
        }
        out
    }

    #[test]
    fn both_products_match_the_f32_path() {
        // k not a multiple of 4, n not a multiple of a block, several rows.
        let (dirs, input, hidden) = (1, 37, 50);
        let gh = 4 * hidden;
        let w: Vec<f32> = (0..gh * input)
            .map(|i| ((i * 37 % 255) as i32 - 127) as f32)
            .collect();
        let r: Vec<f32> = (0..gh * hidden)
            .map(|i| ((i * 91 % 256) as i32 - 128) as f32)
            .collect();
        let Some(packed) = pack(&w, &r, dirs, gh, input, hidden) else {
            eprintln!("skipping: no AVX-512 VNNI");
            return;
        };
        let ws: Vec<f32> = (0..gh).map(|j| 0.001 + j as f32 * 1e-5).collect();
        for rows in [1, 3, 20] {
            let x: Vec<f32> = (0..rows * input)
                .map(|i| ((i * 13 % 29) as f32 - 9.0) * 0.1)
                .collect();
            let mut got = vec![0f32; rows * gh];
            product(&x, rows, &packed[0].w, &ws, &mut got);
            assert_eq!(
                got,
                reference(&x, rows, &w, input, gh, &ws),
                "projection, {rows} rows"
            );
            let h: Vec<f32> = (0..rows * hidden)
                .map(|i| ((i * 7 % 19) as f32 - 4.0) * 0.05)
                .collect();
            let mut got = vec![0f32; rows * gh];
            step_product(&h, rows, &packed[0].r, &ws, &mut got);
            assert_eq!(
                got,
                reference(&h, rows, &r, hidden, gh, &ws),
                "step, {rows} rows"
            );
        }
    }

    #[test]
    fn the_streamed_layout_reads_back_in_both_paths() {
        let (k, n) = (37, 200);
        let b = Streamed::new(k, n, |kk, j| ((kk * 31 + j * 7) % 256) as u8 as i8);
        let mut a = vec![0u8; k_groups(k)];
        for (i, v) in a.iter_mut().take(k).enumerate() {
            *v = (i * 13 % 256) as u8;
        }
        let want: Vec<i32> = (0..n)
            .map(|j| {
                (0..k)
                    .map(|kk| i32::from(a[kk]) * i32::from(((kk * 31 + j * 7) % 256) as u8 as i8))
                    .sum()
            })
            .collect();
        let mut c = vec![0i32; n.div_ceil(BLOCK) * BLOCK];
        b.row_portable(&a, &mut c, k_groups(k) / 4);
        assert_eq!(c[..n], want[..]);
        c.fill(-1);
        b.row(&a, &mut c);
        assert_eq!(c[..n], want[..]);
    }

    #[test]
    fn weights_past_a_signed_byte_stay_in_f32() {
        let w = vec![200.0f32; 4 * 8];
        let r = vec![1.0f32; 4 * 2 * 2];
        assert!(pack(&w, &r, 1, 4 * 2, 4, 2).is_none());
    }
}
