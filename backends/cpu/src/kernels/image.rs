//! ImageDecoder through the `image` crate: BMP, JPEG, PNG, PNM, TIFF and
//! WebP, to 8-bit RGB (channels reversed for BGR) or gray. Gray is ITU-R
//! 601-2 luma in 16-bit fixed point, as Pillow's `convert("L")` computes it
//! (the ONNX reference decodes with Pillow). JPEG pixels may differ from
//! libjpeg's by a level or two: the standard leaves the inverse DCT's and
//! the chroma upsampling's rounding to the decoder.

use rlx_ir::ops::{Op, PixelFormat};
use rlx_ir::{DType, Node, Tensor};

use crate::kernel::{EvalCx, KernelError};

pub fn image_decoder(
    node: &Node,
    inputs: &[Tensor],
    cx: &EvalCx,
) -> Result<Vec<Tensor>, KernelError> {
    let Op::ImageDecoder(op) = &node.op else {
        return Err(KernelError::Internal("not image_decoder".into()));
    };
    let bytes = inputs[0].bytes();
    let format = image::guess_format(bytes).map_err(|_| {
        KernelError::Unsupported(
            "the image is in none of the formats decoded here (BMP, JPEG, PNG, PNM, TIFF, WebP; \
             not JPEG 2000)"
                .into(),
        )
    })?;
    let reader = || image::ImageReader::with_format(std::io::Cursor::new(bytes), format);
    let bad = |e: image::ImageError| {
        KernelError::Value(format!("cannot decode the {format:?} image: {e}"))
    };
    // The header's size is checked before anything is decoded: the
    // output has width x height x 3 elements, bounded as any tensor, and
    // no decoder buffer may be larger than 8 bytes a pixel (16-bit RGBA).
    let (w, h) = reader().into_dimensions().map_err(bad)?;
    let pixels = u64::from(w) * u64::from(h);
    let limit = cx.cache.limits.max_tensor_elements;
    if pixels.saturating_mul(3) > limit {
        return Err(KernelError::Value(format!(
            "a {w}x{h} image makes {} elements; the limit is {limit} \
             (Limits::max_tensor_elements, --max-tensor-elements)",
            pixels.saturating_mul(3)
        )));
    }
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(pixels.saturating_mul(8).max(1 << 20));
    let mut reader = reader();
    reader.limits(limits);
    let img = reader.decode().map_err(bad)?;
    // One conversion (none for an RGB image), and the buffer moves on.
    let rgb = img.into_rgb8();
    let (w, h) = (rgb.width() as usize, rgb.height() as usize);
    let px = rgb.into_raw();
    let (c, data): (usize, Vec<u8>) = match op.pixel_format {
        PixelFormat::Rgb => (3, px),
        PixelFormat::Bgr => (
            3,
            px.chunks_exact(3)
                .flat_map(|p| [p[2], p[1], p[0]])
                .collect(),
        ),
        PixelFormat::Grayscale => (
            1,
            px.chunks_exact(3)
                .map(|p| {
                    let l = p[0] as u32 * 19595 + p[1] as u32 * 38470 + p[2] as u32 * 7471 + 0x8000;
                    (l >> 16) as u8
                })
                .collect(),
        ),
    };
    Ok(vec![Tensor::from_slice(DType::U8, &[h, w, c], &data)
        .map_err(|e| KernelError::Internal(e.to_string()))?])
}
