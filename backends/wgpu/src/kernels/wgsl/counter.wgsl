// Loop counter: an i64 (two words) that loop bodies read their iteration
// number from. Params after the handle: 0 = set to zero, 1 = add one.

@compute @workgroup_size(1)
fn main() {
    if (P[1] == 0u) {
        wr(P[0], 0u, 0u);
        wr(P[0], 1u, 0u);
        return;
    }
    let lo = rd(P[0], 0u) + 1u;
    wr(P[0], 0u, lo);
    if (lo == 0u) {
        wr(P[0], 1u, rd(P[0], 1u) + 1u);
    }
}
