//! An application with its model inside: the artifact `build.rs` compiled is
//! embedded with `include_artifact!` and loaded without copying its weights
//! or parsing any ONNX. Reads an image as a `.npy` (f32, 3x16x16 or
//! 1x3x16x16) given on the command line, or makes a test pattern, and prints
//! the class scores.
//!
//! `cargo run -p rlx-example-embed-model -- [image.npy]`

use std::process::ExitCode;

use rlx_onnx::ir::Tensor;
use rlx_onnx::{artifact, Session, SessionOptions};

static MODEL: &[u8] = rlx_onnx::include_artifact!(concat!(env!("OUT_DIR"), "/cnn.rlx"));

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let model = artifact::from_static(MODEL)?;
    let session = Session::new(model, SessionOptions { threads: 1 })?;
    let input = &session.inputs()[0];
    let shape = input
        .fixed_shape()
        .ok_or("the embedded model has symbolic dims")?;
    println!("model input {input}, output {}", session.outputs()[0]);
    let image = match std::env::args_os().nth(1) {
        Some(path) => {
            let t = rlx_onnx::npy::read(path.as_ref())?;
            let n: usize = shape.iter().product();
            if t.numel() != n {
                return Err(format!(
                    "the image has {} values; the model takes {shape:?}",
                    t.numel()
                )
                .into());
            }
            t.reshaped(shape.clone())?
        }
        None => {
            // A diagonal gradient, the same on every channel.
            let (h, w) = (shape[2], shape[3]);
            let v: Vec<f32> = (0..shape.iter().product::<usize>())
                .map(|i| ((i % w + (i / w) % h) as f32) / (h + w) as f32)
                .collect();
            Tensor::from_values(&shape, &v)?
        }
    };
    let outputs = session.run(&[(input.name.as_str(), &image)])?;
    let scores = outputs[0].values::<f32>()?;
    let best = scores
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
        .ok_or("no scores")?;
    println!("scores: {scores:.3?}");
    println!("class {best}");
    Ok(())
}
