#!/usr/bin/env python3
"""Generates one-node models of ONNX Runtime's contrib op
`com.microsoft::GroupQueryAttention`, each with inputs from a seeded generator
and reference outputs from ONNX Runtime's CPU kernel, in the ONNX backend-test
layout beside this script: <case>/model.onnx and
<case>/test_data_set_0/{input,output}_N.pb (make_cases.py's `case` writes them).

Inputs fed at run time: query/key/value, past_key/past_value, seqlens_k.
Initializers: total_sequence_length (it fixes the present length, so the
output shapes stay static) and the rotary cos/sin caches. Every case is also
checked against `reference` below, the op's semantics in numpy.

Pinned: pip install onnx==1.22.0 onnxruntime==1.31.1 numpy
Usage: python3 tests/data/contrib/make_gqa_cases.py [--extras]
(--extras also writes smooth_softmax, softcap/scale, head_sink and
attention_bias cases.)
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_cases import HERE, case  # noqa: E402  (also asserts the pinned versions)

R = np.random.default_rng(2027)
GQA = "GroupQueryAttention"
OUTS = ["output", "present_key", "present_value"]
WRITTEN = []


def f32(*s, scale=1.0):
    return (scale * R.standard_normal(s)).astype(np.float32)


def i32(*v):
    return np.array(v, np.int32)


def rope_tables(max_len, head):
    """cos/sin caches (max_len, head/2) with the usual 10000^(-2i/head) frequencies."""
    ang = np.arange(max_len)[:, None] * (10000.0 ** (-np.arange(head // 2) / (head // 2)))[None]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def rope(x, pos, cos, sin, interleaved):
    """x (..., S, H) rotated at positions pos (S,); rotary dim = 2 * cos.shape[1]."""
    rd = 2 * cos.shape[1]
    c, s = cos[pos].astype(np.float64), sin[pos].astype(np.float64)
    y = x.copy()
    if interleaved:
        a, b = x[..., 0:rd:2], x[..., 1:rd:2]
        y[..., 0:rd:2], y[..., 1:rd:2] = a * c - b * s, b * c + a * s
    else:
        h = rd // 2
        a, b = x[..., :h], x[..., h:rd]
        y[..., :h], y[..., h:rd] = a * c - b * s, b * c + a * s
    return y


def reference(query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache=None,
              sin_cache=None, position_ids=None, attention_bias=None, head_sink=None, *, num_heads, kv_num_heads, scale=0.0, softcap=0.0,
              local_window_size=-1, do_rotary=0, rotary_interleaved=0, smooth_softmax=0):
    """GroupQueryAttention as ORT's CPU kernel computes it (float64); position_ids unsupported here."""
    assert position_ids is None
    n, nkv = num_heads, kv_num_heads
    b_, s_, _ = query.shape
    if key is None:  # packed QKV: (B, S, (N + 2 Nkv) H)
        h = query.shape[2] // (n + 2 * nkv)
        query, key, value = query[..., :n * h], query[..., n * h:(n + nkv) * h], query[..., (n + nkv) * h:]
    h = query.shape[2] // n
    q = query.reshape(b_, s_, n, h).transpose(0, 2, 1, 3).astype(np.float64)
    k = key.reshape(b_, s_, nkv, h).transpose(0, 2, 1, 3).astype(np.float64)
    v = value.reshape(b_, s_, nkv, h).transpose(0, 2, 1, 3).astype(np.float64)
    total = int(total_sequence_length)
    p_buf = 0 if past_key is None else past_key.shape[2]
    first_prompt = s_ == total
    present_len = max(total, p_buf)
    pk = np.zeros((b_, nkv, present_len, h))  # rows a batch entry does not write stay zero
    pv = np.zeros((b_, nkv, present_len, h))
    out = np.zeros((b_, n, s_, h))
    alpha = scale if scale != 0.0 else 1.0 / np.sqrt(h)
    for b in range(b_):
        t_b = int(seqlens_k[b]) + 1          # valid keys of this batch entry
        past = 0 if first_prompt else t_b - s_  # where the new rows go
        qb, kb = q[b], k[b]
        if do_rotary:
            pos = np.arange(s_) + past        # the prompt starts every batch entry at 0
            qb = rope(qb, pos, cos_cache, sin_cache, rotary_interleaved)
            kb = rope(kb, pos, cos_cache, sin_cache, rotary_interleaved)
        if past > 0:
            pk[b, :, :past], pv[b, :, :past] = past_key[b, :, :past], past_value[b, :, :past]
        pk[b, :, past:past + s_], pv[b, :, past:past + s_] = kb, v[b]
        for hn in range(n):
            g = hn // (n // nkv)
            for i in range(s_):
                end = min(past + i + 1, t_b)  # causal, capped for right-padded prompt rows
                start = end - local_window_size if 0 <= local_window_size < end else 0
                x = qb[hn, i] @ pk[b, g, start:end].T * alpha
                if softcap > 0.0:
                    x = softcap * np.tanh(x / softcap)
                if attention_bias is not None:
                    x = x + attention_bias[b % attention_bias.shape[0], hn % attention_bias.shape[1], i, start:end]
                if smooth_softmax or head_sink is not None:
                    sink = 0.0 if head_sink is None else float(head_sink[hn])
                    m = max(x.max(), sink)
                    e = np.exp(x - m)
                    p = e / (e.sum() + np.exp(sink - m))
                else:
                    e = np.exp(x - x.max())
                    p = e / e.sum()
                out[b, hn, i] = p @ pv[b, g, start:end]
    return [out.transpose(0, 2, 1, 3).reshape(b_, s_, n * h), pk, pv]


def gqa(name, inputs, attrs, consts=("total_sequence_length", "cos_cache", "sin_cache")):
    """One GroupQueryAttention node; checks ORT's outputs against `reference`."""
    case(name, GQA, inputs, OUTS, attrs, consts=set(consts))
    d = os.path.join(HERE, name, "test_data_set_0")
    got = [numpy_helper.to_array(onnx.load_tensor(os.path.join(d, f"output_{i}.pb"))) for i in range(3)]
    want = reference(*[a for _, a in inputs], **attrs)
    for o, g, w in zip(OUTS, got, want):
        assert g.shape == w.shape, (name, o, g.shape, w.shape)
        err = np.abs(g - w).max()
        assert err < 1e-5, (name, o, err)
    WRITTEN.append(name)


def inputs(q, k, v, pk, pv, seqlens, total, cos=None, sin=None, bias=None, sink=None):
    named = [("query", q), ("key", k), ("value", v), ("past_key", pk), ("past_value", pv), ("seqlens_k", seqlens),
             ("total_sequence_length", np.array(total, np.int32)), ("cos_cache", cos), ("sin_cache", sin)]
    if bias is not None or sink is not None:
        named += [("position_ids", None), ("attention_bias", bias), ("head_sink", sink)]
    while named[-1][1] is None:  # drop trailing omitted optionals
        named.pop()
    return named


def core():
    n, nkv = 4, 2
    heads = {"num_heads": n, "kv_num_heads": nkv}

    # (a) First prompt, no past: S == total_sequence_length. Batch 1 is
    # right-padded (3 valid tokens of 4); its padded query row still attends
    # to keys [0, 3).
    b, s, h = 2, 4, 8
    gqa("gqa_prompt_padded", inputs(f32(b, s, n * h), f32(b, s, nkv * h), f32(b, s, nkv * h), None, None, i32(3, 2), s), heads)

    # (b) Token generation into a static cache: past_key holds 5 valid rows in a
    # buffer of 8 (rows 5..7 garbage), seqlens_k = 5, total_sequence_length 6
    # (<= 8), so present is the 8-row buffer: rows 0..4 from past, row 5 new,
    # rows 6..7 zero.
    b, s, h = 1, 1, 8
    gqa("gqa_decode_static_cache", inputs(f32(b, s, n * h), f32(b, s, nkv * h), f32(b, s, nkv * h),
                                          f32(b, nkv, 8, h), f32(b, nkv, 8, h), i32(5), 6), heads)
    # The same with a ragged batch: new rows land at 5 and 3.
    b = 2
    gqa("gqa_decode_ragged", inputs(f32(b, s, n * h), f32(b, s, nkv * h), f32(b, s, nkv * h),
                                    f32(b, nkv, 8, h), f32(b, nkv, 8, h), i32(5, 3), 6), heads)
    # Token generation with a growing cache: total_sequence_length = past + 1,
    # present has 6 rows.
    b = 1
    gqa("gqa_decode_dynamic_cache", inputs(f32(b, s, n * h), f32(b, s, nkv * h), f32(b, s, nkv * h),
                                           f32(b, nkv, 5, h), f32(b, nkv, 5, h), i32(5), 6), heads)

    # (c) Rotary on Q and K (head size must be a multiple of 16): the prompt
    # rotates position s for every batch entry; token generation rotates
    # position seqlens_k[b] (+ s).
    h = 16
    cos, sin = rope_tables(16, h)
    b, s = 2, 4
    gqa("gqa_rotary_prompt", inputs(f32(b, s, n * h), f32(b, s, nkv * h), f32(b, s, nkv * h), None, None, i32(3, 2), s, cos, sin),
        dict(heads, do_rotary=1))
    s = 1
    gqa("gqa_rotary_decode_interleaved", inputs(f32(b, s, n * h), f32(b, s, nkv * h), f32(b, s, nkv * h),
                                                f32(b, nkv, 8, h), f32(b, nkv, 8, h), i32(5, 3), 6, cos, sin),
        dict(heads, do_rotary=1, rotary_interleaved=1))

    # (d) Packed QKV: query is (B, S, (N + 2 Nkv) H), key and value omitted.
    b, s, h = 2, 4, 8
    gqa("gqa_packed_qkv", inputs(f32(b, s, (n + 2 * nkv) * h), None, None, None, None, i32(3, 2), s), heads)

    # (e) Local window: each query sees its last 2 keys (itself and one
    # before). No padded rows: there ORT's two CPU paths disagree.
    b, s, h = 2, 6, 8
    gqa("gqa_local_window", inputs(f32(b, s, n * h), f32(b, s, nkv * h), f32(b, s, nkv * h), None, None, i32(5, 5), s),
        dict(heads, local_window_size=2))


def extras():
    n, nkv, b, s, h = 4, 2, 2, 4, 8
    heads = {"num_heads": n, "kv_num_heads": nkv}
    qkv = lambda: (f32(b, s, n * h), f32(b, s, nkv * h), f32(b, s, nkv * h))
    gqa("gqa_smooth_softmax", inputs(*qkv(), None, None, i32(3, 2), s), dict(heads, smooth_softmax=1))
    gqa("gqa_softcap_scale", inputs(*qkv(), None, None, i32(3, 2), s), dict(heads, softcap=1.5, scale=0.5))
    gqa("gqa_head_sink", inputs(*qkv(), None, None, i32(3, 2), s, sink=f32(n)), heads)
    gqa("gqa_attention_bias", inputs(*qkv(), None, None, i32(3, 2), s, bias=f32(b, 1, s, s)), heads)


if __name__ == "__main__":
    core()
    if "--extras" in sys.argv[1:]:
        extras()
    print(f"{len(WRITTEN)} cases written: {' '.join(WRITTEN)}")
