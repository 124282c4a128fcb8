//! Compiles the vendored `proto/onnx.proto` and `proto/onnx-data.proto` with prost-build, using protox as the
//! protobuf compiler so that no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    println!("cargo:rerun-if-changed=proto/onnx-data.proto");
    // onnx-data.proto: SequenceProto, OptionalProto and MapProto, the test
    // data files of sequence- and optional-typed values.
    let fds = protox::compile(["proto/onnx.proto", "proto/onnx-data.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
