// Slab copy: moves `rows` rows of `inner` bytes from the source to the
// destination, where row r starts at base + r * stride. Either base may be
// offset by idx * step, where idx is the loop counter (an i64 whose low word
// is read) or, reversed, len - 1 - counter: this is how loop bodies take
// slices of scanned inputs and write slices of scan outputs.
//
// Params: SlabCopyParams (rlx-gpu control.rs) with the handles dst, src,
// counter. Flags: 1 = the source is indexed, 2 = the destination is indexed,
// 4 = reversed, 8 = a counter is bound.
//
// One invocation per destination word: byte-granular copies (bool, u8) read,
// patch and write whole words, and no two invocations share a word.

fn slab_byte(h: u32, a: u32) -> u32 {
    return (rd(h, a >> 2u) >> ((a & 3u) * 8u)) & 0xffu;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    let rows = p.rows;
    let inner = p.inner;
    let ss = p.src_stride;
    let ds = p.dst_stride;
    let flags = p.flags;
    var idx = 0u;
    if ((flags & 8u) != 0u) {
        idx = rd(p.counter, 0u);
        if ((flags & 4u) != 0u) {
            idx = p.len - 1u - idx;
        }
    }
    var s0 = p.src & 0x3fffffffu;
    if ((flags & 1u) != 0u) {
        s0 += idx * p.src_step;
    }
    var d0 = p.dst & 0x3fffffffu;
    if ((flags & 2u) != 0u) {
        d0 += idx * p.dst_step;
    }
    // Window bits only: rd/wr then address absolute words of the window.
    let sw = p.src & 0xc0000000u;
    let dw = p.dst & 0xc0000000u;
    let span = (rows - 1u) * ds + inner;
    if (((s0 | d0 | inner | ss | ds) & 3u) == 0u) {
        let q = t * 4u;
        if (q >= span) {
            return;
        }
        let r = q / ds;
        let j = q - r * ds;
        if (j < inner) {
            wr(dw, (d0 + q) >> 2u, rd(sw, (s0 + r * ss + j) >> 2u));
        }
        return;
    }
    let w = (d0 >> 2u) + t;
    if (w * 4u >= d0 + span) {
        return;
    }
    var word = rd(dw, w);
    var touched = false;
    for (var b = 0u; b < 4u; b++) {
        let a = w * 4u + b;
        if (a < d0 || a >= d0 + span) {
            continue;
        }
        let q = a - d0;
        let r = q / ds;
        let j = q - r * ds;
        if (j >= inner) {
            continue;
        }
        let v = slab_byte(sw, s0 + r * ss + j);
        word = (word & ~(0xffu << (b * 8u))) | (v << (b * 8u));
        touched = true;
    }
    if (touched) {
        wr(dw, w, word);
    }
}
