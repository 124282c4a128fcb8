// im2col: columns p0..p0+cols of the unfolded image of a 2-D convolution, one
// invocation per element of col[c * KH * KW + kh * KW + kw][p - p0].
// Params after operands (x, col): n, C, H, W, KH, KW, OW, SH, SW, DH, DW, PT, PL, p0, cols.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= P[2]) {
        return;
    }
    let H = P[4]; let W = P[5]; let KH = P[6]; let KW = P[7]; let OW = P[8];
    let cols = P[16];
    let q = t % cols;
    let r = t / cols;
    let p = P[15] + q;
    let oy = p / OW;
    let ox = p % OW;
    let kw = r % KW;
    let kh = (r / KW) % KH;
    let c = r / (KW * KH);
    let iy = i32(oy * P[9] + kh * P[11]) - i32(P[13]);
    let ix = i32(ox * P[10] + kw * P[12]) - i32(P[14]);
    var v = 0u;
    if (iy >= 0 && iy < i32(H) && ix >= 0 && ix < i32(W)) {
        v = ldw(P[0], (c * H + u32(iy)) * W + u32(ix));
    }
    stw(P[1], t, v);
}
