//! Attention (opset 23-25), RotaryEmbedding (opset 23) and LinearAttention (opset 27).

use rlx_ir::ops::{Attention, LinearAttention, LinearUpdateRule, RotaryEmbedding};

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    // Opset 25 adds the key window; opsets 23 and 24 read the same, with the
    // bottom-right causal alignment and zero fully-masked rows of onnx 1.23.
    r.add("Attention", 23, attention);
    r.add("RotaryEmbedding", 23, rotary_embedding);
    r.add("LinearAttention", 27, linear_attention);
}

fn attention(cx: &mut NodeCtx) -> Result<(), MapError> {
    let is_causal = cx.attr_bool("is_causal", false)?;
    let q_num_heads = cx.attr_i("q_num_heads", 0)?;
    let kv_num_heads = cx.attr_i("kv_num_heads", 0)?;
    let qk_matmul_output_mode = cx.attr_i("qk_matmul_output_mode", 0)?;
    if !(0..=3).contains(&qk_matmul_output_mode) {
        return Err(MapError::Attr {
            name: "qk_matmul_output_mode".into(),
            reason: format!("{qk_matmul_output_mode} is not 0..=3"),
        });
    }
    let scale = cx.attr_f_opt("scale")?;
    let softcap = cx.attr_f("softcap", 0.0)?;
    let softmax_precision = cx.attr_dtype("softmax_precision")?;
    let left_window_size = cx.attr_i("left_window_size", -1)?;
    let right_window_size = cx.attr_i("right_window_size", -1)?;
    let (q, k, v) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let mask = cx.input(3)?;
    let past_key = cx.input(4)?;
    let past_value = cx.input(5)?;
    let nonpad = cx.input(6)?;
    if past_key.is_some() != past_value.is_some() {
        return cx.unsupported("past_key and past_value must be given together");
    }
    let mut ins = vec![q, k, v];
    ins.extend(mask);
    if let (Some(pk), Some(pv)) = (past_key, past_value) {
        ins.extend([pk, pv]);
    }
    ins.extend(nonpad);
    let num_outputs = (0..cx.num_outputs())
        .rev()
        .find(|&i| cx.output_used(i))
        .map_or(1, |i| i + 1) as i64;
    let op = Attention {
        q_num_heads,
        kv_num_heads,
        scale,
        is_causal,
        softcap,
        qk_matmul_output_mode,
        has_mask: mask.is_some(),
        has_past: past_key.is_some(),
        has_nonpad: nonpad.is_some(),
        num_outputs,
        left_window_size,
        right_window_size,
        softmax_precision,
        views: Default::default(),
    };
    let ys = cx.add(op, &ins)?;
    cx.set_outputs(&ys);
    Ok(())
}

fn rotary_embedding(cx: &mut NodeCtx) -> Result<(), MapError> {
    let interleaved = cx.attr_bool("interleaved", false)?;
    let rotary_embedding_dim = cx.attr_i("rotary_embedding_dim", 0)?;
    let num_heads = cx.attr_i("num_heads", 0)?;
    let (x, c, s) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let mut ins = vec![x, c, s];
    if let Some(p) = cx.input(3)? {
        ins.push(p);
    }
    let y = cx.add1(
        RotaryEmbedding {
            interleaved,
            rotary_embedding_dim,
            num_heads,
        },
        &ins,
    )?;
    cx.set_output(0, y);
    Ok(())
}

fn linear_attention(cx: &mut NodeCtx) -> Result<(), MapError> {
    // A tuning hint for chunked prefill; the output does not depend on it.
    cx.ignore_attr("chunk_size");
    let q_num_heads = cx
        .attr_i_opt("q_num_heads")?
        .ok_or_else(|| MapError::Attr {
            name: "q_num_heads".into(),
            reason: "is required".into(),
        })?;
    let kv_num_heads = cx
        .attr_i_opt("kv_num_heads")?
        .ok_or_else(|| MapError::Attr {
            name: "kv_num_heads".into(),
            reason: "is required".into(),
        })?;
    // ONNX spells the default scale as 0.0.
    let scale = cx.attr_f_opt("scale")?.filter(|&s| s != 0.0);
    let rule = cx.attr_choice(
        "update_rule",
        "gated_delta",
        &["linear", "gated", "delta", "gated_delta"],
    )?;
    let update_rule = LinearUpdateRule::from_name(&rule).unwrap_or(LinearUpdateRule::GatedDelta);
    let (q, k, v) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let past = cx.input(3)?;
    let decay = cx.input(4)?;
    let beta = cx.input(5)?;
    if decay.is_some() != update_rule.gated() {
        return cx.unsupported(format!(
            "update_rule `{rule}` {} the decay input",
            if update_rule.gated() {
                "requires"
            } else {
                "forbids"
            }
        ));
    }
    if beta.is_some() != update_rule.delta() {
        return cx.unsupported(format!(
            "update_rule `{rule}` {} the beta input",
            if update_rule.delta() {
                "requires"
            } else {
                "forbids"
            }
        ));
    }
    let mut ins = vec![q, k, v];
    ins.extend(past);
    ins.extend(decay);
    ins.extend(beta);
    let op = LinearAttention {
        q_num_heads,
        kv_num_heads,
        scale,
        update_rule,
        has_past: past.is_some(),
    };
    let ys = cx.add(op, &ins)?;
    cx.set_outputs(&ys);
    Ok(())
}
