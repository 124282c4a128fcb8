//! `rlx-onnx pass-report [--golden DIR] [--light DIR] [--target T] [--out FILE]`:
//! the table of `docs/passes.md`. Per model: ops after import, ops after
//! `-O2`, BatchNormalizations folded, and how often each fusion formed (and
//! what legalization decomposed again for the target).

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rlx_onnx::importer::{decode_model, import_file, Registry};
use rlx_onnx::ir::{Graph, Op};
use rlx_onnx::{OptLevel, Target};

#[derive(clap::Args)]
pub struct Args {
    /// Directory of golden model cases (`<name>/model.onnx`).
    #[arg(long, default_value = "golden")]
    golden: PathBuf,
    /// Directory of the ONNX `light` models (`light_*.onnx`); skipped if absent.
    #[arg(long)]
    light: Option<PathBuf>,
    /// The target whose legalization the table shows.
    #[arg(long, value_enum, default_value = "cpu")]
    target: crate::common::TargetArg,
    /// Write the Markdown here instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Op nodes (not inputs, weights or constants) of the top-level graph.
fn ops(g: &Graph) -> usize {
    g.node_ids()
        .into_iter()
        .filter(|i| !g.node(*i).op.is_leaf())
        .count()
}

/// Names of the model's BatchNormalization nodes.
fn batchnorms(path: &Path) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let m = decode_model(&rlx_onnx::files::read_regular(path)?)?;
    Ok(m.graph
        .iter()
        .flat_map(|g| g.node.iter())
        .filter(|n| n.op_type.as_deref() == Some("BatchNormalization"))
        .map(|n| n.name.clone().unwrap_or_default())
        .collect())
}

/// BatchNormalizations whose every remaining node is a conv or matmul.
fn folded(g: &Graph, bns: &[String]) -> usize {
    let mut into: HashSet<&str> = HashSet::new();
    let mut elsewhere: HashSet<&str> = HashSet::new();
    for id in g.node_ids() {
        let n = g.node(id);
        if n.op.is_leaf() {
            continue;
        }
        let folds = matches!(
            n.op,
            Op::Conv(_) | Op::FusedConv(_) | Op::MatMul(_) | Op::FusedMatMul(_)
        );
        for o in &n.origin {
            if folds {
                into.insert(o)
            } else {
                elsewhere.insert(o)
            };
        }
    }
    bns.iter()
        .filter(|b| into.contains(b.as_str()) && !elsewhere.contains(b.as_str()))
        .count()
}

struct Row {
    name: String,
    imported: usize,
    optimized: usize,
    bn: (usize, usize),
    formed: BTreeMap<String, usize>,
    decomposed: BTreeMap<String, usize>,
}

fn row(name: &str, path: &Path, target: Target) -> Result<Row, Box<dyn std::error::Error>> {
    let m = import_file(path, &Registry::standard())?;
    let imported = ops(&m.graph);
    let (mut g, mut w) = (m.graph, m.weights);
    let passes = rlx_onnx::passes::pipeline::names(target.name(), OptLevel::O2);
    let stats = rlx_onnx::compile::run_passes(
        &mut g,
        &mut w,
        target,
        &passes,
        true,
        rlx_onnx::Fallback::Refuse,
        None,
    )?;
    let bns = batchnorms(path)?;
    let mut formed = BTreeMap::new();
    let mut decomposed = BTreeMap::new();
    for (k, v) in stats {
        if let Some(op) = k.strip_prefix("decomposed.") {
            decomposed.insert(op.to_string(), v);
        } else if !k.starts_with("simplify.") && !k.starts_with("cse.") {
            // `fused_matmul.bias` and `fused_matmul.activation` both count one fused_matmul step.
            formed.insert(k, v);
        }
    }
    Ok(Row {
        name: name.to_string(),
        imported,
        optimized: ops(&g),
        bn: (folded(&g, &bns), bns.len()),
        formed,
        decomposed,
    })
}

fn join(m: &BTreeMap<String, usize>) -> String {
    if m.is_empty() {
        return "-".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn run(a: Args) -> ExitCode {
    let target = Target::from(a.target);
    let mut models: Vec<(String, PathBuf)> = Vec::new();
    if let Ok(dirs) = rlx_onnx::testdata::case_dirs(&a.golden) {
        for d in dirs {
            let n = d
                .file_name()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_default();
            models.push((format!("golden/{n}"), d.join("model.onnx")));
        }
    }
    if let Some(l) = &a.light {
        match rlx_onnx::testdata::light_models(l) {
            Ok(ms) => models.extend(
                ms.into_iter()
                    .map(|m| (format!("light/{}", m.name), m.model)),
            ),
            Err(e) => return crate::common::error_msg(e),
        }
    }
    let mut md = String::new();
    let _ = writeln!(md, "| model | ops after import | ops after -O2 | BatchNorm folded | formed | decomposed for {target} |");
    let _ = writeln!(md, "|---|---:|---:|---:|---|---|");
    let mut failed = false;
    for (name, path) in &models {
        eprintln!("{name}...");
        match row(name, path, target) {
            Ok(r) => {
                let bn = if r.bn.1 == 0 {
                    "-".to_string()
                } else {
                    format!("{}/{}", r.bn.0, r.bn.1)
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} |",
                    r.name,
                    r.imported,
                    r.optimized,
                    bn,
                    join(&r.formed),
                    join(&r.decomposed)
                );
            }
            Err(e) => {
                failed = true;
                let _ = writeln!(md, "| {name} | error: {e} | | | | |");
            }
        }
    }
    match &a.out {
        None => print!("{md}"),
        Some(p) => {
            if let Err(e) = std::fs::write(p, &md) {
                return crate::common::error_msg(format!("cannot write `{}`: {e}", p.display()));
            }
        }
    }
    if failed {
        // A model that does not compile is an error, not a finding.
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}
