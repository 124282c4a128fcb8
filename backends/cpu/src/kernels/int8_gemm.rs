//! The 8-bit GEMM behind MatMulInteger: `C[i][j] = Σ_k A[i][k] · B[k][j]` in
//! i32, `A` unsigned and `B` signed bytes (the kernel maps other signs onto
//! these, [`super::matmul_integer`]). With AVX-512 VNNI, one `vpdpbusd`
//! multiplies 64 byte pairs and adds them in fours into 16 i32 lanes: `B` is
//! packed in panels of 16 columns with `k` in groups of 4 (64 bytes per
//! group and panel), each row of `A` is broadcast four bytes at a time, and
//! a tile of 8 rows x 32 columns stays in 16 registers over the whole `k`.
//! Without VNNI, AVX2 multiplies 16-bit values with `vpmaddwd`
//! ([`super::int8_avx2`]): `B` is widened once, when it is packed, and `A`
//! per product; a portable loop computes the same sums elsewhere. Arithmetic wraps
//! (as i32 products of 8-bit values never do below 2^16 terms).
//!
//! An [`Epilogue`] finishes each tile as it leaves the registers: the zero
//! points' correction and, for `fused_matmul_integer`, the conversion to
//! f32, the scale, the bias and the activation.

use rlx_ir::ops::Activation;

/// Columns per panel: one 512-bit register of i32.
pub const PANEL: usize = 16;
/// Rows per tile of the VNNI microkernel.
pub const TILE_ROWS: usize = 8;
/// Products of at least this many rows take AMX where the CPU has it: a
/// tile's 16 rows at least.
const AMX_ROWS: usize = 16;

/// Products of at most this many columns take [`narrow`]: one column or a
/// few would waste most of a 16-column panel.
pub const NARROW: usize = 4;

/// `k` rounded up to the 4-byte groups `vpdpbusd` takes.
pub fn k_groups(k: usize) -> usize {
    k.div_ceil(4) * 4
}

/// `B` (k x n, signed bytes) packed for [`gemm`]: panels of [`PANEL`]
/// columns, each `[k_groups / 4][PANEL][4]` bytes, zero past `k` and `n`.
#[derive(Debug, Clone)]
pub struct PackedB {
    pub k: usize,
    pub n: usize,
    data: Vec<i8>,
    /// `Σ_k B[k][j]` per column.
    pub col_sums: Vec<i32>,
    /// With at most [`NARROW`] columns, each column's `k` bytes again,
    /// contiguous and zero to a multiple of 64, for [`narrow`].
    columns: Vec<i8>,
    /// Where products take the AVX2 path ([`wide`]): the panels again with
    /// each byte widened to i16, `[k_groups / 2][PANEL][2]` per panel (a
    /// pair of `k` per column, as `vpmaddwd` multiplies and adds them).
    wide: Option<Vec<i16>>,
}

impl PackedB {
    /// Packs `b(kk, j)` for `kk < k`, `j < n`.
    pub fn new(k: usize, n: usize, b: impl Fn(usize, usize) -> i8) -> PackedB {
        let panels = n.div_ceil(PANEL);
        let len = panel_len(k);
        let mut data = vec![0i8; panels * len];
        let mut col_sums = vec![0i32; n];
        for p in 0..panels {
            let panel = &mut data[p * len..(p + 1) * len];
            for kk in 0..k {
                for c in 0..PANEL.min(n - p * PANEL) {
                    let j = p * PANEL + c;
                    let v = b(kk, j);
                    panel[(kk / 4) * PANEL * 4 + c * 4 + kk % 4] = v;
                    col_sums[j] = col_sums[j].wrapping_add(i32::from(v));
                }
            }
        }
        let mut columns = Vec::new();
        if n <= NARROW {
            let k64 = k.div_ceil(64) * 64;
            columns = vec![0i8; n * k64];
            for j in 0..n {
                for kk in 0..k {
                    columns[j * k64 + kk] = b(kk, j);
                }
            }
        }
        let wide = wide().then(|| widened(&data, k_groups(k), panels));
        PackedB {
            k,
            n,
            data,
            col_sums,
            columns,
            wide,
        }
    }

    pub(super) fn panel(&self, p: usize) -> &[i8] {
        let len = panel_len(self.k);
        &self.data[p * len..(p + 1) * len]
    }

    /// Panel `p` widened (`[k_groups / 2][PANEL][2]`), if this `B` was
    /// packed for the AVX2 path.
    pub(super) fn wide_panel(&self, p: usize) -> Option<&[i16]> {
        let len = k_groups(self.k) * PANEL;
        self.wide.as_ref()?.get(p * len..(p + 1) * len)
    }

    /// `B[kk][j]`, read back from the panels.
    pub fn at(&self, kk: usize, j: usize) -> i8 {
        self.panel(j / PANEL)[(kk / 4) * PANEL * 4 + (j % PANEL) * 4 + kk % 4]
    }
}

/// Bytes of a packed panel: `k` in groups of four, padded to 64 (the `k`
/// an AMX tile covers, [`super::int8_amx`]), [`PANEL`] columns a group.
fn panel_len(k: usize) -> usize {
    k.div_ceil(64) * 64 * PANEL
}

/// The panels `data` (`[k4 / 4][PANEL][4]` each, [`panel_len`] apart) as
/// `[k4 / 2][PANEL][2]` i16 each.
fn widened(data: &[i8], k4: usize, panels: usize) -> Vec<i16> {
    let len = k4 * PANEL;
    let mut wide = vec![0i16; panels * len];
    if len == 0 {
        return wide;
    }
    let stride = data.len() / panels.max(1);
    for (src, dst) in data.chunks_exact(stride).zip(wide.chunks_exact_mut(len)) {
        for kk in 0..k4 {
            for c in 0..PANEL {
                dst[(kk / 2) * PANEL * 2 + c * 2 + kk % 2] =
                    i16::from(src[(kk / 4) * PANEL * 4 + c * 4 + kk % 4]);
            }
        }
    }
    wide
}

/// Whether products take the AVX2 path: a CPU with AVX2 and without VNNI.
pub fn wide() -> bool {
    !vnni() && super::vmath::avx2()
}

/// Whether this CPU has AVX-512 VNNI (and the AVX-512 the kernels use).
pub fn vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::vmath::avx512() && std::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// How a sum `s` of row `i` and column `j` of `A·B` is stored:
/// `s - za_i·col_terms_j - row_sums_i·zb_j` (the exact `(a - za)·(b - zb)`
/// of [`super::matmul_integer`]'s shifted operands) as i32 or, with
/// `float`, as the bits of the f32 `act(f32(·) · scale_j + bias_j)`, each
/// step rounded as the separate `cast`, `mul` and `add` round.
pub struct Epilogue<'a> {
    /// `a`'s zero point: one, or one per row of the call.
    pub za: &'a [i32],
    /// `Σ_k A[i][k]` per row of the call.
    pub row_sums: &'a [i32],
    /// `Σ_k B[k][j] - k·zb_j` per column of `B` (`b.n` of them).
    pub col_terms: &'a [i32],
    /// `b`'s zero point per column of `B`.
    pub zb: &'a [i32],
    pub float: Option<FloatOut<'a>>,
}

/// The f32 part of an [`Epilogue`].
#[derive(Clone)]
pub struct FloatOut<'a> {
    /// Per column of `B`.
    pub scale: &'a [f32],
    /// Per column of `B`.
    pub bias: Option<&'a [f32]>,
    pub act: Activation,
}

impl Epilogue<'_> {
    fn za(&self, i: usize) -> i32 {
        self.za[if self.za.len() == 1 { 0 } else { i }]
    }

    /// Finishes `m` rows of raw sums in place (`c`'s column 0 is `B`'s
    /// column `col0`, `width` columns): the portable paths' epilogue.
    pub fn finish_rows(&self, m: usize, c: &mut [i32], ldc: usize, col0: usize, width: usize) {
        for i in 0..m {
            let row = &mut c[i * ldc..i * ldc + width];
            let (za, rs) = (self.za(i), self.row_sums[i]);
            for (jj, v) in row.iter_mut().enumerate() {
                let j = col0 + jj;
                *v = v
                    .wrapping_sub(za.wrapping_mul(self.col_terms[j]))
                    .wrapping_sub(rs.wrapping_mul(self.zb[j]));
            }
            if let Some(f) = &self.float {
                for (jj, v) in row.iter_mut().enumerate() {
                    let j = col0 + jj;
                    let mut x = *v as f32 * f.scale[j];
                    if let Some(b) = f.bias {
                        x += b[j];
                    }
                    *v = x.to_bits() as i32;
                }
                let row: &mut [f32] = bytemuck::cast_slice_mut(row);
                super::matmul::activate(f.act, row);
            }
        }
    }
}

/// Scratch a thread takes in a product of at most `m` rows of depth `k`
/// ([`crate::scratch`]).
pub fn scratch(m: usize, k: usize) -> usize {
    match m >= AMX_ROWS && cfg!(target_arch = "x86_64") && vnni() {
        true => super::int8_amx::scratch(m, k),
        false => 0,
    }
}

/// `C = A · B` for `m` rows of `a` (row `i` at `a[i * k_groups(b.k)..]`,
/// zero past `b.k`) into `c` (row stride `ldc`, at least `b.n` wide).
/// `use_vnni` must only be true where [`vnni`] is.
pub fn gemm(a: &[u8], m: usize, b: &PackedB, c: &mut [i32], ldc: usize, use_vnni: bool) {
    gemm_panels(a, m, b, 0..b.n.div_ceil(PANEL), c, ldc, use_vnni, None);
}

/// [`gemm`] for the columns of panels `panels` only: `c`'s column 0 is
/// the first panel's (a task's share of the columns, for splitting a
/// product over threads), each sum finished by `epi` where given.
#[allow(clippy::too_many_arguments)]
pub fn gemm_panels(
    a: &[u8],
    m: usize,
    b: &PackedB,
    panels: std::ops::Range<usize>,
    c: &mut [i32],
    ldc: usize,
    use_vnni: bool,
    epi: Option<&Epilogue>,
) {
    let width = (panels.end * PANEL)
        .min(b.n)
        .saturating_sub(panels.start * PANEL);
    assert!(
        operands_fit(a, m, b, &panels, epi)
            && ldc >= width
            && (m == 0 || c.len() >= (m - 1) * ldc + width)
    );
    #[cfg(target_arch = "x86_64")]
    if use_vnni {
        // SAFETY: the caller checked `vnni()`; the slices hold `m` rows of
        // `k4` bytes and `m` rows of `ldc >= width` outputs (asserted above).
        unsafe { vnni_gemm(a, m, b, panels, c.as_mut_ptr(), ldc, epi) };
        return;
    }
    let _ = use_vnni;
    let col0 = panels.start * PANEL;
    #[cfg(target_arch = "x86_64")]
    if let Some(wide) = super::int8_avx2::Wide::new(b, &panels) {
        wide.gemm(a, m, c, ldc);
        if let Some(e) = epi {
            e.finish_rows(m, c, ldc, col0, width);
        }
        return;
    }
    portable(a, m, b, panels, c, ldc);
    if let Some(e) = epi {
        e.finish_rows(m, c, ldc, col0, width);
    }
}

/// Whether `a` (`m` packed rows), the panels and the epilogue's per-row and
/// per-column terms hold what a product over `panels` reads.
fn operands_fit(
    a: &[u8],
    m: usize,
    b: &PackedB,
    panels: &std::ops::Range<usize>,
    epi: Option<&Epilogue>,
) -> bool {
    panels.end <= b.n.div_ceil(PANEL)
        && a.len() >= m * k_groups(b.k)
        && epi.is_none_or(|e| {
            e.row_sums.len() >= m
                && (e.za.len() == 1 || e.za.len() >= m)
                && e.col_terms.len() >= b.n
                && e.zb.len() >= b.n
                && e.float
                    .as_ref()
                    .is_none_or(|f| f.scale.len() >= b.n && f.bias.is_none_or(|v| v.len() >= b.n))
        })
}

/// [`gemm_panels`] on the VNNI path into `c`, which points at the output's
/// column `panels.start * PANEL` of row 0 (rows `ldc` apart): tasks that each
/// take their own panels of one output write it in place.
///
/// # Safety
/// The CPU has VNNI ([`vnni`]); `a` holds `m` rows of `k_groups(b.k)` bytes;
/// `c` is valid for writes of `m` rows of the panels' width at stride `ldc`,
/// and nothing else reads or writes those elements during the call.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_panels_into(
    a: &[u8],
    m: usize,
    b: &PackedB,
    panels: std::ops::Range<usize>,
    c: *mut i32,
    ldc: usize,
    epi: Option<&Epilogue>,
) {
    assert!(operands_fit(a, m, b, &panels, epi));
    // SAFETY: as the caller promises; the operands are checked above.
    unsafe { vnni_gemm(a, m, b, panels, c, ldc, epi) }
}

fn portable(
    a: &[u8],
    m: usize,
    b: &PackedB,
    panels: std::ops::Range<usize>,
    c: &mut [i32],
    ldc: usize,
) {
    let k4 = k_groups(b.k);
    let col0 = panels.start * PANEL;
    let width = (panels.end * PANEL).min(b.n) - col0;
    let mut row = vec![0i32; b.n];
    for i in 0..m {
        row.fill(0);
        let ai = &a[i * k4..i * k4 + b.k];
        for p in panels.clone() {
            let panel = b.panel(p);
            let cols = PANEL.min(b.n - p * PANEL);
            for (kk, &av) in ai.iter().enumerate() {
                let av = i32::from(av);
                let at = (kk / 4) * PANEL * 4 + kk % 4;
                for cc in 0..cols {
                    let j = p * PANEL + cc;
                    row[j] = row[j].wrapping_add(av.wrapping_mul(i32::from(panel[at + cc * 4])));
                }
            }
        }
        c[i * ldc..i * ldc + width].copy_from_slice(&row[col0..col0 + width]);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vnni,avx2,fma")]
unsafe fn vnni_gemm(
    a: &[u8],
    m: usize,
    b: &PackedB,
    range: std::ops::Range<usize>,
    c: *mut i32,
    ldc: usize,
    epi: Option<&Epilogue>,
) {
    if m >= AMX_ROWS && super::int8_amx::available() {
        // SAFETY: AMX is available; the operands are as this call's.
        unsafe { super::int8_amx::gemm(a, m, k_groups(b.k), b, range, c, ldc, epi) };
        return;
    }
    // Panel pairs outer, row tiles inner: a pair of panels (`32 x k` bytes)
    // stays in L1 while the rows (a block of them, packed by the caller)
    // stream past it.
    let full = m - m % TILE_ROWS;
    let mut p = range.start;
    while p < range.end {
        let two = p + 1 < range.end;
        let mut i = 0;
        while i < full {
            // SAFETY: the tile's rows and panels lie inside `a`, `b` and `c`.
            unsafe {
                if two {
                    tile::<TILE_ROWS, 2>(a, i, b, p, range.start, c, ldc, epi);
                } else {
                    tile::<TILE_ROWS, 1>(a, i, b, p, range.start, c, ldc, epi);
                }
            }
            i += TILE_ROWS;
        }
        p += if two { 2 } else { 1 };
    }
    if full < m {
        // SAFETY: the rows lie inside `a` and `c`.
        unsafe { few_rows(a, full, m - full, b, range, c, ldc, epi) };
    }
}

/// `C = A·B` for a `B` of at most [`NARROW`] columns, by dot products
/// along `k`: the `m` rows of `a` as stored (`k` bytes each, less 128 —
/// XOR 0x80 — first where `flip`, as [`super::matmul_integer`] shifts an
/// i8 `a`), 64 byte pairs per `vpdpbusd`, no packing. Writes the raw sums
/// to `c` (row stride `ldc`) and each row's byte sum to `row_sums`, for
/// [`Epilogue::finish_rows`].
#[allow(clippy::too_many_arguments)]
pub fn narrow(
    a: &[u8],
    m: usize,
    flip: bool,
    b: &PackedB,
    c: &mut [i32],
    ldc: usize,
    row_sums: &mut [i32],
    use_vnni: bool,
) {
    let (k, n) = (b.k, b.n);
    let k64 = k.div_ceil(64) * 64;
    assert!(
        n <= NARROW
            && b.columns.len() == n * k64
            && a.len() >= m * k
            && row_sums.len() >= m
            && ldc >= n
            && (m == 0 || c.len() >= (m - 1) * ldc + n)
    );
    #[cfg(target_arch = "x86_64")]
    if use_vnni {
        // SAFETY: the caller checked `vnni()`; the sizes are asserted above.
        unsafe { narrow_vnni(a, m, flip, b, c, ldc, row_sums) };
        return;
    }
    let _ = use_vnni;
    for i in 0..m {
        let row = &a[i * k..(i + 1) * k];
        let byte = |v: u8| i32::from(if flip { v ^ 0x80 } else { v });
        row_sums[i] = row.iter().map(|&v| byte(v)).sum();
        for j in 0..n {
            let col = &b.columns[j * k64..j * k64 + k];
            c[i * ldc + j] = row
                .iter()
                .zip(col)
                .fold(0i32, |s, (&x, &w)| s.wrapping_add(byte(x) * i32::from(w)));
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vnni,avx2,fma")]
unsafe fn narrow_vnni(
    a: &[u8],
    m: usize,
    flip: bool,
    b: &PackedB,
    c: &mut [i32],
    ldc: usize,
    row_sums: &mut [i32],
) {
    use std::arch::x86_64::*;
    let (k, n) = (b.k, b.n);
    let k64 = k.div_ceil(64) * 64;
    let ones = _mm512_set1_epi8(1);
    let flip_v = _mm512_set1_epi8(if flip { i8::MIN } else { 0 });
    for i in 0..m {
        let row = a.as_ptr().add(i * k);
        let mut sum = _mm512_setzero_si512();
        let mut acc = [_mm512_setzero_si512(); NARROW];
        for c0 in (0..k).step_by(64) {
            let len = (k - c0).min(64);
            let mask: __mmask64 = if len == 64 { !0 } else { (1u64 << len) - 1 };
            // Bytes past `k` stay 0 (not 0 XOR 0x80).
            let av = _mm512_maskz_mov_epi8(
                mask,
                _mm512_xor_si512(
                    _mm512_maskz_loadu_epi8(mask, row.add(c0) as *const i8),
                    flip_v,
                ),
            );
            sum = _mm512_dpbusd_epi32(sum, av, ones);
            for (j, acc) in acc.iter_mut().enumerate().take(n) {
                let bv = _mm512_loadu_si512(b.columns.as_ptr().add(j * k64 + c0) as *const _);
                *acc = _mm512_dpbusd_epi32(*acc, av, bv);
            }
        }
        row_sums[i] = _mm512_reduce_add_epi32(sum);
        for (j, acc) in acc.iter().enumerate().take(n) {
            c[i * ldc + j] = _mm512_reduce_add_epi32(*acc);
        }
    }
}

/// Fewer than [`TILE_ROWS`] rows (a GEMV, as a recurrent step's): one row
/// at a time over eight panels at once, so that eight independent
/// `vpdpbusd` chains hide the instruction's latency.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vnni,avx2,fma")]
unsafe fn few_rows(
    a: &[u8],
    i: usize,
    rows: usize,
    b: &PackedB,
    range: std::ops::Range<usize>,
    c: *mut i32,
    ldc: usize,
    epi: Option<&Epilogue>,
) {
    const WIDE: usize = 8;
    for r in i..i + rows {
        let mut p = range.start;
        // SAFETY: as for `tile`, one row.
        unsafe {
            while p + WIDE <= range.end {
                tile::<1, WIDE>(a, r, b, p, range.start, c, ldc, epi);
                p += WIDE;
            }
            while p < range.end {
                tile::<1, 1>(a, r, b, p, range.start, c, ldc, epi);
                p += 1;
            }
        }
    }
}

/// Rows `i..i + R` of `C`, columns of panels `p..p + P`; `c`'s column 0 is
/// panel `first`'s. Row indices of `a`, `c` and `epi` are the call's.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vnni,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<const R: usize, const P: usize>(
    a: &[u8],
    i: usize,
    b: &PackedB,
    p: usize,
    first: usize,
    c: *mut i32,
    ldc: usize,
    epi: Option<&Epilogue>,
) {
    use std::arch::x86_64::*;
    let k4 = k_groups(b.k);
    let mut acc = [[_mm512_setzero_si512(); P]; R];
    let bp: [*const i8; P] = std::array::from_fn(|q| b.panel(p + q).as_ptr());
    let ap = a.as_ptr().add(i * k4);
    for g in 0..k4 / 4 {
        let bv: [__m512i; P] =
            std::array::from_fn(|q| _mm512_loadu_si512(bp[q].add(g * PANEL * 4) as *const _));
        for r in 0..R {
            let av = _mm512_set1_epi32((ap.add(r * k4 + g * 4) as *const i32).read_unaligned());
            for q in 0..P {
                acc[r][q] = _mm512_dpbusd_epi32(acc[r][q], av, bv[q]);
            }
        }
    }
    for q in 0..P {
        let j = (p + q) * PANEL;
        let cols = PANEL.min(b.n - j);
        let mask: __mmask16 = if cols == PANEL {
            !0
        } else {
            (1u16 << cols) - 1
        };
        let finish = Finish::new(epi, j, mask);
        for r in 0..R {
            let at = (i + r) * ldc + j - first * PANEL;
            finish.store(acc[r][q], i + r, c.add(at));
        }
    }
}

/// The epilogue's terms for 16 columns from `j` (those of `mask`), ready
/// to finish rows of raw sums as they are stored: the VNNI tiles' and the
/// AMX blocks' ([`super::int8_amx`]).
#[cfg(target_arch = "x86_64")]
pub(super) struct Finish<'e> {
    epi: Option<&'e Epilogue<'e>>,
    mask: std::arch::x86_64::__mmask16,
    terms: std::arch::x86_64::__m512i,
    zb: std::arch::x86_64::__m512i,
    float: Option<(
        std::arch::x86_64::__m512,
        Option<std::arch::x86_64::__m512>,
        Activation,
    )>,
}

#[cfg(target_arch = "x86_64")]
impl<'e> Finish<'e> {
    /// # Safety
    /// The CPU has AVX-512; `epi`'s per-column slices hold the masked
    /// columns from `j`.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx2,fma")]
    pub(super) unsafe fn new(
        epi: Option<&'e Epilogue<'e>>,
        j: usize,
        mask: std::arch::x86_64::__mmask16,
    ) -> Finish<'e> {
        use std::arch::x86_64::*;
        let zero = _mm512_setzero_si512();
        let Some(e) = epi else {
            return Finish {
                epi,
                mask,
                terms: zero,
                zb: zero,
                float: None,
            };
        };
        let float = e.float.as_ref().map(|f| {
            let bias = f
                .bias
                .map(|v| _mm512_maskz_loadu_ps(mask, v.as_ptr().add(j)));
            (
                _mm512_maskz_loadu_ps(mask, f.scale.as_ptr().add(j)),
                bias,
                f.act,
            )
        });
        Finish {
            epi,
            mask,
            terms: _mm512_maskz_loadu_epi32(mask, e.col_terms.as_ptr().add(j)),
            zb: _mm512_maskz_loadu_epi32(mask, e.zb.as_ptr().add(j)),
            float,
        }
    }

    /// Stores row `i`'s raw `sums` to `at`, finished.
    ///
    /// # Safety
    /// The CPU has AVX-512; `at` is valid for the masked columns' writes;
    /// the epilogue's per-row slices hold row `i`.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx2,fma")]
    pub(super) unsafe fn store(&self, sums: std::arch::x86_64::__m512i, i: usize, at: *mut i32) {
        use std::arch::x86_64::*;
        let Some(e) = self.epi else {
            _mm512_mask_storeu_epi32(at, self.mask, sums);
            return;
        };
        let za = _mm512_set1_epi32(e.za(i));
        let rs = _mm512_set1_epi32(e.row_sums[i]);
        let v = _mm512_sub_epi32(
            _mm512_sub_epi32(sums, _mm512_mullo_epi32(za, self.terms)),
            _mm512_mullo_epi32(rs, self.zb),
        );
        let v = match self.float {
            None => v,
            Some((scale, bias, act)) => {
                let mut x = _mm512_mul_ps(_mm512_cvtepi32_ps(v), scale);
                if let Some(bias) = bias {
                    x = _mm512_add_ps(x, bias);
                }
                _mm512_castps_si512(super::gemm::microkernel::activate(act, x))
            }
        };
        _mm512_mask_storeu_epi32(at, self.mask, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(a: &[u8], m: usize, k: usize, b: &[i8], n: usize) -> Vec<i32> {
        let mut c = vec![0i32; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|kk| a[i * k + kk] as i32 * b[kk * n + j] as i32)
                    .sum();
            }
        }
        c
    }

    #[test]
    fn both_paths_match_the_reference_on_ragged_shapes() {
        for (m, k, n) in [
            (1, 1, 1),
            (3, 5, 7),
            (8, 64, 32),
            (13, 37, 50),
            (17, 200, 16),
            (9, 4, 33),
        ] {
            let a: Vec<u8> = (0..m * k).map(|i| (i * 37 % 256) as u8).collect();
            let b: Vec<i8> = (0..k * n).map(|i| (i * 91 % 256) as u8 as i8).collect();
            let pb = PackedB::new(k, n, |kk, j| b[kk * n + j]);
            let k4 = k_groups(k);
            let mut ap = vec![0u8; m * k4];
            for i in 0..m {
                ap[i * k4..i * k4 + k].copy_from_slice(&a[i * k..(i + 1) * k]);
            }
            let want = reference(&a, m, k, &b, n);
            for use_vnni in [false, vnni()] {
                let mut c = vec![-1i32; m * n];
                gemm(&ap, m, &pb, &mut c, n, use_vnni);
                assert_eq!(c, want, "{m}x{k}x{n} vnni={use_vnni}");
                // Every panel range on its own: the columns of that range.
                let panels = n.div_ceil(PANEL);
                for (p0, p1) in [(0, 1), (1, panels), (panels / 2, panels)] {
                    if p0 >= p1 {
                        continue;
                    }
                    let (j0, j1) = (p0 * PANEL, (p1 * PANEL).min(n));
                    let mut part = vec![-1i32; m * (j1 - j0)];
                    gemm_panels(&ap, m, &pb, p0..p1, &mut part, j1 - j0, use_vnni, None);
                    for i in 0..m {
                        assert_eq!(
                            part[i * (j1 - j0)..(i + 1) * (j1 - j0)],
                            want[i * n + j0..i * n + j1],
                            "{m}x{k}x{n} panels {p0}..{p1} vnni={use_vnni}"
                        );
                    }
                }
            }
            for j in 0..n {
                let s: i32 = (0..k).map(|kk| b[kk * n + j] as i32).sum();
                assert_eq!(pb.col_sums[j], s);
                assert_eq!(pb.at(k - 1, j), b[(k - 1) * n + j]);
            }
        }
    }
}
