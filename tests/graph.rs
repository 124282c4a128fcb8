//! `graph`: DOT snapshots of two golden models after `-O2` (fused nodes as
//! clusters), SVG and DOT for every golden model at import and after `-O2`,
//! and a target's support shading.

mod common;

use rlx_onnx::dot::{to_dot, to_svg, DotOptions, SupportTable};
use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::passes::legalize::{classify, Support};
use rlx_onnx::{Compiler, OptLevel, Target};

fn compiled(name: &str) -> rlx_onnx::CompiledModel {
    let m = import_file(
        &common::root().join(format!("golden/{name}/model.onnx")),
        &Registry::standard(),
    )
    .unwrap();
    Compiler::new(Target::Cpu)
        .opt_level(OptLevel::O2)
        .compile(m, None)
        .unwrap()
}

#[test]
fn dot_snapshots_of_two_golden_models() {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(common::root().join("golden/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        for name in ["cnn", "transformer"] {
            let dot = to_dot(
                &compiled(name).graph,
                &DotOptions {
                    support: None,
                    clusters: true,
                },
            );
            insta::assert_snapshot!(format!("graph__{name}"), dot);
        }
    });
}

#[test]
fn svg_and_dot_for_every_golden_model() {
    for case in common::golden_cases() {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let imported = import_file(&case.join("model.onnx"), &Registry::standard()).unwrap();
        let compiled = Compiler::new(Target::Cpu)
            .compile(imported.clone(), None)
            .unwrap();
        for g in [&imported.graph, &compiled.graph] {
            let dot = to_dot(g, &DotOptions::default());
            assert!(
                dot.starts_with("digraph rlx {") && dot.ends_with("}\n"),
                "{name}"
            );
            for id in g.node_ids() {
                let n = g.node(id);
                if !n.op.is_leaf() {
                    assert!(
                        dot.contains(n.op.name()),
                        "{name}: no {} in {dot}",
                        n.op.name()
                    );
                }
            }
            let svg = to_svg(g, None).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"),
                "{name}"
            );
        }
    }
}

#[test]
fn nodes_a_target_cannot_run_are_shaded_with_the_reason() {
    let m = import_file(
        &common::root().join("golden/if_rank/model.onnx"),
        &Registry::standard(),
    )
    .unwrap();
    let mut support: SupportTable = classify(&m.graph, &m.weights, Target::Wgpu.backend())
        .into_iter()
        .map(|(name, _, _, s)| (name, s))
        .collect();
    // The shape arithmetic folds once shapes are bound; mark one node
    // unsupported as a backend without its kernel would.
    let (name, _) = support
        .iter()
        .find(|(_, s)| matches!(s, Support::FoldsWhenBound))
        .map(|(n, s)| (n.clone(), s.clone()))
        .expect("a node that folds when bound");
    let dot = to_dot(
        &m.graph,
        &DotOptions {
            support: Some(support.clone()),
            clusters: true,
        },
    );
    assert!(dot.contains("folds once shapes are bound"), "{dot}");
    support.insert(name, Support::Unsupported("no kernel for `shape`".into()));
    let dot = to_dot(
        &m.graph,
        &DotOptions {
            support: Some(support),
            clusters: true,
        },
    );
    assert!(dot.contains("unsupported: no kernel for `shape`"), "{dot}");
    assert!(dot.contains("#f4cccc"), "{dot}");
}
