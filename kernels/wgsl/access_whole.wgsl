// rd/wr when the whole buffer fits one binding: every handle is a byte offset
// into binding 0 (window 0), so an access is one load or store, no branch.

fn rd(h: u32, i: u32) -> u32 {
    return B0[(h >> 2u) + i];
}

fn wr(h: u32, i: u32, v: u32) {
    B0[(h >> 2u) + i] = v;
}
