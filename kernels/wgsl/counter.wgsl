// Loop counter: an i64 (two words) that loop bodies read their iteration
// number from. Params: CounterParams (rlx-gpu control.rs), handle `counter`.

@compute @workgroup_size(1)
fn main() {
    if (p.increment == 0u) {
        wr(p.counter, 0u, 0u);
        wr(p.counter, 1u, 0u);
        return;
    }
    let lo = rd(p.counter, 0u) + 1u;
    wr(p.counter, 0u, lo);
    if (lo == 0u) {
        wr(p.counter, 1u, rd(p.counter, 1u) + 1u);
    }
}
