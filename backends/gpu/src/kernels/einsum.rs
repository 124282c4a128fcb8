//! The `einsum` kernel family: one output element per thread, summing the
//! product of the operands over the labels absent from the output, as the
//! CPU backend's direct loop binds the equation to the operand shapes
//! (output labels first, then summed ones; a label of size 1 broadcasts).

use rlx_ir::ops::Einsum;

use crate::geometry::{strides, u32_of, LResult};

/// The most labels and operands the kernel takes.
pub const MAX_LABELS: usize = 8;
pub const MAX_OPERANDS: usize = 4;

crate::kernel_params! {
    /// Labels `0..n_out` index the output, the rest are summed.
    pub struct EinsumParams {
        /// Output elements.
        pub n: u32,
        /// Summed combinations per output element.
        pub n_sum: u32,
        /// Labels in all.
        pub labels: u32,
        /// Output labels.
        pub n_out: u32,
        /// Operands.
        pub operands: u32,
        /// The size of each label.
        pub sizes: [u32; 8],
        /// Per operand, its element stride along each label (0 where absent).
        pub s0: [u32; 8],
        pub s1: [u32; 8],
        pub s2: [u32; 8],
        pub s3: [u32; 8],
    }
}

/// The operand names of the einsum kernel, in launch order (absent
/// operands bind the first again, never read).
pub const EINSUM_OPERANDS: &[&str] = &["x0", "x1", "x2", "x3", "y"];

/// The parameters of `e` over operands of `dims`, giving an output of `out`.
pub fn einsum_params(e: &Einsum, dims: &[Vec<usize>], out: &[usize]) -> LResult<EinsumParams> {
    if dims.is_empty() || dims.len() > MAX_OPERANDS {
        return Err(format!(
            "einsum of {} operands has no GPU kernel",
            dims.len()
        ));
    }
    let ranks: Vec<usize> = dims.iter().map(Vec::len).collect();
    let spec = e.spec(&ranks).map_err(|e| e.to_string())?;
    let mut labels: Vec<char> = Vec::new();
    for &c in &spec.output {
        if labels.contains(&c) {
            return Err(format!("einsum output label `{c}` repeats"));
        }
        labels.push(c);
    }
    let n_out = labels.len();
    for &c in spec.inputs.iter().flatten() {
        if !labels.contains(&c) {
            labels.push(c);
        }
    }
    if labels.len() > MAX_LABELS {
        return Err(format!(
            "einsum of {} labels has no GPU kernel",
            labels.len()
        ));
    }
    let at = |c: char| labels.iter().position(|&l| l == c).unwrap_or(0);
    let mut sizes = vec![1usize; labels.len()];
    for (d, ls) in dims.iter().zip(&spec.inputs) {
        for (&c, &n) in ls.iter().zip(d) {
            let k = at(c);
            if n != 1 {
                if sizes[k] != 1 && sizes[k] != n {
                    return Err(format!("einsum label `{c}` has sizes {} and {n}", sizes[k]));
                }
                sizes[k] = n;
            }
        }
    }
    if out != &sizes[..n_out] {
        return Err(format!(
            "einsum output {out:?} where the equation gives {:?}",
            &sizes[..n_out]
        ));
    }
    let mut p = EinsumParams {
        n: u32_of(out.iter().product(), "elements")?,
        n_sum: u32_of(sizes[n_out..].iter().product(), "summed elements")?,
        labels: labels.len() as u32,
        n_out: n_out as u32,
        operands: dims.len() as u32,
        sizes: [1; 8],
        s0: [0; 8],
        s1: [0; 8],
        s2: [0; 8],
        s3: [0; 8],
    };
    for (k, &s) in sizes.iter().enumerate() {
        p.sizes[k] = u32_of(s, "a label size")?;
    }
    for (i, (d, ls)) in dims.iter().zip(&spec.inputs).enumerate() {
        let st = strides(d);
        let mut s = [0u32; 8];
        for (q, &c) in ls.iter().enumerate() {
            let k = at(c);
            if d[q] == sizes[k] {
                s[k] += u32_of(st[q], "a stride")?;
            }
        }
        match i {
            0 => p.s0 = s,
            1 => p.s1 = s,
            2 => p.s2 = s,
            _ => p.s3 = s,
        }
    }
    Ok(p)
}
