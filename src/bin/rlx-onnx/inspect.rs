//! `rlx-onnx inspect MODEL`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use rlx_onnx::importer::proto::{type_proto, ModelProto, ValueInfoProto};
use rlx_onnx::importer::{decode_model, import_model, ImportError, Registry};

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx model.
    model: PathBuf,
}

fn describe(vi: &ValueInfoProto) -> String {
    let Some(t) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return "(no type)".into();
    };
    match t {
        type_proto::Value::TensorType(tt) => {
            let code = tt.elem_type.unwrap_or(0);
            let d = rlx_onnx::ir::DType::from_onnx_code(code)
                .map_or_else(|| format!("type{code}"), |d| d.to_string());
            let dims: Vec<String> = tt.shape.as_ref().map_or_else(
                || vec!["?".to_string()],
                |s| {
                    s.dim
                        .iter()
                        .map(|d| {
                            use rlx_onnx::importer::proto::tensor_shape_proto::dimension::Value as DV;
                            match &d.value {
                                Some(DV::DimValue(v)) => v.to_string(),
                                Some(DV::DimParam(p)) => p.clone(),
                                None => "?".into(),
                            }
                        })
                        .collect()
                },
            );
            format!("{d}[{}]", dims.join(","))
        }
        type_proto::Value::SequenceType(_) => "sequence".into(),
        type_proto::Value::OptionalType(_) => "optional".into(),
        type_proto::Value::MapType(_) => "map".into(),
        type_proto::Value::SparseTensorType(_) => "sparse tensor".into(),
    }
}

fn histogram(m: &ModelProto) -> BTreeMap<String, usize> {
    fn walk(g: &rlx_onnx::importer::proto::GraphProto, h: &mut BTreeMap<String, usize>) {
        for n in &g.node {
            let d = n.domain.clone().unwrap_or_default();
            let key = if d.is_empty() || d == "ai.onnx" {
                n.op_type.clone().unwrap_or_default()
            } else {
                format!("{d}.{}", n.op_type.clone().unwrap_or_default())
            };
            *h.entry(key).or_default() += 1;
            for a in &n.attribute {
                for sg in a.g.iter().chain(a.graphs.iter()) {
                    walk(sg, h);
                }
            }
        }
    }
    let mut h = BTreeMap::new();
    if let Some(g) = &m.graph {
        walk(g, &mut h);
    }
    h
}

pub fn run(a: Args) -> ExitCode {
    let bytes = match std::fs::read(&a.model) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", a.model.display());
            return ExitCode::from(2);
        }
    };
    let m = match decode_model(&bytes) {
        Ok(m) => m,
        Err(e) => {
            crate::report(&e);
            return ExitCode::from(2);
        }
    };
    println!("model: {}", a.model.display());
    println!("ir_version: {}", m.ir_version.unwrap_or(0));
    let producer = format!(
        "{} {}",
        m.producer_name.clone().unwrap_or_default(),
        m.producer_version.clone().unwrap_or_default()
    );
    println!("producer: {}", producer.trim());
    let opsets: Vec<String> = m
        .opset_import
        .iter()
        .map(|o| {
            let d = o.domain.clone().unwrap_or_default();
            format!(
                "{} {}",
                if d.is_empty() { "ai.onnx".into() } else { d },
                o.version.unwrap_or(0)
            )
        })
        .collect();
    println!("opsets: {}", opsets.join(", "));
    if let Some(g) = &m.graph {
        let inits: std::collections::HashSet<_> = g
            .initializer
            .iter()
            .filter_map(|t| t.name.clone())
            .collect();
        println!("inputs:");
        for i in g
            .input
            .iter()
            .filter(|i| !inits.contains(i.name.as_deref().unwrap_or("")))
        {
            println!("  {}: {}", i.name.clone().unwrap_or_default(), describe(i));
        }
        println!("outputs:");
        for o in &g.output {
            println!("  {}: {}", o.name.clone().unwrap_or_default(), describe(o));
        }
        println!("initializers: {}", g.initializer.len());
    }
    let h = histogram(&m);
    println!("ops ({} nodes):", h.values().sum::<usize>());
    for (op, n) in &h {
        println!("  {op:<28} {n}");
    }
    let dir = a.model.parent().map(|p| {
        if p.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            p.to_path_buf()
        }
    });
    match import_model(&m, dir, &Registry::standard()) {
        Ok(model) => {
            println!(
                "imported: {} RLX nodes, {} weights ({} bytes)",
                model.graph.node_count(),
                model.weights.len(),
                model.weights.total_bytes()
            );
            println!("unsupported: none");
            ExitCode::SUCCESS
        }
        Err(ImportError::Nodes(issues)) => {
            println!("unsupported ({} nodes):", issues.len());
            for i in &issues {
                println!("  {i}");
            }
            ExitCode::from(1)
        }
        Err(e) => {
            println!("unsupported: the model does not import:");
            println!("  {e}");
            ExitCode::from(1)
        }
    }
}
