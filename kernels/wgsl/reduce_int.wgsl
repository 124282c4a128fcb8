// reduce_int: reductions of 32- and 64-bit integers, laid out like reduce.wgsl
// (one workgroup of 64 per output element, strided partials, a tree in
// workgroup memory), computed on u32 pairs with the int64.wgsl helpers. 32-bit
// elements are widened (sign-extended when signed) and stored as the low word,
// which is what wrapping 32-bit arithmetic gives.
// Params: ReduceIntParams (rlx-gpu kernels/reduce.rs) with the handles x, y: the
// fields of ReduceParams, then wide (1: two words per element) and is_signed.
// kind: 0 sum, 1 mean, 2 max, 3 min, 4 prod, 5 l1, 9 sum_square, 10 argmax,
// 11 argmin (i64 output). An empty max/min gives the dtype's lowest/highest value.

const NONE: u32 = 0xffffffffu;

var<workgroup> sv: array<vec2<u32>, 64>;
var<workgroup> si: array<u32, 64>;

fn ri_offset(r0: u32) -> u32 {
    var r = r0;
    var off = 0u;
    for (var d = 0u; d < p.reduced_rank; d++) {
        let a = p.reduced_rank - 1u - d;
        off += (r % p.reduced_dims[a]) * p.reduced_strides[a];
        r = r / p.reduced_dims[a];
    }
    return off;
}

fn ri_ld(i: u32) -> vec2<u32> {
    if (p.wide != 0u) {
        return vec2<u32>(rd(p.x, 2u * i), rd(p.x, 2u * i + 1u));
    }
    let w = rd(p.x, i);
    return vec2<u32>(w, select(0u, bitcast<u32>(bitcast<i32>(w) >> 31u), p.is_signed != 0u));
}

fn ri_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
    if (p.is_signed != 0u) {
        return i64_lt(a, b);
    }
    return u64_lt(a, b);
}

// The dtype's lowest and highest values, widened.
fn ri_lowest() -> vec2<u32> {
    if (p.is_signed == 0u) {
        return vec2<u32>(0u, 0u);
    }
    return select(vec2<u32>(0x80000000u, 0xffffffffu), vec2<u32>(0u, 0x80000000u), p.wide != 0u);
}

fn ri_highest() -> vec2<u32> {
    let hi = select(0xffffffffu, 0x7fffffffu, p.is_signed != 0u);
    if (p.wide != 0u) {
        return vec2<u32>(0xffffffffu, hi);
    }
    return vec2<u32>(hi, 0u);
}

fn ri_combine(kind: u32, a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    switch kind {
        case 2u: { return select(a, b, ri_lt(a, b)); }
        case 3u: { return select(a, b, ri_lt(b, a)); }
        case 4u: { return i64_mul(a, b); }
        default: { return i64_add(a, b); }
    }
}

fn ri_identity(kind: u32) -> vec2<u32> {
    switch kind {
        case 2u: { return ri_lowest(); }
        case 3u: { return ri_highest(); }
        case 4u: { return vec2<u32>(1u, 0u); }
        default: { return vec2<u32>(0u, 0u); }
    }
}

// a beats b for argmax (kind 10) / argmin (11); ties go to the lower index,
// or the higher one with select_last; an empty slot (index NONE) loses.
fn ri_better(kind: u32, av: vec2<u32>, ai: u32, bv: vec2<u32>, bi: u32) -> bool {
    if (ai == NONE || bi == NONE) {
        return bi == NONE && ai != NONE;
    }
    if (i64_eq(av, bv)) {
        return select((ai < bi), (ai > bi), p.select_last != 0u);
    }
    return select(ri_lt(av, bv), ri_lt(bv, av), kind == 10u);
}

fn ri_tree(li: u32, kind: u32) {
    for (var s = 32u; s > 0u; s = s >> 1u) {
        workgroupBarrier();
        if (li < s) {
            if (kind >= 10u) {
                if (ri_better(kind, sv[li + s], si[li + s], sv[li], si[li])) {
                    sv[li] = sv[li + s];
                    si[li] = si[li + s];
                }
            } else {
                sv[li] = ri_combine(kind, sv[li], sv[li + s]);
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
    var ck = kind;
    if (kind == 1u || kind == 5u || kind == 9u) {
        ck = 0u;
    }
    var acc = ri_identity(ck);
    var best_i = NONE;
    for (var r = li; r < count; r += 64u) {
        var v = ri_ld(base + ri_offset(r));
        if (kind >= 10u) {
            if (ri_better(kind, v, r, acc, best_i)) {
                acc = v;
                best_i = r;
            }
            continue;
        }
        if (kind == 5u && p.is_signed != 0u) {
            v = i64_abs(v);
        } else if (kind == 9u) {
            v = i64_mul(v, v);
        }
        acc = ri_combine(ck, acc, v);
    }
    sv[li] = acc;
    si[li] = best_i;
    ri_tree(li, ck);
    if (li != 0u) {
        return;
    }
    var res = sv[0];
    if (kind >= 10u) {
        wr(p.y, 2u * o, select(si[0], 0u, si[0] == NONE));
        wr(p.y, 2u * o + 1u, 0u);
        return;
    }
    if (kind == 1u) {
        let n = vec2<u32>(count, 0u);
        res = select(u64_div(res, n), i64_div(res, n), p.is_signed != 0u);
    }
    if (p.wide != 0u) {
        wr(p.y, 2u * o, res.x);
        wr(p.y, 2u * o + 1u, res.y);
    } else {
        wr(p.y, o, res.x);
    }
}
