// Positional parameter words of kernels not yet moved to a typed parameter
// struct: P[0..] are the operand handles, then the kernel's words.
@group(0) @binding(4) var<storage, read> P: array<u32>;

fn pf(i: u32) -> f32 {
    return bitcast<f32>(P[i]);
}

fn pi(i: u32) -> i32 {
    return bitcast<i32>(P[i]);
}
