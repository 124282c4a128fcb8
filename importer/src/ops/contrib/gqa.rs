//! com.microsoft GroupQueryAttention, onto the RLX op of the same name.

use rlx_ir::ops::{GroupQueryAttention, Split};
use rlx_ir::Value;

use super::MS;
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add_in(MS, "GroupQueryAttention", 1, group_query_attention);
}

fn required(cx: &mut NodeCtx, name: &str) -> Result<i64, MapError> {
    cx.attr_i_opt(name)?.ok_or_else(|| MapError::Attr {
        name: name.into(),
        reason: "is required".into(),
    })
}

/// Splits a packed `[B, S, (N + 2 Nkv) H]` query into query, key and value.
fn unpack(cx: &mut NodeCtx, qkv: Value, n: i64, kv: i64) -> Result<[Value; 3], MapError> {
    let Some(d) = cx.ty(qkv).shape.dims().get(2).and_then(|d| d.known()) else {
        return cx.unsupported("packed QKV needs a known feature count");
    };
    let parts = n + 2 * kv;
    if d % parts != 0 {
        return cx.unsupported(format!(
            "{d} packed features do not split into {parts} heads"
        ));
    }
    let h = d / parts;
    let sizes = cx.const_i64(&[n * h, kv * h, kv * h]);
    let v = cx.add(
        Split {
            axis: 2,
            num_outputs: 3,
        },
        &[qkv, sizes],
    )?;
    Ok([v[0], v[1], v[2]])
}

fn group_query_attention(cx: &mut NodeCtx) -> Result<(), MapError> {
    let num_heads = required(cx, "num_heads")?;
    let kv_num_heads = required(cx, "kv_num_heads")?;
    let scale = cx.attr_f("scale", 0.0)?;
    let softcap = cx.attr_f("softcap", 0.0)?;
    let local_window_size = cx.attr_i("local_window_size", -1)?;
    let causal = cx.attr_bool("causal", true)?;
    let rotary = cx.attr_bool("do_rotary", false)?;
    let rotary_interleaved = cx.attr_bool("rotary_interleaved", false)?;
    let smooth_softmax = cx.attr_bool("smooth_softmax", false)?;
    if cx.attr_i("qk_output", 0)? != 0 || cx.output_used(3) {
        return cx.unsupported("the attention-score output (qk_output)");
    }
    if cx.attr_i("kv_cache_bit_width", 0)? != 0
        || cx.attr_s("k_quant_type")?.is_some_and(|s| s != "NONE")
        || cx.attr_s("v_quant_type")?.is_some_and(|s| s != "NONE")
    {
        return cx.unsupported("a quantized KV cache");
    }
    if cx.attr_bool("sliding_window_cache", false)? {
        return cx.unsupported("a sliding-window KV cache");
    }
    cx.ignore_attr("qk_norm_epsilon");
    for (port, what) in [
        (12, "k_scale"),
        (13, "v_scale"),
        (14, "q_norm_weight"),
        (15, "k_norm_weight"),
    ] {
        if cx.input(port)?.is_some() {
            return cx.unsupported(format!("input {what}"));
        }
    }
    let query = cx.req(0)?;
    let [q, k, v] = match (cx.input(1)?, cx.input(2)?) {
        (Some(k), Some(v)) => [query, k, v],
        (None, None) => unpack(cx, query, num_heads, kv_num_heads)?,
        _ => return cx.unsupported("key without value (or value without key)"),
    };
    let mut ins = vec![q, k, v, cx.req(5)?, cx.req(6)?];
    let past = match (cx.input(3)?, cx.input(4)?) {
        (Some(pk), Some(pv)) => {
            // A past of length 0 is no past.
            let empty = cx.ty(pk).shape.dims().get(2).and_then(|d| d.known()) == Some(0);
            if !empty {
                ins.extend([pk, pv]);
            }
            !empty
        }
        (None, None) => false,
        _ => return cx.unsupported("past_key without past_value (or the reverse)"),
    };
    let caches = (cx.input(7)?, cx.input(8)?);
    if rotary {
        let (Some(c), Some(s)) = caches else {
            return cx.unsupported("do_rotary=1 without cos_cache and sin_cache");
        };
        ins.extend([c, s]);
    }
    let has = |cx: &mut NodeCtx, port: usize, ins: &mut Vec<Value>| -> Result<bool, MapError> {
        Ok(match cx.input(port)? {
            Some(x) => {
                ins.push(x);
                true
            }
            None => false,
        })
    };
    let has_position_ids = rotary && has(cx, 9, &mut ins)?;
    if !rotary {
        // Position ids only steer the rotation.
        cx.input(9)?;
    }
    let has_bias = has(cx, 10, &mut ins)?;
    let has_sink = has(cx, 11, &mut ins)?;
    let ys = cx.add(
        GroupQueryAttention {
            num_heads,
            kv_num_heads,
            scale,
            softcap,
            local_window_size,
            causal,
            rotary,
            rotary_interleaved,
            smooth_softmax,
            has_past: past,
            has_position_ids,
            has_bias,
            has_sink,
        },
        &ins,
    )?;
    cx.set_outputs(&ys);
    Ok(())
}
