//! Profiles as Chrome traces (`chrome://tracing`, Perfetto, Speedscope):
//! one complete event per step, named by the ONNX nodes it runs, as ONNX
//! Runtime's `enable_profiling` writes them.

use std::fmt::Write as _;
use std::time::Duration;

/// A JSON string literal of `s` (quoted, escaped).
pub(crate) fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A Chrome trace of profiled steps, each `(kernel label, ONNX origin,
/// time)` as [`crate::Session::profile`] gives them, laid end to end on one
/// track of process `target` (the steps of one run are sequential). The
/// event's name is the ONNX origin; its category the kernel's kind; its
/// arguments the kernel label.
pub fn chrome_trace(target: &str, steps: &[(String, String, Duration)]) -> String {
    let mut out = String::from("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    let _ = write!(
        out,
        "{{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, \"args\": {{\"name\": {}}}}}",
        json_string(&format!("rlx-onnx {target}"))
    );
    let mut at = 0.0f64;
    for (label, origin, t) in steps {
        let us = t.as_secs_f64() * 1e6;
        let kind = label.split(' ').next().unwrap_or(label);
        let _ = write!(
            out,
            ",\n{{\"name\": {}, \"cat\": {}, \"ph\": \"X\", \"ts\": {at:.3}, \"dur\": {us:.3}, \
             \"pid\": 1, \"tid\": 1, \"args\": {{\"kernel\": {}}}}}",
            json_string(origin),
            json_string(kind),
            json_string(label)
        );
        at += us;
    }
    out.push_str("\n]}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_lie_end_to_end_named_by_their_onnx_nodes() {
        let steps = vec![
            (
                "conv 3x3".to_string(),
                "/conv\"1".to_string(),
                Duration::from_micros(5),
            ),
            (
                "relu".to_string(),
                "/relu".to_string(),
                Duration::from_micros(2),
            ),
        ];
        let t = chrome_trace("cpu", &steps);
        assert!(
            t.contains(
                r#""name": "/conv\"1", "cat": "conv", "ph": "X", "ts": 0.000, "dur": 5.000"#
            ),
            "{t}"
        );
        assert!(
            t.contains(r#""name": "/relu", "cat": "relu", "ph": "X", "ts": 5.000, "dur": 2.000"#),
            "{t}"
        );
        assert!(t.ends_with("]}\n"));
    }
}
