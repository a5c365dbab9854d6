"""Writes ``plugins/amanda-tf/amanda_tf/tables/onnx_newest_to_tf_attention.yaml``: the general ONNX Attention ->
TensorFlow rule.  Its expressions repeat the same few definitions (the heads, the lengths, the element types); this
script writes each expression with the definitions it reads, so that the rule stays one reviewable graph.

    .venv/bin/python scripts/gen_tf_attention_table.py
"""

from __future__ import annotations

import re
from pathlib import Path

OUT = (
    Path(__file__).resolve().parents[1]
    / "plugins"
    / "amanda-tf"
    / "amanda_tf"
    / "tables"
    / "onnx_newest_to_tf_attention.yaml"
)

PRE = [
    ("sq", "sq = static_shape(q)"),
    ("sk", "sk = static_shape(k)"),
    ("sv", "sv = static_shape(v)"),
    ("r4", "r4 = len(sq) == 4"),
    ("b", "b = sq[0]"),
    ("hq", "hq = sq[1] if r4 else o.attrs['q_num_heads']"),
    ("hk", "hk = sk[1] if r4 else o.attrs['kv_num_heads']"),
    ("d", "d = sq[3] if r4 else sq[2] // hq"),
    ("dv", "dv = sv[3] if r4 else sv[2] // hk"),
    ("s", "s = sq[2] if r4 else sq[1]"),
    ("pl", "pl = static_shape(o.input_ports['past_key'])[2] if port_fed(o, 'past_key') else 0"),
    ("l", "l = (sk[2] if r4 else sk[1]) + pl"),
    ("lw", "lw = o.attrs.get('left_window_size') if o.attrs.get('left_window_size') is not None else -1"),
    ("rw", "rw = o.attrs.get('right_window_size') if o.attrs.get('right_window_size') is not None else -1"),
    ("ms", "ms = static_shape(o.input_ports['attn_mask']) if port_fed(o, 'attn_mask') else []"),
]


INLINE = [
    ("cap", "float(o.attrs.get('softcap') or 0.0)"),
    ("me", "(value_elem(o.input_ports['attn_mask']) if port_fed(o, 'attn_mask') else t)"),
    ("st", "('float32' if se == 'float16' else se)"),
    ("se", "{1: 'float32', 10: 'float16', 11: 'float64'}.get(o.attrs.get('softmax_precision') or 0, e)"),
    ("t", "('float32' if e == 'float16' else e)"),
    ("e", "value_elem(q)"),
]


def body(expr: str) -> str:
    """``expr`` with the definitions it needs, as a ${...} body (or a one-line ${...})."""
    for n, x in INLINE:
        expr = re.sub(rf"(?<![\w'.]){n}(?![\w'])", x.replace("\\", "\\\\"), expr)
    wanted: set[str] = set()
    frontier = expr
    changed = True
    while changed:
        changed = False
        for n, line in PRE:
            if n in wanted:
                continue
            if re.search(rf"(?<![\w'.]){n}(?![\w'])", frontier):
                wanted.add(n)
                frontier += "\n" + line.split("=", 1)[1]
                changed = True
    lines = [line for n, line in PRE if n in wanted]
    if not lines:
        return "${" + expr + "}"
    return "${\n" + "\n".join(lines) + "\nreturn " + expr + "\n}"


def q(expr: str) -> str:
    """A YAML value holding the expression."""
    text = body(expr)
    if "\n" in text:
        ind = " " * 16
        return "|-\n" + "\n".join(ind + ln for ln in text.splitlines())
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


OPS: list[tuple[str, str, dict, dict, list]] = []  # key, type expr, attrs, consts, output_ports


def op(key, typ, attrs=None, consts=None, out=None):
    OPS.append((key, typ, attrs or {}, consts or {}, out))


def rnd(key, src_t, dst_t):
    op(key, "Cast", {"SrcT": src_t, "DstT": dst_t, "Truncate": "false"})


def kv_heads(x: str, shape: str, width: str, past: str) -> None:
    """K or V ([B, L, Hkv*D], or [B, Hkv, L, D]) as [B, Hkv, L, D] after its past (or an empty past): ops
    ``<x>a``, ``<x>t``, ``<x>cat``."""
    op(f"{x}a", "Reshape", {"T": "=e", "Tshape": "int64"},
       {"shape": f"tf_int_tensor({shape} if r4 else [b, {shape}[1], hk, {width}])"})
    op(f"{x}t", "Transpose", {"T": "=e", "Tperm": "int32"},
       {"perm": "as_tensor([0, 1, 2, 3] if r4 else [0, 2, 1, 3], 'int32')"})
    op(f"{x}cat", "ConcatV2", {"T": "=e", "N": "2", "Tidx": "int32"},
       {"values_0": f"None if port_fed(o, '{past}') else as_tensor([], e).reshape([b, hk, 0, {width}])",
        "axis": "tf_scalar(2, 'int32')"})


def build():
    OPS.clear()
    E, T, ST, SE = "=e", "=t", "=st", "=se"
    # heads: Q [B, Hkv, G, S, D], K and V [B, Hkv, 1, L, D] (the past first)
    op("qa", "Reshape", {"T": E, "Tshape": "int64"}, {"shape": "tf_int_tensor(sq if r4 else [b, s, hq, d])"})
    op(
        "qt",
        "Transpose",
        {"T": E, "Tperm": "int32"},
        {"perm": "as_tensor([0, 1, 2, 3] if r4 else [0, 2, 1, 3], 'int32')"},
    )
    op("qb", "Reshape", {"T": E, "Tshape": "int64"}, {"shape": "tf_int_tensor([b, hk, hq // hk, s, d])"})
    rnd("qc", E, T)
    op("qs", "Mul", {"T": T}, {"y": "tf_scalar(float(tf_scalar((o.attrs.get('scale') or 1 / d ** 0.5) ** 0.5, e)), t)"})
    rnd("qs_r", T, E)
    rnd("qs_c", E, T)
    kv_heads("k", "sk", "d", "past_key")
    op("kb", "Reshape", {"T": E, "Tshape": "int64"}, {"shape": "tf_int_tensor([b, hk, 1, l, d])"})
    rnd("kc", E, T)
    op("ks", "Mul", {"T": T}, {"y": "tf_scalar(float(tf_scalar((o.attrs.get('scale') or 1 / d ** 0.5) ** 0.5, e)), t)"})
    rnd("ks_r", T, E)
    rnd("ks_c", E, T)
    kv_heads("v", "sv", "dv", "past_value")
    op("vb", "Reshape", {"T": E, "Tshape": "int64"}, {"shape": "tf_int_tensor([b, hk, 1, l, dv])"})
    rnd("vc", E, T)
    # scores [B, Hq, S, L], rounded to the inputs' type after each step as the reference computes them
    op("qk", "BatchMatMulV3", {"Ta": T, "Tb": T, "Tout": T, "adj_x": "false", "adj_y": "true"})
    rnd("qk_r", T, E)
    rnd("qk_c", E, T)
    op("qk4", "Reshape", {"T": T, "Tshape": "int64"}, {"shape": "tf_int_tensor([b, hq, s, l])"})
    op("capd", "RealDiv", {"T": T}, {"y": "tf_scalar(float(tf_scalar(cap or 1.0, e)), t)"})
    rnd("capd_r", T, E)
    rnd("capd_c", E, T)
    op("capt", "'Tanh' if cap > 0 else 'Neg'", {"T": T})
    rnd("capt_r", T, E)
    rnd("capt_c", E, T)
    op("capm", "Mul", {"T": T}, {"y": "tf_scalar(float(tf_scalar(cap or -1.0, e)), t)"})
    rnd("capm_r", T, E)
    rnd("capm_c", E, T)
    # the additive bias: the mask (bool: log of 1 / 0, so 0 / -inf; float: 1 * mask), padded with -inf to L ...
    op(
        "mc",
        "Cast",
        {"SrcT": "=me", "DstT": T, "Truncate": "false"},
        {"x": "None if port_fed(o, 'attn_mask') else tf_scalar(0, t)"},
    )
    op("mb", "'Xlogy' if me == 'bool' else 'Mul'", {"T": T}, {"x": "tf_scalar(1, t)"})
    op(
        "mp",
        "PadV2",
        {"T": T, "Tpaddings": "int64"},
        {
            "paddings": "tf_int_tensor([0, 0] * (len(ms) - 1) + [0, l - ms[-1]] if ms else []).reshape(len(ms), 2)",
            "constant_values": "tf_scalar(float('-inf'), t)",
        },
    )
    # ... plus 0 / -inf where the causal frontier, the windows or nonpad_kv_seqlen hide a key: with the offset
    # (nonpad_kv_seqlen[b] - S, or the past length), a key j is seen by query i iff lo <= j - i - offset <= hi
    op(
        "off",
        "Sub",
        {"T": "int64"},
        {"x": "None if port_fed(o, 'nonpad_kv_seqlen') else tf_int_tensor([s + pl])", "y": "tf_scalar(s, 'int64')"},
    )
    op("off4", "Reshape", {"T": "int64", "Tshape": "int64"}, {"shape": "tf_int_tensor([-1, 1, 1, 1])"})
    op("rel", "Sub", {"T": "int64"}, {"x": "tf_int_tensor([j - i for i in range(s) for j in range(l)]).reshape(s, l)"})
    op("lo", "GreaterEqual", {"T": "int64"}, {"y": "tf_scalar(-lw if lw >= 0 else -(2 ** 62), 'int64')"})
    op(
        "hi",
        "LessEqual",
        {"T": "int64"},
        {
            "y": "tf_scalar(min([2 ** 62] + ([0] if o.attrs.get('is_causal') else [])"
            " + ([rw] if rw >= 0 else [])), 'int64')"
        },
    )
    op(
        "nl",
        "Reshape",
        {"T": "int64", "Tshape": "int64"},
        {
            "tensor": "None if port_fed(o, 'nonpad_kv_seqlen') else tf_int_tensor([l])",
            "shape": "tf_int_tensor([-1, 1, 1, 1])",
        },
    )
    op("pad", "Less", {"T": "int64"}, {"x": "tf_int_tensor(list(range(l)))"})
    op("and1", "LogicalAnd")
    op("and2", "LogicalAnd")
    op("sbias", "SelectV2", {"T": T}, {"t": "tf_scalar(0, t)", "e": "tf_scalar(float('-inf'), t)"})
    op("bias", "AddV2", {"T": T})
    op("sb", "AddV2", {"T": T})
    rnd("sb_r", T, E)
    rnd("sb_c", E, T)
    # softmax in softmax_precision (float16: in float32, rounded after each step), as the reference
    rnd("sx", T, ST)
    op("smax", "Max", {"T": ST, "Tidx": "int64", "keep_dims": "true"}, {"reduction_indices": "tf_int_tensor([-1])"})
    op("sninf", "Equal", {"T": ST, "incompatible_shape_error": "true"}, {"y": "tf_scalar(float('-inf'), st)"})
    op("ssafe", "SelectV2", {"T": ST}, {"t": "tf_scalar(0, st)"})
    op("ssub", "Sub", {"T": ST})
    rnd("ssub_r", ST, SE)
    rnd("ssub_c", SE, ST)
    op("sexp", "Exp", {"T": ST})
    rnd("sexp_r", ST, SE)
    rnd("sexp_c", SE, ST)
    op("ssum", "Sum", {"T": ST, "Tidx": "int64", "keep_dims": "true"}, {"reduction_indices": "tf_int_tensor([-1])"})
    rnd("ssum_r", ST, SE)
    rnd("ssum_c", SE, ST)
    op("szero", "Equal", {"T": ST, "incompatible_shape_error": "true"}, {"y": "tf_scalar(0, st)"})
    op("sden", "SelectV2", {"T": ST}, {"t": "tf_scalar(1, st)"})
    op("sdiv", "RealDiv", {"T": ST})
    rnd("sdiv_r", ST, SE)
    rnd("sdiv_c", SE, ST)
    # rows whose every key the bias hides give 0
    op("bmax", "Max", {"T": T, "Tidx": "int64", "keep_dims": "true"}, {"reduction_indices": "tf_int_tensor([-1])"})
    op("hidden", "Equal", {"T": T, "incompatible_shape_error": "true"}, {"y": "tf_scalar(float('-inf'), t)"})
    op("guard", "SelectV2", {"T": ST}, {"t": "tf_scalar(0, st)"})
    rnd("pe", ST, E)
    rnd("pt", E, T)
    op("p5", "Reshape", {"T": T, "Tshape": "int64"}, {"shape": "tf_int_tensor([b, hk, hq // hk, s, l])"})
    op("pv", "BatchMatMulV3", {"Ta": T, "Tb": T, "Tout": T, "adj_x": "false", "adj_y": "false"})
    rnd("ye", T, E)
    op("y4", "Reshape", {"T": E, "Tshape": "int64"}, {"shape": "tf_int_tensor([b, hq, s, dv])"})
    op(
        "yt",
        "Transpose",
        {"T": E, "Tperm": "int32"},
        {"perm": "as_tensor([0, 1, 2, 3] if r4 else [0, 2, 1, 3], 'int32')"},
    )
    # the qk_matmul output: modes 0 and 1 the scores, 2 the scores plus the bias, 3 the softmax (a selection by a
    # constant condition: no arithmetic)
    op(
        "qsel2",
        "SelectV2",
        {"T": E},
        {"condition": "tf_scalar((o.attrs.get('qk_matmul_output_mode') or 0) == 2, 'bool')"},
    )
    op(
        "qsel3",
        "SelectV2",
        {"T": E},
        {"condition": "tf_scalar((o.attrs.get('qk_matmul_output_mode') or 0) == 3, 'bool')"},
    )
    op(
        "yr",
        "Reshape",
        {"T": E, "Tshape": "int64"},
        {"shape": "tf_int_tensor(static_shape(y))"},
        out="{output: '${value_dtype(y)}'}",
    )


EDGES = """
$o.$q -> $qa.tensor
$qa.output -> $qt.x
$qt.y -> $qb.tensor
$qb.output -> $qc.x
$qc.y -> $qs.x
$qs.z -> $qs_r.x
$qs_r.y -> $qs_c.x
$o.$k -> $ka.tensor
$ka.output -> $kt.x
$o.$pk -> $kcat.values_0
$kt.y -> $kcat.values_1
$kcat.output -> $kb.tensor
$kcat.output -> $o.$prk
$kb.output -> $kc.x
$kc.y -> $ks.x
$ks.z -> $ks_r.x
$ks_r.y -> $ks_c.x
$o.$v -> $va.tensor
$va.output -> $vt.x
$o.$pv -> $vcat.values_0
$vt.y -> $vcat.values_1
$vcat.output -> $vb.tensor
$vcat.output -> $o.$prv
$vb.output -> $vc.x
$qs_c.y -> $qk.x
$ks_c.y -> $qk.y
$qk.output -> $qk_r.x
$qk_r.y -> $qk_c.x
$qk_c.y -> $qk4.tensor
$qk4.output -> $capd.x
$capd.z -> $capd_r.x
$capd_r.y -> $capd_c.x
$capd_c.y -> $capt.x
$capt.y -> $capt_r.x
$capt_r.y -> $capt_c.x
$capt_c.y -> $capm.x
$capm.z -> $capm_r.x
$capm_r.y -> $capm_c.x
$o.$m -> $mc.x
$mc.y -> $mb.y
$mb.z -> $mp.input
$o.$np -> $off.x
$off.z -> $off4.tensor
$off4.output -> $rel.y
$rel.z -> $lo.x
$rel.z -> $hi.x
$o.$np -> $nl.tensor
$nl.output -> $pad.y
$lo.z -> $and1.x
$hi.z -> $and1.y
$and1.z -> $and2.x
$pad.z -> $and2.y
$and2.z -> $sbias.condition
$mp.output -> $bias.x
$sbias.output -> $bias.y
$capm_c.y -> $sb.x
$bias.z -> $sb.y
$sb.z -> $sb_r.x
$sb_r.y -> $sb_c.x
$sb_c.y -> $sx.x
$sx.y -> $smax.input
$smax.output -> $sninf.x
$sninf.z -> $ssafe.condition
$smax.output -> $ssafe.e
$sx.y -> $ssub.x
$ssafe.output -> $ssub.y
$ssub.z -> $ssub_r.x
$ssub_r.y -> $ssub_c.x
$ssub_c.y -> $sexp.x
$sexp.y -> $sexp_r.x
$sexp_r.y -> $sexp_c.x
$sexp_c.y -> $ssum.input
$ssum.output -> $ssum_r.x
$ssum_r.y -> $ssum_c.x
$ssum_c.y -> $szero.x
$szero.z -> $sden.condition
$ssum_c.y -> $sden.e
$sexp_c.y -> $sdiv.x
$sden.output -> $sdiv.y
$sdiv.z -> $sdiv_r.x
$sdiv_r.y -> $sdiv_c.x
$bias.z -> $bmax.input
$bmax.output -> $hidden.x
$hidden.z -> $guard.condition
$sdiv_c.y -> $guard.e
$guard.output -> $pe.x
$pe.y -> $pt.x
$pt.y -> $p5.tensor
$p5.output -> $pv.x
$vc.y -> $pv.y
$pv.output -> $ye.x
$ye.y -> $y4.tensor
$y4.output -> $yt.x
$yt.y -> $yr.tensor
$yr.output -> $o.$y
$sb_r.y -> $qsel2.t
$capm_r.y -> $qsel2.e
$pe.y -> $qsel3.t
$qsel2.output -> $qsel3.e
$qsel3.output -> $o.$qko
"""

WHERE = r"""sq = static_shape(q)
sk = static_shape(k)
sv = static_shape(v)
e = value_elem(q)
if e not in ('float16', 'float32', 'float64') or value_elem(k) != e or value_elem(v) != e:
    return False
if sq is None or sk is None or sv is None or not (len(sq) == len(sk) == len(sv)) or len(sq) not in (3, 4):
    return False
r4 = len(sq) == 4
if r4:
    if o.attrs.get('q_num_heads') or o.attrs.get('kv_num_heads'):
        return False
    hq, hk = sq[1], sk[1]
    if sv[1] != hk:
        return False
else:
    hq, hk = o.attrs.get('q_num_heads') or 0, o.attrs.get('kv_num_heads') or 0
    if hq <= 0 or hk <= 0 or sq[2] % hq or sk[2] % hk or sv[2] % hk:
        return False
if hq % hk:
    return False
b = sq[0]
d = sq[3] if r4 else sq[2] // hq
dv = sv[3] if r4 else sv[2] // hk
s = sq[2] if r4 else sq[1]
lk = sk[2] if r4 else sk[1]
if (sk[3] if r4 else sk[2] // hk) != d or sk[0] != b or sv[0] != b or (sv[2] if r4 else sv[1]) != lk:
    return False
if float(o.attrs.get('softcap') or 0.0) < 0:
    return False
for w in ('left_window_size', 'right_window_size'):
    if o.attrs.get(w) is not None and o.attrs.get(w) < -1:
        return False
if (o.attrs.get('softmax_precision') or 0) not in (0, 1, 10, 11):
    return False
pl = 0
if port_fed(o, 'past_key') or port_fed(o, 'past_value'):
    if not (port_fed(o, 'past_key') and port_fed(o, 'past_value')) or port_fed(o, 'nonpad_kv_seqlen'):
        return False
    spk = static_shape(o.input_ports['past_key'])
    spv = static_shape(o.input_ports['past_value'])
    if spk is None or spv is None or len(spk) != 4 or spk[:2] != [b, hk] or spk[3] != d or spv != [b, hk, spk[2], dv]:
        return False
    if value_elem(o.input_ports['past_key']) != e or value_elem(o.input_ports['past_value']) != e:
        return False
    pl = spk[2]
l = lk + pl
if port_fed(o, 'nonpad_kv_seqlen'):
    if value_elem(o.input_ports['nonpad_kv_seqlen']) != 'int64' or static_shape(o.input_ports['nonpad_kv_seqlen']) != [b]:
        return False
if port_fed(o, 'attn_mask'):
    ms = static_shape(o.input_ports['attn_mask'])
    if value_elem(o.input_ports['attn_mask']) not in ('bool', e) or ms is None or not 1 <= len(ms) <= 4 or ms[-1] > l:
        return False
    full = [b, hq, s, l]
    if any(a not in (1, c) for a, c in zip(ms[::-1][1:], full[::-1][1:])):
        return False
read = len(o.outputs) > 3 and bool(o.outputs[3].consumers)
mode = o.attrs.get('qk_matmul_output_mode') or 0
"""  # noqa: E501 - the condition as it is written into the table

WHERE_TAIL = "return not read or mode in (1, 2, 3) or (mode == 0 and not float(o.attrs.get('softcap') or 0.0))"

HEADER = """\
# ONNX Attention-23/24 (and later) -> TensorFlow, ahead of the opset chain (a part of onnx-newest-to-tf), for what
# the rules of onnx_newest_to_tf.yaml leave: the qk_matmul output, nonpad_kv_seqlen, float16 inputs,
# softmax_precision, masks shorter than the keys.  One graph serves every form:
# * Q, K and V in heads (3-D inputs split), the past concatenated first (an empty past when there is none: the
#   present outputs); Q's heads grouped by their K/V head, so the batched matmuls broadcast a K/V head over its
#   group, as ONNX repeats it;
# * the reference's arithmetic step by step: Q and K times sqrt(scale) (the factor in the inputs' type), QK^T,
#   softcap * tanh(s / softcap) (without softcap -(-s / 1): exact), plus the bias, then softmax as the reference
#   writes it (the maximum, 0 for a row of -inf; exp(x - max); the sum, 1 when 0; the quotient) in
#   softmax_precision, rows the bias hides entirely set to 0, the product with V;
# * the bias: the mask (bool: Xlogy(1, mask) = 0 / -inf; float: 1 * mask; none: 0) padded with -inf to the keys'
#   length, plus 0 / -inf where a key j is hidden from query i: with the offset nonpad_kv_seqlen[b] - S (or the
#   past length), j is seen iff lo <= j - i - offset <= hi (hi 0 when causal, the right window; lo minus the left
#   window) and j < nonpad_kv_seqlen[b], computed at run time;
# * float16: TF's CPU has no float16 BatchMatMul, so every step runs in float32 and is rounded to float16 where the
#   reference rounds (a Cast there and back: exact for +, -, *, / and the matmuls, whose float16 products numpy
#   accumulates in float32 and rounds once, and for exp and tanh up to float32's last bit); for float32 and float64
#   those casts are to the same type, the identity.
# The qk_matmul output is the reference's: modes 0 and 1 the scores (after softcap: mode 0 with softcap is
# refused, the specification and the reference disagree there), 2 the scores plus the bias, 3 the softmax (0 for
# hidden rows).  Refused: bfloat16, masks that do not broadcast to [B, Hq, S, L], a past cache together with
# nonpad_kv_seqlen (the reference refuses it too), softmax_precision other than float16/float32/float64.
# Written by scripts/gen_tf_attention_table.py (edit that and run it).
table:
  name: onnx-newest-to-tf-attention
  part_of: onnx-newest-to-tf
  description: ONNX Attention (the qk_matmul output, nonpad_kv_seqlen, float16, softmax_precision) as TensorFlow raw ops, converted ahead of the opset chain
  src: amanda/onnx/>=19
  dst: amanda/tensorflow/>=2.15
  ahead: true
  rules:
"""  # noqa: E501 - the header as it is written into the table


def attr_value(v: str) -> str:
    if v.startswith("="):
        return q(v[1:])
    return v


def emit() -> str:
    build()
    out = [HEADER]
    if True:
        out.append("    attention_general:   # every form the rules of onnx_newest_to_tf.yaml leave\n")
        out.append("      src:\n")
        out.append(
            "        ops: {$o: {type: Attention, input_ports: [$q, $k, $v, '$m?', '$pk?', '$pv?', '$np?'], "
            "output_ports: [$y, '$prk?', '$prv?', '$qko?']}}\n"
        )
        where = "${\n" + WHERE + WHERE_TAIL + "\n}"
        out.append("        where: |-\n" + "\n".join("          " + ln for ln in where.splitlines()) + "\n")
        out.append("      dst:\n        ops:\n")
        for key, typ, attrs, consts, outp in OPS:
            lines = [f"          ${key}:"]
            lines.append(f"            type: {q(typ) if typ[0] == chr(39) else typ}")
            if outp:
                lines.append(f"            output_ports: [{outp}]")
            if attrs:
                lines.append("            attrs:")
                for a, v in attrs.items():
                    lines.append(f"              {a}: {attr_value(v) if v.startswith('=') else v}")
            if consts:
                lines.append("            consts:")
                for c, v in consts.items():
                    lines.append(f"              {c}: {q(v)}")
            out.append("\n".join(lines) + "\n")
        out.append("        edges:\n")
        for ln in EDGES.strip().splitlines():
            out.append(f"          - {ln}\n")
    return "".join(out)


if __name__ == "__main__":
    OUT.write_text(emit())
