// matmul_tile: what both GEMM kernels share (matmul.wgsl, 64 invocations
// of 8x8 outputs; matmul_narrow.wgsl, 128 invocations of 8x4): a 64x64 output
// tile, K in steps of 16 through workgroup memory, operand tiles loaded by
// `load` and written K-major by `stage`, and the epilogue's loads and stores.
// The kernel that follows this file defines `INV`, its invocations.
//
// Params `p`: rlx-gpu `MatmulParams` (sizes m, n, k, element strides, flags bit 0:
// add bias, bit 1: apply `epilogue`, bit 2: accumulate into C; tiles, right-aligned
// batch dims with per-operand batch strides) after the operand handles a, b, c,
// bias. The pipeline prepends `fn epilogue(x0: f32) -> f32`, the fused product's
// activation (rlx-gpu `elementwise::wgsl::epilogue`), and the constants
// `A_ALONG_K` and `B_ALONG_K`: whether each operand's tile is loaded along K (K is
// its contiguous axis: a row-major A, a transposed B) or along its rows or
// columns. They are the plan's, from the strides, so each pipeline holds only
// the load and staging code of its layout.

// Operand tiles, K-major: As[k * 16 + q] holds rows 4q..4q+3 of column k of
// the A tile; Bs[k * 16 + q] columns 4q..4q+3 of row k of the B tile.
var<workgroup> As: array<vec4<f32>, 256>;
var<workgroup> Bs: array<vec4<f32>, 256>;

// Four elements of operand `h` from `at`, `step` apart; the first `valid` of
// them (the rest are past the matrix's edge and read as zero).
fn quad(h: u32, at: u32, step: u32, valid: u32) -> vec4<f32> {
    if (valid >= 4u) {
        return vec4<f32>(ldf(h, at), ldf(h, at + step), ldf(h, at + 2u * step), ldf(h, at + 3u * step));
    }
    var v = vec4<f32>(0.0);
    if (valid > 0u) {
        v.x = ldf(h, at);
    }
    if (valid > 1u) {
        v.y = ldf(h, at + step);
    }
    if (valid > 2u) {
        v.z = ldf(h, at + 2u * step);
    }
    return v;
}

// How many of four consecutive indices from `i` lie below `end`.
fn inside(i: u32, end: u32) -> u32 {
    return min(end - min(i, end), 4u);
}

// Quad `j` (of 256 / INV) of this invocation's share of a 64 x 16 operand tile
// whose 64 "rows" (A's rows, B's columns) start at `r0` of `rows` and whose
// K starts at `k0`; `s_r` and `s_k` are the element strides. Along K when
// K is the contiguous axis (a row-major A, a transposed B), else along rows,
// so neighbouring invocations read neighbouring addresses either way.
fn load(h: u32, base: u32, along_k: bool, li: u32, j: u32, r0: u32, rows: u32, k0: u32, K: u32, s_r: u32, s_k: u32) -> vec4<f32> {
    if (along_k) {
        let r = r0 + li / 4u + (INV / 4u) * j;
        let k = k0 + (li % 4u) * 4u;
        let valid = select(0u, inside(k, K), r < rows);
        return quad(h, base + r * s_r + k * s_k, s_k, valid);
    }
    let r = r0 + (li % 16u) * 4u;
    let k = k0 + li / 16u + (INV / 16u) * j;
    let valid = select(0u, inside(r, rows), k < K);
    return quad(h, base + r * s_r + k * s_k, s_r, valid);
}

// Element `c` of vec4 `i` of tile A (`b` false) or B.
fn put_tile(b: bool, i: u32, c: u32, x: f32) {
    if (b) {
        Bs[i][c] = x;
    } else {
        As[i][c] = x;
    }
}

// Stores quad `j` loaded by `load` into K-major tile A (`b` false) or B.
fn stage(b: bool, along_k: bool, li: u32, j: u32, v: vec4<f32>) {
    if (along_k) {
        let r = li / 4u + (INV / 4u) * j;
        let k = (li % 4u) * 4u;
        put_tile(b, k * 16u + r / 4u, r % 4u, v.x);
        put_tile(b, (k + 1u) * 16u + r / 4u, r % 4u, v.y);
        put_tile(b, (k + 2u) * 16u + r / 4u, r % 4u, v.z);
        put_tile(b, (k + 3u) * 16u + r / 4u, r % 4u, v.w);
        return;
    }
    let i = (li / 16u + (INV / 16u) * j) * 16u + li % 16u;
    if (b) {
        Bs[i] = v;
    } else {
        As[i] = v;
    }
}

// What the epilogue reads from `p`, read once before the first store (a load
// after a store to the one buffer waits for its turn).
struct Epi {
    m: u32,
    n: u32,
    c_sm: u32,
    c_sn: u32,
    bias_sm: u32,
    bias_sn: u32,
    flags: u32,
    c: u32,
    bias: u32,
    co: u32,
    biaso: u32,
}

// What is added to four outputs of row `m` from column `n`: C's current
// values when accumulating, the bias. Loads only.
fn addend(e: Epi, m: u32, n: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    if (m >= e.m || (e.flags & 5u) == 0u) {
        return v;
    }
    for (var j = 0u; j < 4u; j++) {
        if (n + j < e.n) {
            var x = 0.0;
            if ((e.flags & 4u) != 0u) {
                x += ldf(e.c, e.co + m * e.c_sm + (n + j) * e.c_sn);
            }
            if ((e.flags & 1u) != 0u) {
                x += ldf(e.bias, e.biaso + m * e.bias_sm + (n + j) * e.bias_sn);
            }
            v[j] = x;
        }
    }
    return v;
}

// Stores four outputs of row `m` from column `n` through the activation.
fn put(e: Epi, m: u32, n: u32, v: vec4<f32>) {
    if (m >= e.m) {
        return;
    }
    for (var j = 0u; j < 4u; j++) {
        if (n + j < e.n) {
            var x = v[j];
            if ((e.flags & 2u) != 0u) {
                x = epilogue(x);
            }
            stf(e.c, e.co + m * e.c_sm + (n + j) * e.c_sn, x);
        }
    }
}

// Where workgroup `wg`'s output tile lies: its batch entry's element offsets
// of A, B, C and the bias, and the tile's first row and column; `inside` is
// false past the last batch entry.
struct Tile {
    a: u32,
    b: u32,
    c: u32,
    bias: u32,
    m0: u32,
    n0: u32,
    inside: bool,
}

fn tile_of(wg: u32) -> Tile {
    let tn = wg % p.tiles_n;
    let rest = wg / p.tiles_n;
    let tm = rest % p.tiles_m;
    let bi = rest / p.tiles_m;
    var t = Tile(0u, 0u, 0u, 0u, tm * 64u, tn * 64u, bi < p.batches);
    var r = bi;
    for (var d = 0u; d < 4u; d++) {
        let a = 3u - d;
        let c = r % p.batch[a];
        r = r / p.batch[a];
        t.a += c * p.a_sb[a];
        t.b += c * p.b_sb[a];
        t.c += c * p.c_sb[a];
        t.bias += c * p.bias_sb[a];
    }
    return t;
}
