// cumulative_int: cumsum / cumprod of 32- and 64-bit integers along one axis,
// one invocation per line, computed on u32 pairs (int64.wgsl helpers) and
// wrapping like the CPU backend. A 32-bit result is the low word of the 64-bit
// one, so signed and unsigned dtypes share the kernel.
// Params after operands (x, y): lines, len, inner, exclusive, reverse, prod,
// wide (1: two words per element).

fn cu_ld(i: u32) -> vec2<u32> {
    if (P[8] != 0u) {
        return vec2<u32>(rd(P[0], 2u * i), rd(P[0], 2u * i + 1u));
    }
    return vec2<u32>(rd(P[0], i), 0u);
}

fn cu_st(i: u32, v: vec2<u32>) {
    if (P[8] != 0u) {
        wr(P[1], 2u * i, v.x);
        wr(P[1], 2u * i + 1u, v.y);
    } else {
        wr(P[1], i, v.x);
    }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= P[2]) {
        return;
    }
    let len = P[3];
    let inner = P[4];
    let base = (t / inner) * len * inner + t % inner;
    let prod = P[7] != 0u;
    var acc = vec2<u32>(select(0u, 1u, prod), 0u);
    for (var s = 0u; s < len; s++) {
        var j = s;
        if (P[6] != 0u) {
            j = len - 1u - s;
        }
        let at = base + j * inner;
        let v = cu_ld(at);
        if (P[5] != 0u) {
            cu_st(at, acc);
        }
        if (prod) {
            acc = i64_mul(acc, v);
        } else {
            acc = i64_add(acc, v);
        }
        if (P[5] == 0u) {
            cu_st(at, acc);
        }
    }
}
