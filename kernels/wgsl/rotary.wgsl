// rotary_embedding on f32: one invocation per output element. Element e of
// a head vector is rotated with its pair (interleaved: 2i and 2i + 1; else
// i and i + half) by the cos/sin cache row of its position (its batch and
// sequence index, or its position id, clamped into the cache); features
// past the rotary dims are copied. Params: RotaryParams (rlx-gpu
// kernels/rotary.rs) with the handles x, cos, sin, ids, y.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let o = wg_linear(wid, nwg) * 64u + li;
    if (o >= p.count) {
        return;
    }
    let e = o % p.head;
    let row = o / p.head;
    if (e >= 2u * p.half) {
        wr(p.y, o, rd(p.x, o));
        return;
    }
    var bi: u32;
    var si: u32;
    if (p.four == 1u) {
        bi = row / (p.heads * p.seq);
        si = row % p.seq;
    } else {
        bi = row / (p.seq * p.heads);
        si = row / p.heads % p.seq;
    }
    let pos = bi * p.seq + si;
    var crow = pos;
    if (p.has_ids == 1u) {
        let id = ldidx(p.ids, pos, p.ids_wide);
        crow = u32(max(id, 0));
        if (crow >= p.cache_rows) {
            crow = p.cache_rows - 1u;
        }
    }
    var i: u32;
    var a: u32;
    var b: u32;
    var first: bool;
    if (p.interleaved == 1u) {
        i = e / 2u;
        a = 2u * i;
        b = a + 1u;
        first = (e & 1u) == 0u;
    } else {
        first = e < p.half;
        i = select(e - p.half, e, first);
        a = i;
        b = i + p.half;
    }
    let base = row * p.head;
    let c = bitcast<f32>(rd(p.cos, crow * p.half + i));
    let s = bitcast<f32>(rd(p.sin, crow * p.half + i));
    let x1 = bitcast<f32>(rd(p.x, base + a));
    let x2 = bitcast<f32>(rd(p.x, base + b));
    var r: f32;
    if (first) {
        r = c * x1 - s * x2;
    } else {
        r = s * x1 + c * x2;
    }
    wr(p.y, o, bitcast<u32>(r));
}
