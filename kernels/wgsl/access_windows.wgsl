// rd/wr for a buffer bound as up to four windows (see prelude.wgsl).

// Word `i` of the operand with handle `h` (window in the top 2 bits, byte
// offset in that window below).
fn rd(h: u32, i: u32) -> u32 {
    let w = ((h & 0x3fffffffu) >> 2u) + i;
    switch (h >> 30u) {
        case 0u: { return B0[w]; }
        case 1u: { return B1[w]; }
        case 2u: { return B2[w]; }
        default: { return B3[w]; }
    }
}

fn wr(h: u32, i: u32, v: u32) {
    let w = ((h & 0x3fffffffu) >> 2u) + i;
    switch (h >> 30u) {
        case 0u: { B0[w] = v; }
        case 1u: { B1[w] = v; }
        case 2u: { B2[w] = v; }
        default: { B3[w] = v; }
    }
}
