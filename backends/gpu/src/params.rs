//! Typed kernel parameters. Every kernel entry point takes one `#[repr(C)]`
//! struct of 4-byte fields (`u32`, `i32`, `f32` and arrays of them), declared
//! with [`kernel_params!`]. The declaration yields the Rust struct (`Pod`, so
//! its bytes go to the device as they are) and its [`Layout`]: field names,
//! types and offsets, from which each kernel language's mirror of the struct
//! is printed ([`Layout::wgsl`], [`Layout::cuda`]) and by which schedules
//! print a dispatch's parameters by name. Host and kernel cannot drift: the
//! kernel source never spells the struct itself, and tests check the printed
//! mirrors against each language's own layout rules (naga for WGSL, NVRTC
//! `static_assert`s for CUDA).
//!
//! Kernels whose source is generated per node (element-wise regions) build
//! their layout at plan time with [`LayoutBuilder`]; it prints and checks the
//! same way.

use std::borrow::Cow;
use std::fmt;

/// The element type of a parameter field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scalar {
    U32,
    I32,
    F32,
}

impl Scalar {
    pub fn wgsl(self) -> &'static str {
        match self {
            Scalar::U32 => "u32",
            Scalar::I32 => "i32",
            Scalar::F32 => "f32",
        }
    }

    pub fn cuda(self) -> &'static str {
        match self {
            Scalar::U32 => "unsigned int",
            Scalar::I32 => "int",
            Scalar::F32 => "float",
        }
    }
}

/// A field's type: a scalar or a fixed-length array of scalars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FieldType {
    pub scalar: Scalar,
    /// `Some(n)`: an array of `n` elements.
    pub len: Option<usize>,
}

impl FieldType {
    pub const fn bytes(self) -> usize {
        match self.len {
            Some(n) => 4 * n,
            None => 4,
        }
    }
}

/// Rust types a parameter field may have.
pub trait ParamField {
    const TYPE: FieldType;
}

macro_rules! scalar_field {
    ($t:ty, $s:ident) => {
        impl ParamField for $t {
            const TYPE: FieldType = FieldType {
                scalar: Scalar::$s,
                len: None,
            };
        }
        impl<const N: usize> ParamField for [$t; N] {
            const TYPE: FieldType = FieldType {
                scalar: Scalar::$s,
                len: Some(N),
            };
        }
    };
}
scalar_field!(u32, U32);
scalar_field!(i32, I32);
scalar_field!(f32, F32);

/// One named field at a byte offset.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Field {
    pub name: Cow<'static, str>,
    pub ty: FieldType,
    pub offset: usize,
}

/// The layout of a parameter struct: its name, fields in order, and size.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    pub name: Cow<'static, str>,
    pub fields: Cow<'static, [Field]>,
    pub size: usize,
}

/// A parameter struct declared with [`kernel_params!`].
pub trait Params: bytemuck::Pod {
    const LAYOUT: Layout;
}

/// Declares a kernel parameter struct: `#[repr(C)]`, `Pod`, and its [`Layout`].
/// Fields are `u32`, `i32`, `f32` or arrays of them, so the struct has no
/// padding (checked at compile time).
#[macro_export]
macro_rules! kernel_params {
    ($(#[doc = $doc:literal])* pub struct $name:ident {
        $($(#[doc = $fdoc:literal])* pub $f:ident : $t:ty),* $(,)?
    }) => {
        $(#[doc = $doc])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $name {
            $($(#[doc = $fdoc])* pub $f: $t),*
        }

        const _: () = assert!(
            ::core::mem::size_of::<$name>() == 0 $(+ ::core::mem::size_of::<$t>())*,
            "kernel parameter structs have no padding"
        );
        // SAFETY: repr(C), only 4-byte scalar fields and arrays of them (the
        // `ParamField` bound below), and no padding (asserted above).
        unsafe impl $crate::params::bytemuck::Zeroable for $name {}
        unsafe impl $crate::params::bytemuck::Pod for $name {}

        impl $crate::params::Params for $name {
            const LAYOUT: $crate::params::Layout = $crate::params::Layout {
                name: ::std::borrow::Cow::Borrowed(stringify!($name)),
                fields: ::std::borrow::Cow::Borrowed(&[$($crate::params::Field {
                    name: ::std::borrow::Cow::Borrowed(stringify!($f)),
                    ty: <$t as $crate::params::ParamField>::TYPE,
                    offset: ::core::mem::offset_of!($name, $f),
                }),*]),
                size: ::core::mem::size_of::<$name>(),
            };
        }

        impl Default for $name {
            fn default() -> $name {
                $crate::params::bytemuck::Zeroable::zeroed()
            }
        }
    };
}

#[doc(hidden)]
pub use bytemuck;

/// Builds a layout at plan time, for kernels generated per node.
#[derive(Debug, Clone, Default)]
pub struct LayoutBuilder {
    fields: Vec<Field>,
    bytes: Vec<u8>,
}

impl LayoutBuilder {
    pub fn new() -> LayoutBuilder {
        LayoutBuilder::default()
    }

    fn push(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        scalar: Scalar,
        words: &[u32],
        array: bool,
    ) {
        self.fields.push(Field {
            name: name.into(),
            ty: FieldType {
                scalar,
                len: array.then_some(words.len()),
            },
            offset: self.bytes.len(),
        });
        for w in words {
            self.bytes.extend_from_slice(&w.to_le_bytes());
        }
    }

    pub fn u32(mut self, name: impl Into<Cow<'static, str>>, v: u32) -> Self {
        self.push(name, Scalar::U32, &[v], false);
        self
    }

    /// An array field; empty arrays are left out (no language has them).
    pub fn u32s(mut self, name: impl Into<Cow<'static, str>>, v: &[u32]) -> Self {
        if !v.is_empty() {
            self.push(name, Scalar::U32, v, true);
        }
        self
    }

    pub fn f32s(mut self, name: impl Into<Cow<'static, str>>, v: &[f32]) -> Self {
        if !v.is_empty() {
            let w: Vec<u32> = v.iter().map(|x| x.to_bits()).collect();
            self.push(name, Scalar::F32, &w, true);
        }
        self
    }

    /// The layout (named `name`) and the parameter bytes.
    pub fn build(self, name: impl Into<Cow<'static, str>>) -> ParamBlock {
        let size = self.bytes.len();
        ParamBlock {
            layout: Layout {
                name: name.into(),
                fields: Cow::Owned(self.fields),
                size,
            },
            bytes: self.bytes,
        }
    }
}

/// A dispatch's parameters: a layout and bytes laid out by it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamBlock {
    pub layout: Layout,
    pub bytes: Vec<u8>,
}

impl ParamBlock {
    pub fn of<P: Params>(p: &P) -> ParamBlock {
        ParamBlock {
            layout: P::LAYOUT,
            bytes: bytemuck::bytes_of(p).to_vec(),
        }
    }

    fn word(&self, at: usize) -> u32 {
        self.bytes
            .get(at..at + 4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

fn fmt_scalar(f: &mut fmt::Formatter<'_>, s: Scalar, w: u32) -> fmt::Result {
    match s {
        Scalar::U32 => write!(f, "{w}"),
        Scalar::I32 => write!(f, "{}", w as i32),
        Scalar::F32 => write!(f, "{:?}", f32::from_bits(w)),
    }
}

/// `name=value` per field, arrays as `[a,b]`.
impl fmt::Display for ParamBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, fd) in self.layout.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{}=", fd.name)?;
            match fd.ty.len {
                None => fmt_scalar(f, fd.ty.scalar, self.word(fd.offset))?,
                Some(n) => {
                    f.write_str("[")?;
                    for k in 0..n {
                        if k > 0 {
                            f.write_str(",")?;
                        }
                        fmt_scalar(f, fd.ty.scalar, self.word(fd.offset + 4 * k))?;
                    }
                    f.write_str("]")?;
                }
            }
        }
        Ok(())
    }
}

impl Layout {
    /// The WGSL mirror: `struct Params` with one `u32` operand handle per
    /// name in `operands` first, then the fields, bound read-only as `p` at
    /// `binding` of group 0.
    pub fn wgsl(&self, operands: &[&str], binding: u32) -> String {
        let mut s = format!(
            "// {} (with operand handles)\nstruct Params {{\n",
            self.name
        );
        for o in operands {
            s.push_str(&format!("    {o}: u32,\n"));
        }
        for fd in self.fields.iter() {
            match fd.ty.len {
                None => s.push_str(&format!("    {}: {},\n", fd.name, fd.ty.scalar.wgsl())),
                Some(n) => s.push_str(&format!(
                    "    {}: array<{}, {n}>,\n",
                    fd.name,
                    fd.ty.scalar.wgsl()
                )),
            }
        }
        if operands.is_empty() && self.fields.is_empty() {
            s.push_str("    unused: u32,\n");
        }
        s.push_str(&format!(
            "}}\n@group(0) @binding({binding}) var<storage, read> p: Params;\n"
        ));
        s
    }

    /// The CUDA mirror: `struct NAME { ... };`, passed by value.
    pub fn cuda(&self) -> String {
        let mut s = format!("struct {} {{\n", self.name);
        for fd in self.fields.iter() {
            match fd.ty.len {
                None => s.push_str(&format!("    {} {};\n", fd.ty.scalar.cuda(), fd.name)),
                Some(n) => s.push_str(&format!("    {} {}[{n}];\n", fd.ty.scalar.cuda(), fd.name)),
            }
        }
        if self.fields.is_empty() {
            s.push_str("    unsigned int unused;\n");
        }
        s.push_str("};\n");
        s
    }

    /// CUDA `static_assert`s that the compiled struct has this layout.
    pub fn cuda_checks(&self) -> String {
        let mut s = format!(
            "static_assert(sizeof({n}) == {}, \"{n} size\");\n",
            self.size.max(4),
            n = self.name
        );
        for fd in self.fields.iter() {
            s.push_str(&format!(
                "static_assert(offsetof({n}, {f}) == {o}, \"{n}.{f}\");\n",
                n = self.name,
                f = fd.name,
                o = fd.offset
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    kernel_params! {
        /// A test struct.
        pub struct Demo {
            pub m: u32,
            pub alpha: f32,
            pub shift: i32,
            pub dims: [u32; 3],
        }
    }

    #[test]
    fn layout_follows_the_struct() {
        let l = Demo::LAYOUT;
        assert_eq!(l.size, 24);
        let offs: Vec<(&str, usize)> = l.fields.iter().map(|f| (&*f.name, f.offset)).collect();
        assert_eq!(offs, [("m", 0), ("alpha", 4), ("shift", 8), ("dims", 12)]);
        let p = Demo {
            m: 7,
            alpha: 0.5,
            shift: -2,
            dims: [1, 2, 3],
        };
        assert_eq!(
            ParamBlock::of(&p).to_string(),
            "m=7 alpha=0.5 shift=-2 dims=[1,2,3]"
        );
        assert!(l
            .wgsl(&["x", "y"], 4)
            .contains("    x: u32,\n    y: u32,\n    m: u32,"));
        assert!(l.wgsl(&[], 4).contains("dims: array<u32, 3>,"));
        assert!(l.cuda().contains("    unsigned int dims[3];\n"));
        assert!(l.cuda_checks().contains("offsetof(Demo, dims) == 12"));
    }

    #[test]
    fn built_layouts_print_the_same_way() {
        let b = LayoutBuilder::new()
            .u32("n", 6)
            .u32s("dims", &[2, 3])
            .u32s("empty", &[])
            .f32s("lits", &[1.5])
            .build("Gen");
        assert_eq!(b.to_string(), "n=6 dims=[2,3] lits=[1.5]");
        assert_eq!(b.layout.size, 16);
        assert_eq!(b.layout.fields[2].offset, 12);
    }
}
