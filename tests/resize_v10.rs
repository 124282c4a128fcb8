//! Resize-10 and Upsample: asymmetric coordinates, nearest rounding down on
//! growing axes and up on shrinking ones (the opset-10 ONNX tests and
//! onnxruntime), compiled and run end to end.

use prost::Message;
use rlx_onnx::importer::proto::{
    tensor_proto, type_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TypeProto, ValueInfoProto,
};
use rlx_onnx::importer::{import_bytes, proto::AttributeProto, Registry};
use rlx_onnx::ir::ops::values::float_tensor;
use rlx_onnx::ir::DType;
use rlx_onnx::{Compiler, Session, SessionOptions, Target};

fn value_info(name: &str, dims: Option<&[usize]>) -> ValueInfoProto {
    use rlx_onnx::importer::proto::tensor_shape_proto::{dimension, Dimension};
    use rlx_onnx::importer::proto::TensorShapeProto;
    let shape = dims.map(|d| TensorShapeProto {
        dim: d
            .iter()
            .map(|&v| Dimension {
                value: Some(dimension::Value::DimValue(v as i64)),
                ..Default::default()
            })
            .collect(),
    });
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
                shape,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Runs `op_type(x, scales)` of `opset` with `mode` on a 2x4 (or given) input.
fn run(op_type: &str, opset: i64, mode: &str, x: (&[usize], &[f64]), scales: &[f32]) -> Vec<f64> {
    let node = NodeProto {
        input: vec!["x".into(), "scales".into()],
        output: vec!["y".into()],
        op_type: Some(op_type.into()),
        name: Some("resize".into()),
        attribute: vec![AttributeProto {
            name: Some("mode".into()),
            s: Some(mode.as_bytes().to_vec()),
            r#type: Some(3),
            ..Default::default()
        }],
        ..Default::default()
    };
    let scales = TensorProto {
        name: Some("scales".into()),
        dims: vec![scales.len() as i64],
        data_type: Some(tensor_proto::DataType::Float as i32),
        float_data: scales.to_vec(),
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(GraphProto {
            node: vec![node],
            name: Some("g".into()),
            initializer: vec![scales],
            input: vec![value_info("x", Some(x.0))],
            output: vec![value_info("y", None)],
            ..Default::default()
        }),
        ..Default::default()
    };
    let imported = import_bytes(&model.encode_to_vec(), None, &Registry::standard()).unwrap();
    let compiled = Compiler::new(Target::Cpu).compile(imported, None).unwrap();
    let session = Session::new(compiled, SessionOptions { threads: 1 }).unwrap();
    let input = float_tensor(DType::F32, x.0, x.1).unwrap();
    let out = session.run(&[("x", &input)]).unwrap();
    out[0].to_f64_vec().unwrap()
}

const X24: (&[usize], &[f64]) = (&[1, 1, 2, 4], &[1., 2., 3., 4., 5., 6., 7., 8.]);

#[test]
fn resize10_nearest_downsample_rounds_up() {
    let y = run("Resize", 10, "nearest", X24, &[1.0, 1.0, 0.6, 0.6]);
    assert_eq!(y, vec![1.0, 3.0]);
}

#[test]
fn resize10_nearest_mixed_axes() {
    // Rows grow (floor of y/2), columns shrink (ceil of x/0.5).
    let y = run("Resize", 10, "nearest", X24, &[1.0, 1.0, 2.0, 0.5]);
    assert_eq!(y, vec![1., 3., 1., 3., 5., 7., 5., 7.]);
}

#[test]
fn resize10_linear_is_asymmetric() {
    let y = run(
        "Resize",
        10,
        "linear",
        (&[1, 1, 2, 2], &[1., 2., 3., 4.]),
        &[1., 1., 2., 2.],
    );
    let want = [
        1., 1.5, 2., 2., 2., 2.5, 3., 3., 3., 3.5, 4., 4., 3., 3.5, 4., 4.,
    ];
    assert_eq!(y, want.to_vec());
}

#[test]
fn upsample9_nearest_repeats() {
    let y = run(
        "Upsample",
        9,
        "nearest",
        (&[1, 1, 2, 2], &[1., 2., 3., 4.]),
        &[1., 1., 2., 3.],
    );
    let want = [
        1., 1., 1., 2., 2., 2., 1., 1., 1., 2., 2., 2., 3., 3., 3., 4., 4., 4., 3., 3., 3., 4., 4.,
        4.,
    ];
    assert_eq!(y, want.to_vec());
}
