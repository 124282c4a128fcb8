// attention_tile: scaled dot-product attention, f32, heads of up to 4 * ND4
// features (ND4, the vec4 a head spans: 4, 8 or 16, is a constant the host
// prepends), for several query rows: a workgroup of 64 invocations per
// (batch, query head, 16 query rows). Keys and values go by in tiles of 16
// through workgroup memory, the next tile's loads issued before this one is
// computed.
//
// Invocation t owns query row t / 4 and keys t % 4, t % 4 + 4, ... of every
// tile. It holds its query row in registers and keeps its own online softmax
// (running max `m` and sum `l`) and output accumulator over its keys, so a
// tile costs two barriers and no reduction across invocations; the four
// partial states of a row merge once, at the end, through workgroup memory.
// Key tiles that no row of the workgroup can see (causality, key lengths,
// the mask's length) are not visited.
//
// Same parameters, flags and masks as attention.wgsl, without the QK output;
// the softcap, the mask bias and the loads are attention_mask.wgsl's
// (prepended).

const ROWS: u32 = 16u;
const TILE: u32 = 16u;
// Invocations sharing a query row, and keys each takes of a tile.
const SLOTS: u32 = 4u;
const PER: u32 = TILE / SLOTS;
// vec4 a key in workgroup memory: one of padding, so that the four slots of
// a row read four keys in distinct banks.
const LD: u32 = ND4 + 1u;
// vec4 each invocation stages of a tile, per operand.
const STAGE: u32 = TILE * ND4 / 64u;
const MASKED: f32 = -3.0e38;

var<workgroup> ks: array<vec4<f32>, TILE * LD>;
var<workgroup> vs: array<vec4<f32>, TILE * LD>;
// The merge: four vec4 of each invocation's accumulator a round, and each
// invocation's running max and sum.
var<workgroup> mg: array<vec4<f32>, 256>;
var<workgroup> ms: array<f32, 64>;
var<workgroup> ls: array<f32, 64>;
var<workgroup> kend_w: u32;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let sq = p.sq;
    let keys = p.keys;
    let dk = p.dk;
    let dv = p.dv;
    let flags = p.flags;
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
    let ks2 = p.k_s[2];
    let vs2 = p.v_s[2];
    let r = li / SLOTS;
    let slot = li % SLOTS;
    let i = i0 + r;

    // The keys some row of the workgroup may see: [0, kend), made uniform
    // for the tile loop's barriers (a key length is a storage read).
    var kend = keys;
    if ((flags & 8u) != 0u) {
        kend = min(kend, u32(max(ldidx(p.nonpad, b, (flags >> 4u) & 1u), 0)));
    }
    if ((flags & 1u) != 0u) {
        kend = min(kend, p.mask_len);
    }
    if ((flags & 4u) != 0u && (flags & 64u) == 0u) {
        // Causal, bottom-right aligned by the cache: row i sees keys up to
        // i + past.
        kend = min(kend, min(i0 + ROWS, sq) + p.past);
    }
    if (li == 0u) {
        kend_w = kend;
    }
    kend = workgroupUniformLoad(&kend_w);

    var q: array<vec4<f32>, ND4>;
    let qb = b * p.q_s[0] + h * p.q_s[1] + min(i, sq - 1u) * p.q_s[2];
    for (var e = 0u; e < ND4; e++) {
        q[e] = ld4(p.q, qb + e * 4u, select(0u, left4(e * 4u, dk), i < sq)) * p.scale;
    }

    // This invocation's share of a tile: vec4 x = li + 64u * u is feature
    // vec4 x % ND4 of key x / ND4.
    var kn: array<vec4<f32>, STAGE>;
    var vn: array<vec4<f32>, STAGE>;
    for (var u = 0u; u < STAGE; u++) {
        let x = li + 64u * u;
        let f = (x % ND4) * 4u;
        kn[u] = kv4(p.k, kb, ks2, x / ND4, kend, f, dk);
        vn[u] = kv4(p.v, vb, vs2, x / ND4, kend, f, dv);
    }

    var m = -inf_f32();
    var l = 0.0;
    var acc: array<vec4<f32>, ND4>;
    for (var e = 0u; e < ND4; e++) {
        acc[e] = vec4<f32>(0.0);
    }
    for (var t0 = 0u; t0 < kend; t0 += TILE) {
        for (var u = 0u; u < STAGE; u++) {
            let x = li + 64u * u;
            let at = (x / ND4) * LD + x % ND4;
            ks[at] = kn[u];
            vs[at] = vn[u];
        }
        workgroupBarrier();
        // The next tile's loads, in flight while this one is computed.
        let t1 = t0 + TILE;
        if (t1 < kend) {
            for (var u = 0u; u < STAGE; u++) {
                let x = li + 64u * u;
                let f = (x % ND4) * 4u;
                kn[u] = kv4(p.k, kb, ks2, t1 + x / ND4, kend, f, dk);
                vn[u] = kv4(p.v, vb, vs2, t1 + x / ND4, kend, f, dv);
            }
        }
        var s: array<f32, PER>;
        var tmax = -inf_f32();
        for (var u = 0u; u < PER; u++) {
            let kk = slot + SLOTS * u;
            let j = t0 + kk;
            var dot = vec4<f32>(0.0);
            for (var e = 0u; e < ND4; e++) {
                dot = fma(q[e], ks[kk * LD + e], dot);
            }
            var sc = -inf_f32();
            if (i < sq && j < kend) {
                sc = att_cap(dot.x + dot.y + dot.z + dot.w) + att_bias(b, h, i, j);
            }
            s[u] = sc;
            tmax = max(tmax, sc);
        }
        let mnew = max(m, tmax);
        // Nothing unmasked yet: keep the state.
        if (mnew > MASKED) {
            var alpha = 0.0;
            if (m > MASKED) {
                alpha = exp(m - mnew);
            }
            l *= alpha;
            for (var e = 0u; e < ND4; e++) {
                acc[e] *= alpha;
            }
            for (var u = 0u; u < PER; u++) {
                if (s[u] > MASKED) {
                    let pr = exp(s[u] - mnew);
                    l += pr;
                    let kv = (slot + SLOTS * u) * LD;
                    for (var e = 0u; e < ND4; e++) {
                        acc[e] = fma(vec4<f32>(pr), vs[kv + e], acc[e]);
                    }
                }
            }
            m = mnew;
        }
        workgroupBarrier();
    }

    // The row's four partial states, each rescaled to the row's max.
    ms[li] = m;
    ls[li] = l;
    workgroupBarrier();
    let r0 = r * SLOTS;
    var mx = -inf_f32();
    for (var c = 0u; c < SLOTS; c++) {
        mx = max(mx, ms[r0 + c]);
    }
    var total = 0.0;
    var mine = 0.0;
    if (mx > MASKED) {
        for (var c = 0u; c < SLOTS; c++) {
            let mc = ms[r0 + c];
            if (mc > MASKED) {
                total += ls[r0 + c] * exp(mc - mx);
            }
        }
        if (m > MASKED) {
            mine = exp(m - mx);
        }
    }
    let yb = b * p.y_s[0] + h * p.y_s[1] + i * p.y_s[2];
    // Four vec4 of the head a round; slot c writes vec4 4 * round + c.
    for (var round = 0u; round < ND4 / 4u; round++) {
        for (var c = 0u; c < 4u; c++) {
            mg[li * 4u + c] = acc[round * 4u + c] * mine;
        }
        workgroupBarrier();
        var o = vec4<f32>(0.0);
        for (var c = 0u; c < SLOTS; c++) {
            o += mg[(r0 + c) * 4u + slot];
        }
        let f = (round * 4u + slot) * 4u;
        if (i < sq && f < dv) {
            if (total > 0.0) {
                o = o / total;
            } else {
                o = vec4<f32>(0.0);
            }
            st4(p.y, yb + f, o, left4(f, dv));
        }
        workgroupBarrier();
    }
}
