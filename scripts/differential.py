#!/usr/bin/env python3
"""A differential sweep: random single-op ONNX graphs run by rlx-onnx (CPU) and by
onnxruntime, outputs compared (rtol and atol 1e-4), and where they disagree, the
ONNX reference implementation (onnx.reference) asked too, so that a disagreement
says who departs from ONNX. Configurations onnxruntime refuses are skipped.

Usage: python3 scripts/differential.py --family pool|conv|resize|ops|quant|rnn|vision|math
           [--seed 0] [--cases 200] [--binary target/release/rlx-onnx] [--target cpu]

Families: pool (MaxPool/AveragePool/LpPool: ceil mode, dilations, auto_pad, pads),
conv (Conv/ConvTranspose: groups, 1-3 spatial dims, strides, dilations, pads,
auto_pad, output_padding), resize (every mode, coordinate transform, nearest
rounding, antialias, exclude_outside, axes, roi, sizes and scales), ops
(reductions, Slice at the i64 extremes, Pad modes, gathers, CumSum, TopK with
ties, ArgMax/ArgMin, softmaxes, Einsum, MatMul broadcasting, the norms, Split,
Tile, Expand, Trilu, OneHot, Where, Clip, Cast), quant (QuantizeLinear,
DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
QLinearConv, ConvInteger, int8 weights stored as Cast+Mul), rnn (LSTM, GRU and RNN:
direction, layout, biases, initial states, sequence lengths, clip,
linear_before_reset, non-default activations), vision (GridSample, RoiAlign,
NonMaxSuppression, ScatterND/ScatterElements with reductions, GatherND with
batch dims, Unique, Compress, Mod, ReverseSequence), math (element-wise functions
over NaN, the infinities, signed zeros, huge and tiny values and the cut-offs
of the vectorized approximations).
"""
import argparse
import glob
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

ort.set_default_logger_severity(3)

def model(nodes, ins, outs, inits=(), opset=19):
    g=h.make_graph(nodes,"g",ins,outs,list(inits))
    m=h.make_model(g,opset_imports=[h.make_opsetid("",opset)]); m.ir_version=9
    return m
def run_both(m, feeds, tag):
    p=os.path.join(WORK, f"{tag}.onnx"); onnx.save(m,p)
    try:
        so=ort.SessionOptions(); so.log_severity_level=4
        s=ort.InferenceSession(p,so,providers=["CPUExecutionProvider"])
        want=s.run(None,feeds)
    except Exception as e:
        return "ortfail"
    d=os.path.join(WORK, f"in_{tag}"); os.makedirs(d,exist_ok=True)
    args=[]
    for k,v in feeds.items():
        np.save(f"{d}/{k}.npy",v); args+=["--input",f"{k}={d}/{k}.npy"]
    r=subprocess.run([ARGS.binary,"run",p,*args,"-o",os.path.join(WORK, f"out_{tag}"),"--force","--threads","1","--target",ARGS.target],capture_output=True,text=True)
    if r.returncode!=0:
        return "rlxfail: "+r.stderr.strip().splitlines()[-1][:300] if r.stderr.strip() else f"rc {r.returncode}"
    outs=[o.name for o in s.get_outputs()]
    for n,w in zip(outs,want):
        g=np.load(os.path.join(WORK, f"out_{tag}", f"{n}.npy"))
        if g.shape!=w.shape: return f"shape {g.shape} vs {w.shape}"
        if w.dtype.kind=='f':
            err=np.max(np.abs(g.astype(np.float64)-w)/(np.abs(w)+1e-3)) if w.size else 0
            if not np.allclose(g,w,rtol=1e-4,atol=1e-4,equal_nan=True): return f"values max rel {err:.3g}"
        elif not np.array_equal(g,w): return "values differ"
    return "ok"


def reference(m, feeds, tag):
    """How rlx-onnx's outputs compare with onnx.reference's, in a word."""
    try:
        from onnx.reference import ReferenceEvaluator
        want = ReferenceEvaluator(m).run(None, feeds)
    except Exception as e:  # the reference refuses some configurations
        return f"reference fails ({str(e)[:60]})"
    for o, w in zip(m.graph.output, want):
        g = np.load(os.path.join(WORK, f"out_{tag}", f"{o.name}.npy"))
        if g.shape != w.shape or not np.allclose(g, w, rtol=1e-4, atol=1e-4, equal_nan=True):
            return "rlx-onnx differs from the reference too"
    return "rlx-onnx matches the reference"


F = lambda n, s, t=T.FLOAT: h.make_tensor_value_info(n, t, s)


def rshape(r=None, lo=1, hi=5):
    r = r if r is not None else rng.randint(1, 4)
    return [rng.randint(lo, hi) for _ in range(r)]


def I(n, v):
    return nh.from_array(np.array(v, np.int64), n)


def resize_case(i):
    mode=rng.choice(["nearest","linear","cubic"])
    ctm=rng.choice(["half_pixel","asymmetric","align_corners","pytorch_half_pixel","tf_crop_and_resize","half_pixel_symmetric"])
    nm=rng.choice(["round_prefer_floor","round_prefer_ceil","floor","ceil"])
    rank=rng.choice([3,4])
    shape=[rng.randint(1,2),rng.randint(1,3)]+[rng.randint(1,9) for _ in range(rank-2)]
    use_sizes=rng.random()<0.5
    attrs=dict(mode=mode,coordinate_transformation_mode=ctm,nearest_mode=nm)
    if rng.random()<0.3: attrs["cubic_coeff_a"]=rng.choice([-0.5,-0.75])
    if rng.random()<0.3: attrs["exclude_outside"]=1
    if rng.random()<0.3 and mode!="nearest": attrs["antialias"]=1
    if rng.random()<0.2: attrs["keep_aspect_ratio_policy"]=rng.choice(["not_larger","not_smaller"]); use_sizes=True
    if rng.random()<0.3: 
        attrs["axes"]=list(range(2,rank)); full=False
    else: full=True
    inits=[]; ins=["x"]
    if ctm=="tf_crop_and_resize":
        roi=[rng.uniform(0,0.4) for _ in range(rank-2)]+[rng.uniform(0.6,1) for _ in range(rank-2)]
        roi=([0]*2 if full else [])+roi[:rank-2]+([1]*2 if full else [])+roi[rank-2:] if full else roi
        if full: roi=[0,0]+roi_s if False else [0,0]+[rng.uniform(0,0.4) for _ in range(rank-2)]+[1,1]+[rng.uniform(0.6,1) for _ in range(rank-2)]
        inits.append(nh.from_array(np.array(roi,np.float32),"roi")); ins.append("roi")
        attrs["extrapolation_value"]=rng.choice([0.0,-1.5])
    else: ins.append("")
    nax = rank if full else rank-2
    if use_sizes:
        sz=[rng.randint(1,14) for _ in range(rank-2)]
        sizes=(shape[:2]+sz) if full else sz
        inits.append(nh.from_array(np.array(sizes,np.int64),"sizes")); ins+=["","sizes"]
    else:
        sc=[rng.choice([0.5,0.6,1.0,1.5,2.0,2.5,3.0,0.75,1.3]) for _ in range(rank-2)]
        scales=([1.0,1.0]+sc) if full else sc
        inits.append(nh.from_array(np.array(scales,np.float32),"scales")); ins.append("scales")
    node=h.make_node("Resize",ins,["y"],**attrs)
    m=model([node],[h.make_tensor_value_info("x",T.FLOAT,shape)],[h.make_tensor_value_info("y",T.FLOAT,None)],inits)
    x=np.random.default_rng(i).standard_normal(shape).astype(np.float32)
    return m,{"x":x},attrs|{"shape":shape,"ins":[n.name for n in inits]}
def pool_case(i):
    op=rng.choice(["MaxPool","AveragePool","LpPool"])
    rank=rng.choice([3,4,5]); nsp=rank-2
    shape=[1,rng.randint(1,3)]+[rng.randint(3,10) for _ in range(nsp)]
    k=[rng.randint(1,4) for _ in range(nsp)]
    attrs=dict(kernel_shape=k)
    if rng.random()<0.6: attrs["strides"]=[rng.randint(1,3) for _ in range(nsp)]
    if rng.random()<0.5 and op!="LpPool": attrs["ceil_mode"]=1
    if rng.random()<0.4 and op!="LpPool" : attrs["dilations"]=[rng.randint(1,2) for _ in range(nsp)]
    if rng.random()<0.3: attrs["auto_pad"]=rng.choice(["SAME_UPPER","SAME_LOWER","VALID"])
    elif rng.random()<0.6: attrs["pads"]=[rng.randint(0,kk-1) for kk in k]+[rng.randint(0,kk-1) for kk in k]
    if op=="AveragePool" and rng.random()<0.5: attrs["count_include_pad"]=1
    if op=="LpPool": attrs["p"]=rng.choice([1,2,3])
    outs=[h.make_tensor_value_info("y",T.FLOAT,None)]
    if op=="MaxPool" and rng.random()<0.4:
        outs.append(h.make_tensor_value_info("i",T.INT64,None)); attrs["storage_order"]=rng.choice([0,1])
    node=h.make_node(op,["x"],[o.name for o in outs],**attrs)
    m=model([node],[h.make_tensor_value_info("x",T.FLOAT,shape)],outs)
    x=np.random.default_rng(i).standard_normal(shape).astype(np.float32)
    return m,{"x":x},attrs|{"op":op,"shape":shape}
def conv_case(i):
    op=rng.choice(["Conv","ConvTranspose"])
    nsp=rng.choice([1,2,2,3]); g=rng.choice([1,1,2,3])
    ci=g*rng.randint(1,3); co=g*rng.randint(1,3)
    shape=[rng.randint(1,2),ci]+[rng.randint(2,8) for _ in range(nsp)]
    k=[rng.randint(1,4) for _ in range(nsp)]
    attrs=dict(group=g)
    if rng.random()<0.6: attrs["strides"]=[rng.randint(1,3) for _ in range(nsp)]
    if rng.random()<0.4: attrs["dilations"]=[rng.randint(1,2) for _ in range(nsp)]
    if rng.random()<0.3: attrs["auto_pad"]=rng.choice(["SAME_UPPER","SAME_LOWER","VALID"])
    elif rng.random()<0.6: attrs["pads"]=[rng.randint(0,2) for _ in range(2*nsp)]
    if op=="ConvTranspose":
        w=np.random.default_rng(i+1).standard_normal([ci,co//g]+k).astype(np.float32)
        st=attrs.get("strides",[1]*nsp); dl=attrs.get("dilations",[1]*nsp)
        if rng.random()<0.3: attrs["output_padding"]=[rng.randint(0,max(s,d)-1) for s,d in zip(st,dl)]
        if rng.random()<0.2: attrs["output_shape"]=[rng.randint(2,14) for _ in range(nsp)]
    else:
        w=np.random.default_rng(i+1).standard_normal([co,ci//g]+k).astype(np.float32)
    inits=[nh.from_array(w,"w")]; ins=["x","w"]
    if rng.random()<0.5:
        nb = co if op=="Conv" else co
        inits.append(nh.from_array(np.random.default_rng(i+2).standard_normal(nb).astype(np.float32),"b")); ins.append("b")
    node=h.make_node(op,ins,["y"],**attrs)
    m=model([node],[h.make_tensor_value_info("x",T.FLOAT,shape)],[h.make_tensor_value_info("y",T.FLOAT,None)],inits)
    x=np.random.default_rng(i).standard_normal(shape).astype(np.float32)
    return m,{"x":x},attrs|{"op":op,"shape":shape,"k":k}

def ops_case(i):
    op=rng.choice(["reduce","slice","pad","gather","gatherel","cumsum","topk","argmax","softmax","einsum","matmul","d2s","norm","split","tile","expand","trilu","onehot","where","clip","range_cast"])
    g=np.random.default_rng(i)
    if op=="reduce":
        kind=rng.choice(["ReduceSum","ReduceMean","ReduceMax","ReduceMin","ReduceProd","ReduceL1","ReduceL2","ReduceLogSumExp","ReduceSumSquare","ReduceLogSum"])
        s=rshape(lo=0 if rng.random()<0.15 else 1); r=len(s)
        axes=sorted(set(rng.randint(-r,r-1) for _ in range(rng.randint(0,r))))
        attrs=dict(keepdims=rng.choice([0,1]))
        if rng.random()<0.3: attrs["noop_with_empty_axes"]=1
        ins=["x"]; inits=[]
        if axes: ins.append("a"); inits.append(I("a",axes))
        x=g.standard_normal(s).astype(np.float32)
        if kind in ("ReduceLogSum",): x=np.abs(x)+0.1
        return model([h.make_node(kind,ins,["y"],**attrs)],[F("x",s)],[F("y",None)],inits,18),{"x":x},(kind,s,axes,attrs)
    if op=="slice":
        s=rshape(); r=len(s); n=rng.randint(1,r)
        axes=rng.sample(range(-r,r),n); axes=[a for a in axes]
        # avoid duplicate axes mod r
        seen=set(); ax2=[]
        for a in axes:
            if a%r not in seen: seen.add(a%r); ax2.append(a)
        axes=ax2; n=len(axes)
        big=[-2**63, 2**63-1, -100, 100]
        st=[rng.choice([rng.randint(-6,6)]+big) for _ in range(n)]
        en=[rng.choice([rng.randint(-6,6)]+big) for _ in range(n)]
        sp=[rng.choice([1,2,-1,-2,3]) for _ in range(n)]
        x=g.standard_normal(s).astype(np.float32)
        return model([h.make_node("Slice",["x","s","e","a","p"],["y"])],[F("x",s)],[F("y",None)],[I("s",st),I("e",en),I("a",axes),I("p",sp)],18),{"x":x},(s,st,en,axes,sp)
    if op=="pad":
        s=rshape(); r=len(s); mode=rng.choice(["constant","reflect","edge","wrap"])
        p=[rng.randint(0,3) if mode!="constant" else rng.randint(-1,3) for _ in range(2*r)]
        if mode=="reflect": p=[min(v, s[k%r]-1) for k,v in enumerate(p)]
        ins=["x","p"]; inits=[I("p",p)]
        if mode=="constant" and rng.random()<0.5: ins.append("c"); inits.append(nh.from_array(np.array(1.5,np.float32),"c"))
        x=g.standard_normal(s).astype(np.float32)
        return model([h.make_node("Pad",ins,["y"],mode=mode)],[F("x",s)],[F("y",None)],inits,19),{"x":x},(s,p,mode)
    if op=="gather":
        s=rshape(); r=len(s); ax=rng.randint(-r,r-1); d=s[ax]
        idx=g.integers(-d,d,size=rshape(rng.randint(0,2))).astype(np.int64)
        x=g.standard_normal(s).astype(np.float32)
        return model([h.make_node("Gather",["x","i"],["y"],axis=ax)],[F("x",s)],[F("y",None)],[nh.from_array(idx,"i")],13),{"x":x},(s,ax,idx.shape)
    if op=="gatherel":
        s=rshape(); r=len(s); ax=rng.randint(-r,r-1); d=s[ax]
        ishape=[rng.randint(1,v) for v in s]; ishape[ax]=rng.randint(1,4)
        idx=g.integers(-d,d,size=ishape).astype(np.int64)
        x=g.standard_normal(s).astype(np.float32)
        return model([h.make_node("GatherElements",["x","i"],["y"],axis=ax)],[F("x",s)],[F("y",None)],[nh.from_array(idx,"i")],13),{"x":x},(s,ax,ishape)
    if op=="cumsum":
        s=rshape(); r=len(s); ax=rng.randint(-r,r-1)
        x=g.standard_normal(s).astype(np.float32)
        return model([h.make_node("CumSum",["x","a"],["y"],exclusive=rng.choice([0,1]),reverse=rng.choice([0,1]))],[F("x",s)],[F("y",None)],[I("a",ax)],14),{"x":x},(s,ax)
    if op=="topk":
        s=rshape(); r=len(s); ax=rng.randint(-r,r-1); k=rng.randint(0,s[ax])
        x=g.integers(-3,3,size=s).astype(np.float32)  # ties
        return model([h.make_node("TopK",["x","k"],["v","i"],axis=ax,largest=rng.choice([0,1]),sorted=1)],[F("x",s)],[F("v",None),h.make_tensor_value_info("i",T.INT64,None)],[I("k",[k])],11),{"x":x},(s,ax,k)
    if op=="argmax":
        s=rshape(); r=len(s); ax=rng.randint(-r,r-1)
        x=g.integers(-2,2,size=s).astype(np.float32)
        o=rng.choice(["ArgMax","ArgMin"])
        return model([h.make_node(o,["x"],["y"],axis=ax,keepdims=rng.choice([0,1]),select_last_index=rng.choice([0,1]))],[F("x",s)],[h.make_tensor_value_info("y",T.INT64,None)],[],13),{"x":x},(o,s,ax)
    if op=="softmax":
        s=rshape(); r=len(s); ax=rng.randint(-r,r-1); o=rng.choice(["Softmax","LogSoftmax","Hardmax"])
        x=(g.standard_normal(s)*rng.choice([1,30])).astype(np.float32)
        return model([h.make_node(o,["x"],["y"],axis=ax)],[F("x",s)],[F("y",None)],[],13),{"x":x},(o,s,ax)
    if op=="einsum":
        eqs=["ij,jk->ik","bij,bjk->bik","ii->i","ij->ji","ij,ij->","i,j->ij","bhqd,bhkd->bhqk","...ij,...jk->...ik","ijk->ki","ij,kj->ik","i,i->","abc,cd->abd","ij->","ii->"]
        e=rng.choice(eqs)
        lhs=e.split("->")[0].split(",")
        dims={}
        def sh(t):
            out=[]
            for c in t.replace("...","E"):
                if c=="E": out+= [2,3]; continue
                dims.setdefault(c,rng.randint(1,4)); out.append(dims[c])
            return out
        shapes=[sh(t) for t in lhs]
        xs={f"x{k}":g.standard_normal(sp).astype(np.float32) for k,sp in enumerate(shapes)}
        return model([h.make_node("Einsum",list(xs),["y"],equation=e)],[F(k,v.shape) for k,v in xs.items()],[F("y",None)],[],12),xs,(e,shapes)
    if op=="matmul":
        a=rshape(rng.randint(1,4)); b=rshape(rng.randint(1,4))
        if len(a)>=1 and len(b)>=2: b[-2]=a[-1]
        elif len(b)==1: b[0]=a[-1]
        # broadcast batch
        if len(a)>2 and len(b)>2:
            for k in range(1,min(len(a),len(b))-1):
                if rng.random()<0.5: b[-2-k]=1
                else: b[-2-k]=a[-2-k]
        xs={"a":g.standard_normal(a).astype(np.float32),"b":g.standard_normal(b).astype(np.float32)}
        return model([h.make_node("MatMul",["a","b"],["y"])],[F("a",a),F("b",b)],[F("y",None)],[],13),xs,(a,b)
    if op=="d2s":
        bs=rng.choice([1,2,3]); s=[1,bs*bs*rng.randint(1,3),rng.randint(1,4),rng.randint(1,4)]
        o=rng.choice(["DepthToSpace","SpaceToDepth"])
        if o=="SpaceToDepth": s=[1,rng.randint(1,3),bs*rng.randint(1,3),bs*rng.randint(1,3)]
        attrs=dict(blocksize=bs)
        if o=="DepthToSpace": attrs["mode"]=rng.choice(["DCR","CRD"])
        x=g.standard_normal(s).astype(np.float32)
        return model([h.make_node(o,["x"],["y"],**attrs)],[F("x",s)],[F("y",None)],[],13),{"x":x},(o,s,attrs)
    if op=="norm":
        o=rng.choice(["LayerNormalization","InstanceNormalization","GroupNormalization","LpNormalization","MeanVarianceNormalization"])
        s=[rng.randint(1,3),rng.choice([2,4,6])]+rshape(rng.randint(0,2))
        x=(g.standard_normal(s)*3+1).astype(np.float32)
        if o=="LayerNormalization":
            ax=rng.randint(-len(s),len(s)-1); sc=s[ax:] if ax>=0 else s[ax:]
            inits=[nh.from_array(g.standard_normal(sc).astype(np.float32),"s"),nh.from_array(g.standard_normal(sc).astype(np.float32),"b")]
            return model([h.make_node(o,["x","s","b"],["y"],axis=ax,epsilon=1e-5)],[F("x",s)],[F("y",None)],inits,17),{"x":x},(o,s,ax)
        if o=="InstanceNormalization":
            if len(s)<3: s=s+[3]; x=(g.standard_normal(s)*3+1).astype(np.float32)
            inits=[nh.from_array(g.standard_normal(s[1]).astype(np.float32),"s"),nh.from_array(g.standard_normal(s[1]).astype(np.float32),"b")]
            return model([h.make_node(o,["x","s","b"],["y"])],[F("x",s)],[F("y",None)],inits,17),{"x":x},(o,s)
        if o=="GroupNormalization":
            ng=rng.choice([1,2]); 
            inits=[nh.from_array(g.standard_normal(s[1]).astype(np.float32),"s"),nh.from_array(g.standard_normal(s[1]).astype(np.float32),"b")]
            return model([h.make_node(o,["x","s","b"],["y"],num_groups=ng)],[F("x",s)],[F("y",None)],inits,21),{"x":x},(o,s,ng)
        if o=="LpNormalization":
            return model([h.make_node(o,["x"],["y"],axis=rng.randint(-len(s),len(s)-1),p=rng.choice([1,2]))],[F("x",s)],[F("y",None)],[],17),{"x":x},(o,s)
        axes=sorted(rng.sample(range(len(s)),rng.randint(1,len(s))))
        return model([h.make_node(o,["x"],["y"],axes=axes)],[F("x",s)],[F("y",None)],[],13),{"x":x},(o,s,axes)
    if op=="split":
        s=rshape(); r=len(s); ax=rng.randint(-r,r-1); d=s[ax]; n=rng.randint(1,3)
        x=g.standard_normal(s).astype(np.float32)
        outs=[F(f"y{k}",None) for k in range(n)]
        return model([h.make_node("Split",["x"],[f"y{k}" for k in range(n)],axis=ax,num_outputs=n)],[F("x",s)],outs,[],18),{"x":x},(s,ax,n)
    if op=="tile":
        s=rshape(); rep=[rng.randint(0,3) for _ in s]
        x=g.standard_normal(s).astype(np.float32)
        return model([h.make_node("Tile",["x","r"],["y"])],[F("x",s)],[F("y",None)],[I("r",rep)],13),{"x":x},(s,rep)
    if op=="expand":
        s=rshape(lo=1,hi=3); s=[v if rng.random()<0.6 else 1 for v in s]
        t=[rng.randint(1,3) for _ in range(rng.randint(0,2))]+[v if v!=1 else rng.randint(1,3) for v in s]
        t=[1 if rng.random()<0.2 else v for v in t]
        x=g.standard_normal(s).astype(np.float32)
        return model([h.make_node("Expand",["x","t"],["y"])],[F("x",s)],[F("y",None)],[I("t",t)],13),{"x":x},(s,t)
    if op=="trilu":
        s=rshape(rng.randint(2,3)); k=rng.randint(-4,4)
        x=g.standard_normal(s).astype(np.float32)
        return model([h.make_node("Trilu",["x","k"],["y"],upper=rng.choice([0,1]))],[F("x",s)],[F("y",None)],[I("k",k)],14),{"x":x},(s,k)
    if op=="onehot":
        s=rshape(rng.randint(1,2)); d=rng.randint(1,5); ax=rng.randint(-len(s)-1,len(s))
        idx=g.integers(-d,d,size=s).astype(np.int64)
        return model([h.make_node("OneHot",["i","d","v"],["y"],axis=ax)],[h.make_tensor_value_info("i",T.INT64,s)],[F("y",None)],[I("d",d),nh.from_array(np.array([-1.0,2.0],np.float32),"v")],11),{"i":idx},(s,d,ax)
    if op=="where":
        a=rshape(); b=rshape(len(a)); b=[v if rng.random()<0.5 else 1 for v in a]
        c=[v if rng.random()<0.5 else 1 for v in a]
        xs={"c":g.integers(0,2,size=c).astype(bool),"x":g.standard_normal(b).astype(np.float32),"z":g.standard_normal(a).astype(np.float32)}
        return model([h.make_node("Where",["c","x","z"],["y"])],[h.make_tensor_value_info("c",T.BOOL,c),F("x",b),F("z",a)],[F("y",None)],[],16),xs,(a,b,c)
    if op=="clip":
        s=rshape(); x=(g.standard_normal(s)*3).astype(np.float32)
        lo,hi=sorted([rng.uniform(-2,2),rng.uniform(-2,2)])
        if rng.random()<0.2: lo,hi=hi,lo
        return model([h.make_node("Clip",["x","lo","hi"],["y"])],[F("x",s)],[F("y",None)],[nh.from_array(np.array(lo,np.float32),"lo"),nh.from_array(np.array(hi,np.float32),"hi")],13),{"x":x},(s,lo,hi)
    if op=="range_cast":
        s=rshape(); x=(g.standard_normal(s)*300).astype(np.float32)
        to=rng.choice([T.INT8,T.UINT8,T.INT32,T.INT64,T.FLOAT16,T.BOOL,T.DOUBLE])
        return model([h.make_node("Cast",["x"],["y"],to=to)],[F("x",s)],[h.make_tensor_value_info("y",to,None)],[],13),{"x":x},(s,to)

def quant_case(i):
    g=np.random.default_rng(i)
    op=rng.choice(["dql","ql","dyn","mmint","qlmm","qlconv","convint","matmulnbits_like"])
    if op=="ql":
        s=[rng.randint(1,4) for _ in range(rng.randint(1,3))]; r=len(s)
        qt=rng.choice([np.uint8,np.int8]); per=rng.random()<0.5
        ax=rng.randint(-r,r-1)
        sc=(g.random(s[ax])*0.1+0.01).astype(np.float32) if per else np.array(rng.uniform(0.01,0.2),np.float32)
        zp=(g.integers(0,20,size=s[ax]) if per else np.array(rng.randint(0,20))).astype(qt)
        x=(g.standard_normal(s)*5).astype(np.float32)
        tt=T.UINT8 if qt==np.uint8 else T.INT8
        attrs=dict(axis=ax) if per else {}
        if rng.random()<0.3: attrs["saturate"]=1
        return model([h.make_node("QuantizeLinear",["x","s","z"],["y"],**{k:v for k,v in attrs.items() if k!='saturate'})],[F("x",s)],[F("y",None,tt)],[nh.from_array(sc,"s"),nh.from_array(zp,"z")],19),{"x":x},(op,s,per,ax)
    if op=="dql":
        s=[rng.randint(1,4) for _ in range(rng.randint(1,3))]; r=len(s)
        qt=rng.choice([np.uint8,np.int8,np.int32]); per=rng.random()<0.5; ax=rng.randint(-r,r-1)
        sc=(g.random(s[ax])*0.1+0.01).astype(np.float32) if per else np.array(0.05,np.float32)
        x=g.integers(-100 if qt!=np.uint8 else 0,100,size=s).astype(qt)
        ins=["x","s"]; inits=[nh.from_array(sc,"s")]
        if qt!=np.int32 or not per:
            zp=(g.integers(0,10,size=s[ax]) if per else np.array(3)).astype(qt); ins.append("z"); inits.append(nh.from_array(zp,"z"))
        tt={np.uint8:T.UINT8,np.int8:T.INT8,np.int32:T.INT32}[qt]
        return model([h.make_node("DequantizeLinear",ins,["y"],**(dict(axis=ax) if per else {}))],[F("x",s,tt)],[F("y",None)],inits,19),{"x":x},(op,s,per,ax,qt)
    if op=="dyn":
        s=[rng.randint(1,5) for _ in range(rng.randint(1,3))]
        x=(g.standard_normal(s)*rng.choice([0.001,1,100])+rng.choice([0,5,-5])).astype(np.float32)
        return model([h.make_node("DynamicQuantizeLinear",["x"],["y","s","z"])],[F("x",s)],[F("y",None,T.UINT8),F("s",None),F("z",None,T.UINT8)],[],13),{"x":x},(op,s)
    if op=="mmint":
        m,k,n=rng.randint(1,5),rng.randint(1,9),rng.randint(1,6)
        at=rng.choice([np.uint8,np.int8]); bt=rng.choice([np.uint8,np.int8])
        a=g.integers(0 if at==np.uint8 else -128,128,size=[m,k]).astype(at); b=g.integers(0 if bt==np.uint8 else -128,128,size=[k,n]).astype(bt)
        ins=["a","b"]; inits=[nh.from_array(b,"b")]
        if rng.random()<0.7: ins.append("az"); inits.append(nh.from_array(np.array(rng.randint(0,9)).astype(at),"az"))
        if rng.random()<0.7:
            if len(ins)==2: ins.append("")
            perb=rng.random()<0.5
            ins.append("bz"); inits.append(nh.from_array((g.integers(0,9,size=n) if perb else np.array(rng.randint(0,9))).astype(bt),"bz"))
        tt=lambda t: T.UINT8 if t==np.uint8 else T.INT8
        return model([h.make_node("MatMulInteger",ins,["y"])],[F("a",[m,k],tt(at))],[F("y",None,T.INT32)],inits,13),{"a":a},(op,m,k,n,at,bt,ins)
    if op=="qlmm":
        m,k,n=rng.randint(1,5),rng.randint(1,9),rng.randint(1,6)
        qt=rng.choice([np.uint8,np.int8]); tt=T.UINT8 if qt==np.uint8 else T.INT8
        lo=0 if qt==np.uint8 else -128
        a=g.integers(lo,lo+256,size=[m,k]).astype(qt); b=g.integers(lo,lo+256,size=[k,n]).astype(qt)
        perb=rng.random()<0.5
        inits=[nh.from_array(np.array(0.02,np.float32),"as"),nh.from_array(np.array(rng.randint(0,9)).astype(qt),"az"),nh.from_array(b,"b"),
               nh.from_array((g.random(n)*0.02+0.005).astype(np.float32) if perb else np.array(0.01,np.float32),"bs"),
               nh.from_array((g.integers(0,9,size=n) if perb else np.array(rng.randint(0,9))).astype(qt),"bz"),
               nh.from_array(np.array(rng.uniform(0.05,0.5),np.float32),"ys"),nh.from_array(np.array(rng.randint(0,50)).astype(qt),"yz")]
        return model([h.make_node("QLinearMatMul",["a","as","az","b","bs","bz","ys","yz"],["y"])],[F("a",[m,k],tt)],[F("y",None,tt)],inits,13),{"a":a},(op,m,k,n,qt,perb)
    if op in ("qlconv","convint"):
        c,co=rng.randint(1,4),rng.randint(1,5); k=rng.randint(1,3); hw=rng.randint(k,7)
        qt=np.uint8; xt=T.UINT8
        x=g.integers(0,256,size=[1,c,hw,hw]).astype(qt)
        wq=rng.choice([np.uint8,np.int8]); wlo=0 if wq==np.uint8 else -128
        w=g.integers(wlo,wlo+256,size=[co,c,k,k]).astype(wq)
        attrs=dict(pads=[rng.randint(0,1)]*4, strides=[rng.randint(1,2)]*2)
        if op=="convint":
            inits=[nh.from_array(w,"w"),nh.from_array(np.array(rng.randint(0,255)).astype(qt),"xz")]
            return model([h.make_node("ConvInteger",["x","w","xz"],["y"],**attrs)],[F("x",[1,c,hw,hw],xt)],[F("y",None,T.INT32)],inits,10),{"x":x},(op,c,co,k,hw,attrs)
        perw=rng.random()<0.5
        inits=[nh.from_array(np.array(0.02,np.float32),"xs"),nh.from_array(np.array(rng.randint(0,255)).astype(qt),"xz"),nh.from_array(w,"w"),
               nh.from_array((g.random(co)*0.02+0.005).astype(np.float32) if perw else np.array(0.01,np.float32),"ws"),
               nh.from_array((np.zeros(co) if perw else np.array(0)).astype(wq),"wz"),
               nh.from_array(np.array(rng.uniform(0.05,0.5),np.float32),"ys"),nh.from_array(np.array(rng.randint(0,50)).astype(qt),"yz")]
        ins=["x","xs","xz","w","ws","wz","ys","yz"]
        if rng.random()<0.5: ins.append("b"); inits.append(nh.from_array(g.integers(-500,500,size=co).astype(np.int32),"b"))
        return model([h.make_node("QLinearConv",ins,["y"],**attrs)],[F("x",[1,c,hw,hw],xt)],[F("y",None,T.UINT8)],inits,10),{"x":x},(op,c,co,k,hw,attrs,perw,wq)
    # matmul with dequantized int8 weights (Cast+Mul pattern)
    k,n=rng.randint(1,9),rng.randint(1,6)
    wq=g.integers(-128,128,size=[k,n]).astype(np.int8)
    nodes=[h.make_node("Cast",["wq"],["wf"],to=T.FLOAT),h.make_node("Mul",["wf","sc"],["w"]),h.make_node("MatMul",["x","w"],["y"])]
    inits=[nh.from_array(wq,"wq"),nh.from_array((g.random(n)*0.02).astype(np.float32),"sc")]
    x=g.standard_normal([2,3,k]).astype(np.float32)
    return model(nodes,[F("x",[2,3,k])],[F("y",None)],inits,17),{"x":x},(op,k,n)


def rnn_case(i):
    """LSTM, GRU or RNN: direction, layout, biases, initial states, sequence
    lengths, clip, GRU's linear_before_reset, non-default activations."""
    g = np.random.default_rng(i)
    op = rng.choice(["LSTM", "GRU", "RNN"])
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    dirs = rng.choice(["forward", "reverse", "bidirectional"])
    nd = 2 if dirs == "bidirectional" else 1
    seq, batch, inp, hid = rng.randint(1, 5), rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 4)
    layout = rng.choice([0, 1])
    x_shape = [seq, batch, inp] if layout == 0 else [batch, seq, inp]
    w = (g.standard_normal([nd, gates * hid, inp]) * 0.5).astype(np.float32)
    r = (g.standard_normal([nd, gates * hid, hid]) * 0.5).astype(np.float32)
    ins, inits = ["x", "w", "r"], [nh.from_array(w, "w"), nh.from_array(r, "r")]
    attrs = dict(hidden_size=hid, direction=dirs)
    if layout:
        attrs["layout"] = 1
    optional = []
    if rng.random() < 0.7:
        optional.append(("b", (g.standard_normal([nd, 2 * gates * hid]) * 0.5).astype(np.float32)))
    else:
        optional.append(("", None))
    if rng.random() < 0.4:
        lens = g.integers(1, seq + 1, size=batch).astype(np.int32)
        optional.append(("sl", lens))
    else:
        optional.append(("", None))
    state = [batch, nd, hid] if layout else [nd, batch, hid]
    if rng.random() < 0.5:
        optional.append(("h0", g.standard_normal(state).astype(np.float32)))
    else:
        optional.append(("", None))
    if op == "LSTM" and rng.random() < 0.5:
        optional.append(("c0", g.standard_normal(state).astype(np.float32)))
    while optional and optional[-1][0] == "":
        optional.pop()
    for name, v in optional:
        ins.append(name)
        if v is not None:
            inits.append(nh.from_array(v, name))
    if rng.random() < 0.3:
        attrs["clip"] = rng.choice([0.5, 1.0, 3.0])
    if op == "GRU" and rng.random() < 0.5:
        attrs["linear_before_reset"] = 1
    if rng.random() < 0.25:
        per = {"LSTM": 3, "GRU": 2, "RNN": 1}[op]
        pick = [rng.choice(["Sigmoid", "Tanh", "Relu", "HardSigmoid", "LeakyRelu", "Affine", "ScaledTanh", "Elu", "Softsign", "Softplus", "ThresholdedRelu"]) for _ in range(per * nd)]
        attrs["activations"] = pick
    outs = [F("y", None), F("yh", None)] + ([F("yc", None)] if op == "LSTM" else [])
    x = g.standard_normal(x_shape).astype(np.float32)
    node = h.make_node(op, ins, [o.name for o in outs], **attrs)
    return model([node], [F("x", x_shape)], outs, inits, 14), {"x": x}, (op, attrs, x_shape, [n for n in ins])


def vision_case(i):
    """What detectors and OCR models use around their convolutions:
    GridSample, RoiAlign, NonMaxSuppression, the scatters with reductions,
    GatherND with batch dims, Unique, Compress, Mod, ReverseSequence."""
    g = np.random.default_rng(i)
    op = rng.choice(["GridSample", "RoiAlign", "NonMaxSuppression", "ScatterND", "ScatterElements", "GatherND", "Unique", "Compress", "Mod", "ReverseSequence"])
    if op == "GridSample":
        nsp = rng.choice([2, 2, 3])
        x_shape = [rng.randint(1, 2), rng.randint(1, 3)] + [rng.randint(1, 6) for _ in range(nsp)]
        out = [rng.randint(1, 5) for _ in range(nsp)]
        grid = (g.random([x_shape[0]] + out + [nsp]) * 2.6 - 1.3).astype(np.float32)
        attrs = dict(mode=rng.choice(["linear", "nearest", "cubic"] if nsp == 2 else ["linear", "nearest"]),
                     padding_mode=rng.choice(["zeros", "border", "reflection"]), align_corners=rng.choice([0, 1]))
        x = g.standard_normal(x_shape).astype(np.float32)
        return model([h.make_node(op, ["x", "grid"], ["y"], **attrs)], [F("x", x_shape)], [F("y", None)], [nh.from_array(grid, "grid")], 20), {"x": x}, (op, x_shape, out, attrs)
    if op == "RoiAlign":
        x_shape = [rng.randint(1, 2), rng.randint(1, 3), rng.randint(2, 9), rng.randint(2, 9)]
        n = rng.randint(1, 4)
        boxes = []
        for _ in range(n):
            x1, y1 = g.random() * x_shape[3], g.random() * x_shape[2]
            boxes.append([x1, y1, x1 + g.random() * 4, y1 + g.random() * 4])
        idx = g.integers(0, x_shape[0], size=n).astype(np.int64)
        attrs = dict(mode=rng.choice(["avg", "max"]), output_height=rng.randint(1, 4), output_width=rng.randint(1, 4),
                     sampling_ratio=rng.choice([0, 1, 2]), spatial_scale=rng.choice([1.0, 0.5, 0.25]),
                     coordinate_transformation_mode=rng.choice(["half_pixel", "output_half_pixel"]))
        x = g.standard_normal(x_shape).astype(np.float32)
        inits = [nh.from_array(np.array(boxes, np.float32), "rois"), nh.from_array(idx, "bi")]
        return model([h.make_node(op, ["x", "rois", "bi"], ["y"], **attrs)], [F("x", x_shape)], [F("y", None)], inits, 16), {"x": x}, (op, x_shape, attrs)
    if op == "NonMaxSuppression":
        b, c, n = rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 12)
        xy = g.random([b, n, 2]) * 10
        wh = g.random([b, n, 2]) * 4
        centre = rng.choice([0, 1])
        boxes = np.concatenate([xy, xy + wh], -1) if centre == 0 else np.concatenate([xy, wh], -1)
        scores = g.integers(0, 5, size=[b, c, n]).astype(np.float32) / 4  # ties
        inits = [nh.from_array(np.array(rng.randint(0, 6), np.int64), "m"), nh.from_array(np.array(rng.choice([0.0, 0.3, 0.5, 1.0]), np.float32), "iou"),
                 nh.from_array(np.array(rng.choice([0.0, 0.3, 0.6]), np.float32), "st")]
        return model([h.make_node(op, ["boxes", "scores", "m", "iou", "st"], ["y"], center_point_box=centre)], [F("boxes", [b, n, 4]), F("scores", [b, c, n])],
                     [F("y", None, T.INT64)], inits, 11), {"boxes": boxes.astype(np.float32), "scores": scores}, (op, b, c, n, centre)
    if op == "ScatterND":
        s = rshape(rng.randint(1, 3), 2, 5)
        q = rng.randint(1, len(s))
        k = rng.randint(1, 4)
        idx = np.stack([g.integers(-d, d, size=k) for d in s[:q]], -1).astype(np.int64)
        red = rng.choice(["none", "add", "mul", "max", "min"])
        if red == "none":  # unique indices only
            seen, rows = set(), []
            for r_ in idx:
                key = tuple(int(v) % d for v, d in zip(r_, s))
                if key not in seen:
                    seen.add(key)
                    rows.append(r_)
            idx = np.array(rows, np.int64)
        upd = g.standard_normal([len(idx)] + s[q:]).astype(np.float32)
        x = g.standard_normal(s).astype(np.float32)
        return model([h.make_node(op, ["x", "i", "u"], ["y"], reduction=red)], [F("x", s)], [F("y", None)], [nh.from_array(idx, "i"), nh.from_array(upd, "u")], 18), {"x": x}, (op, s, idx.shape, red)
    if op == "ScatterElements":
        s = rshape(rng.randint(1, 3), 2, 5)
        ax = rng.randint(-len(s), len(s) - 1)
        ishape = [rng.randint(1, d) for d in s]
        idx = g.integers(-s[ax], s[ax], size=ishape).astype(np.int64)
        red = rng.choice(["add", "mul", "max", "min"])
        upd = g.standard_normal(ishape).astype(np.float32)
        x = g.standard_normal(s).astype(np.float32)
        return model([h.make_node(op, ["x", "i", "u"], ["y"], axis=ax, reduction=red)], [F("x", s)], [F("y", None)], [nh.from_array(idx, "i"), nh.from_array(upd, "u")], 18), {"x": x}, (op, s, ax, red)
    if op == "GatherND":
        bd = rng.randint(0, 1)
        s = rshape(rng.randint(bd + 1, 4), 1, 4)
        q = rng.randint(1, len(s) - bd)
        k = rng.randint(1, 3)
        batch = s[:bd]
        idx = np.stack([g.integers(-d, d, size=batch + [k]) for d in s[bd:bd + q]], -1).astype(np.int64)
        x = g.standard_normal(s).astype(np.float32)
        return model([h.make_node(op, ["x", "i"], ["y"], batch_dims=bd)], [F("x", s)], [F("y", None)], [nh.from_array(idx, "i")], 13), {"x": x}, (op, s, idx.shape, bd)
    if op == "Unique":
        s = rshape(rng.randint(1, 3), 1, 5)
        x = g.integers(-2, 3, size=s).astype(np.float32)
        attrs = dict(sorted=rng.choice([0, 1]))
        if rng.random() < 0.5:
            attrs["axis"] = rng.randint(-len(s), len(s) - 1)
        outs = [F("y", None), F("idx", None, T.INT64), F("inv", None, T.INT64), F("cnt", None, T.INT64)]
        return model([h.make_node(op, ["x"], ["y", "idx", "inv", "cnt"], **attrs)], [F("x", s)], outs, [], 11), {"x": x}, (op, s, attrs)
    if op == "Compress":
        s = rshape(rng.randint(1, 3), 1, 5)
        ax = rng.choice([None] + list(range(-len(s), len(s))))
        n = (s[ax] if ax is not None else int(np.prod(s)))
        cond = g.integers(0, 2, size=rng.randint(0, n)).astype(bool)
        x = g.standard_normal(s).astype(np.float32)
        attrs = {} if ax is None else dict(axis=ax)
        return model([h.make_node(op, ["x", "c"], ["y"], **attrs)], [F("x", s)], [F("y", None)], [nh.from_array(cond, "c")], 11), {"x": x}, (op, s, ax, len(cond))
    if op == "Mod":
        s = rshape()
        fm = rng.choice([0, 1])
        if fm:
            a, b = (g.standard_normal(s) * 7).astype(np.float32), (g.standard_normal(s) * 3 + 0.1).astype(np.float32)
            return model([h.make_node(op, ["a", "b"], ["y"], fmod=1)], [F("a", s), F("b", s)], [F("y", None)], [], 13), {"a": a, "b": b}, (op, s, fm)
        a, b = g.integers(-20, 20, size=s).astype(np.int64), g.integers(1, 7, size=s).astype(np.int64) * rng.choice([1, -1])
        return model([h.make_node(op, ["a", "b"], ["y"])], [F("a", s, T.INT64), F("b", s, T.INT64)], [F("y", None, T.INT64)], [], 13), {"a": a, "b": b}, (op, s, fm)
    s = [rng.randint(1, 5), rng.randint(1, 4), rng.randint(1, 3)]
    ba = rng.choice([0, 1])
    ta = 1 - ba
    lens = g.integers(1, s[ta] + 1, size=s[ba]).astype(np.int64)
    x = g.standard_normal(s).astype(np.float32)
    return model([h.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=ba, time_axis=ta)], [F("x", s)], [F("y", None)], [nh.from_array(lens, "l")], 10), {"x": x}, ("ReverseSequence", s, ba)


def math_case(i):
    """Element-wise functions over values at their edges: NaN, the
    infinities, signed zeros, huge and tiny magnitudes, the points where an
    approximation switches (the vectorized exponential's and sigmoid's
    cut-offs), ties for rounding."""
    g = np.random.default_rng(i)
    unary = ["Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Erf", "Softplus", "Softsign", "Relu",
             "HardSwish", "HardSigmoid", "Mish", "Elu", "Selu", "Celu", "Gelu", "LeakyRelu", "ThresholdedRelu",
             "Round", "Floor", "Ceil", "Sign", "Abs", "Neg", "IsNaN", "IsInf", "Sin", "Cos", "Atan", "Asinh", "Acosh", "Atanh"]
    binary = ["Pow", "Max", "Min", "Div", "Sub", "Mod", "PRelu"]
    edges = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 1e30, -1e30, 88.7, -88.7, 87.0, -87.0,
                      -87.5, 104.0, -104.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 3.0, -3.0, 20.0, -20.0, 9.0, -9.0], np.float32)
    n = rng.randint(1, 70)
    x = np.concatenate([rng.choice([edges, g.standard_normal(40).astype(np.float32) * rng.choice([1, 10, 100])])[: n] for _ in range(2)])
    x = g.permutation(x).astype(np.float32)
    op = rng.choice(unary + binary)
    s = [len(x)]
    if op in binary:
        y = g.permutation(np.concatenate([edges, g.standard_normal(len(x)).astype(np.float32)]))[: len(x)].astype(np.float32)
        attrs = dict(fmod=1) if op == "Mod" else {}
        return model([h.make_node(op, ["x", "z"], ["y"], **attrs)], [F("x", s), F("z", s)], [F("y", None)], [], 20), {"x": x, "z": y}, (op,)
    attrs = {}
    if op == "Gelu":
        attrs["approximate"] = rng.choice(["none", "tanh"])
    out_t = T.BOOL if op in ("IsNaN", "IsInf") else T.FLOAT
    return model([h.make_node(op, ["x"], ["y"], **attrs)], [F("x", s)], [F("y", None, out_t)], [], 20), {"x": x}, (op, attrs)


FAMILIES = {
    "resize": resize_case,
    "pool": pool_case,
    "conv": conv_case,
    "ops": ops_case,
    "quant": quant_case,
    "rnn": rnn_case,
    "vision": vision_case,
    "math": math_case,
}


def main():
    stats = {}
    for i in range(ARGS.cases):
        m, feeds, desc = FAMILIES[ARGS.family](i)
        tag = f"{ARGS.family}{i}"
        r = run_both(m, feeds, tag)
        key = r.split(":")[0] if r.startswith("rlxfail") else r.split(" ")[0]
        stats[key] = stats.get(key, 0) + 1
        if r not in ("ok", "ortfail"):
            verdict = reference(m, feeds, tag) if not r.startswith("rlxfail") else ""
            print(i, m.graph.node[-1].op_type, r[:200], desc, verdict, flush=True)
    print(ARGS.family, stats)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", required=True, choices=sorted(FAMILIES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--binary", default="target/release/rlx-onnx")
    ap.add_argument("--target", default="cpu", choices=["cpu", "cuda", "wgpu", "vulkan"],
                    help="the backend rlx-onnx runs on (a GPU target needs its driver: lavapipe does for wgpu and vulkan)")
    ARGS = ap.parse_args()
    rng = random.Random(ARGS.seed)
    WORK = tempfile.mkdtemp(prefix="rlx-differential-")
    main()
