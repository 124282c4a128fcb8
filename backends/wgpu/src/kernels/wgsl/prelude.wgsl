// prelude: bindings and typed access to the one storage buffer, shared by every kernel.
// Binding 0 is a window of the buffer as 32-bit words; binding 1 the dispatch's params,
// whose first words are operand byte offsets relative to the window.

@group(0) @binding(0) var<storage, read_write> A: array<u32>;
@group(0) @binding(1) var<storage, read> P: array<u32>;

fn wg_linear(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

fn ldf(b: u32, i: u32) -> f32 {
    return bitcast<f32>(A[(b >> 2u) + i]);
}

fn stf(b: u32, i: u32, v: f32) {
    A[(b >> 2u) + i] = bitcast<u32>(v);
}

fn ldi(b: u32, i: u32) -> i32 {
    return bitcast<i32>(A[(b >> 2u) + i]);
}

fn sti(b: u32, i: u32, v: i32) {
    A[(b >> 2u) + i] = bitcast<u32>(v);
}

fn ldw(b: u32, i: u32) -> u32 {
    return A[(b >> 2u) + i];
}

fn stw(b: u32, i: u32, v: u32) {
    A[(b >> 2u) + i] = v;
}

// Byte `i` of the operand at `b` (bool, u8).
fn ldb(b: u32, i: u32) -> u32 {
    let o = b + i;
    return (A[o >> 2u] >> ((o & 3u) * 8u)) & 0xffu;
}

// An index stored as i32 (wide == 0) or as i64 (wide == 1, two words). An i64
// outside the i32 range reads as i32 min, which every bounds check rejects.
fn ldidx(b: u32, i: u32, wide: u32) -> i32 {
    if (wide == 0u) {
        return bitcast<i32>(A[(b >> 2u) + i]);
    }
    let lo = bitcast<i32>(A[(b >> 2u) + 2u * i]);
    let hi = bitcast<i32>(A[(b >> 2u) + 2u * i + 1u]);
    if (hi != (lo >> 31u)) {
        return -2147483647 - 1;
    }
    return lo;
}

fn pf(i: u32) -> f32 {
    return bitcast<f32>(P[i]);
}

fn pi(i: u32) -> i32 {
    return bitcast<i32>(P[i]);
}

fn nan_f32() -> f32 {
    var u = 0x7fc00000u;
    return bitcast<f32>(u);
}

fn inf_f32() -> f32 {
    var u = 0x7f800000u;
    return bitcast<f32>(u);
}
