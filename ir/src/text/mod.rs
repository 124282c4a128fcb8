//! The IR text form: a deterministic printer and a parser that round-trip exactly.
//!
//! The grammar, by example:
//!
//! ```text
//! rlx-ir 2
//! graph {
//!   %0 = input "x" : f32[N,3]
//!   %1 = weight "fc.weight" : f32[3,4]
//!   %2 = constant i64[2] [1, -1] : i64[2]
//!   %3 = matmul(%0, %1) : f32[N,4]  # MatMul_0
//!   %4:2 = split(%3, %2) {axis=1, num_outputs=2} : (f32[N,2], f32[N,2])  # Split_1
//!   output "y" = %4.1
//! }
//! ```
//!
//! Values are numbered in a canonical order (graph inputs, then a depth-first
//! post-order from the outputs), so a dump does not depend on how the graph was
//! built. The trailing comment lists the node's `origin`: the ONNX nodes it came
//! from. See `docs/ir-text.md` for the full grammar and its versioning.

mod attr;
pub mod lex;
mod parse;
mod print;

pub use attr::{AttrValue, Attrs};
pub use parse::{parse_graph, ParseError, Parser};
pub use print::{numbering, print_graph, print_graph_body, Writer};

/// The newest version of the text form (written in its first line). A
/// text is written as version 2 unless it names long dims (a `dims { }`
/// block, version 3); the parser reads both.
pub const TEXT_VERSION: u32 = 3;

/// Defines an op's attribute struct and its text form.
///
/// Fields print in declaration order as `{name=value, ...}`; an op without
/// fields prints no braces.
#[macro_export]
macro_rules! op_attrs {
    ($(#[$m:meta])* pub struct $name:ident { $( $(#[$fm:meta])* pub $field:ident : $ty:ty ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name { $( $(#[$fm])* pub $field: $ty ),* }

        impl $crate::text::Attrs for $name {
            const HAS_ATTRS: bool = 0 $(+ { let _ = stringify!($field); 1 })* > 0;

            #[allow(unused_variables, unused_mut)]
            fn write_attrs(&self, w: &mut $crate::text::Writer) {
                let mut first = true;
                $( w.attr(&mut first, stringify!($field), &self.$field); )*
            }

            #[allow(unused_variables, unused_mut)]
            fn read_attrs(p: &mut $crate::text::Parser) -> Result<Self, $crate::text::ParseError> {
                let mut first = true;
                Ok($name { $( $field: p.attr(&mut first, stringify!($field))?, )* })
            }
        }
    };
}

/// Defines a fieldless enum used as an attribute, with its text names.
#[macro_export]
macro_rules! attr_enum {
    ($(#[$m:meta])* pub enum $name:ident { $( $(#[$vm:meta])* $variant:ident = $text:literal ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $( $(#[$vm])* $variant ),* }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }

            pub fn from_name(s: &str) -> Option<$name> {
                match s { $($text => Some($name::$variant),)* _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl $crate::text::AttrValue for $name {
            fn write_attr(&self, w: &mut $crate::text::Writer) {
                w.push(self.name());
            }

            fn read_attr(p: &mut $crate::text::Parser) -> Result<Self, $crate::text::ParseError> {
                let (offset, word) = p.ident()?;
                $name::from_name(&word).ok_or_else(|| p.error_at(offset, format!(
                    "expected one of {:?}, found `{word}`",
                    [$($text),*]
                )))
            }
        }
    };
}

#[cfg(test)]
mod tests;
