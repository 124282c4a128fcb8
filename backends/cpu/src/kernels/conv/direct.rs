//! 2-D convolutions as implicit GEMMs over the input in place: no im2col
//! matrix is made or packed. This file holds the geometry and the staging;
//! [`super::plan`] picks how the product is tiled.
//!
//! Each group's input is staged once per run into zero-bordered planes,
//! split by stride phase: phase `(ph, pw)` of channel `c` holds padded rows
//! `ph, ph + s_h, ...` and columns `pw, pw + s_w, ...`. In a phase plane every
//! kernel tap reads the outputs of a row at consecutive columns, and the rows
//! follow each other at the plane's pitch. So the output positions `(oh, ow)`
//! are numbered `oh * pitch + ow` ("wide": a row carries `pitch - Wo` padding
//! columns, computed and dropped on store), and the im2col row of input
//! channel and tap `(c, kh, kw)` is the staged buffer from one offset on: the
//! GEMM reads it in place ([`B::InPlace`]). Strides, dilations and pads of any
//! size take the same path; only the staging differs. A staging too large to
//! stay in L2 is made in bands of output rows ([`Band`]): each band's phase
//! rows, in planes of its own length, just before its product reads them.

use std::ops::Range;

use super::geometry::ConvGeom;
use crate::kernels::gemm::microkernel::NR_MAX;
use crate::kernels::gemm::packed::{self, Cols, Epilogue, Out, PackedA, B};
use crate::kernels::layout::par_rows;
use crate::kernels::vmath::vectorized;

/// The staging and the offsets of one convolution's implicit GEMM.
#[derive(Debug, Clone)]
pub struct Direct {
    /// Input channels per group.
    channels: usize,
    input: [usize; 2],
    pads: [usize; 2],
    strides: [usize; 2],
    /// Rows and columns of a phase plane; columns are the product's pitch.
    plane: [usize; 2],
    /// Floats from one staged plane to the next.
    plane_len: usize,
    /// The phases some tap reads, `(ph, pw)`, in staging order.
    phases: Vec<[usize; 2]>,
    /// Per tap `(kh, kw)`: its phase's slot and its offset in the plane.
    taps: Vec<(usize, usize)>,
    /// Per row `(c, kh, kw)` of the product's `B`: its offset in the staging.
    offsets: Vec<u32>,
    /// Output rows and columns.
    output: [usize; 2],
    /// Floats of the staging buffer (planes, then room for the last tile).
    staged: usize,
}

impl Direct {
    /// The plan for a 2-D convolution `g` (1-D ones are 2-D of height 1);
    /// `None` where offsets would not fit 32 bits.
    pub fn new(g: &ConvGeom) -> Option<Direct> {
        if g.input.len() != 2 || g.output.iter().any(|&d| d == 0) {
            return None;
        }
        let two = |v: &[usize]| [v[0], v[1]];
        let (input, kernel, output) = (two(&g.input), two(&g.kernel), two(&g.output));
        let (strides, dil, pads) = (two(&g.strides), two(&g.dilations), two(&g.pads));
        let channels = g.c / g.group;
        // Padded extent: every tap of every output, and the input.
        let ext = |d: usize| {
            ((output[d] - 1) * strides[d] + (kernel[d] - 1) * dil[d] + 1).max(input[d] + pads[d])
        };
        let plane = [ext(0).div_ceil(strides[0]), ext(1).div_ceil(strides[1])];
        let mut phases: Vec<[usize; 2]> = Vec::new();
        let mut taps = Vec::with_capacity(kernel[0] * kernel[1]);
        for kh in 0..kernel[0] {
            for kw in 0..kernel[1] {
                let (th, tw) = (kh * dil[0], kw * dil[1]);
                let phase = [th % strides[0], tw % strides[1]];
                let slot = match phases.iter().position(|p| *p == phase) {
                    Some(i) => i,
                    None => {
                        phases.push(phase);
                        phases.len() - 1
                    }
                };
                taps.push((slot, th / strides[0] * plane[1] + tw / strides[1]));
            }
        }
        let plane_len = plane_floats(plane[0] * plane[1]);
        let offsets = tap_offsets(channels, phases.len(), &taps, plane_len)?;
        let n = (output[0] - 1) * plane[1] + output[1];
        let last = offsets.iter().max().map_or(0, |&o| o as usize);
        let staged = (phases.len() * channels * plane_len).max(last + n + NR_MAX);
        u32::try_from(staged).ok()?;
        Some(Direct {
            channels,
            input,
            pads,
            strides,
            plane,
            plane_len,
            phases,
            taps,
            offsets,
            output,
            staged,
        })
    }

    /// The staging of bands of as many output rows as stage in about
    /// `bytes` (two at least): the phase rows those read, in planes laid
    /// out as the whole staging's. `None` where one band would be all rows.
    pub fn band(&self, bytes: usize) -> Option<Band> {
        let halo = self
            .taps
            .iter()
            .map(|&(_, within)| within / self.plane[1])
            .max()?;
        let row = 4 * self.channels * self.phases.len() * self.plane[1];
        let rows = (bytes / row.max(1)).saturating_sub(halo).max(2);
        if rows >= self.output[0] {
            return None;
        }
        let plane_rows = (rows + halo).min(self.plane[0]);
        let plane_len = plane_floats(plane_rows * self.plane[1]);
        let offsets = tap_offsets(self.channels, self.phases.len(), &self.taps, plane_len)?;
        let last = offsets.iter().max().map_or(0, |&o| o as usize);
        let n = (rows - 1) * self.plane[1] + self.output[1];
        let floats = (self.phases.len() * self.channels * plane_len).max(last + n + NR_MAX);
        u32::try_from(floats).ok()?;
        Some(Band {
            rows,
            plane_rows,
            plane_len,
            offsets,
            floats,
        })
    }

    /// Stages the phase rows that output rows `r0..` of `band` read (as
    /// [`Direct::stage`]) into the front of `staging`.
    pub fn stage_band<'s>(
        &self,
        band: &Band,
        x: &[f32],
        r0: usize,
        staging: &'s mut [f32],
    ) -> &'s [f32] {
        let staging = &mut staging[..band.floats];
        let slots = self.phases.len();
        let sin = self.input[0] * self.input[1];
        let (body, tail) = staging.split_at_mut(self.channels * slots * band.plane_len);
        tail.fill(0.0);
        let rows = r0..(r0 + band.plane_rows).min(self.plane[0]);
        par_rows(body, slots * band.plane_len, |c, planes| {
            let xc = &x[c * sin..(c + 1) * sin];
            self.stage_channel(xc, planes, rows.clone(), band.plane_len);
        });
        staging
    }

    /// Floats of scratch a run needs.
    pub fn scratch_floats(&self) -> usize {
        self.staged
    }

    /// Floats of one zero-bordered input row, taken by a thread staging a
    /// channel at column strides above 1.
    fn padded_row(&self) -> usize {
        self.plane[1] * self.strides[1]
    }

    /// Scratch a thread takes in staging ([`crate::scratch`]).
    pub fn per_thread(&self) -> usize {
        match self.strides[1] {
            1 => 0,
            _ => crate::scratch::floats_bytes(self.padded_row()),
        }
    }

    /// Wide output positions: the last one is the last output.
    pub fn columns(&self) -> usize {
        (self.output[0] - 1) * self.plane[1] + self.output[1]
    }

    /// Floats from one output row to the next in wide positions.
    pub fn pitch(&self) -> usize {
        self.plane[1]
    }

    /// Output rows and columns.
    pub fn output(&self) -> [usize; 2] {
        self.output
    }

    /// Per input channel and tap, `(c, kh, kw)` in weight order: its offset
    /// in the staging.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// The largest of [`Direct::offsets`].
    pub fn max_offset(&self) -> usize {
        self.offsets.iter().max().map_or(0, |&o| o as usize)
    }

    /// `y = act(bias + w * x + residual)` for one image and group, the
    /// weights as the product's rows: `x` the group's input channels, `y`
    /// (and `residual`) its output channels. With a `band`, band by band:
    /// each staged just before its product runs.
    pub fn run_rows(
        &self,
        w: &PackedA,
        x: &[f32],
        y: &mut [f32],
        ep: Epilogue,
        staging: &mut [f32],
        band: Option<&Band>,
    ) {
        let [oh, ow] = self.output;
        let sout = oh * ow;
        let cols = Cols::Wide {
            pitch: self.plane[1],
            valid: ow,
        };
        let Some(band) = band else {
            let staging = self.stage(x, staging);
            let out = Out {
                c: y,
                ldc: sout,
                cols,
            };
            let b = B::InPlace {
                base: staging,
                offsets: &self.offsets,
            };
            return packed::gemm(w, b, self.columns(), out, ep);
        };
        for r0 in (0..oh).step_by(band.rows) {
            let rows = band.rows.min(oh - r0);
            let base = r0 * ow;
            let staged = self.stage_band(band, x, r0, staging);
            let out = Out {
                c: &mut y[base..],
                ldc: sout,
                cols,
            };
            let b = B::InPlace {
                base: staged,
                offsets: &band.offsets,
            };
            let ep = Epilogue {
                residual: ep.residual.map(|r| &r[base..]),
                ..ep
            };
            packed::gemm(w, b, (rows - 1) * self.plane[1] + ow, out, ep);
        }
    }

    /// Writes the phase planes of `x` (zero where they fall on padding) and
    /// zeros past them into the front of `staging`; returns that part.
    pub fn stage<'s>(&self, x: &[f32], staging: &'s mut [f32]) -> &'s [f32] {
        let staging = &mut staging[..self.staged];
        let sin = self.input[0] * self.input[1];
        let slots = self.phases.len();
        let (body, tail) = staging.split_at_mut(self.channels * slots * self.plane_len);
        tail.fill(0.0);
        // A channel's planes are contiguous: one task per channel.
        par_rows(body, slots * self.plane_len, |c, planes| {
            let xc = &x[c * sin..(c + 1) * sin];
            self.stage_channel(xc, planes, 0..self.plane[0], self.plane_len);
        });
        staging
    }

    /// Phase rows `rows` of channel `xc`: row `a` of each phase's plane
    /// (`plane_len` floats each, in `planes`) at `(a - rows.start) * pitch`,
    /// zeros past the last.
    fn stage_channel(&self, xc: &[f32], planes: &mut [f32], rows: Range<usize>, plane_len: usize) {
        let [ih, iw] = self.input;
        let cols = self.plane[1];
        let [sh, sw] = self.strides;
        let [pt, pl] = self.pads;
        let slots = self.phases.len();
        for plane in planes.chunks_mut(plane_len) {
            plane[rows.len() * cols..].fill(0.0);
        }
        let at = |slot: usize, a: usize| slot * plane_len + (a - rows.start) * cols;
        if sw == 1 {
            // One phase column: each input row is copied once, in place.
            for big in rows.start * sh..rows.end * sh {
                let (a, ph) = (big / sh, big % sh);
                let src = big.checked_sub(pt).filter(|&r| r < ih);
                for slot in (0..slots).filter(|&s| self.phases[s][0] == ph) {
                    let row = &mut planes[at(slot, a)..at(slot, a) + cols];
                    match src {
                        Some(r) => bordered(&xc[r * iw..(r + 1) * iw], pl, row),
                        None => row.fill(0.0),
                    }
                }
            }
            return;
        }
        crate::scratch::floats(self.padded_row(), |padded| {
            for big in rows.start * sh..rows.end * sh {
                let (a, ph) = (big / sh, big % sh);
                // Rows of a phase no tap reads (a 1x1 convolution at stride
                // 2 reads every other row) are not copied.
                if !self.phases.iter().any(|p| p[0] == ph) {
                    continue;
                }
                let src = big.checked_sub(pt).filter(|&r| r < ih);
                if let Some(r) = src {
                    bordered(&xc[r * iw..(r + 1) * iw], pl, padded);
                }
                for slot in (0..slots).filter(|&s| self.phases[s][0] == ph) {
                    let row = &mut planes[at(slot, a)..at(slot, a) + cols];
                    match src {
                        Some(_) => pick(padded, sw, self.phases[slot][1], row),
                        None => row.fill(0.0),
                    }
                }
            }
        });
    }
}

/// The staging of a band of output rows ([`Direct::band`]): the phase rows
/// they read, in planes of their own length.
#[derive(Debug, Clone)]
pub struct Band {
    /// Output rows per band, at most.
    pub rows: usize,
    /// Phase rows staged per plane.
    plane_rows: usize,
    plane_len: usize,
    /// As [`Direct::offsets`], in the band's planes.
    offsets: Vec<u32>,
    /// Floats of a band's staging.
    pub floats: usize,
}

impl Band {
    /// Per input channel and tap: its offset in the band's staging.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// The largest of [`Band::offsets`].
    pub fn max_offset(&self) -> usize {
        self.offsets.iter().max().map_or(0, |&o| o as usize)
    }
}

/// Floats of a plane of `n`: planes start an odd number of cache lines
/// apart, so the same tap of successive channels falls in different L1 sets
/// (at a stride of a power of two lines they would evict each other).
fn plane_floats(n: usize) -> usize {
    16 * (n.div_ceil(16) | 1)
}

/// Per input channel and tap, its offset in a staging of `slots` planes of
/// `plane_len` per channel; `None` past 32 bits.
fn tap_offsets(
    channels: usize,
    slots: usize,
    taps: &[(usize, usize)],
    plane_len: usize,
) -> Option<Vec<u32>> {
    let mut offsets = Vec::with_capacity(channels * taps.len());
    for c in 0..channels {
        for &(slot, within) in taps {
            let off = (c * slots + slot)
                .checked_mul(plane_len)?
                .checked_add(within)?;
            offsets.push(u32::try_from(off).ok()?);
        }
    }
    Some(offsets)
}

/// `row` = `pad` zeros, then `x`, then zeros (as far as `row` goes).
fn bordered(x: &[f32], pad: usize, row: &mut [f32]) {
    let end = (pad + x.len()).min(row.len());
    let start = pad.min(end);
    row[..start].fill(0.0);
    row[start..end].copy_from_slice(&x[..end - start]);
    row[end..].fill(0.0);
}

/// `row[b] = padded[b * stride + phase]`; two phases of stride 2 are a
/// deinterleave, vectorized.
fn pick(padded: &[f32], stride: usize, phase: usize, row: &mut [f32]) {
    match stride {
        1 => row.copy_from_slice(&padded[phase..phase + row.len()]),
        2 => vectorized(|| {
            let pairs = row.iter_mut().zip(padded.chunks_exact(2));
            if phase == 0 {
                pairs.for_each(|(o, pair)| *o = pair[0]);
            } else {
                pairs.for_each(|(o, pair)| *o = pair[1]);
            }
        }),
        _ => {
            for (o, v) in row.iter_mut().zip(padded[phase..].iter().step_by(stride)) {
                *o = *v;
            }
        }
    }
}
