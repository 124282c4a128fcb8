//! `rlx-onnx inspect MODEL [--bind N=1] [--target T [-O N]]`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use rlx_onnx::importer::proto::{type_proto, ModelProto, ValueInfoProto};
use rlx_onnx::importer::{decode_model, import_model, ImportError, Registry};

use crate::common::{OptArg, TargetArg};

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx model, or an .rlx artifact (how it was compiled, its
    /// inputs and outputs).
    model: PathBuf,
    /// Also show, per node, whether this target runs it natively, after
    /// decomposition, or not at all (on the graph the -O pipeline forms).
    #[arg(long, value_enum)]
    target: Option<TargetArg>,
    /// Optimization level of the graph --target inspects.
    #[arg(short = 'O', long = "opt-level", value_enum, default_value = "2")]
    opt_level: OptArg,
    /// Bind a symbolic dim before --target inspects the graph, as `convert
    /// --bind` does: `--bind N=1` (repeatable).
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    binds: Vec<String>,
    /// Print long dim expressions whole (they are cut at 80 characters).
    #[arg(short, long)]
    verbose: bool,
}

/// Prints per node how `target` runs the model's graph after the passes that
/// come before legalization. Returns false if some node cannot run.
fn support_table(
    model: rlx_onnx::importer::ImportedModel,
    target: TargetArg,
    level: OptArg,
    binds: &rlx_onnx::ir::Bindings,
) -> Result<bool, Box<dyn std::error::Error>> {
    use rlx_onnx::passes::legalize::{classify, Support};
    let target = rlx_onnx::Target::from(target);
    let level = rlx_onnx::OptLevel::from(level);
    let mut model = model;
    if !binds.is_empty() {
        model.graph =
            rlx_onnx::ir::analysis::specialize(&model.graph, binds, Some(&model.weights))?;
    }
    let names = rlx_onnx::passes::pipeline::names(target.name(), level);
    let before: Vec<&str> = names
        .iter()
        .copied()
        .take_while(|n| *n != "legalize")
        .collect();
    let (mut g, mut w) = (model.graph, model.weights);
    let refuse = rlx_onnx::Fallback::Refuse;
    rlx_onnx::compile::run_passes(&mut g, &mut w, target, &before, false, refuse, None)?;
    let rows = classify(&g, &w, target.backend());
    let count = |f: fn(&Support) -> bool| rows.iter().filter(|r| f(&r.3)).count();
    println!(
        "target {} (-{}): {} nodes: {} native, {} after decomposition, {} folded once shapes are bound, {} unsupported",
        target,
        level.name(),
        rows.len(),
        count(|s| matches!(s, Support::Native)),
        count(|s| matches!(s, Support::Decomposed(_))),
        count(|s| matches!(s, Support::FoldsWhenBound)),
        count(|s| matches!(s, Support::Unsupported(_))),
    );
    for (name, op, origin, s) in &rows {
        let how = match s {
            Support::Native => "native".to_string(),
            Support::Decomposed(ops) => format!("decomposed into {}", ops.join(", ")),
            Support::FoldsWhenBound => {
                "folded to a constant once input shapes are known (--bind, or at run time)".into()
            }
            Support::Unsupported(r) => format!("unsupported: {r}"),
        };
        println!("  {name:<28} {op:<20} {how}  (from {origin})");
    }
    if count(|s| matches!(s, Support::Unsupported(_))) > 0 && target != rlx_onnx::Target::Cpu {
        println!("(`--fallback cpu` runs the unsupported nodes on the CPU, in segments between the {target} ones)");
    }
    Ok(rows.iter().all(|r| !matches!(r.3, Support::Unsupported(_))))
}

/// The inputs as imported, and the dim names `--bind NAME=SIZE` accepts
/// (unknown dims such as `?` or `-1` get names of their own, like `x.2`).
fn print_bindable(g: &rlx_onnx::ir::Graph) {
    let mut symbols: Vec<String> = Vec::new();
    println!("inputs as imported:");
    for &id in g.inputs() {
        let node = g.node(id);
        let ty = &node.outputs[0];
        println!("  {}: {ty}", node.name);
        for d in &ty.shape.0 {
            for s in d.symbols() {
                if !symbols.contains(&s) {
                    symbols.push(s);
                }
            }
        }
    }
    if !symbols.is_empty() {
        println!("bindable dims (--bind NAME=SIZE): {}", symbols.join(", "));
    }
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

/// The model's metadata: the named fields that are set, then
/// `metadata_props` (values cut to one line of 100 characters).
fn print_metadata(m: &rlx_onnx::importer::Metadata) {
    let one_line = |v: &str| {
        let v = v.split_whitespace().collect::<Vec<_>>().join(" ");
        if v.chars().count() > 100 {
            format!("{}…", v.chars().take(99).collect::<String>())
        } else {
            v
        }
    };
    let fields: Vec<_> = m
        .fields()
        .into_iter()
        .filter(|(k, v)| !v.is_empty() && !k.starts_with("producer"))
        .collect();
    if let Some(v) = m.version {
        println!("model version: {v}");
    }
    for (k, v) in fields {
        println!("{}: {}", k.replace('_', " "), one_line(v));
    }
    if !m.custom.is_empty() {
        println!("metadata ({} entries):", m.custom.len());
        for (k, v) in &m.custom {
            println!("  {k}: {}", one_line(v));
        }
    }
}

/// An artifact: how it was compiled and what it takes and gives.
fn inspect_artifact(a: &Args) -> ExitCode {
    if a.target.is_some() || !a.binds.is_empty() {
        return crate::common::error_msg(
            "--target and --bind inspect an .onnx model; an artifact is compiled already",
        );
    }
    let m = match rlx_onnx::artifact::load(&a.model) {
        Ok(m) => m,
        Err(e) => return crate::common::error(&e),
    };
    println!("artifact: {}", a.model.display());
    println!(
        "compiled for {} at -{} ({} arithmetic), from {}",
        m.target,
        m.opt_level.name(),
        m.precision,
        if m.producer.is_empty() {
            "an unnamed producer"
        } else {
            &m.producer
        }
    );
    print_metadata(&m.metadata);
    let mut binds: Vec<_> = m.bindings.iter().collect();
    binds.sort();
    if !binds.is_empty() {
        let b: Vec<String> = binds.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("bound dims: {}", b.join(", "));
    }
    let show = |io: rlx_onnx::IoInfo| {
        if a.verbose {
            io.to_string()
        } else {
            io.brief(80)
        }
    };
    println!("inputs:");
    for io in m.inputs() {
        println!("  {}", show(io));
    }
    println!("outputs:");
    for io in m.outputs() {
        println!("  {}", show(io));
    }
    println!(
        "graph: {} nodes; weights: {} ({} bytes in memory)",
        m.graph.node_count(),
        m.weights.len(),
        m.weights.total_bytes()
    );
    if m.cuda_ptx.is_some() {
        println!("CUDA kernels: prebuilt");
    }
    ExitCode::SUCCESS
}

pub fn run(a: Args) -> ExitCode {
    if crate::common::is_artifact(&a.model) {
        return inspect_artifact(&a);
    }
    let bytes = match rlx_onnx::files::read_regular(&a.model) {
        Ok(b) => b,
        Err(e) => {
            return crate::common::error_msg(format!("cannot read `{}`: {e}", a.model.display()));
        }
    };
    let m = match decode_model(&bytes) {
        Ok(m) => m,
        Err(e) => return crate::common::error(&e),
    };
    println!("model: {}", a.model.display());
    println!("ir_version: {}", m.ir_version.unwrap_or(0));
    let producer = format!(
        "{} {}",
        m.producer_name.clone().unwrap_or_default(),
        m.producer_version.clone().unwrap_or_default()
    );
    println!("producer: {}", producer.trim());
    print_metadata(&rlx_onnx::importer::Metadata::of(&m));
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
    let binds = match crate::parse_binds(&a.binds) {
        Ok(b) => b,
        Err(e) => return crate::common::error_msg(e),
    };
    match import_model(&m, dir, &Registry::standard()) {
        Ok(model) => {
            println!(
                "imported: {} RLX nodes, {} weights ({} bytes)",
                model.graph.node_count(),
                model.weights.len(),
                model.weights.total_bytes()
            );
            println!("unsupported: none");
            print_bindable(&model.graph);
            let symbols = rlx_onnx::compile::input_symbols(&model.graph);
            if let Some(name) = binds.keys().find(|k| !symbols.contains(*k)) {
                return crate::common::error(&rlx_onnx::InputError::UnknownSymbol {
                    name: name.clone(),
                    symbols: symbols.into_iter().collect(),
                });
            }
            match a.target {
                None => ExitCode::SUCCESS,
                Some(t) => match support_table(model, t, a.opt_level, &binds) {
                    Ok(true) => ExitCode::SUCCESS,
                    Ok(false) => crate::common::check_failed(),
                    Err(e) => crate::common::error(e.as_ref()),
                },
            }
        }
        Err(ImportError::Nodes(issues)) => {
            println!("unsupported ({} nodes):", issues.len());
            for i in &issues {
                println!("  {i}");
            }
            crate::common::check_failed()
        }
        Err(e) => {
            println!("unsupported: the model does not import:");
            println!("  {e}");
            crate::common::check_failed()
        }
    }
}
