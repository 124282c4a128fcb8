// prelude: bindings and typed access to the one storage buffer, shared by every kernel.
// Bindings 0-3 are windows of the buffer as 32-bit words (all the whole buffer when
// it fits the binding limit). Binding 4 holds the dispatch's parameters as the struct
// `p`, generated from the kernel's Rust parameter struct (rlx-gpu `kernel_params!`):
// first one handle per operand (window index << 30 | byte offset in that window),
// named as the kernel names its operands, then the kernel's own fields. Words are
// read and written through `rd` and `wr`, from `access_windows.wgsl` or, when the
// whole buffer is one window, `access_whole.wgsl`.

@group(0) @binding(0) var<storage, read_write> B0: array<u32>;
@group(0) @binding(1) var<storage, read_write> B1: array<u32>;
@group(0) @binding(2) var<storage, read_write> B2: array<u32>;
@group(0) @binding(3) var<storage, read_write> B3: array<u32>;

fn wg_linear(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

fn ldf(b: u32, i: u32) -> f32 {
    return bitcast<f32>(rd(b, i));
}

fn stf(b: u32, i: u32, v: f32) {
    wr(b, i, bitcast<u32>(v));
}

fn ldi(b: u32, i: u32) -> i32 {
    return bitcast<i32>(rd(b, i));
}

fn sti(b: u32, i: u32, v: i32) {
    wr(b, i, bitcast<u32>(v));
}

fn ldw(b: u32, i: u32) -> u32 {
    return rd(b, i);
}

fn stw(b: u32, i: u32, v: u32) {
    wr(b, i, v);
}

// Byte `i` of the operand at `b` (bool, u8).
fn ldb(b: u32, i: u32) -> u32 {
    let o = (b & 0x3fffffffu) + i;
    return (rd(b & 0xc0000000u, o >> 2u) >> ((o & 3u) * 8u)) & 0xffu;
}

// An index stored as i32 (wide == 0) or as i64 (wide == 1, two words). An i64
// outside the i32 range reads as i32 min, which every bounds check rejects.
fn ldidx(b: u32, i: u32, wide: u32) -> i32 {
    if (wide == 0u) {
        return bitcast<i32>(rd(b, i));
    }
    let lo = bitcast<i32>(rd(b, 2u * i));
    let hi = bitcast<i32>(rd(b, 2u * i + 1u));
    if (hi != (lo >> 31u)) {
        return -2147483647 - 1;
    }
    return lo;
}

fn nan_f32() -> f32 {
    var u = 0x7fc00000u;
    return bitcast<f32>(u);
}

fn inf_f32() -> f32 {
    var u = 0x7f800000u;
    return bitcast<f32>(u);
}

// a / b correctly rounded, as IEEE (and the CPU backend) divides: Vulkan
// lets a device's `/` be 2.5 ulp off (NVIDIA's is), which moves roundings
// such as quantization's by one level. One correction step on the exact
// residual (fma) fixes the quotient; infinities, NaNs and a zero divisor
// keep the device's result.
fn fdiv(a: f32, b: f32) -> f32 {
    let q = a / b;
    let r = fma(-q, b, a);
    if (!(abs(q) <= 3.4028235e38) || !(abs(r) <= 3.4028235e38) || b == 0.0) {
        return q;
    }
    return fma(r, 1.0 / b, q);
}
