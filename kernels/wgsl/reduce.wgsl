// reduce: one workgroup of 64 per output element, a strided partial per
// invocation, then a tree reduction in workgroup memory (argmax/argmin carry indices).
// Params: ReduceParams (rlx-gpu kernels/reduce.rs) with the handles x, y: n_out,
// count, kind, select_last, kept_rank, reduced_rank, kept_dims, kept_strides,
// reduced_dims, reduced_strides (non-unit dims only, outermost first).
// kind: 0 sum, 1 mean, 2 max, 3 min, 4 prod, 5 l1, 6 l2, 7 log_sum, 8 log_sum_exp,
// 9 sum_square, 10 argmax, 11 argmin (i64 output).

var<workgroup> sv: array<f32, 64>;
var<workgroup> si: array<u32, 64>;

fn r_offset(r0: u32) -> u32 {
    var r = r0;
    var off = 0u;
    for (var d = 0u; d < p.reduced_rank; d++) {
        let a = p.reduced_rank - 1u - d;
        off += (r % p.reduced_dims[a]) * p.reduced_strides[a];
        r = r / p.reduced_dims[a];
    }
    return off;
}

fn r_combine(kind: u32, a: f32, b: f32) -> f32 {
    switch kind {
        case 2u: { return max(a, b); }
        case 3u: { return min(a, b); }
        case 4u: { return a * b; }
        default: { return a + b; }
    }
}

fn r_identity(kind: u32) -> f32 {
    switch kind {
        case 2u: { return -inf_f32(); }
        case 3u: { return inf_f32(); }
        case 4u: { return 1.0; }
        default: { return 0.0; }
    }
}

// a beats b for argmax (kind 10) / argmin (11); ties go to the lower index,
// or the higher one with select_last.
fn r_better(kind: u32, av: f32, ai: u32, bv: f32, bi: u32) -> bool {
    if (av == bv) {
        return select((ai < bi), (ai > bi), p.select_last != 0u);
    }
    return select((av < bv), (av > bv), kind == 10u);
}

fn r_tree(li: u32, kind: u32) {
    for (var s = 32u; s > 0u; s = s >> 1u) {
        workgroupBarrier();
        if (li < s) {
            if (kind >= 10u) {
                if (r_better(kind, sv[li + s], si[li + s], sv[li], si[li])) {
                    sv[li] = sv[li + s];
                    si[li] = si[li + s];
                }
            } else {
                sv[li] = r_combine(kind, sv[li], sv[li + s]);
            }
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let o = wg_linear(wid, nwg);
    if (o >= p.n_out) {
        return;
    }
    let count = p.count;
    let kind = p.kind;
    var rem = o;
    var base = 0u;
    for (var d = 0u; d < p.kept_rank; d++) {
        let a = p.kept_rank - 1u - d;
        base += (rem % p.kept_dims[a]) * p.kept_strides[a];
        rem = rem / p.kept_dims[a];
    }
    // Phase 1: the value the kernel combines (for log_sum_exp, the max first).
    var ck = kind;
    if (kind == 8u) {
        ck = 2u;
    } else if (kind == 1u || kind == 5u || kind == 6u || kind == 7u || kind == 9u) {
        ck = 0u;
    }
    var acc = r_identity(ck);
    var best_i = 0xffffffffu;
    if (kind >= 10u) {
        acc = select(inf_f32(), -inf_f32(), kind == 10u);
    }
    for (var r = li; r < count; r += 64u) {
        var v = ldf(p.x, base + r_offset(r));
        if (kind >= 10u) {
            if (best_i == 0xffffffffu || r_better(kind, v, r, acc, best_i)) {
                acc = v;
                best_i = r;
            }
            continue;
        }
        if (kind == 5u) {
            v = abs(v);
        } else if (kind == 6u || kind == 9u) {
            v = v * v;
        }
        acc = r_combine(ck, acc, v);
    }
    sv[li] = acc;
    si[li] = best_i;
    if (kind >= 10u) {
        // Invocations that saw no element must lose every comparison.
        if (best_i == 0xffffffffu) {
            sv[li] = select(inf_f32(), -inf_f32(), kind == 10u);
            si[li] = select(0xffffffffu, 0u, p.select_last != 0u);
        }
    }
    r_tree(li, ck);
    if (kind == 8u) {
        let m = sv[0];
        workgroupBarrier();
        var s = 0.0;
        for (var r = li; r < count; r += 64u) {
            s += exp(ldf(p.x, base + r_offset(r)) - m);
        }
        sv[li] = s;
        r_tree(li, 0u);
        if (li == 0u) {
            stf(p.y, o, m + log(sv[0]));
        }
        return;
    }
    if (li != 0u) {
        return;
    }
    var res = sv[0];
    if (kind >= 10u) {
        let i = min(si[0], max(count, 1u) - 1u);
        wr(p.y, 2u * o, i);
        wr(p.y, 2u * o + 1u, 0u);
        return;
    }
    if (kind == 1u) {
        res = res / f32(count);
    } else if (kind == 6u) {
        res = sqrt(res);
    } else if (kind == 7u) {
        res = log(res);
    }
    stf(p.y, o, res);
}
