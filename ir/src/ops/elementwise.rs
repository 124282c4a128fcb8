//! Elementwise ops: unary math, binary arithmetic, comparisons, logic, `where`,
//! casts, clipping and GELU. Binary ops broadcast like numpy.

use super::{broadcast, broadcast_all, InferCx, InferError, OpDef};
use crate::dtype::{DType, DTypeClass};
use crate::shape::TensorType;
use crate::{attr_enum, kinded_op, op_attrs};

attr_enum! {
    /// A one-input elementwise function.
    pub enum UnaryKind {
        Abs = "abs", Neg = "neg", Sign = "sign", Ceil = "ceil", Floor = "floor",
        /// Round half to even.
        Round = "round",
        Sqrt = "sqrt", Reciprocal = "reciprocal", Exp = "exp", Log = "log",
        Sin = "sin", Cos = "cos", Tan = "tan", Asin = "asin", Acos = "acos", Atan = "atan",
        Sinh = "sinh", Cosh = "cosh", Asinh = "asinh", Acosh = "acosh", Atanh = "atanh",
        Tanh = "tanh", Sigmoid = "sigmoid", Relu = "relu", Erf = "erf",
        Softplus = "softplus", Softsign = "softsign",
        /// Logical not of a bool tensor.
        Not = "not",
        BitwiseNot = "bitwise_not",
        IsNan = "isnan", IsInf = "isinf", IsPosInf = "isposinf", IsNegInf = "isneginf",
    }
}

impl UnaryKind {
    /// True for functions defined on floats only.
    pub fn float_only(self) -> bool {
        use UnaryKind::*;
        !matches!(
            self,
            Abs | Neg | Sign | Relu | Not | BitwiseNot | Ceil | Floor | Round
        )
    }

    /// The output dtype for an input dtype, or why the kind rejects it.
    pub fn output_dtype(self, d: DType) -> Result<DType, String> {
        use UnaryKind::*;
        let ok = match self {
            Not => d == DType::Bool,
            BitwiseNot => d.is_int(),
            IsNan | IsInf | IsPosInf | IsNegInf => d.is_float(),
            Abs | Relu | Sign => d.is_int() || d.is_float(),
            Neg => d.is_float() || d.class() == DTypeClass::Signed,
            Ceil | Floor | Round => d.is_float(),
            _ => d.is_float(),
        };
        if !ok {
            return Err(format!("{} is not defined on {d}", self.name()));
        }
        Ok(match self {
            IsNan | IsInf | IsPosInf | IsNegInf => DType::Bool,
            _ => d,
        })
    }
}

kinded_op! {
    pub struct Unary [UnaryKind] {}
}

impl OpDef for Unary {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = self
            .kind
            .output_dtype(cx.dtype(0))
            .map_err(|_| InferError::DType {
                port: 0,
                got: cx.dtype(0),
                expected: format!("a dtype `{}` is defined on", self.kind.name()),
            })?;
        Ok(vec![TensorType::new(d, cx.shape(0).clone())])
    }
}

attr_enum! {
    /// A two-input arithmetic or bitwise function.
    pub enum BinaryKind {
        Add = "add", Sub = "sub", Mul = "mul",
        /// Integer division truncates toward zero, as in C.
        Div = "div",
        Pow = "pow",
        /// Integer remainder with the divisor's sign (Python's `%`).
        Mod = "mod",
        /// Remainder with the dividend's sign (C's `fmod`).
        Fmod = "fmod",
        Max = "max", Min = "min",
        BitwiseAnd = "bitwise_and", BitwiseOr = "bitwise_or", BitwiseXor = "bitwise_xor",
        ShiftLeft = "shift_left", ShiftRight = "shift_right",
    }
}

kinded_op! {
    pub struct Binary [BinaryKind] {}
}

impl OpDef for Binary {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        use BinaryKind::*;
        let d = cx.dtype(0);
        match self.kind {
            // Pow's exponent may have its own numeric dtype.
            Pow => {
                if !(cx.dtype(1).is_float() || cx.dtype(1).is_int()) {
                    return Err(InferError::DType {
                        port: 1,
                        got: cx.dtype(1),
                        expected: "a number".into(),
                    });
                }
            }
            _ => {
                cx.expect_same_dtype(1, 0)?;
            }
        }
        let ok = match self.kind {
            BitwiseAnd | BitwiseOr | BitwiseXor | ShiftLeft | ShiftRight => d.is_int(),
            Fmod | Pow => d.is_float() || d.is_int(),
            _ => d.is_float() || d.is_int(),
        };
        if !ok || !d.is_standard() {
            return Err(InferError::DType {
                port: 0,
                got: d,
                expected: format!("a dtype `{}` is defined on", self.kind.name()),
            });
        }
        Ok(vec![TensorType::new(
            d,
            broadcast(cx.shape(0), cx.shape(1))?,
        )])
    }
}

attr_enum! {
    /// A comparison; the output is bool.
    pub enum CompareKind {
        Equal = "equal", Less = "less", LessOrEqual = "less_or_equal",
        Greater = "greater", GreaterOrEqual = "greater_or_equal",
    }
}

kinded_op! {
    pub struct Compare [CompareKind] {}
}

impl OpDef for Compare {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_same_dtype(1, 0)?;
        Ok(vec![TensorType::new(
            DType::Bool,
            broadcast(cx.shape(0), cx.shape(1))?,
        )])
    }
}

attr_enum! {
    /// A two-input logical function on bool tensors.
    pub enum LogicalKind { And = "and", Or = "or", Xor = "xor" }
}

kinded_op! {
    pub struct Logical [LogicalKind] {}
}

impl OpDef for Logical {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, &[DType::Bool])?;
        cx.expect_dtype(1, &[DType::Bool])?;
        Ok(vec![TensorType::new(
            DType::Bool,
            broadcast(cx.shape(0), cx.shape(1))?,
        )])
    }
}

op_attrs! {
    /// `cond ? x : y`, broadcasting all three.
    pub struct Where {}
}

impl OpDef for Where {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, &[DType::Bool])?;
        let d = cx.expect_same_dtype(2, 1)?;
        Ok(vec![TensorType::new(
            d,
            broadcast_all([cx.shape(0), cx.shape(1), cx.shape(2)])?,
        )])
    }
}

attr_enum! {
    /// Rounding of casts into minifloat formats.
    pub enum RoundMode { Nearest = "nearest", Up = "up", Down = "down" }
}

op_attrs! {
    /// Converts to another dtype. `saturate` clamps out-of-range values when the
    /// target is an 8-bit float; float-to-int truncates toward zero.
    pub struct Cast {
        pub to: crate::dtype::DType,
        pub saturate: bool,
        pub round_mode: RoundMode,
    }
}

impl OpDef for Cast {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        Ok(vec![TensorType::new(self.to, cx.shape(0).clone())])
    }
}

op_attrs! {
    /// Reinterprets the bits of each element as another dtype of the same size.
    pub struct BitCast {
        pub to: crate::dtype::DType,
    }
}

impl OpDef for BitCast {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let from = cx.dtype(0);
        if from.packed_bits() != self.to.packed_bits() {
            return Err(InferError::DType {
                port: 0,
                got: from,
                expected: format!("a dtype of {} bits", self.to.packed_bits()),
            });
        }
        Ok(vec![TensorType::new(self.to, cx.shape(0).clone())])
    }
}

op_attrs! {
    /// `min(max(x, lo), hi)`; inputs `x`, `lo`, `hi` (scalars of x's dtype).
    pub struct Clip {}
}

impl OpDef for Clip {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_same_dtype(1, 0)?;
        cx.expect_same_dtype(2, 0)?;
        Ok(vec![cx.ty(0).clone()])
    }
}

attr_enum! {
    pub enum GeluApprox { None = "none", Tanh = "tanh" }
}

op_attrs! {
    /// Gaussian error linear unit, exact (erf) or with the tanh approximation.
    pub struct Gelu {
        pub approximate: GeluApprox,
    }
}

impl OpDef for Gelu {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, &[DType::F32, DType::F64, DType::F16, DType::BF16])?;
        Ok(vec![cx.ty(0).clone()])
    }
}
