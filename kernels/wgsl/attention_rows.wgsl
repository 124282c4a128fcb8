// attention_rows: scaled dot-product attention, f32, heads of up to 64
// features, for several query rows: a workgroup of 64 invocations per (batch,
// query head, 8 query rows). Keys and values go by in tiles of 16 through
// workgroup memory with an online softmax (running max `m` and sum `l` per
// row, rescaled per tile). Per tile, each invocation first scores two
// (row, key) pairs (one vec4 dot product over the head), then accumulates
// 8 output features of one row (two vec4, 32 features apart, so that the
// reads of eight neighbouring invocations fall in distinct banks).
//
// Same parameters, flags and masks as attention.wgsl, without the QK output;
// the softcap and the mask bias are attention_mask.wgsl's (prepended).

const ROWS: u32 = 8u;
const TILE: u32 = 16u;
const MASKED: f32 = -3.0e38;

// The workgroup's query rows (scaled), 16 vec4 a row.
var<workgroup> qs: array<vec4<f32>, 128>;
// The tile's keys, 17 vec4 a key (one of padding: a key per bank group).
var<workgroup> ks: array<vec4<f32>, 272>;
// The tile's values, 16 vec4 a key.
var<workgroup> vs: array<vec4<f32>, 256>;
// The tile's scores, 17 a row.
var<workgroup> ss: array<f32, 136>;

// Four consecutive elements of operand `h` from `at`, the first `valid` of
// them (the rest read as zero). Branch-free, so that the loads of several
// calls issue together: an element past `valid` reloads the first (or the
// operand's first, when none is valid) and is selected away.
fn ld4(h: u32, at: u32, valid: u32) -> vec4<f32> {
    let a = select(0u, at, valid > 0u);
    return vec4<f32>(
        select(0.0, ldf(h, a), valid > 0u),
        select(0.0, ldf(h, a + select(0u, 1u, valid > 1u)), valid > 1u),
        select(0.0, ldf(h, a + select(0u, 2u, valid > 2u)), valid > 2u),
        select(0.0, ldf(h, a + select(0u, 3u, valid > 3u)), valid > 3u));
}

// Key or value row `j` of a tile (four features from `d`), zero past `keys`.
fn kv4(h: u32, base: u32, stride: u32, j: u32, keys: u32, d: u32, n: u32) -> vec4<f32> {
    let ok = j < keys;
    return ld4(h, base + select(0u, j, ok) * stride + d, select(0u, left4(d, n), ok));
}

// Stores the first `valid` of four consecutive elements.
fn st4(h: u32, at: u32, v: vec4<f32>, valid: u32) {
    for (var c = 0u; c < min(valid, 4u); c++) {
        stf(h, at + c, v[c]);
    }
}

// How many of the four features from `d` lie below `n`.
fn left4(d: u32, n: u32) -> u32 {
    return n - min(d, n);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let sq = p.sq;
    let keys = p.keys;
    let dk = p.dk;
    let dv = p.dv;
    let tiles = (sq + ROWS - 1u) / ROWS;
    let wg = wg_linear(wid, nwg);
    let bh = wg / tiles;
    if (bh >= p.rows / sq) {
        return;
    }
    let i0 = (wg % tiles) * ROWS;
    let h = bh % p.hq;
    let b = bh / p.hq;
    let kvh = h / p.group;
    let kb = b * p.k_s[0] + kvh * p.k_s[1];
    let vb = b * p.v_s[0] + kvh * p.v_s[1];
    let d4 = li % 16u;
    let hk = p.k;
    let hv = p.v;
    let ks2 = p.k_s[2];
    let vs2 = p.v_s[2];

    for (var c = 0u; c < 2u; c++) {
        let r = li / 16u + 4u * c;
        let i = i0 + r;
        var q = vec4<f32>(0.0);
        if (i < sq) {
            q = ld4(p.q, b * p.q_s[0] + h * p.q_s[1] + i * p.q_s[2] + d4 * 4u, left4(d4 * 4u, dk)) * p.scale;
        }
        qs[r * 16u + d4] = q;
    }

    // Scoring: key sj of the tile against rows sr and sr + 4.
    let sj = li % 16u;
    let sr = li / 16u;
    // Accumulating: row ar, features 4af.. (lo) and 32 + 4af.. (hi).
    let ar = li / 8u;
    let af = li % 8u;
    var m = -inf_f32();
    var l = 0.0;
    var lo = vec4<f32>(0.0);
    var hi = vec4<f32>(0.0);
    for (var t0 = 0u; t0 < keys; t0 += TILE) {
        // The tile's 16 keys and values, four of each an invocation, all
        // loads issued before the first store.
        let key = li / 16u;
        let j = t0 + key;
        let f = d4 * 4u;
        let k0 = kv4(hk, kb, ks2, j, keys, f, dk);
        let k1 = kv4(hk, kb, ks2, j + 4u, keys, f, dk);
        let k2 = kv4(hk, kb, ks2, j + 8u, keys, f, dk);
        let k3 = kv4(hk, kb, ks2, j + 12u, keys, f, dk);
        let v0 = kv4(hv, vb, vs2, j, keys, f, dv);
        let v1 = kv4(hv, vb, vs2, j + 4u, keys, f, dv);
        let v2 = kv4(hv, vb, vs2, j + 8u, keys, f, dv);
        let v3 = kv4(hv, vb, vs2, j + 12u, keys, f, dv);
        ks[key * 17u + d4] = k0;
        ks[(key + 4u) * 17u + d4] = k1;
        ks[(key + 8u) * 17u + d4] = k2;
        ks[(key + 12u) * 17u + d4] = k3;
        vs[key * 16u + d4] = v0;
        vs[(key + 4u) * 16u + d4] = v1;
        vs[(key + 8u) * 16u + d4] = v2;
        vs[(key + 12u) * 16u + d4] = v3;
        workgroupBarrier();
        for (var c = 0u; c < 2u; c++) {
            let r = sr + 4u * c;
            let i = i0 + r;
            let j = t0 + sj;
            var s = -inf_f32();
            if (i < sq && j < keys) {
                var acc = vec4<f32>(0.0);
                for (var e = 0u; e < 16u; e++) {
                    acc = fma(qs[r * 16u + e], ks[sj * 17u + e], acc);
                }
                s = att_cap(acc.x + acc.y + acc.z + acc.w) + att_bias(b, h, i, j);
            }
            ss[r * 17u + sj] = s;
        }
        workgroupBarrier();
        let n = min(TILE, keys - t0);
        var tmax = -inf_f32();
        for (var jj = 0u; jj < n; jj++) {
            tmax = max(tmax, ss[ar * 17u + jj]);
        }
        let mnew = max(m, tmax);
        // Nothing unmasked yet: keep the state.
        if (mnew > MASKED) {
            var alpha = 0.0;
            if (m > MASKED) {
                alpha = exp(m - mnew);
            }
            l *= alpha;
            lo *= alpha;
            hi *= alpha;
            for (var jj = 0u; jj < n; jj++) {
                let s = ss[ar * 17u + jj];
                if (s > MASKED) {
                    let pr = exp(s - mnew);
                    l += pr;
                    lo = fma(vec4<f32>(pr), vs[jj * 16u + af], lo);
                    hi = fma(vec4<f32>(pr), vs[jj * 16u + 8u + af], hi);
                }
            }
            m = mnew;
        }
        workgroupBarrier();
    }

    let i = i0 + ar;
    if (i < sq) {
        let yb = b * p.y_s[0] + h * p.y_s[1] + i * p.y_s[2];
        var ol = vec4<f32>(0.0);
        var oh = vec4<f32>(0.0);
        if (l > 0.0) {
            ol = lo / l;
            oh = hi / l;
        }
        let f = af * 4u;
        st4(p.y, yb + f, ol, left4(f, dv));
        st4(p.y, yb + 32u + f, oh, left4(32u + f, dv));
    }
}
