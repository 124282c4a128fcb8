//! Bad input gives an error value naming the problem, never a panic.

mod common;

use std::path::Path;

use prost::Message;
use rlx_onnx::importer::proto::{
    tensor_proto, type_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use rlx_onnx::importer::{import_bytes, import_file, ImportError, Registry};

fn value_info(name: &str, dims: &[i64]) -> ValueInfoProto {
    use rlx_onnx::importer::proto::tensor_shape_proto::{dimension, Dimension};
    let shape = TensorShapeProto {
        dim: dims
            .iter()
            .map(|&d| Dimension {
                value: Some(dimension::Value::DimValue(d)),
                ..Default::default()
            })
            .collect(),
    };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(shape),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `y = x + w` where `w` is the given initializer.
fn add_model(w: TensorProto) -> ModelProto {
    let node = NodeProto {
        input: vec!["x".into(), "w".into()],
        output: vec!["y".into()],
        op_type: Some("Add".into()),
        name: Some("add".into()),
        ..Default::default()
    };
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            node: vec![node],
            name: Some("g".into()),
            initializer: vec![w],
            input: vec![value_info("x", &[4])],
            output: vec![value_info("y", &[4])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn external(location: &str, offset: Option<&str>, length: Option<&str>) -> TensorProto {
    let mut ext = vec![StringStringEntryProto {
        key: Some("location".into()),
        value: Some(location.into()),
    }];
    if let Some(o) = offset {
        ext.push(StringStringEntryProto {
            key: Some("offset".into()),
            value: Some(o.into()),
        });
    }
    if let Some(l) = length {
        ext.push(StringStringEntryProto {
            key: Some("length".into()),
            value: Some(l.into()),
        });
    }
    TensorProto {
        name: Some("w".into()),
        dims: vec![4],
        data_type: Some(1),
        external_data: ext,
        data_location: Some(tensor_proto::DataLocation::External as i32),
        ..Default::default()
    }
}

/// Writes `model` to `dir/model.onnx` and imports it from there.
fn import_in(dir: &Path, model: &ModelProto) -> Result<(), ImportError> {
    let path = dir.join("model.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    import_file(&path, &Registry::standard()).map(|_| ())
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rlx-bad-input-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn truncated_models_are_errors() {
    let bytes = std::fs::read(common::root().join("golden/cnn/model.onnx")).unwrap();
    let registry = Registry::standard();
    let mut errors = 0;
    for cut in (0..bytes.len()).step_by(7) {
        if import_bytes(&bytes[..cut], None, &registry).is_err() {
            errors += 1;
        }
    }
    assert!(errors > 0);
    let e = import_bytes(&bytes[..bytes.len() / 2], None, &registry).unwrap_err();
    assert!(matches!(e, ImportError::Decode(_)), "{e}");
}

#[test]
fn corrupted_models_never_panic() {
    let bytes = std::fs::read(common::root().join("golden/transformer/model.onnx")).unwrap();
    let registry = Registry::standard();
    // A deterministic xorshift walk over byte positions and values.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..400 {
        let mut b = bytes.clone();
        for _ in 0..4 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let i = (state as usize) % b.len();
            b[i] = (state >> 32) as u8;
        }
        let _ = import_bytes(&b, None, &registry);
    }
}

#[test]
fn not_a_model_is_a_decode_error() {
    let e = import_bytes(
        b"this is not protobuf \xff\xff\xff",
        None,
        &Registry::standard(),
    )
    .unwrap_err();
    assert!(
        matches!(e, ImportError::Decode(_) | ImportError::NoGraph),
        "{e}"
    );
    let e = import_file(Path::new("/nonexistent/model.onnx"), &Registry::standard()).unwrap_err();
    assert!(matches!(e, ImportError::Io { .. }), "{e}");
}

#[test]
fn external_data_outside_the_model_directory_is_refused() {
    let dir = tempdir("outside");
    std::fs::write(dir.join("w.bin"), [0u8; 16]).unwrap();
    for loc in ["../w.bin", "/etc/passwd", "sub/../../w.bin"] {
        let e = import_in(&dir, &add_model(external(loc, None, None))).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("is refused") && s.contains(&format!("`{loc}`")) && s.contains("tensor `w`"),
            "{loc}: {s}"
        );
    }
    // A symlink that resolves outside is refused too.
    let outside = tempdir("outside-target");
    std::fs::write(outside.join("secret.bin"), [0u8; 16]).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(outside.join("secret.bin"), dir.join("link.bin")).unwrap();
        let e = import_in(&dir, &add_model(external("link.bin", None, None))).unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
    }
    // Inside the directory it imports.
    import_in(&dir, &add_model(external("w.bin", None, None))).unwrap();
    // A FIFO (opening it would block for ever) or a directory is refused.
    #[cfg(unix)]
    {
        let fifo = dir.join("pipe.bin");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = import_in(&dir, &add_model(external("pipe.bin", None, None))).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let e = import_in(&dir, &add_model(external("sub", None, None))).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

#[test]
fn external_data_ranges_are_checked() {
    let dir = tempdir("ranges");
    std::fs::write(dir.join("w.bin"), [0u8; 16]).unwrap();
    let e = import_in(&dir, &add_model(external("w.bin", Some("8"), Some("16")))).unwrap_err();
    assert!(e.to_string().contains("exceeds the file size"), "{e}");
    let e = import_in(&dir, &add_model(external("w.bin", Some("x"), None))).unwrap_err();
    assert!(e.to_string().contains("not a number"), "{e}");
    let e = import_in(&dir, &add_model(external("missing.bin", None, None))).unwrap_err();
    assert!(e.to_string().contains("missing.bin"), "{e}");
    // A model from memory has no directory to resolve against.
    let e = import_bytes(
        &add_model(external("w.bin", None, None)).encode_to_vec(),
        None,
        &Registry::standard(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no directory"), "{e}");
}

#[test]
fn absurd_dims_are_errors() {
    let w = TensorProto {
        name: Some("w".into()),
        dims: vec![1 << 40, 1 << 40],
        data_type: Some(1),
        float_data: vec![1.0; 4],
        ..Default::default()
    };
    let e = import_bytes(&add_model(w).encode_to_vec(), None, &Registry::standard()).unwrap_err();
    assert!(e.to_string().contains("`w`"), "{e}");
    let w = TensorProto {
        name: Some("w".into()),
        dims: vec![-3],
        data_type: Some(1),
        ..Default::default()
    };
    assert!(import_bytes(&add_model(w).encode_to_vec(), None, &Registry::standard()).is_err());
}

#[test]
fn unknown_ops_name_the_node() {
    let mut m = add_model(TensorProto {
        name: Some("w".into()),
        dims: vec![4],
        data_type: Some(1),
        float_data: vec![1.0; 4],
        ..Default::default()
    });
    let g = m.graph.as_mut().unwrap();
    g.node[0].op_type = Some("FrobnicateV2".into());
    g.node[0].name = Some("my_node".into());
    let e = import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("my_node") && s.contains("FrobnicateV2") && s.contains("opset 17"),
        "{s}"
    );
    // An attribute the mapper does not know is an error, not ignored.
    let mut m = add_model(TensorProto {
        name: Some("w".into()),
        dims: vec![4],
        data_type: Some(1),
        float_data: vec![1.0; 4],
        ..Default::default()
    });
    m.graph.as_mut().unwrap().node[0]
        .attribute
        .push(rlx_onnx::importer::proto::AttributeProto {
            name: Some("mystery".into()),
            r#type: Some(2),
            i: Some(1),
            ..Default::default()
        });
    let e = import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap_err();
    assert!(e.to_string().contains("mystery"), "{e}");
}

fn ones(name: &str) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![4],
        data_type: Some(1),
        float_data: vec![1.0; 4],
        ..Default::default()
    }
}

#[test]
fn a_value_defined_twice_is_an_error() {
    let mut m = add_model(ones("w"));
    let g = m.graph.as_mut().unwrap();
    let mut second = g.node[0].clone();
    second.name = Some("add_again".into());
    second.op_type = Some("Sub".into());
    g.node.push(second);
    let e = import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("`y`") && s.contains("`add`") && s.contains("`add_again`"),
        "{s}"
    );
}

/// Nodes reading each other's outputs: a cycle, named by a node of it
/// (`{op_type}_{index}` where the nodes have no names).
#[test]
fn a_cycle_of_nodes_is_an_error_naming_a_node() {
    let mut m = add_model(ones("w"));
    let g = m.graph.as_mut().unwrap();
    g.node[0].name = None;
    g.node[0].input[1] = "r".into();
    g.node.push(NodeProto {
        input: vec!["y".into()],
        output: vec!["r".into()],
        op_type: Some("Relu".into()),
        ..Default::default()
    });
    let e = import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("cycle") && (s.contains("`Add_0`") || s.contains("`Relu_1`")),
        "{s}"
    );
}

#[test]
fn opsets_past_the_newest_known_are_refused() {
    for version in [0, 29, 999] {
        let mut m = add_model(ones("w"));
        m.opset_import[0].version = Some(version);
        let e = import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap_err();
        assert!(e.to_string().contains(&format!("version {version}")), "{e}");
    }
    let mut m = add_model(ones("w"));
    m.opset_import[0].version = Some(28);
    assert!(import_bytes(&m.encode_to_vec(), None, &Registry::standard()).is_ok());
}

#[test]
fn pools_with_empty_or_negative_kernels_are_refused() {
    use rlx_onnx::importer::proto::{attribute_proto, AttributeProto};
    for k in [0, -1] {
        let node = NodeProto {
            input: vec!["x".into()],
            output: vec!["y".into()],
            op_type: Some("MaxPool".into()),
            name: Some("pool".into()),
            attribute: vec![AttributeProto {
                name: Some("kernel_shape".into()),
                r#type: Some(attribute_proto::AttributeType::Ints as i32),
                ints: vec![k],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut m = add_model(ones("w"));
        let g = m.graph.as_mut().unwrap();
        g.node = vec![node];
        g.initializer.clear();
        g.input = vec![value_info("x", &[1, 1, 4])];
        g.output = vec![value_info("y", &[1, 1, 4])];
        let e = import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap_err();
        assert!(
            e.to_string().contains("kernel sizes must be positive"),
            "{e}"
        );
    }
}

/// Operands ONNX Runtime refuses are refused here too, not computed into
/// something: BatchNormalization parameters of one value for three
/// channels (they would broadcast), an output padding as large as the
/// stride, a Range whose limit is NaN (it made an empty tensor).
#[test]
fn operands_onnx_runtime_refuses_are_errors() {
    use rlx_onnx::importer::proto::{attribute_proto, AttributeProto};
    let floats = |name: &str, dims: &[i64], v: &[f32]| TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(1),
        float_data: v.to_vec(),
        ..Default::default()
    };
    let ints = |name: &str, v: &[i64]| AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    };
    let node = |op: &str, inputs: &[&str], attribute: Vec<AttributeProto>| NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec!["y".into()],
        op_type: Some(op.into()),
        name: Some(format!("the_{op}")),
        attribute,
        ..Default::default()
    };
    let one = |n: &str| floats(n, &[1], &[1.0]);
    let cases = [
        (
            node("BatchNormalization", &["x", "s", "b", "m", "v"], vec![]),
            vec![one("s"), one("b"), one("m"), one("v")],
            vec![value_info("x", &[1, 3, 2, 2])],
            "input 1: [1]",
        ),
        (
            node(
                "ConvTranspose",
                &["x", "k"],
                vec![ints("strides", &[2, 2]), ints("output_padding", &[2, 2])],
            ),
            vec![floats("k", &[1, 1, 2, 2], &[1.0; 4])],
            vec![value_info("x", &[1, 1, 4, 4])],
            "output_padding",
        ),
        (
            node("Range", &["a", "l", "d"], vec![]),
            vec![
                floats("a", &[], &[0.0]),
                floats("l", &[], &[f32::NAN]),
                floats("d", &[], &[1.0]),
            ],
            vec![],
            "must be finite",
        ),
    ];
    for (node, inits, inputs, want) in cases {
        let op = node.op_type.clone().unwrap_or_default();
        let mut m = add_model(ones("w"));
        let g = m.graph.as_mut().unwrap();
        g.node = vec![node];
        g.initializer = inits;
        g.input = inputs;
        g.output = vec![ValueInfoProto {
            name: Some("y".into()),
            ..Default::default()
        }];
        let e = import_bytes(&m.encode_to_vec(), None, &Registry::standard())
            .err()
            .unwrap_or_else(|| panic!("{op} imported"));
        let e = e.to_string();
        assert!(
            e.contains(want) && e.contains(&format!("the_{op}")),
            "{op}: {e}"
        );
    }
}

/// A decision tree whose nodes form a cycle is refused when imported, both
/// where the walk from the root meets it and where the cycle hangs off no
/// path from the root (the root a leaf, two branches pointing at each
/// other: every row answered the leaf's value before).
#[test]
fn trees_with_cycles_are_refused() {
    use rlx_onnx::importer::proto::{attribute_proto::AttributeType, AttributeProto};
    let attr = |name: &str, t: AttributeType| AttributeProto {
        name: Some(name.into()),
        r#type: Some(t as i32),
        ..Default::default()
    };
    let ints = |name: &str, v: &[i64]| AttributeProto {
        ints: v.to_vec(),
        ..attr(name, AttributeType::Ints)
    };
    let floats = |name: &str, v: &[f32]| AttributeProto {
        floats: v.to_vec(),
        ..attr(name, AttributeType::Floats)
    };
    let strings = |name: &str, v: &[&str]| AttributeProto {
        strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..attr(name, AttributeType::Strings)
    };
    // Node ids 0, 1, 2; `modes` and children per node; node 2's entry.
    let forest = |modes: &[&str], t: &[i64], f: &[i64]| {
        let node = NodeProto {
            input: vec!["x".into()],
            output: vec!["y".into()],
            op_type: Some("TreeEnsembleRegressor".into()),
            domain: Some("ai.onnx.ml".into()),
            name: Some("forest".into()),
            attribute: vec![
                ints("nodes_treeids", &[0, 0, 0]),
                ints("nodes_nodeids", &[0, 1, 2]),
                ints("nodes_featureids", &[0, 0, 0]),
                floats("nodes_values", &[0.5, 0.5, 0.5]),
                strings("nodes_modes", modes),
                ints("nodes_truenodeids", t),
                ints("nodes_falsenodeids", f),
                ints("target_treeids", &[0]),
                ints("target_nodeids", &[2]),
                ints("target_ids", &[0]),
                floats("target_weights", &[1.0]),
                AttributeProto {
                    i: Some(1),
                    ..attr("n_targets", AttributeType::Int)
                },
            ],
            ..Default::default()
        };
        let mut m = add_model(ones("w"));
        m.opset_import.push(OperatorSetIdProto {
            domain: Some("ai.onnx.ml".into()),
            version: Some(3),
        });
        let g = m.graph.as_mut().unwrap();
        g.node = vec![node];
        g.initializer.clear();
        g.input = vec![value_info("x", &[3, 2])];
        g.output = vec![ValueInfoProto {
            name: Some("y".into()),
            ..Default::default()
        }];
        import_bytes(&m.encode_to_vec(), None, &Registry::standard())
            .err()
            .map(|e| e.to_string())
    };
    let leaf = ["BRANCH_LEQ", "BRANCH_LEQ", "LEAF"];
    // A well-formed tree: 0 -> (1, 2), 1 -> (2, 2).
    assert_eq!(forest(&leaf, &[1, 2, 0], &[2, 2, 0]), None);
    // 0 <-> 1 with the leaf pointed to by neither: the leaf is a root alone.
    let e = forest(&leaf, &[1, 0, 0], &[1, 0, 0]).expect("a cycle off the root imported");
    assert!(e.contains("not reached from the tree's root"), "{e}");
    // Node 1 its own true child, on the path from the root 0.
    let e = forest(&leaf, &[1, 1, 0], &[2, 2, 0]).expect("a cycle on the path imported");
    assert!(e.contains("a cycle"), "{e}");
}

#[test]
fn an_output_declared_with_another_dtype_is_refused() {
    let mut m = add_model(ones("w"));
    let g = m.graph.as_mut().unwrap();
    if let Some(type_proto::Value::TensorType(t)) =
        g.output[0].r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = Some(7); // int64, while Add of floats computes f32
    }
    let e = import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("`y`") && s.contains("declared i64") && s.contains("computes f32"),
        "{s}"
    );
}

#[test]
fn argmax_over_an_empty_axis_is_an_error() {
    let node = NodeProto {
        input: vec!["x".into()],
        output: vec!["y".into()],
        op_type: Some("ArgMax".into()),
        name: Some("am".into()),
        attribute: vec![rlx_onnx::importer::proto::AttributeProto {
            name: Some("axis".into()),
            i: Some(1),
            r#type: Some(2),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut m = add_model(ones("w"));
    let g = m.graph.as_mut().unwrap();
    g.node = vec![node];
    g.initializer.clear();
    g.input = vec![value_info("x", &[2, 0])];
    g.output = vec![ValueInfoProto {
        name: Some("y".into()),
        ..Default::default()
    }];
    let e = import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap_err();
    assert!(e.to_string().contains("empty axis"), "{e}");
}

/// ConstantOfShape asking for 10^12 elements, from a constant or from a
/// shape given at run time: a typed error naming the node, not an abort.
#[test]
fn tensors_past_the_element_limit_are_errors() {
    use rlx_onnx::ir::Tensor;
    use rlx_onnx::{Compiler, Error, Session, SessionOptions, Target};
    let model = |shape_from_input: bool| {
        let node = |op: &str, i: &str, o: &str, name: &str| NodeProto {
            input: vec![i.into()],
            output: vec![o.into()],
            op_type: Some(op.into()),
            name: Some(name.into()),
            ..Default::default()
        };
        let mut sum = node("ReduceSum", "big", "y", "sum");
        sum.attribute = vec![rlx_onnx::importer::proto::AttributeProto {
            name: Some("keepdims".into()),
            i: Some(0),
            r#type: Some(2),
            ..Default::default()
        }];
        let shape = TensorProto {
            name: Some("s".into()),
            dims: vec![2],
            data_type: Some(7),
            int64_data: vec![1_000_000, 1_000_000],
            ..Default::default()
        };
        let mut s_in = value_info("s", &[2]);
        if let Some(type_proto::Value::TensorType(t)) =
            s_in.r#type.as_mut().and_then(|t| t.value.as_mut())
        {
            t.elem_type = Some(7);
        }
        ModelProto {
            ir_version: Some(8),
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(13),
            }],
            graph: Some(GraphProto {
                node: vec![node("ConstantOfShape", "s", "big", "huge"), sum],
                name: Some("g".into()),
                initializer: if shape_from_input {
                    vec![]
                } else {
                    vec![shape]
                },
                input: if shape_from_input { vec![s_in] } else { vec![] },
                output: vec![ValueInfoProto {
                    name: Some("y".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    };
    let compile = |m: &ModelProto| {
        Compiler::new(Target::Cpu).compile(
            import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap(),
            None,
        )
    };
    let e = compile(&model(false)).unwrap_err();
    assert!(matches!(&e, Error::Limit(s) if s.contains("`huge`")), "{e}");
    let session = Session::new(
        compile(&model(true)).unwrap(),
        SessionOptions { threads: 1 },
    )
    .unwrap();
    let s = Tensor::from_values(&[2], &[1_000_000i64, 1_000_000]).unwrap();
    let e = session.run(&[("s", &s)]).unwrap_err();
    assert!(matches!(&e, Error::Limit(s) if s.contains("`huge`")), "{e}");
}

/// A node with more inputs or outputs than its op's schema allows is
/// refused (it used to run, ignoring them), with the counts in the error;
/// omitted optional inputs (empty names) still import.
#[test]
fn nodes_outside_their_schemas_arity_are_refused() {
    let mut m = add_model(ones("w"));
    m.graph.as_mut().unwrap().node[0].input.push("w".into());
    let e = import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("`add`") && s.contains("takes 2 inputs; the node has 3"),
        "{s}"
    );
    let mut m = add_model(ones("w"));
    m.graph.as_mut().unwrap().node[0].output.push("z".into());
    let e = import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap_err();
    assert!(
        e.to_string().contains("at most 1 outputs; the node has 2"),
        "{e}"
    );
    // Trailing empty names are omitted values, not extra inputs.
    let mut m = add_model(ones("w"));
    m.graph.as_mut().unwrap().node[0].input.push(String::new());
    import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap();
}

/// A Loop whose trip count is 2^62 and whose condition stays true ends
/// with an error at the iteration limit instead of running for ever.
#[test]
fn a_loop_past_the_iteration_limit_is_an_error() {
    use rlx_onnx::ir::Tensor;
    use rlx_onnx::{Compiler, Error, Limits, Session, SessionOptions, Target};
    let text = "rlx-ir 2\ngraph {\n  %0 = input \"m\" : i64[]\n  %1 = input \"x\" : f32[3]\n  %2 = constant bool[] [true] : bool[]\n  %3 = loop(%0, %2, %1) {body=graph {\n    %0 = input \"i\" : i64[]\n    %1 = input \"cond\" : bool[]\n    %2 = input \"acc\" : f32[3]\n    %3 = neg(%2) : f32[3]\n    output \"cond_out\" = %1\n    output \"acc_out\" = %3\n  }, num_carried=1} : f32[3]\n  output \"y\" = %3\n}\n";
    let mut model = Compiler::new(Target::Cpu)
        .compile(common::imported(text), None)
        .unwrap();
    model.limits = Limits {
        max_loop_iterations: 1000,
        ..Limits::default()
    };
    let session = Session::new(model, SessionOptions { threads: 1 }).unwrap();
    let x = Tensor::from_values(&[3], &[1.0f32, 2.0, 3.0]).unwrap();
    let m = Tensor::scalar_i64(1 << 62);
    let e = session.run(&[("m", &m), ("x", &x)]).unwrap_err();
    assert!(matches!(&e, Error::Run(_)), "{e}");
    // Its condition passes through unchanged: refused before the first
    // iteration, not after the limit's worth of work.
    assert!(
        e.to_string()
            .contains("would run 4611686018427387904 iterations"),
        "{e}"
    );
    // Under the limit it runs: an even number of negations.
    let m = Tensor::scalar_i64(10);
    let y = session.run(&[("m", &m), ("x", &x)]).unwrap();
    assert_eq!(y[0].values::<f32>().unwrap(), &[1.0, 2.0, 3.0]);
}

/// IR text of `If` bodies nested `depth` deep around a negation.
fn nested_ifs(depth: usize) -> String {
    fn body(depth: usize) -> String {
        let head = "%0 = input \"c\" : bool[]\n%1 = input \"x\" : f32[3]\n";
        if depth == 0 {
            return format!("{head}%2 = neg(%1) : f32[3]\noutput \"y\" = %2\n");
        }
        format!(
            "{head}%2 = if(%0, %0, %1) {{then_branch=graph {{\n{}}}, else_branch=graph {{\n{}}}}} : f32[3]\noutput \"y\" = %2\n",
            body(depth - 1),
            body(0)
        )
    }
    format!("rlx-ir 2\ngraph {{\n{}}}\n", body(depth))
}

fn compile_text(text: &str, limits: rlx_onnx::Limits) -> rlx_onnx::Result<rlx_onnx::CompiledModel> {
    use rlx_onnx::{Compiler, Target};
    let compiler = Compiler {
        limits,
        ..Compiler::new(Target::Cpu)
    };
    compiler.compile(common::imported(text), None)
}

/// Control flow nested past `Limits::max_nesting` is refused when it
/// compiles (runs recurse into bodies); within it, it runs.
#[test]
fn nesting_past_the_limit_is_an_error() {
    use rlx_onnx::{Error, Limits};
    let e = compile_text(&nested_ifs(70), Limits::default()).unwrap_err();
    assert!(matches!(&e, Error::Limit(_)), "{e}");
    assert!(e.to_string().contains("more than 64 deep"), "{e}");
    let m = compile_text(&nested_ifs(8), Limits::default()).unwrap();
    let session = rlx_onnx::Session::new(m, rlx_onnx::SessionOptions { threads: 1 }).unwrap();
    let c = rlx_onnx::ir::Tensor::from_slice(rlx_onnx::ir::DType::Bool, &[], &[1u8]).unwrap();
    let x = rlx_onnx::ir::Tensor::from_values(&[3], &[1.0f32, -2.0, 3.0]).unwrap();
    let y = session.run(&[("c", &c), ("x", &x)]).unwrap();
    assert_eq!(y[0].values::<f32>().unwrap(), &[-1.0, 2.0, -3.0]);
}

/// A graph of more nodes than `Limits::max_nodes`, or a run whose arena
/// exceeds `Limits::max_arena_bytes`, is a typed error.
#[test]
fn node_and_arena_limits_are_errors() {
    use rlx_onnx::{Error, Limits};
    let text = "rlx-ir 2\ngraph {\n  %0 = input \"x\" : f32[1024]\n  %1 = neg(%0) : f32[1024]\n  %2 = exp(%1) : f32[1024]\n  %3 = neg(%2) : f32[1024]\n  output \"y\" = %3\n}\n";
    let few = Limits {
        max_nodes: 2,
        ..Limits::default()
    };
    let e = compile_text(text, few).unwrap_err();
    assert!(matches!(&e, Error::Limit(_)), "{e}");
    assert!(e.to_string().contains("more than 2 nodes"), "{e}");
    let small = Limits {
        max_arena_bytes: 1024,
        ..Limits::default()
    };
    let m = compile_text(text, small).unwrap();
    let session = rlx_onnx::Session::new(m, rlx_onnx::SessionOptions { threads: 1 }).unwrap();
    let x = rlx_onnx::ir::Tensor::from_values(&[1024], &vec![0.5f32; 1024]).unwrap();
    let e = session.run(&[("x", &x)]).unwrap_err();
    assert!(matches!(&e, Error::Limit(_)), "{e}");
    assert!(e.to_string().contains("max_arena_bytes"), "{e}");
}

/// A scale that does not broadcast over the normalized axes is an error
/// naming it, not read cyclically (SkipLayerNormalization's gamma shorter
/// than the hidden size, which ONNX Runtime refuses).
#[test]
fn a_norm_scale_that_does_not_broadcast_is_an_error() {
    use rlx_onnx::ir::Tensor;
    use rlx_onnx::{Session, SessionOptions};
    let text = "rlx-ir 2\ngraph {\n  %0 = input \"x\" : f32[2,4]\n  %1 = input \"g\" : f32[2]\n  %2 = layer_norm(%0, %1) {axis=-1, epsilon=1e-5, stats=false} : f32[2,4]\n  output \"y\" = %2\n}\n";
    let model = match compile_text(text, rlx_onnx::Limits::default()) {
        Ok(m) => m,
        Err(e) => {
            assert!(e.to_string().contains("broadcast"), "{e}");
            return;
        }
    };
    let session = Session::new(model, SessionOptions { threads: 1 }).unwrap();
    let x = Tensor::from_values(&[2, 4], &[1.0f32; 8]).unwrap();
    let g = Tensor::from_values(&[2], &[1.0f32, 2.0]).unwrap();
    let e = session.run(&[("x", &x), ("g", &g)]).unwrap_err();
    assert!(e.to_string().contains("does not broadcast"), "{e}");
}

/// Block rearrangements whose dims are not multiples of the block are
/// refused (as ONNX Runtime refuses them), not floored into a smaller
/// tensor; a negative Split size is refused by name.
#[test]
fn block_moves_off_the_block_and_negative_splits_are_errors() {
    use rlx_onnx::Limits;
    let cases = [
        (
            "%1 = space_to_depth(%0) {blocksize=3, mode=dcr} : f32[1,36,0,0]",
            "height 4 is not a multiple of blocksize (3)",
        ),
        (
            "%1 = depth_to_space(%0) {blocksize=3, mode=dcr} : f32[1,0,12,12]",
            "channels 4 is not a multiple of the square of blocksize (9)",
        ),
        (
            "%1 = space_to_depth(%0) {blocksize=4294967296, mode=dcr} : f32[1,4,0,0]",
            "its square overflows i64",
        ),
    ];
    for (node, want) in cases {
        let text = format!(
            "rlx-ir 2\ngraph {{\n  %0 = input \"x\" : f32[1,4,4,4]\n  {node}\n  output \"y\" = %1\n}}\n"
        );
        let e = compile_text(&text, Limits::default())
            .err()
            .unwrap_or_else(|| panic!("{node} compiled"));
        assert!(e.to_string().contains(want), "{node}: {e}");
    }
    let text = "rlx-ir 2\ngraph {\n  %0 = input \"x\" : f32[4]\n  %1 = constant i64[2] [-4, 8] : i64[2]\n  %2:2 = split(%0, %1) {axis=0, num_outputs=2} : (f32[0], f32[8])\n  output \"a\" = %2.0\n  output \"b\" = %2.1\n}\n";
    let e = compile_text(text, Limits::default())
        .err()
        .expect("a negative split compiled");
    assert!(e.to_string().contains("size -4 at 0 is negative"), "{e}");
}

/// Runs of changing shapes past `Limits::max_specializations` each get the
/// executable of their own shapes (the last run's is found without a key;
/// the others through the cache, the least recently run evicted); a shape
/// that breaks the declared dims is an error whether or not the one before
/// it was cached.
#[test]
fn changing_shapes_each_run_their_own_executable() {
    use rlx_onnx::Limits;
    let text = "rlx-ir 2\ngraph {\n  %0 = input \"x\" : f32[2,N]\n  %1 = add(%0, %0) : f32[2,N]\n  output \"y\" = %1\n}\n";
    let m = compile_text(
        text,
        Limits {
            max_specializations: 2,
            ..Limits::default()
        },
    )
    .unwrap();
    let session = rlx_onnx::Session::new(m, rlx_onnx::SessionOptions { threads: 1 }).unwrap();
    for n in [1usize, 1, 3, 1, 5, 3, 3, 1, 5, 2] {
        let v: Vec<f32> = (0..2 * n).map(|i| i as f32 - 1.5).collect();
        let x = rlx_onnx::ir::Tensor::from_values(&[2, n], &v).unwrap();
        let y = session.run(&[("x", &x)]).unwrap();
        assert_eq!(y[0].dims(), &[2, n]);
        let want: Vec<f32> = v.iter().map(|a| a + a).collect();
        assert_eq!(y[0].values::<f32>().unwrap(), want.as_slice(), "n = {n}");
        let bad = rlx_onnx::ir::Tensor::from_values(&[3, n], &vec![0.0f32; 3 * n]).unwrap();
        let e = session.run(&[("x", &bad)]).unwrap_err();
        assert!(e.to_string().contains("dim 0 is 3, expected 2"), "{e}");
    }
}

/// Shapes the declared dims allow but a node cannot take are the inputs'
/// error, naming their shapes and the node: a Reshape of `x [n]` to
/// `[2, 3]` given five elements (it was reported as a failing pass, the
/// model's fault). Six elements still run.
#[test]
fn shapes_a_node_cannot_take_are_input_errors() {
    use rlx_onnx::importer::proto::tensor_shape_proto::{dimension, Dimension};
    use rlx_onnx::ir::Tensor;
    use rlx_onnx::{Compiler, Error, InputError, Session, SessionOptions, Target};
    let mut x = value_info("x", &[]);
    if let Some(type_proto::Value::TensorType(t)) = x.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.shape = Some(TensorShapeProto {
            dim: vec![Dimension {
                value: Some(dimension::Value::DimParam("n".into())),
                ..Default::default()
            }],
        });
    }
    let shape = TensorProto {
        name: Some("s".into()),
        dims: vec![2],
        data_type: Some(7),
        int64_data: vec![2, 3],
        ..Default::default()
    };
    let reshape = NodeProto {
        input: vec!["x".into(), "s".into()],
        output: vec!["y".into()],
        op_type: Some("Reshape".into()),
        name: Some("to_2x3".into()),
        ..Default::default()
    };
    let m = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            node: vec![reshape],
            name: Some("g".into()),
            initializer: vec![shape],
            input: vec![x],
            output: vec![ValueInfoProto {
                name: Some("y".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let model = import_bytes(&m.encode_to_vec(), None, &Registry::standard()).unwrap();
    let compiled = Compiler::new(Target::Cpu).compile(model, None).unwrap();
    let session = Session::new(compiled, SessionOptions { threads: 1 }).unwrap();
    let five = Tensor::from_f32(&[5], &[1.0; 5]).unwrap();
    let e = session.run(&[("x", &five)]).unwrap_err();
    match &e {
        Error::Input(InputError::Unfit { shapes, reason }) => {
            assert_eq!(shapes, "x: [5]");
            assert!(reason.contains("to_2x3"), "{e}");
        }
        _ => panic!("not an input error: {e:?}"),
    }
    let six = Tensor::from_f32(&[6], &[1.0; 6]).unwrap();
    let y = session.run(&[("x", &six)]).unwrap();
    assert_eq!(y[0].dims(), &[2, 3]);
}
