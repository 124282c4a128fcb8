//! SVG of a graph, laid out in layers (the Sugiyama scheme, in its simple
//! linear-time forms): every box on the layer after its deepest input, edges
//! that skip layers bent through one waypoint per layer, boxes of a layer
//! ordered by the mean position of their neighbours (sweeps down and up),
//! then placed as near that mean as the boxes beside them allow. Each step
//! is linear in boxes plus waypoints (sorting aside), so a model of
//! thousands of nodes draws in well under a second; text is monospace, so
//! boxes are sized to fit their labels exactly.

use std::fmt::Write as _;

use rlx_ir::Graph;

use crate::dot::{is_drawn, look, output_look, DotOptions, Look};

/// The most boxes one picture holds: past this no layout is readable.
pub const MAX_BOXES: usize = 5000;

/// The most edge waypoints (an edge skipping k layers has k - 1).
const MAX_WAYPOINTS: usize = 400_000;

const FONT_SIZE: f64 = 10.0;
/// The advance of one character of a monospace font at [`FONT_SIZE`] (0.6 em).
const CHAR_W: f64 = 6.0;
const LINE_H: f64 = 12.5;
const PAD_X: f64 = 10.0;
const PAD_Y: f64 = 7.0;
const GAP_X: f64 = 22.0;
const GAP_Y: f64 = 42.0;
const MARGIN: f64 = 16.0;
/// Crossing-reduction sweeps (each one down and one up).
const SWEEPS: usize = 6;
/// Placement sweeps (each one down and one up).
const PLACEMENTS: usize = 4;

/// One thing placed on a layer: a box, or a waypoint of a long edge.
struct Item {
    look: Option<Look>,
    w: f64,
    h: f64,
    layer: usize,
    x: f64,
}

/// An edge of the picture: the items it passes, source first.
struct Route {
    items: Vec<usize>,
    label: Option<String>,
}

/// Lays out and draws `g` (its top level) as SVG text.
pub fn draw(g: &Graph, opts: &DotOptions) -> Result<String, String> {
    let (order, _) = rlx_ir::text::numbering(g);
    let mut items: Vec<Item> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let boxed = |l: Look| {
        let chars = l.lines.iter().map(|s| s.chars().count()).max().unwrap_or(1);
        let mut w = chars as f64 * CHAR_W + 2.0 * PAD_X;
        let mut h = l.lines.len() as f64 * LINE_H + 2.0 * PAD_Y;
        if l.ellipse {
            // An ellipse around the text's box: sqrt(2) larger each way.
            w *= 1.42;
            h *= 1.42;
        }
        Item {
            look: Some(l),
            w,
            h,
            layer: 0,
            x: 0.0,
        }
    };
    for &id in &order {
        if is_drawn(g, id) {
            index.insert(id, items.len());
            items.push(boxed(look(g, id, opts, true)));
        }
    }
    let mut edges: Vec<(usize, usize, Option<String>)> = Vec::new();
    for &id in &order {
        let Some(&dst) = index.get(&id) else {
            continue;
        };
        for v in g.inputs_of(id) {
            if let Some(&src) = index.get(&v.node) {
                let label = (g.node(v.node).outputs.len() > 1).then(|| v.port.to_string());
                edges.push((src, dst, label));
            }
        }
    }
    for o in g.outputs() {
        let k = items.len();
        items.push(boxed(output_look(&o.name)));
        if let Some(&src) = index.get(&o.value.node) {
            edges.push((src, k, None));
        }
    }
    if items.len() > MAX_BOXES {
        return Err(too_large(items.len()));
    }
    assign_layers(&mut items, &edges);
    let routes = route(&mut items, edges)?;
    let layers = order_layers(&items, &routes);
    place(&mut items, &layers, &routes);
    Ok(render(&items, &layers, &routes))
}

fn too_large(boxes: usize) -> String {
    format!(
        "the graph has {boxes} boxes to draw: past {MAX_BOXES} no layout is readable; write \
         DOT (-o graph.dot) for Graphviz, or draw a stage where fusion has made it smaller \
         (--after with a later pass)"
    )
}

/// Longest path from the sources; then a box without inputs moves down to
/// just above its first consumer (an input used deep in the graph starts
/// there, not at the top with a long edge).
fn assign_layers(items: &mut [Item], edges: &[(usize, usize, Option<String>)]) {
    let mut preds = vec![0usize; items.len()];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    // Items are in topological order: every edge goes to a later item.
    let mut sorted: Vec<&(usize, usize, Option<String>)> = edges.iter().collect();
    sorted.sort_by_key(|e| e.1);
    for &&(s, d, _) in &sorted {
        items[d].layer = items[d].layer.max(items[s].layer + 1);
        preds[d] += 1;
        succs[s].push(d);
    }
    for i in (0..items.len()).rev() {
        if preds[i] == 0 {
            if let Some(first) = succs[i].iter().map(|&d| items[d].layer).min() {
                items[i].layer = first.saturating_sub(1);
            }
        }
    }
}

/// Splits edges that skip layers into chains through waypoints.
fn route(
    items: &mut Vec<Item>,
    edges: Vec<(usize, usize, Option<String>)>,
) -> Result<Vec<Route>, String> {
    let boxes = items.len();
    let mut routes = Vec::with_capacity(edges.len());
    for (s, d, label) in edges {
        let mut chain = vec![s];
        for layer in items[s].layer + 1..items[d].layer {
            if items.len() - boxes >= MAX_WAYPOINTS {
                return Err(too_large(boxes));
            }
            chain.push(items.len());
            items.push(Item {
                look: None,
                w: 0.0,
                h: 0.0,
                layer,
                x: 0.0,
            });
        }
        chain.push(d);
        routes.push(Route {
            items: chain,
            label,
        });
    }
    Ok(routes)
}

/// Each item's predecessors and successors along the routes.
fn neighbours(n: usize, routes: &[Route]) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for r in routes {
        for w in r.items.windows(2) {
            preds[w[1]].push(w[0]);
            succs[w[0]].push(w[1]);
        }
    }
    (preds, succs)
}

/// The items of each layer, ordered to keep crossings few: the barycentre
/// heuristic, sweeping down (by the mean position of predecessors) and up
/// (of successors).
fn order_layers(items: &[Item], routes: &[Route]) -> Vec<Vec<usize>> {
    let depth = items.iter().map(|i| i.layer).max().map_or(0, |d| d + 1);
    let mut layers: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for (k, it) in items.iter().enumerate() {
        layers[it.layer].push(k);
    }
    let (preds, succs) = neighbours(items.len(), routes);
    let mut pos = vec![0.0f64; items.len()];
    let renumber = |layer: &[usize], pos: &mut [f64]| {
        for (p, &k) in layer.iter().enumerate() {
            pos[k] = p as f64;
        }
    };
    for l in &layers {
        renumber(l, &mut pos);
    }
    let sweep = |layers: &mut Vec<Vec<usize>>, pos: &mut Vec<f64>, down: bool| {
        let n = layers.len();
        for step in 1..n {
            let li = if down { step } else { n - 1 - step };
            let adj = if down { &preds } else { &succs };
            let mut keyed: Vec<(f64, usize)> = layers[li]
                .iter()
                .map(|&k| {
                    let nb = &adj[k];
                    let key = if nb.is_empty() {
                        pos[k]
                    } else {
                        nb.iter().map(|&j| pos[j]).sum::<f64>() / nb.len() as f64
                    };
                    (key, k)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
            layers[li] = keyed.into_iter().map(|(_, k)| k).collect();
            renumber(&layers[li], pos);
        }
    };
    for _ in 0..SWEEPS {
        sweep(&mut layers, &mut pos, true);
        sweep(&mut layers, &mut pos, false);
    }
    layers
}

/// Horizontal centres: each layer placed as near the mean centre of its
/// neighbours as the order and the gaps allow (the mean of the left-packed
/// and the right-packed placement, both of which keep the gaps).
fn place(items: &mut [Item], layers: &[Vec<usize>], routes: &[Route]) {
    let (preds, succs) = neighbours(items.len(), routes);
    let sep = |items: &[Item], a: usize, b: usize| {
        let gap = if items[a].look.is_none() && items[b].look.is_none() {
            GAP_X / 2.0
        } else {
            GAP_X
        };
        (items[a].w + items[b].w) / 2.0 + gap
    };
    for layer in layers {
        let mut x = 0.0;
        for (p, &k) in layer.iter().enumerate() {
            if p > 0 {
                x += sep(items, layer[p - 1], k);
            }
            items[k].x = x;
        }
    }
    let settle = |items: &mut [Item], layer: &[usize], adj: &[Vec<usize>]| {
        let want: Vec<f64> = layer
            .iter()
            .map(|&k| {
                let nb = &adj[k];
                if nb.is_empty() {
                    items[k].x
                } else {
                    nb.iter().map(|&j| items[j].x).sum::<f64>() / nb.len() as f64
                }
            })
            .collect();
        let n = layer.len();
        let mut left = want.clone();
        for p in 1..n {
            left[p] = left[p].max(left[p - 1] + sep(items, layer[p - 1], layer[p]));
        }
        let mut right = want;
        for p in (0..n.saturating_sub(1)).rev() {
            right[p] = right[p].min(right[p + 1] - sep(items, layer[p], layer[p + 1]));
        }
        for p in 0..n {
            items[layer[p]].x = (left[p] + right[p]) / 2.0;
        }
    };
    for _ in 0..PLACEMENTS {
        for layer in layers.iter().skip(1) {
            settle(items, layer, &preds);
        }
        for layer in layers.iter().rev().skip(1) {
            settle(items, layer, &succs);
        }
    }
}

fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

fn render(items: &[Item], layers: &[Vec<usize>], routes: &[Route]) -> String {
    let left = items
        .iter()
        .map(|i| i.x - i.w / 2.0)
        .fold(f64::INFINITY, f64::min);
    let right = items
        .iter()
        .map(|i| i.x + i.w / 2.0)
        .fold(f64::NEG_INFINITY, f64::max);
    let shift = MARGIN - if left.is_finite() { left } else { 0.0 };
    let mut tops = Vec::with_capacity(layers.len());
    let mut heights = Vec::with_capacity(layers.len());
    let mut y = MARGIN;
    for layer in layers {
        let h = layer.iter().map(|&k| items[k].h).fold(0.0, f64::max);
        tops.push(y);
        heights.push(h);
        y += h + GAP_Y;
    }
    let width = if right.is_finite() {
        right + shift + MARGIN
    } else {
        2.0 * MARGIN
    };
    let height = (y - GAP_Y + MARGIN).max(2.0 * MARGIN);
    let cx = |k: usize| items[k].x + shift;
    let cy = |k: usize| tops[items[k].layer] + heights[items[k].layer] / 2.0;
    let mut out = String::new();
    let _ = writeln!(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"Menlo, Consolas, 'DejaVu Sans Mono', monospace\" \
         font-size=\"{FONT_SIZE}\">"
    );
    out.push_str(
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" \
         markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" \
         fill=\"#444444\"/></marker></defs>\n",
    );
    let _ = writeln!(
        out,
        "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>"
    );
    out.push_str("<g fill=\"none\" stroke=\"#444444\" stroke-width=\"1\">\n");
    for r in routes {
        let (s, d) = (r.items[0], r.items[r.items.len() - 1]);
        let mut pts: Vec<(f64, f64)> = vec![(cx(s), cy(s) + items[s].h / 2.0)];
        pts.extend(
            r.items[1..r.items.len() - 1]
                .iter()
                .map(|&k| (cx(k), cy(k))),
        );
        pts.push((cx(d), cy(d) - items[d].h / 2.0));
        let mut path = format!("M{:.1} {:.1}", pts[0].0, pts[0].1);
        for w in pts.windows(2) {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            let my = (y0 + y1) / 2.0;
            let _ = write!(path, " C{x0:.1} {my:.1} {x1:.1} {my:.1} {x1:.1} {y1:.1}");
        }
        let _ = writeln!(out, "<path d=\"{path}\" marker-end=\"url(#arrow)\"/>");
    }
    out.push_str("</g>\n");
    for r in routes {
        if let Some(label) = &r.label {
            let s = r.items[0];
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"8\" fill=\"#666666\">{}</text>",
                cx(s) + 3.0,
                cy(s) + items[s].h / 2.0 + 9.0,
                xml(label)
            );
        }
    }
    for (k, it) in items.iter().enumerate() {
        let Some(l) = &it.look else {
            continue;
        };
        let (x, y) = (cx(k), cy(k));
        let stroke = l.color.unwrap_or("#333333");
        let sw = if l.thick { 2.0 } else { 1.0 };
        if l.ellipse {
            let _ = writeln!(
                out,
                "<ellipse cx=\"{x:.1}\" cy=\"{y:.1}\" rx=\"{:.1}\" ry=\"{:.1}\" fill=\"{}\" stroke=\"{stroke}\" stroke-width=\"{sw}\"/>",
                it.w / 2.0,
                it.h / 2.0,
                l.fill
            );
        } else {
            let _ = writeln!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"6\" fill=\"{}\" stroke=\"{stroke}\" stroke-width=\"{sw}\"/>",
                x - it.w / 2.0,
                y - it.h / 2.0,
                it.w,
                it.h,
                l.fill
            );
        }
        let first = y - (l.lines.len() as f64 - 1.0) * LINE_H / 2.0;
        let _ = write!(
            out,
            "<text text-anchor=\"middle\" dominant-baseline=\"central\" fill=\"#000000\">"
        );
        for (i, line) in l.lines.iter().enumerate() {
            let _ = write!(
                out,
                "<tspan x=\"{x:.1}\" y=\"{:.1}\">{}</tspan>",
                first + i as f64 * LINE_H,
                xml(line)
            );
        }
        out.push_str("</text>\n");
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::text::parse_graph;

    /// A chain of `n` unary nodes with a skip edge from the input to the end.
    fn chain(n: usize) -> Graph {
        let mut t = String::from("rlx-ir 2\ngraph {\n  %0 = input \"x\" : f32[4]\n");
        for i in 1..=n {
            let _ = writeln!(t, "  %{i} = relu(%{}) : f32[4]", i - 1);
        }
        let _ = writeln!(t, "  %{} = add(%{n}, %0) : f32[4]", n + 1);
        let _ = writeln!(t, "  output \"y\" = %{}\n}}", n + 1);
        parse_graph(&t).unwrap()
    }

    #[test]
    fn long_chains_lay_out_and_every_box_keeps_its_text() {
        let g = chain(1500);
        let svg = draw(&g, &DotOptions::default()).unwrap();
        assert!(svg.starts_with("<?xml") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<rect x=").count(), 1501, "one box per node");
        assert_eq!(svg.matches(">relu</tspan>").count(), 1500);
        // The skip edge bends through one waypoint per layer it passes.
        assert_eq!(svg.matches("marker-end=").count(), 1503);
    }

    #[test]
    fn past_the_limit_it_says_what_to_do() {
        let e = draw(&chain(MAX_BOXES), &DotOptions::default()).unwrap_err();
        assert!(e.contains("-o graph.dot") && e.contains("--after"), "{e}");
    }
}
