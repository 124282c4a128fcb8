//! Element traits: floats compute in a wider "compute" type (f16/bf16 in f32),
//! integers with wrapping arithmetic.

use bytemuck::Pod;
use half::{bf16, f16};

/// The float type a float dtype computes in.
pub trait Comp: num_traits::Float + Send + Sync + 'static {
    fn erf(self) -> Self;
    /// `exp`, `tanh` and `erf` as the element-wise kernels compute them: f32
    /// through the vectorizable polynomials of `vmath` (within 2 ulp), f64
    /// through libm.
    fn vexp(self) -> Self;
    fn vtanh(self) -> Self;
    fn verf(self) -> Self;
    fn round_even(self) -> Self;
    fn from_f64c(v: f64) -> Self;
}

impl Comp for f32 {
    fn erf(self) -> f32 {
        libm::erff(self)
    }
    fn vexp(self) -> f32 {
        super::vmath::exp(self)
    }
    fn vtanh(self) -> f32 {
        super::vmath::tanh(self)
    }
    fn verf(self) -> f32 {
        super::vmath::erf(self)
    }
    fn round_even(self) -> f32 {
        self.round_ties_even()
    }
    fn from_f64c(v: f64) -> f32 {
        v as f32
    }
}

impl Comp for f64 {
    fn erf(self) -> f64 {
        libm::erf(self)
    }
    fn vexp(self) -> f64 {
        self.exp()
    }
    fn vtanh(self) -> f64 {
        self.tanh()
    }
    fn verf(self) -> f64 {
        libm::erf(self)
    }
    fn round_even(self) -> f64 {
        self.round_ties_even()
    }
    fn from_f64c(v: f64) -> f64 {
        v
    }
}

/// A float element type.
pub trait Real: Pod + Copy + Send + Sync + PartialOrd + 'static {
    type C: Comp;
    fn up(self) -> Self::C;
    fn down(c: Self::C) -> Self;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

impl Real for f32 {
    type C = f32;
    fn up(self) -> f32 {
        self
    }
    fn down(c: f32) -> f32 {
        c
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
}

impl Real for f64 {
    type C = f64;
    fn up(self) -> f64 {
        self
    }
    fn down(c: f64) -> f64 {
        c
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> f64 {
        v
    }
}

impl Real for f16 {
    type C = f32;
    fn up(self) -> f32 {
        self.to_f32()
    }
    fn down(c: f32) -> f16 {
        f16::from_f32(c)
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> f16 {
        f16::from_f64(v)
    }
}

impl Real for bf16 {
    type C = f32;
    fn up(self) -> f32 {
        self.to_f32()
    }
    fn down(c: f32) -> bf16 {
        bf16::from_f32(c)
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> bf16 {
        bf16::from_f64(v)
    }
}

/// An integer element type.
pub trait Int:
    Pod
    + Copy
    + Send
    + Sync
    + Ord
    + num_traits::PrimInt
    + num_traits::WrappingAdd
    + num_traits::WrappingSub
    + num_traits::WrappingMul
    + num_traits::WrappingNeg
    + 'static
{
    const SIGNED: bool;
    fn to_i128(self) -> i128;
    /// Wraps like a C cast.
    fn from_i128(v: i128) -> Self;
    fn to_f64(self) -> f64;
}

macro_rules! ints {
    ($($t:ty, $signed:expr;)*) => {$(
        impl Int for $t {
            const SIGNED: bool = $signed;
            fn to_i128(self) -> i128 { self as i128 }
            fn from_i128(v: i128) -> $t { v as $t }
            fn to_f64(self) -> f64 { self as f64 }
        }
    )*};
}

ints! {
    i8, true; i16, true; i32, true; i64, true;
    u8, false; u16, false; u32, false; u64, false;
}

/// Any element type with a conversion through f64 (used by mixed-dtype ops).
pub trait AnyNum: Pod + Copy + Send + Sync + PartialOrd + 'static {
    fn as_f64(self) -> f64;
    /// Saturating for integers (NaN gives 0), like Rust's `as`.
    fn of_f64(v: f64) -> Self;
    /// The integer value (floats truncate).
    fn as_i128(self) -> i128;
    /// Wrapping for integers, like a C cast.
    fn of_i128(v: i128) -> Self;
}

macro_rules! any_num_prim {
    ($($t:ty),*) => {$(
        impl AnyNum for $t {
            fn as_f64(self) -> f64 { self as f64 }
            fn of_f64(v: f64) -> $t { v as $t }
            fn as_i128(self) -> i128 { self as i128 }
            fn of_i128(v: i128) -> $t { v as $t }
        }
    )*};
}

any_num_prim!(f32, f64, i8, i16, i32, i64, u8, u16, u32, u64);

impl AnyNum for f16 {
    fn as_f64(self) -> f64 {
        self.to_f64()
    }
    fn of_f64(v: f64) -> f16 {
        f16::from_f64(v)
    }
    fn as_i128(self) -> i128 {
        self.to_f64() as i128
    }
    fn of_i128(v: i128) -> f16 {
        f16::from_f64(v as f64)
    }
}

impl AnyNum for bf16 {
    fn as_f64(self) -> f64 {
        self.to_f64()
    }
    fn of_f64(v: f64) -> bf16 {
        bf16::from_f64(v)
    }
    fn as_i128(self) -> i128 {
        self.to_f64() as i128
    }
    fn of_i128(v: i128) -> bf16 {
        bf16::from_f64(v as f64)
    }
}

/// `v` as f32s when `T` is f32 (a kernel generic over the element type taking
/// an f32-only fast path).
pub fn as_f32<T: 'static>(v: &[T]) -> Option<&[f32]> {
    (std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>())
        // SAFETY: T is f32 (checked above).
        .then(|| unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len()) })
}

/// [`as_f32`] for a mutable slice.
pub fn as_f32_mut<T: 'static>(v: &mut [T]) -> Option<&mut [f32]> {
    (std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>())
        // SAFETY: T is f32 (checked above).
        .then(|| unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), v.len()) })
}
