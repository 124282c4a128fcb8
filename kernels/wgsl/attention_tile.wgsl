// attention_tile: scaled dot-product attention, f32, heads of up to 4 * ND4
// features, for several query rows: a workgroup of 64 invocations per
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
// the mask's length) are not visited. The rules of a score are read from the
// parameters once (`AttRules`), and a mask the same for every query row is
// staged a tile at a time with the keys.
//
// The host prepends, for a head of ND4 vec4 (4, 8 or 16), the constant ND4
// and the per-invocation registers with the functions over them, the loops
// over the head written out (attention.rs, `tile_registers`): the query row
// q0.., the accumulator a0.., the next tile's share kn0.., vn0.. A driver
// keeps an array indexed in a loop in local memory (NVIDIA's did, 656 bytes
// an invocation, at half the speed).
//
// Same parameters, flags and masks as attention.wgsl, without the QK output;
// the softcap, the mask bias and the loads are attention_mask.wgsl's
// (prepended).

const ROWS: u32 = 16u;
const TILE: u32 = 16u;
// Invocations sharing a query row; each takes four keys of a tile.
const SLOTS: u32 = 4u;
// vec4 a key in workgroup memory: one of padding, so that the four slots of
// a row read four keys in distinct banks.
const LD: u32 = ND4 + 1u;
const MASKED: f32 = -3.0e38;

var<workgroup> ks: array<vec4<f32>, TILE * LD>;
var<workgroup> vs: array<vec4<f32>, TILE * LD>;
// The merge: four vec4 of each invocation's accumulator a round, and each
// invocation's running max and sum.
var<workgroup> mg: array<vec4<f32>, 256>;
var<workgroup> ms: array<f32, 64>;
var<workgroup> ls: array<f32, 64>;
var<workgroup> kend_w: u32;
// A mask the same for every query row (a padding mask): the tile's biases,
// staged with its keys, and this invocation's share of the next tile's.
var<workgroup> mb: array<f32, TILE>;
var<private> mbn: f32;

// Where a tile's keys and values come from.
struct KvTile {
    kb: u32,
    vb: u32,
    ks2: u32,
    vs2: u32,
    kend: u32,
    dk: u32,
    dv: u32,
}

// Vec4 `u` of this invocation's share of the tile from key t0: vec4
// x = li + 64u * u is feature vec4 x % ND4 of key x / ND4.
fn tile_k(kv: KvTile, li: u32, t0: u32, u: u32) -> vec4<f32> {
    let x = li + 64u * u;
    return kv4(p.k, kv.kb, kv.ks2, t0 + x / ND4, kv.kend, (x % ND4) * 4u, kv.dk);
}

fn tile_v(kv: KvTile, li: u32, t0: u32, u: u32) -> vec4<f32> {
    let x = li + 64u * u;
    return kv4(p.v, kv.vb, kv.vs2, t0 + x / ND4, kv.kend, (x % ND4) * 4u, kv.dv);
}

// Where vec4 `u` of the share lies in ks and vs.
fn tile_at(li: u32, u: u32) -> u32 {
    let x = li + 64u * u;
    return (x / ND4) * LD + x % ND4;
}

// What scores the workgroup's query row `i` (of batch b, head h).
struct Scorer {
    rules: AttRules,
    b: u32,
    h: u32,
    i: u32,
    kend: u32,
    // Whether row i exists.
    row: bool,
    // Whether the mask's biases are staged in `mb`.
    keyed: bool,
}

// The score of row i against key kk of the tile from t0: -inf past the
// visible keys or the rows.
fn score(c: Scorer, t0: u32, kk: u32) -> f32 {
    let j = t0 + kk;
    let raw = dot_key(kk * LD);
    if (c.row && j < c.kend) {
        var bias = att_rule_bias(c.rules, c.i, j);
        if (c.keyed) {
            bias += mb[kk];
        } else if ((c.rules.flags & 1u) != 0u) {
            bias += att_mask_bias(c.rules, c.b, c.h, c.i, j);
        }
        return att_cap_r(c.rules, raw) + bias;
    }
    return -inf_f32();
}

// A staged mask's biases of the tile from t: one a key, by the first TILE
// invocations.
fn load_mask(c: Scorer, li: u32, t: u32) {
    if (c.keyed && li < TILE) {
        mbn = att_mask_bias(c.rules, c.b, c.h, 0u, t + li);
    }
}

fn store_mask(c: Scorer, li: u32) {
    if (c.keyed && li < TILE) {
        mb[li] = mbn;
    }
}

// Adds key kk's value, weighted by its probability under the max `mx`, to
// the accumulator; returns the probability (0 where masked).
fn add_value(s: f32, mx: f32, kk: u32) -> f32 {
    if (s > MASKED) {
        let pr = exp(s - mx);
        add_row(pr, kk * LD);
        return pr;
    }
    return 0.0;
}

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
    let rules = att_rules(b);
    var kend = keys;
    if ((flags & 8u) != 0u) {
        kend = min(kend, u32(max(rules.np, 0)));
    }
    if ((flags & 1u) != 0u) {
        kend = min(kend, rules.mask_len);
    }
    if ((flags & 4u) != 0u) {
        // Causal: row i sees keys up to i + off.
        kend = min(kend, u32(max(i32(min(i0 + ROWS, sq)) + rules.off, 0)));
    }
    if (li == 0u) {
        kend_w = kend;
    }
    kend = workgroupUniformLoad(&kend_w);

    let sc = Scorer(rules, b, h, i, kend, i < sq, (flags & 1u) != 0u && rules.mask_s.z == 0u);
    load_q(b * p.q_s[0] + h * p.q_s[1] + min(i, sq - 1u) * p.q_s[2], dk, i < sq);
    let kv = KvTile(kb, vb, ks2, vs2, kend, dk, dv);
    load_tile(kv, li, 0u);
    load_mask(sc, li, 0u);

    var m = -inf_f32();
    var l = 0.0;
    for (var t0 = 0u; t0 < kend; t0 += TILE) {
        store_tile(li);
        store_mask(sc, li);
        workgroupBarrier();
        // The next tile's loads, in flight while this one is computed.
        if (t0 + TILE < kend) {
            load_tile(kv, li, t0 + TILE);
            load_mask(sc, li, t0 + TILE);
        }
        let s0 = score(sc, t0, slot);
        let s1 = score(sc, t0, slot + SLOTS);
        let s2 = score(sc, t0, slot + 2u * SLOTS);
        let s3 = score(sc, t0, slot + 3u * SLOTS);
        let mnew = max(max(m, max(s0, s1)), max(s2, s3));
        // Nothing unmasked yet: keep the state.
        if (mnew > MASKED) {
            var alpha = 0.0;
            if (m > MASKED) {
                alpha = exp(m - mnew);
            }
            scale_out(alpha);
            l = l * alpha + add_value(s0, mnew, slot) + add_value(s1, mnew, slot + SLOTS) +
                add_value(s2, mnew, slot + 2u * SLOTS) + add_value(s3, mnew, slot + 3u * SLOTS);
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
        stage_round(round, li * 4u, mine);
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
