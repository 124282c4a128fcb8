//! Element-wise kernels, generated per node: unary, binary, compare, logical,
//! where, cast, clip, gelu and whole `elementwise_region` programs become one
//! WGSL `main` over broadcast inputs (helpers in `wgsl/elementwise.wgsl`, and
//! `wgsl/int64.wgsl` when an operand is a 64-bit integer).
//!
//! Params after the operand offsets (`out`, `x0..`): `n`, then the output dims
//! (rank `R`, collapsed), then each input's element strides (0 = broadcast),
//! then region literals as f32 bits.

use rlx_ir::ops::{Operand as RegionOperand, RegionFn};
use rlx_ir::{DType, Op};

use super::expr::{self, wgsl_type};
use super::{strides, u32_of, Cx, LResult};

const HELPERS: &str = include_str!("../../../../kernels/wgsl/elementwise.wgsl");
const INT64: &str = include_str!("../../../../kernels/wgsl/int64.wgsl");

/// Broadcast strides of an input of `dims` against output `out`.
pub fn broadcast_strides(dims: &[usize], out: &[usize]) -> LResult<Vec<usize>> {
    if dims.len() > out.len() {
        return Err("an input has a higher rank than the output".into());
    }
    let pad = out.len() - dims.len();
    let s = strides(dims);
    let mut v = vec![0; out.len()];
    for (i, &d) in dims.iter().enumerate() {
        if d == out[pad + i] {
            v[pad + i] = if d == 1 { 0 } else { s[i] };
        } else if d != 1 {
            return Err(format!("dims {dims:?} do not broadcast to {out:?}"));
        }
    }
    Ok(v)
}

/// Merges adjacent output dims wherever every input stays contiguous across them.
fn collapse(out: &[usize], ins: &[Vec<usize>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut dims: Vec<usize> = Vec::new();
    let mut st: Vec<Vec<usize>> = vec![Vec::new(); ins.len()];
    for d in 0..out.len() {
        if out[d] == 1 {
            continue;
        }
        let merge = !dims.is_empty()
            && ins
                .iter()
                .enumerate()
                .all(|(j, s)| st[j].last().copied() == Some(s[d] * out[d]));
        if merge {
            let last = dims.len() - 1;
            dims[last] *= out[d];
            for (j, s) in ins.iter().enumerate() {
                let l = st[j].len() - 1;
                st[j][l] = s[d];
            }
        } else {
            dims.push(out[d]);
            for (j, s) in ins.iter().enumerate() {
                st[j].push(s[d]);
            }
        }
    }
    (dims, st)
}

fn load(d: DType, j: usize) -> LResult<String> {
    let b = format!("P[{}u]", j + 1);
    Ok(match d {
        DType::F32 => format!("ldf({b}, o{j})"),
        DType::I32 => format!("ldi({b}, o{j})"),
        DType::U32 => format!("ldw({b}, o{j})"),
        DType::I8 => format!("ew_ld8s({b}, o{j})"),
        DType::U8 => format!("ldb({b}, o{j})"),
        DType::I16 => format!("ew_ld16s({b}, o{j})"),
        DType::U16 => format!("ew_ld16({b}, o{j})"),
        DType::F16 => format!("ew_ldh({b}, o{j})"),
        DType::BF16 => format!("ew_ldbf({b}, o{j})"),
        DType::Bool => format!("(ldb({b}, o{j}) != 0u)"),
        DType::I64 | DType::U64 => format!("ew_ld64({b}, o{j})"),
        other => return Err(format!("element-wise kernels do not take {other}")),
    })
}

/// The body's lines (`let t0 = ...;`) and result expression, and literals.
fn body(cx: &Cx) -> LResult<(Vec<String>, String, Vec<u32>)> {
    let d0 = cx.input(0)?.dtype;
    let out = cx.output(0)?.dtype;
    let no = |what: &str| format!("{what} on {d0} has no wgpu kernel");
    let mut lits = Vec::new();
    let mut lines = Vec::new();
    let r = match &cx.node.op {
        Op::Unary(u) => expr::unary(u.kind, d0, "x0").ok_or_else(|| no(u.kind.name()))?,
        Op::Binary(b) => {
            let d1 = cx.input(1)?.dtype;
            let x1 = if d1 == d0 {
                "x1".to_string()
            } else if b.kind == rlx_ir::ops::BinaryKind::Pow && expr::class(d0) == DType::F32 {
                // A float base takes an exponent of any number dtype.
                expr::cast(d1, DType::F32, "x1")
                    .ok_or_else(|| no("pow with this exponent dtype"))?
            } else {
                return Err(no("a binary op with mixed dtypes"));
            };
            expr::binary(b.kind, d0, "x0", &x1).ok_or_else(|| no(b.kind.name()))?
        }
        Op::Compare(c) => expr::compare(c.kind, d0, "x0", "x1").ok_or_else(|| no(c.kind.name()))?,
        Op::Logical(l) => expr::logical(l.kind, "x0", "x1"),
        Op::Where(_) => "select(x2, x1, x0)".to_string(),
        Op::Clip(_) => expr::clip(d0, "x0", "x1", "x2").ok_or_else(|| no("clip"))?,
        Op::Gelu(g) if expr::class(d0) == DType::F32 => expr::gelu(g.approximate, "x0"),
        Op::Cast(c) => expr::cast(d0, c.to, "x0")
            .ok_or_else(|| format!("cast from {d0} to {} has no wgpu kernel", c.to))?,
        Op::ElementwiseRegion(r) if expr::class(d0) == DType::F32 => {
            let arg = |a: &RegionOperand, lits: &mut Vec<u32>| match *a {
                RegionOperand::Input(k) => format!("x{k}"),
                RegionOperand::Temp(k) => format!("t{k}"),
                RegionOperand::Const(c) => {
                    lits.push((c as f32).to_bits());
                    format!("pf(L + {}u)", lits.len() - 1)
                }
            };
            for (i, ins) in r.program.0.iter().enumerate() {
                let a: Vec<String> = ins.args.iter().map(|a| arg(a, &mut lits)).collect();
                let e = match ins.f {
                    RegionFn::Unary(k) if a.len() == 1 => expr::unary(k, d0, &a[0]),
                    RegionFn::Unary(_) => None,
                    RegionFn::Binary(k) if a.len() == 2 => expr::binary(k, d0, &a[0], &a[1]),
                    RegionFn::Binary(_) => None,
                }
                .ok_or_else(|| format!("region function `{}` has no wgpu form", ins.f.name()))?;
                lines.push(format!("    let t{i} = {e};"));
            }
            format!("t{}", r.program.0.len().saturating_sub(1))
        }
        op => return Err(no(op.name())),
    };
    if wgsl_type(out).is_none() {
        return Err(format!("element-wise output {out} has no wgpu kernel"));
    }
    Ok((lines, r, lits))
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let out = cx.output(0)?.clone();
    let k = cx.ins.len();
    let (lines, result, lits) = body(cx)?;
    let mut bstrides = Vec::with_capacity(k);
    for i in 0..k {
        bstrides.push(broadcast_strides(&cx.ins[i].dims, &out.dims)?);
    }
    let (dims, st) = collapse(&out.dims, &bstrides);
    let rank = dims.len();
    let n = u32_of(out.numel(), "output size")?;
    let np = k + 1;
    let d0 = np + 1;
    let s0 = d0 + rank;
    let l0 = s0 + k * rank;
    let mut src = String::from(HELPERS);
    if expr::wide(out.dtype) || cx.ins.iter().any(|o| expr::wide(o.dtype)) {
        src.push('\n');
        src.push_str(INT64);
    }
    let out_ty = wgsl_type(out.dtype).unwrap_or("f32");
    src.push_str(&format!(
        "\nconst R: u32 = {rank}u;\nconst D: u32 = {d0}u;\nconst S: u32 = {s0}u;\nconst L: u32 = {l0}u;\n\nfn ev(e: u32) -> {out_ty} {{\n    var rem = e;\n"
    ));
    for j in 0..k {
        src.push_str(&format!("    var o{j} = 0u;\n"));
    }
    src.push_str("    for (var d = 0u; d < R; d++) {\n        let a = R - 1u - d;\n        let c = rem % P[D + a];\n        rem = rem / P[D + a];\n");
    for j in 0..k {
        src.push_str(&format!("        o{j} += c * P[S + {j}u * R + a];\n"));
    }
    src.push_str("    }\n");
    for j in 0..k {
        src.push_str(&format!("    let x{j} = {};\n", load(cx.ins[j].dtype, j)?));
    }
    for l in &lines {
        src.push_str(l);
        src.push('\n');
    }
    src.push_str(&format!("    return {result};\n}}\n\n"));
    src.push_str("@compute @workgroup_size(64)\nfn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {\n    let t = wg_linear(wid, nwg) * 64u + li;\n");
    src.push_str(&format!("    let n = P[{np}u];\n"));
    let items = match (out.dtype, out.dtype.size()) {
        (DType::F32 | DType::I32 | DType::U32 | DType::I64 | DType::U64, _) => {
            let st_fn = match out.dtype {
                DType::F32 => "stf",
                DType::I32 => "sti",
                DType::U32 => "stw",
                _ => "ew_st64",
            };
            src.push_str(&format!(
                "    if (t >= n) {{\n        return;\n    }}\n    {st_fn}(P[0], t, ev(t));\n}}\n"
            ));
            n
        }
        (dt, size @ (1 | 2)) => {
            // Sub-word outputs: each invocation packs the elements of one word.
            let per = 4 / size as u32;
            let bits = size * 8;
            let word = match dt {
                DType::Bool => "select(0u, 1u, ev(e))".to_string(),
                DType::U8 | DType::U16 => "ev(e)".to_string(),
                DType::F16 => "pack2x16float(vec2<f32>(ev(e), 0.0))".to_string(),
                DType::BF16 => "ew_bf16(ev(e))".to_string(),
                _ => "bitcast<u32>(ev(e))".to_string(),
            };
            let mask = if size == 1 { "0xffu" } else { "0xffffu" };
            src.push_str(&format!(
                "    if (t * {per}u >= n) {{\n        return;\n    }}\n    var w = 0u;\n    for (var j = 0u; j < {per}u; j++) {{\n        let e = t * {per}u + j;\n        if (e < n) {{\n            w |= ({word} & {mask}) << (j * {bits}u);\n        }}\n    }}\n    stw(P[0], t, w);\n}}\n"
            ));
            n.div_ceil(per)
        }
        (dt, _) => return Err(format!("element-wise output {dt} has no wgpu kernel")),
    };
    let name = format!("elementwise.{}.{}", cx.node.op.name(), out.dtype);
    let pipe = cx.pipeline(&name, &src);
    let mut operands = vec![out.range()];
    operands.extend(cx.ins.iter().map(|o| o.range()));
    let mut params = vec![n];
    for &d in &dims {
        params.push(u32_of(d, "a dim")?);
    }
    for s in &st {
        for &x in s {
            params.push(u32_of(x, "a stride")?);
        }
    }
    params.extend(lits);
    cx.dispatch_items(pipe, operands, params, u64::from(items));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_and_collapse() {
        assert_eq!(
            broadcast_strides(&[3, 1], &[2, 3, 4]).unwrap(),
            vec![0, 1, 0]
        );
        assert!(broadcast_strides(&[3], &[4]).is_err());
        let (d, s) = collapse(&[2, 3, 4], &[vec![12, 4, 1], vec![0, 0, 1]]);
        assert_eq!(d, vec![6, 4]);
        assert_eq!(s, vec![vec![4, 1], vec![0, 1]]);
        let (d, s) = collapse(&[2, 3, 4], &[vec![12, 4, 1]]);
        assert_eq!((d, s), (vec![24], vec![vec![1]]));
    }
}
