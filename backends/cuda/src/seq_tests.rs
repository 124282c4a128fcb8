//! Device-free checks of the recurrent, grid, sequence and signal families:
//! small IR graphs of each op, mode and dtype they take, planned (a
//! reviewed snapshot of a bidirectional GRU's unrolled schedule), and every
//! module they generate compiled by NVRTC.

use crate::schedule::Launch;
use crate::tests::{compile_all, planned};
use crate::Schedule;

const GRU: &str = "  %0 = input \"X\" : f32[2,3,3]
  %1 = input \"W\" : f32[2,15,3]
  %2 = input \"R\" : f32[2,15,5]
  %3 = input \"B\" : f32[2,30]
  %4 = input \"lens\" : i32[3]
  %5:2 = gru(%0, %1, %2, %3, %4) {hidden_size=5, direction=bidirectional, activations=[sigmoid, tanh, hard_sigmoid, softsign], activation_alpha=[0.0, 0.0, 0.2, 0.0], activation_beta=[0.0, 0.0, 0.5, 0.0], clip=2.5, layout=0, linear_before_reset=false, input_forget=false, has_bias=true, has_seq_lens=true, has_initial_h=false, has_initial_c=false, has_peepholes=false, num_outputs=2, quantized=false} : (f32[2,2,3,5], f32[2,3,5])
  output \"Y\" = %5.0
  output \"Y_h\" = %5.1
";

fn recurrent() -> Vec<String> {
    vec![
        GRU.to_string(),
        "  %0 = input \"X\" : f32[3,2,4]
  %1 = input \"W\" : f32[1,12,4]
  %2 = input \"R\" : f32[1,12,3]
  %3 = input \"B\" : f32[1,24]
  %4 = input \"lens\" : i64[3]
  %5 = input \"h0\" : f32[3,1,3]
  %6 = input \"c0\" : f32[3,1,3]
  %7 = input \"P\" : f32[1,9]
  %8:3 = lstm(%0, %1, %2, %3, %4, %5, %6, %7) {hidden_size=3, direction=reverse, activations=[sigmoid, tanh, tanh], activation_alpha=[0.0, 0.0, 0.0], activation_beta=[0.0, 0.0, 0.0], clip=none, layout=1, linear_before_reset=false, input_forget=true, has_bias=true, has_seq_lens=true, has_initial_h=true, has_initial_c=true, has_peepholes=true, num_outputs=3, quantized=false} : (f32[3,2,1,3], f32[3,1,3], f32[3,1,3])
  output \"Y\" = %8.0
  output \"Y_h\" = %8.1
  output \"Y_c\" = %8.2
"
        .to_string(),
        "  %0 = input \"X\" : f32[2,3,3]
  %1 = input \"W\" : f32[1,15,3]
  %2 = input \"R\" : f32[1,15,5]
  %3:2 = gru(%0, %1, %2) {hidden_size=5, direction=forward, activations=[sigmoid, tanh], activation_alpha=[0.0, 0.0], activation_beta=[0.0, 0.0], clip=none, layout=0, linear_before_reset=true, input_forget=false, has_bias=false, has_seq_lens=false, has_initial_h=false, has_initial_c=false, has_peepholes=false, num_outputs=2, quantized=false} : (f32[2,1,3,5], f32[1,3,5])
  output \"Y_h\" = %3.1
"
        .to_string(),
        "  %0 = input \"X\" : f32[2,3,3]
  %1 = input \"W\" : f32[1,4,3]
  %2 = input \"R\" : f32[1,4,4]
  %3 = rnn(%0, %1, %2) {hidden_size=4, direction=forward, activations=[elu], activation_alpha=[1.0], activation_beta=[0.0], clip=none, layout=0, linear_before_reset=false, input_forget=false, has_bias=false, has_seq_lens=false, has_initial_h=false, has_initial_c=false, has_peepholes=false, num_outputs=1, quantized=false} : f32[2,1,3,4]
  output \"Y\" = %3
"
        .to_string(),
    ]
}

fn grids() -> Vec<String> {
    let mut v = Vec::new();
    for (d, g) in [
        ("f32", "f32"),
        ("f64", "f64"),
        ("f16", "f32"),
        ("bf16", "bf16"),
    ] {
        for (mode, pad) in [
            ("nearest", "zeros"),
            ("linear", "border"),
            ("cubic", "reflection"),
        ] {
            v.push(format!(
                "  %0 = input \"x\" : {d}[1,2,3,4]
  %1 = input \"g\" : {g}[1,2,5,2]
  %2 = grid_sample(%0, %1) {{align_corners=true, mode={mode}, padding_mode={pad}}} : {d}[1,2,2,5]
  output \"y\" = %2
"
            ));
        }
    }
    v.push(
        "  %0 = input \"x\" : f32[1,1,3,4,5]
  %1 = input \"g\" : f32[1,2,2,3,3]
  %2 = grid_sample(%0, %1) {align_corners=false, mode=linear, padding_mode=zeros} : f32[1,1,2,2,3]
  output \"y\" = %2
"
        .to_string(),
    );
    v.push(
        "  %0 = input \"x\" : f32[2,4,5,5]
  %1 = input \"w\" : f32[6,2,3,3]
  %2 = input \"off\" : f32[2,36,5,5]
  %3 = input \"b\" : f32[6]
  %4 = input \"m\" : f32[2,18,5,5]
  %5 = deform_conv(%0, %1, %2, %3, %4) {strides=[1, 1], dilations=[1, 1], pads=[1, 1, 1, 1], group=2, offset_group=2, has_bias=true, has_mask=true} : f32[2,6,5,5]
  output \"y\" = %5
"
        .to_string(),
    );
    for d in ["f32", "f16"] {
        v.push(format!(
            "  %0 = input \"theta\" : {d}[2,3,4]
  %1 = constant i64[5] [2, 1, 3, 4, 5] : i64[5]
  %2 = affine_grid(%0, %1) {{align_corners=true}} : {d}[2,3,4,5,3]
  output \"grid\" = %2
"
        ));
    }
    v
}

fn sequences() -> Vec<String> {
    let mut v = Vec::new();
    for d in ["f32", "f64", "f16", "bf16"] {
        v.push(format!(
            "  %0 = input \"q\" : {d}[2,4,64]
  %1 = input \"k\" : {d}[2,4,32]
  %2 = input \"v\" : {d}[2,4,32]
  %3 = input \"past\" : {d}[2,4,8,8]
  %4 = input \"decay\" : {d}[2,4,32]
  %5 = input \"beta\" : {d}[2,4,4]
  %6:2 = linear_attention(%0, %1, %2, %3, %4, %5) {{q_num_heads=8, kv_num_heads=4, scale=none, update_rule=gated_delta, has_past=true}} : ({d}[2,4,64], {d}[2,4,8,8])
  output \"y\" = %6.0
  output \"s\" = %6.1
  %7 = input \"x\" : {d}[2,4,8]
  %8 = input \"w\" : {d}[4,1,4]
  %9 = input \"b\" : {d}[4]
  %10 = input \"ps\" : {d}[2,4,3]
  %11:2 = causal_conv_with_state(%7, %8, %9, %10) {{activation=silu, has_bias=true, has_past=true}} : ({d}[2,4,8], {d}[2,4,3])
  output \"cy\" = %11.0
  output \"cs\" = %11.1
  %12 = input \"rx\" : {d}[2,4,3,8]
  %13 = input \"cos\" : {d}[50,2]
  %14 = input \"sin\" : {d}[50,2]
  %15 = input \"ids\" : i64[2,3]
  %16 = rotary_embedding(%12, %13, %14, %15) {{interleaved=true, rotary_embedding_dim=4, num_heads=0}} : {d}[2,4,3,8]
  output \"r\" = %16
"
        ));
    }
    v.push(
        "  %0 = input \"q\" : f32[1,2,8]
  %1 = input \"k\" : f32[1,2,8]
  %2 = input \"v\" : f32[1,2,4]
  %3:2 = linear_attention(%0, %1, %2) {q_num_heads=2, kv_num_heads=2, scale=0.5, update_rule=linear, has_past=false} : (f32[1,2,8], f32[1,2,4,2])
  output \"y\" = %3.0
  output \"s\" = %3.1
  %4 = input \"x\" : f32[1,3,5]
  %5 = input \"w\" : f32[3,1,1]
  %6:2 = causal_conv_with_state(%4, %5) {activation=none, has_bias=false, has_past=false} : (f32[1,3,5], f32[1,3,0])
  output \"cy\" = %6.0
  %7 = input \"rx\" : f32[2,3,16]
  %8 = input \"cos\" : f32[2,3,4]
  %9 = input \"sin\" : f32[2,3,4]
  %10 = rotary_embedding(%7, %8, %9) {interleaved=false, rotary_embedding_dim=0, num_heads=2} : f32[2,3,16]
  output \"r\" = %10
"
        .to_string(),
    );
    v
}

fn signals() -> Vec<String> {
    let mut v = Vec::new();
    for d in ["f32", "f64", "f16", "bf16"] {
        v.push(format!(
            "  %0 = input \"x\" : {d}[1,6,10,2]
  %1 = constant i64[] [-2] : i64[]
  %2 = dft(%0, %1) {{axis=-2, inverse=true, onesided=true, has_length=false, axis_input=true}} : {d}[1,6,18,1]
  output \"y\" = %2
  %3 = input \"s\" : {d}[1,128,1]
  %4 = constant i64[] [8] : i64[]
  %5 = input \"w\" : {d}[16]
  %6 = stft(%3, %4, %5) {{onesided=true, has_window=true, has_length=false}} : {d}[1,15,9,2]
  output \"z\" = %6
  %7 = input \"c\" : {d}[1,10,12]
  %8 = constant i64[3] [4, 4, 5] : i64[3]
  %9 = constant i64[3] [1, 2, 5] : i64[3]
  %10 = col2im(%7, %8, %9) {{strides=[1, 1, 1], dilations=[1, 1, 1], pads=[0, 0, 0, 0, 0, 0]}} : {d}[1,1,4,4,5]
  output \"i\" = %10
"
        ));
    }
    v.push(
        "  %0 = input \"x\" : f32[3,5,1]
  %1 = constant i64[] [8] : i64[]
  %2 = dft(%0, %1) {axis=1, inverse=false, onesided=true, has_length=true, axis_input=false} : f32[3,5,2]
  output \"y\" = %2
  %3 = input \"c\" : f32[1,5,15]
  %4 = constant i64[2] [5, 5] : i64[2]
  %5 = constant i64[2] [1, 5] : i64[2]
  %6 = col2im(%3, %4, %5) {strides=[1, 1], dilations=[1, 1], pads=[0, 1, 0, 1]} : f32[1,1,5,5]
  output \"i\" = %6
"
        .to_string(),
    );
    v
}

/// Index ops whose axis or diagonal is computed at run time (read on the device).
const RUNTIME_AXES: &str = "  %0 = input \"x\" : f64[2,3,4]
  %1 = input \"axis\" : i32[]
  %2 = cumsum(%0, %1) {exclusive=true, reverse=true} : f64[2,3,4]
  output \"y\" = %2
  %3 = input \"t\" : i64[4,5]
  %4 = input \"k\" : i64[]
  %5 = trilu(%3, %4) {upper=true} : i64[4,5]
  output \"u\" = %5
";

fn all() -> Vec<(String, Schedule)> {
    let mut graphs = recurrent();
    graphs.extend(grids());
    graphs.extend(sequences());
    graphs.extend(signals());
    graphs.push(RUNTIME_AXES.to_string());
    graphs
        .into_iter()
        .map(|g| (g.clone(), planned(&g)))
        .collect()
}

fn entries(s: &Schedule) -> Vec<String> {
    s.launches
        .iter()
        .map(|l| match l {
            Launch::Kernel(k) => k.entry.clone(),
            Launch::Conv(_) => "conv".into(),
            Launch::Gemm(_) => "gemm".into(),
        })
        .collect()
}

#[test]
fn bidirectional_gru_schedule() {
    insta::assert_snapshot!(planned(GRU).to_string());
}

#[test]
fn recurrent_layers_unroll_gemms_and_gate_kernels() {
    // GRU with the reset before the product: per step a GEMM, the gates, a
    // second GEMM and the update; then Y_h.
    let e = entries(&planned(GRU));
    let mut want = vec!["gemm", "rnn_init"];
    for _ in 0..2 {
        want.extend(["gemm", "rnn_gru_gates", "gemm", "rnn_gru_update"]);
    }
    want.push("rnn_finish");
    assert_eq!(e, want);
    // LSTM (2 steps, layout 1): one fused kernel per step.
    let e = entries(&planned(&recurrent()[1]));
    assert_eq!(e.iter().filter(|n| *n == "rnn_step").count(), 2);
    assert_eq!(e.iter().filter(|n| *n == "gemm").count(), 3);
    // RNN with only Y: no finishing kernel.
    let e = entries(&planned(&recurrent()[3]));
    assert_eq!(e.last().map(String::as_str), Some("rnn_step"));
}

#[test]
fn deform_conv_gemms_per_group() {
    let g = grids();
    let s = planned(&g[g.len() - 3]);
    let e = entries(&s);
    assert_eq!(e, ["deform_im2col_f32", "gemm", "gemm", "deform_bias_f32"]);
    let Launch::Gemm(l) = &s.launches[2] else {
        panic!("not a gemm");
    };
    // Group 1: weights rows 3.., columns rows 18.., both images at once.
    assert_eq!(
        (
            l.gemm.m,
            l.gemm.n,
            l.gemm.k,
            l.gemm.batch,
            l.gemm.stride_b,
            l.gemm.stride_c
        ),
        (3, 25, 18, 2, 36 * 25, 6 * 25)
    );
}

#[test]
fn every_sequence_family_module_compiles_with_nvrtc() {
    let all = all();
    let mut seen = std::collections::HashSet::new();
    for (_, s) in &all {
        seen.extend(entries(s));
    }
    for e in [
        "rnn_step",
        "rnn_gru_update",
        "rnn_finish",
        "grid_sample_f16_f32",
        "grid_sample_bf16_bf16",
        "affine_grid_f16",
        "linear_attention_bf16_bf16",
        "causal_conv_f64",
        "rotary_f16",
        "dft_f64",
        "stft_bf16",
        "col2im_f32",
        "deform_im2col_f32",
        "deform_bias_f32",
        "cum_axis_f64",
        "trilu_k_8",
    ] {
        assert!(seen.contains(e), "{e} is never planned");
    }
    let schedules: Vec<Schedule> = all.into_iter().map(|(_, s)| s).collect();
    compile_all(&schedules);
}
