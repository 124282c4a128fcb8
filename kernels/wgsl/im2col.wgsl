// im2col: columns p0..p0+cols of the unfolded image of a 2-D convolution, one
// invocation per element of col[c * KH * KW + kh * KW + kw][p - p0].
// Params `p`: rlx-gpu `Im2colParams` (total, c, h, w, kh, kw, ow, strides sh/sw,
// dilations dh/dw, pads pt/pl, p0, cols) after the operand handles x, col.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.total) {
        return;
    }
    let H = p.h; let W = p.w; let KH = p.kh; let KW = p.kw; let OW = p.ow;
    let cols = p.cols;
    let q = t % cols;
    let r = t / cols;
    let pos = p.p0 + q;
    let oy = pos / OW;
    let ox = pos % OW;
    let kw = r % KW;
    let kh = (r / KW) % KH;
    let c = r / (KW * KH);
    let iy = i32(oy * p.sh + kh * p.dh) - i32(p.pt);
    let ix = i32(ox * p.sw + kw * p.dw) - i32(p.pl);
    var v = 0u;
    if (iy >= 0 && iy < i32(H) && ix >= 0 && ix < i32(W)) {
        v = ldw(p.x, (c * H + u32(iy)) * W + u32(ix));
    }
    stw(p.col, t, v);
}
