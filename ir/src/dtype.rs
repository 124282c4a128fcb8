//! Element types of RLX tensors.
//!
//! Every ONNX tensor element type except complex numbers. Strings (`string`)
//! have no bytes in an arena: a string tensor holds its elements as Rust
//! strings and only the node-by-node executor runs ops on them. Sub-byte
//! types (`i4`, `u4`, `i2`, `u2`, `f4e2m1`) are stored one element per byte inside
//! RLX; the importer unpacks ONNX's packed form and the exporters pack it again.

use std::fmt;
use std::str::FromStr;

macro_rules! dtypes {
    ($($variant:ident = $name:literal, $onnx:literal, $size:literal, $class:ident;)*) => {
        /// An element type.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum DType { $($variant),* }

        impl DType {
            /// Every dtype, in declaration order.
            pub const ALL: &'static [DType] = &[$(DType::$variant),*];

            /// The name used in the IR text form (`f32`, `i64`, `bool`, ...).
            pub fn name(self) -> &'static str {
                match self { $(DType::$variant => $name),* }
            }

            /// The `TensorProto.DataType` code of this dtype.
            pub fn onnx_code(self) -> i32 {
                match self { $(DType::$variant => $onnx),* }
            }

            /// The dtype of a `TensorProto.DataType` code, if RLX supports it.
            pub fn from_onnx_code(code: i32) -> Option<DType> {
                match code { $($onnx => Some(DType::$variant),)* _ => None }
            }

            /// Bytes one element occupies in RLX memory.
            pub fn size(self) -> usize {
                match self { $(DType::$variant => $size),* }
            }

            /// The arithmetic class of this dtype.
            pub fn class(self) -> DTypeClass {
                match self { $(DType::$variant => DTypeClass::$class),* }
            }
        }
    };
}

dtypes! {
    F32 = "f32", 1, 4, Float;
    U8 = "u8", 2, 1, Unsigned;
    I8 = "i8", 3, 1, Signed;
    U16 = "u16", 4, 2, Unsigned;
    I16 = "i16", 5, 2, Signed;
    I32 = "i32", 6, 4, Signed;
    I64 = "i64", 7, 8, Signed;
    Bool = "bool", 9, 1, Bool;
    F16 = "f16", 10, 2, Float;
    F64 = "f64", 11, 8, Float;
    U32 = "u32", 12, 4, Unsigned;
    U64 = "u64", 13, 8, Unsigned;
    BF16 = "bf16", 16, 2, Float;
    F8E4M3FN = "f8e4m3fn", 17, 1, Float;
    F8E4M3FNUZ = "f8e4m3fnuz", 18, 1, Float;
    F8E5M2 = "f8e5m2", 19, 1, Float;
    F8E5M2FNUZ = "f8e5m2fnuz", 20, 1, Float;
    U4 = "u4", 21, 1, Unsigned;
    I4 = "i4", 22, 1, Signed;
    F4E2M1 = "f4e2m1", 23, 1, Float;
    F8E8M0 = "f8e8m0", 24, 1, Float;
    U2 = "u2", 25, 1, Unsigned;
    I2 = "i2", 26, 1, Signed;
    Str = "string", 8, 0, Text;
}

/// How a dtype does arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DTypeClass {
    Float,
    Signed,
    Unsigned,
    Bool,
    /// UTF-8 strings: no arithmetic, and no bytes in an arena.
    Text,
}

impl DType {
    pub fn is_float(self) -> bool {
        self.class() == DTypeClass::Float
    }

    pub fn is_int(self) -> bool {
        matches!(self.class(), DTypeClass::Signed | DTypeClass::Unsigned)
    }

    pub fn is_signed(self) -> bool {
        matches!(self.class(), DTypeClass::Signed | DTypeClass::Float)
    }

    /// True for the 8-bit and 4-bit float formats, which have no arithmetic of
    /// their own in ONNX (only casts and (de)quantization touch them).
    pub fn is_minifloat(self) -> bool {
        matches!(
            self,
            DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1
        )
    }

    /// Bits of the packed ONNX form, where it differs from the RLX storage size.
    pub fn packed_bits(self) -> usize {
        match self {
            DType::U4 | DType::I4 | DType::F4E2M1 => 4,
            DType::U2 | DType::I2 => 2,
            other => other.size() * 8,
        }
    }

    /// True for the dtypes with ordinary arithmetic in the RLX kernels: the
    /// standard floats, integers of 8 to 64 bits, and bool.
    pub fn is_standard(self) -> bool {
        !self.is_minifloat() && self.packed_bits() >= 8
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A dtype name that RLX does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype `{0}`")]
pub struct UnknownDType(pub String);

impl FromStr for DType {
    type Err = UnknownDType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.name() == s)
            .ok_or_else(|| UnknownDType(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            assert_eq!(DType::from_onnx_code(d.onnx_code()), Some(d));
        }
    }

    #[test]
    fn classes() {
        assert!(DType::F16.is_float());
        assert!(DType::U4.is_int() && !DType::U4.is_signed());
        assert!(!DType::F8E5M2.is_standard());
        assert!(DType::Bool.is_standard());
        assert_eq!(DType::I4.packed_bits(), 4);
        assert_eq!(DType::from_onnx_code(8), Some(DType::Str));
        assert!(!DType::Str.is_standard() && DType::Str.size() == 0);
    }
}
