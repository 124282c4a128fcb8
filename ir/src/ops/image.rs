//! ImageDecoder: an encoded image (BMP, JPEG, PNG, PNM, TIFF or WebP bytes)
//! to its pixels, `[H, W, 3]` RGB or BGR, or `[H, W, 1]` gray.

use super::{InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::{attr_enum, op_attrs};

attr_enum! {
    /// The channels ImageDecoder outputs.
    pub enum PixelFormat { Rgb = "rgb", Bgr = "bgr", Grayscale = "grayscale" }
}

op_attrs! {
    /// Decodes the u8 bytes of input 0 (1-D) into `[H, W, C]` u8 pixels.
    pub struct ImageDecoder {
        pub pixel_format: PixelFormat,
    }
}

impl OpDef for ImageDecoder {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, &[DType::U8])?;
        cx.expect_rank(0, 1)?;
        let c = if self.pixel_format == PixelFormat::Grayscale {
            1
        } else {
            3
        };
        Ok(vec![TensorType::new(
            DType::U8,
            Shape(vec![cx.fresh(0, 0), cx.fresh(0, 1), Dim::Known(c)]),
        )])
    }
}
