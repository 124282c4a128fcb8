//! Round-trip tests of the text form.

use super::{parse_graph, print_graph};

const SAMPLE: &str = r#"rlx-ir 2
graph {
  %0 = input "x" : f32[N,2*seq-1]
  %1 = input "cond" : bool[]
  %2 = weight "fc.weight" : f32[floordiv(seq+1, 2),4]
  %3 = constant i64[2] [1, -1] : i64[2]
  %4 = constant f32[3] [0.5, -inf, 1e-7] : f32[3]
  %5 = reshape(%0, %3) {allowzero=false} : f32[1,2*N*seq-N]  # Reshape_0
  %6:2 = split(%5) {axis=1, num_outputs=2} : (f32[1,3], f32["weird dim"])  # [split] "My Split", Other
  %7 = add(%6.0, %4) : f32[1,3]  # Add_1
  %8 = if(%1, %7) {then_branch=graph {
    %0 = input "a" : f32[1,3]
    %1 = relu(%0) : f32[1,3]  # Relu_2
    output "r" = %1
  }, else_branch=graph {
    %0 = input "a" : f32[1,3]
    output "r" = %0
  }} : f32[1,3]  # If_3
  output "y" = %8
  output "z" = %6.1
}
"#;

/// SAMPLE in canonical numbering: inputs, then post-order from the outputs,
/// then nodes no output reads.
const CANONICAL: &str = r#"rlx-ir 2
graph {
  %0 = input "x" : f32[N,2*seq-1]
  %1 = input "cond" : bool[]
  %2 = constant i64[2] [1, -1] : i64[2]
  %3 = reshape(%0, %2) {allowzero=false} : f32[1,2*N*seq-N]  # Reshape_0
  %4:2 = split(%3) {axis=1, num_outputs=2} : (f32[1,3], f32["weird dim"])  # [split] "My Split", Other
  %5 = constant f32[3] [0.5, -inf, 1e-7] : f32[3]
  %6 = add(%4.0, %5) : f32[1,3]  # Add_1
  %7 = if(%1, %6) {then_branch=graph {
    %0 = input "a" : f32[1,3]
    %1 = relu(%0) : f32[1,3]  # Relu_2
    output "r" = %1
  }, else_branch=graph {
    %0 = input "a" : f32[1,3]
    output "r" = %0
  }} : f32[1,3]  # If_3
  %8 = weight "fc.weight" : f32[floordiv(seq+1, 2),4]
  output "y" = %7
  output "z" = %4.1
}
"#;

#[test]
fn print_parse_print_is_identical() {
    let g = parse_graph(SAMPLE).unwrap();
    let printed = print_graph(&g);
    assert_eq!(printed, CANONICAL);
    let again = parse_graph(&printed).unwrap();
    assert_eq!(print_graph(&again), printed);
    assert_eq!(g, again);
}

#[test]
fn names_and_origins_survive() {
    let g = parse_graph(SAMPLE).unwrap();
    let split = g
        .node_ids()
        .into_iter()
        .map(|i| g.node(i))
        .find(|n| n.op.name() == "split")
        .unwrap();
    assert_eq!(split.name, "split");
    assert_eq!(
        split.origin,
        vec!["My Split".to_string(), "Other".to_string()]
    );
    assert_eq!(g.inputs().len(), 2);
}

#[test]
fn errors_have_locations() {
    let e = parse_graph("rlx-ir 2\ngraph {\n  %0 = frobnicate() : f32[]\n}\n").unwrap_err();
    assert_eq!((e.line, e.column), (3, 8));
    assert!(e.message.contains("unknown op `frobnicate`"), "{e}");
    let e = parse_graph("rlx-ir 2\ngraph {\n  %0 = relu(%4) : f32[]\n}\n").unwrap_err();
    assert!(e.message.contains("%4 is not defined"), "{e}");
    let e = parse_graph("rlx-ir 4\ngraph {}\n").unwrap_err();
    assert!(e.message.contains("version 4"), "{e}");
    let e = parse_graph("rlx-ir 3\ndims {\n  $1 = N\n}\ngraph {}\n").unwrap_err();
    assert!(e.message.contains("expected `$0`"), "{e}");
    let e = parse_graph("rlx-ir 3\ngraph {\n  %0 = input \"x\" : f32[$0]\n}\n").unwrap_err();
    assert!(e.message.contains("`$0` is not defined"), "{e}");
}

/// Five stride-2 layers and a broadcast against an upsampled branch, as
/// a detector's neck makes them: the long max() is named once and used by
/// name, and the text parses back to the same graph.
#[test]
fn long_dims_are_named_and_round_trip() {
    use crate::dim::Dim;
    use crate::graph::Graph;
    use crate::ops::elementwise::{Unary, UnaryKind};
    use crate::ops::leaves::Input;
    use crate::ops::Op;
    use crate::shape::{Shape, TensorType};
    use crate::{DType, Node, Value};
    let mut h = Dim::sym("height");
    let mut levels = Vec::new();
    for _ in 0..5 {
        h = h.ceil_div(&Dim::Known(2)).unwrap();
        levels.push(h.clone());
    }
    let wide = levels[3].max_dim(&levels[4].mul(&Dim::Known(2)));
    let ty =
        |d: &Dim| TensorType::new(DType::F32, Shape(vec![Dim::sym("N"), d.clone(), d.clone()]));
    let mut g = Graph::new();
    let x = g.add_input(Node::new(
        Op::Input(Input { name: "x".into() }),
        "x",
        vec![],
        vec![ty(&wide)],
    ));
    let y = g
        .add_node(
            Node::new(
                Op::Unary(Unary {
                    kind: UnaryKind::Neg,
                }),
                "r",
                vec!["Neg_0".into()],
                vec![ty(&wide)],
            ),
            &[Value::of(x)],
        )
        .unwrap();
    g.add_output("y", Value::of(y)).unwrap();
    let text = print_graph(&g);
    assert!(text.starts_with("rlx-ir 3\ndims {\n  $0 = max("), "{text}");
    assert!(text.contains("f32[N,$0,$0]"), "{text}");
    assert_eq!(print_graph(&parse_graph(&text).unwrap()), text);
}

/// Nesting without end is an error, not a stack overflow: subgraphs, dim
/// expressions, parentheses and signs.
#[test]
fn deep_nesting_is_an_error() {
    let n = 10_000;
    let mut sub = String::from("graph {}");
    for _ in 0..n {
        sub = format!("graph {{\n %0 = input \"c\" : bool[]\n %1 = if(%0) {{then_branch={sub}, else_branch=graph {{}}}} : f32[]\n output \"y\" = %1\n}}");
        if sub.len() > 2_000_000 {
            break;
        }
    }
    let e = parse_graph(&format!("rlx-ir 2\n{sub}\n")).unwrap_err();
    assert!(e.message.contains("nested more than"), "{e}");
    for dim in [
        format!("{}N{}", "floordiv(".repeat(n), ", 2)".repeat(n)),
        format!("{}N{}", "(".repeat(n), ")".repeat(n)),
        format!("{}N", "-".repeat(n)),
    ] {
        let text = format!("rlx-ir 2\ngraph {{\n  %0 = input \"x\" : f32[{dim}]\n}}\n");
        let e = parse_graph(&text).unwrap_err();
        assert!(e.message.contains("nested more than"), "{e}");
    }
}

/// Sequences, optionals and strings in types, string constants and a
/// string table attribute round-trip.
#[test]
fn sequence_optional_and_string_types_round_trip() {
    let text = r#"rlx-ir 2
graph {
  %0 = input "s" : seq f32[N]
  %1 = input "o" : opt seq i64[]
  %2 = input "t" : string[2]
  %3 = sequence_length(%0) : i64[]  # SequenceLength_0
  %4 = optional_has_element(%1) : bool[]  # OptionalHasElement_1
  %5 = constant string[2] ["a", "b \"c\""] : string[2]
  %6 = string_equal(%2, %5) : bool[2]  # Equal_2
  %7 = string_map(%2) {keys=string[2] ["x", "y"], values=i64[2] [1, 2], default=i64[] [-1]} : i64[2]  # LabelEncoder_3
  output "n" = %3
  output "h" = %4
  output "e" = %6
  output "m" = %7
}
"#;
    let g = parse_graph(text).unwrap();
    assert_eq!(print_graph(&g), text);
    crate::verify(&g, None).unwrap();
}

/// Ops that take tensors of numbers refuse sequences and strings at inference.
#[test]
fn plain_ops_refuse_sequences_and_strings() {
    for (ty, want) in [
        ("seq f32[3]", "is a sequence; `relu` takes tensors"),
        ("string[3]", "`relu` takes no strings"),
    ] {
        let text = format!(
            "rlx-ir 2\ngraph {{\n  %0 = input \"x\" : {ty}\n  %1 = relu(%0) : f32[3]\n  output \"y\" = %1\n}}\n"
        );
        let e = crate::infer_graph(&mut parse_graph(&text).unwrap(), None).unwrap_err();
        assert!(e.to_string().contains(want), "{ty}: {e}");
    }
}
