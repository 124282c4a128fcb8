//! Compiles the golden CNN (one 3x16x16 image in, ten class scores out) into
//! OUT_DIR when the application builds.

fn main() {
    rlx_onnx::build::Build::new("../../golden/cnn/model.onnx")
        .bind("N", 1)
        .target(rlx_onnx::Target::Cpu)
        .name("cnn")
        .write()
        .unwrap_or_else(|e| panic!("compiling the model: {e}"));
}
