//! Direct 2-D depthwise convolution (one input channel per group), where
//! im2col + GEMM would multiply 1-row matrices.
//!
//! f32 on an AVX-512 CPU: a plane at a time through `window`, with bias and
//! ReLU as the result is stored, or sixteen channels in a register's lanes
//! where the output rows are short ([`super::window_lanes::prefer_lanes`]);
//! on an AVX2 one, eight channels in a register's lanes.
//! Otherwise rows are clamped to the valid kernel taps once, so the inner
//! loop over output columns has no bounds checks.

use std::any::TypeId;

use rlx_ir::ops::Activation;

use super::geometry::ConvGeom;
use super::window;
use crate::kernels::layout::par_rows;
use crate::kernels::matmul::activate;
use crate::kernels::num::Comp;

/// True when `g` is a 2-D convolution with one input channel per group.
pub fn applies(g: &ConvGeom) -> bool {
    g.input.len() == 2 && g.group == g.c && g.group > 1 && g.m % g.group == 0
}

/// `y[n, m] = act(bias[m] + sum_k w[m, k] * x[n, m / (M/C)])` over the kernel window.
pub fn run<T: Comp + bytemuck::Pod>(
    g: &ConvGeom,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    act: Activation,
    y: &mut [T],
) {
    // AVX-512 slides along rows unless they are at most 8 long: eight
    // channels across an AVX2 register's lanes measured slower than the
    // rows there (one thread, 2026-11-30: 512 x 7x7 5x5 0.066 -> 0.076 ms),
    // sixteen across an AVX-512 register's faster (0.062-0.086 -> 0.039).
    let lanes = lanes(g);
    if TypeId::of::<T>() == TypeId::of::<f32>() && window::available() && !lanes {
        let bias = bias.map(bytemuck::cast_slice::<T, f32>);
        let (x, w) = (bytemuck::cast_slice(x), bytemuck::cast_slice(w));
        run_f32(g, x, w, bias, act, bytemuck::cast_slice_mut(y));
        return;
    }
    let g = &as_row(g);
    #[cfg(target_arch = "x86_64")]
    if TypeId::of::<T>() == TypeId::of::<f32>() && lanes {
        let reduce = super::window_lanes::Reduce::Dot {
            w: bytemuck::cast_slice(w),
            bias: bias.map(bytemuck::cast_slice::<T, f32>),
            m: g.m,
            mult: g.m / g.c,
            act,
        };
        let (x, y) = (bytemuck::cast_slice(x), bytemuck::cast_slice_mut(y));
        super::window_lanes::run(&window_geom(g), g.n * g.m, x, y, reduce);
        return;
    }
    run_any(g, x, w, bias, y);
    activate(act, y);
}

/// Scratch a thread takes in a [`run`] over `g` in f32 ([`crate::scratch`]).
pub fn per_thread(g: &ConvGeom) -> usize {
    if !applies(g) {
        return 0;
    }
    let geom = window_geom(&as_row(g));
    #[cfg(target_arch = "x86_64")]
    if lanes(g) {
        return super::window_lanes::scratch(&geom);
    }
    if window::available() {
        return window::scratch(&geom);
    }
    0
}

/// Whether an f32 `g` runs with planes across a register's lanes
/// ([`super::window_lanes`]): on AVX2 always, on AVX-512 where the lanes
/// beat sliding along rows ([`super::window_lanes::prefer_lanes`]).
fn lanes(g: &ConvGeom) -> bool {
    #[cfg(target_arch = "x86_64")]
    if super::window_lanes::available() {
        return !window::available() || super::window_lanes::prefer_lanes(&window_geom(&as_row(g)));
    }
    false
}

/// A plane one column wide (a 1-D conv written as [T, 1], FSMN's memory
/// blocks) lies in memory as one row: `g` with its two spatial axes
/// swapped, so that a kernel slides along the row over many outputs at a
/// time instead of one output per row.
fn as_row(g: &ConvGeom) -> ConvGeom {
    let column = g.input[1] == 1 && g.output[1] == 1 && g.kernel[1] == 1 && g.pads[1] == 0;
    if !column {
        return g.clone();
    }
    let two = |v: &[usize]| vec![v[1], v[0]];
    ConvGeom {
        input: two(&g.input),
        output: two(&g.output),
        kernel: two(&g.kernel),
        strides: two(&g.strides),
        dilations: two(&g.dilations),
        pads: two(&g.pads),
        ..g.clone()
    }
}

/// The window of one plane of `g`.
fn window_geom(g: &ConvGeom) -> window::Geom {
    let two = |v: &[usize]| [v[0], v[1]];
    window::Geom {
        input: two(&g.input),
        output: two(&g.output),
        kernel: two(&g.kernel),
        strides: two(&g.strides),
        dilations: two(&g.dilations),
        pads: two(&g.pads),
    }
}

/// ReLU in the window's store; any other activation on each output plane as
/// soon as it is computed (in cache, and in the same job: one parallel
/// section per step, not two).
fn run_f32(
    g: &ConvGeom,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    y: &mut [f32],
) {
    let relu = act == Activation::Relu;
    // A one-column plane slides along its row, 16 outputs per register.
    let g = &as_row(g);
    let geom = window_geom(g);
    let (taps, mult) = (g.kernel_size(), g.m / g.c);
    let (sin, sout) = (g.spatial_in(), g.spatial_out());
    par_rows(y, sout, |plane, out| {
        let (n, m) = (plane / g.m, plane % g.m);
        let c = m / mult;
        let reduce = window::Reduce::Dot {
            w: &w[m * taps..(m + 1) * taps],
            bias: bias.map_or(0.0, |b| b[m]),
            relu,
        };
        window::plane(&geom, &x[(n * g.c + c) * sin..], out, reduce);
        if !relu {
            activate(act, out);
        }
    });
}

pub(super) fn run_any<T: Comp + bytemuck::Pod>(
    g: &ConvGeom,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [T],
) {
    let (ih, iw) = (g.input[0] as isize, g.input[1] as isize);
    let (oh, ow) = (g.output[0], g.output[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (sh, sw) = (g.strides[0] as isize, g.strides[1] as isize);
    let (dh, dw) = (g.dilations[0] as isize, g.dilations[1] as isize);
    let (ph, pw) = (g.pads[0] as isize, g.pads[1] as isize);
    let mult = g.m / g.c;
    let (sin, sout) = ((ih * iw) as usize, oh * ow);
    // The plane's loops in the CPU's widest lanes (AVX2 where AVX-512's
    // window path is not there).
    par_rows(y, sout, |plane, out| {
        crate::kernels::vmath::vectorized(|| {
            let (n, m) = (plane / g.m, plane % g.m);
            let c = m / mult;
            let xs = &x[(n * g.c + c) * sin..(n * g.c + c + 1) * sin];
            let wm = &w[m * kh * kw..(m + 1) * kh * kw];
            out.fill(bias.map_or(T::zero(), |b| b[m]));
            for r in 0..oh {
                let row = &mut out[r * ow..(r + 1) * ow];
                for a in 0..kh {
                    let h = r as isize * sh - ph + a as isize * dh;
                    if h < 0 || h >= ih {
                        continue;
                    }
                    let line = &xs[(h * iw) as usize..((h + 1) * iw) as usize];
                    for b in 0..kw {
                        let wv = wm[a * kw + b];
                        let off = b as isize * dw - pw;
                        // Output columns whose input column off + col*sw lies in [0, iw).
                        let lo = if off >= 0 {
                            0
                        } else {
                            ((-off + sw - 1) / sw) as usize
                        };
                        let hi = if iw - 1 - off < 0 {
                            0
                        } else {
                            (((iw - 1 - off) / sw) + 1).min(ow as isize) as usize
                        };
                        if lo >= hi {
                            continue;
                        }
                        if sw == 1 {
                            let start = (lo as isize + off) as usize;
                            let src = &line[start..start + (hi - lo)];
                            for (o, v) in row[lo..hi].iter_mut().zip(src) {
                                *o = *o + wv * *v;
                            }
                        } else {
                            for (col, o) in row.iter_mut().enumerate().take(hi).skip(lo) {
                                *o = *o + wv * line[(col as isize * sw + off) as usize];
                            }
                        }
                    }
                }
            }
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-column plane (kernel [5, 1], stride 2, a top pad) slides along
    /// its rows as one row, and matches the portable path.
    #[test]
    fn column_planes_match_the_portable_path() {
        let g = ConvGeom {
            n: 1,
            c: 3,
            m: 3,
            group: 3,
            input: vec![23, 1],
            kernel: vec![5, 1],
            output: vec![11, 1],
            strides: vec![2, 1],
            dilations: vec![1, 1],
            pads: vec![2, 0],
        };
        let x: Vec<f32> = (0..69).map(|i| ((i * 13) % 7) as f32 - 3.0).collect();
        let w: Vec<f32> = (0..15).map(|i| i as f32 * 0.25 - 1.0).collect();
        let b = [0.5f32, -1.0, 2.0];
        let (mut got, mut want) = (vec![0f32; 33], vec![0f32; 33]);
        run(&g, &x, &w, Some(&b), Activation::None, &mut got);
        run_any(&g, &x, &w, Some(&b), &mut want);
        assert_eq!(got, want);
        // The portable path slides along the row too.
        run_any(&as_row(&g), &x, &w, Some(&b), &mut want);
        assert_eq!(got, want);
    }
}
