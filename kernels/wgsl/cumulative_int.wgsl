// cumulative_int: cumsum / cumprod of 32- and 64-bit integers along one axis,
// one invocation per line, computed on u32 pairs (int64.wgsl helpers) and
// wrapping like the CPU backend. A 32-bit result is the low word of the 64-bit
// one, so signed and unsigned dtypes share the kernel.
// Params: CumulativeIntParams (rlx-gpu kernels/indexing.rs) with the handles x,
// y: lines, len, inner, exclusive, reverse, prod, wide (1: two words per element).

fn cu_ld(i: u32) -> vec2<u32> {
    if (p.wide != 0u) {
        return vec2<u32>(rd(p.x, 2u * i), rd(p.x, 2u * i + 1u));
    }
    return vec2<u32>(rd(p.x, i), 0u);
}

fn cu_st(i: u32, v: vec2<u32>) {
    if (p.wide != 0u) {
        wr(p.y, 2u * i, v.x);
        wr(p.y, 2u * i + 1u, v.y);
    } else {
        wr(p.y, i, v.x);
    }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.lines) {
        return;
    }
    let len = p.len;
    let inner = p.inner;
    let base = (t / inner) * len * inner + t % inner;
    let prod = p.prod != 0u;
    var acc = vec2<u32>(select(0u, 1u, prod), 0u);
    for (var s = 0u; s < len; s++) {
        var j = s;
        if (p.reverse != 0u) {
            j = len - 1u - s;
        }
        let at = base + j * inner;
        let v = cu_ld(at);
        if (p.exclusive != 0u) {
            cu_st(at, acc);
        }
        if (prod) {
            acc = i64_mul(acc, v);
        } else {
            acc = i64_add(acc, v);
        }
        if (p.exclusive == 0u) {
            cu_st(at, acc);
        }
    }
}
