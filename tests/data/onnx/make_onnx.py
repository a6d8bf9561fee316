#!/usr/bin/python3
"""make_onnx.py: writes the ONNX fixtures of gpp's import tests with
Debian's python3-onnx (1.12, opset 17), as torch.onnx.export would lay them
out, with deterministic weights (numpy, seed 13).

usage: make_onnx.py OUT_DIR

  branches.onnx  three branches into a join (gpp_onnx's every mapping):
                 a [N,8] -> Gemm(transB=1) -> Relu
                 b [N,6] -> MatMul + Add (bias) -> Gelu in torch's Erf form
                 idx [N,3] int64 -> Gather(emb.weight [20,5]) -> ReduceSum(axis 1)
                 Concat(last axis) -> LayerNormalization -> Gemm(transB=0) -> y [N,4]
  residual.onnx  x [N,2,8] (rows = 2) -> MatMul -> Relu -> Add(x) -> Identity -> y
  split.onnx     one feature vector split into branches, as torch.split and
                 x[:, a:b] export (opset 13+: sizes as a constant input):
                 x [N,10] -> Split(axis 1, split=[4, 6]) -> Gemm -> Relu
                                                         -> MatMul + Add -> Relu
                 x -> Slice(starts 2, ends INT64_MAX, axes -1) -> Gemm
                 Concat(last axis) -> Gemm -> y [N,3]
  reshape.onnx   the shape plumbing of torch exports, without value_info (no
                 onnx.shape_inference): x [N,6] -> Unsqueeze(1) -> MatMul +
                 Add -> Relu r [N,1,8];
                 Reshape(r, Concat(Unsqueeze(Gather(Shape(r), 0)), [-1])) (x.view(x.size(0), -1))
                 + Squeeze(r, 1) -> Flatten -> Gemm -> y [N,3]
  attention.onnx self-attention written out, 2 heads, x [N,4,8] (rows = 4):
                 q = Transpose(Reshape(x Wq + bq, [0, 0, 2, 4]), 0 2 1 3), v alike
                 without a bias, k's transpose as two (0 2 1 3, then 0 1 3 2),
                 Softmax(MatMul(q, k) * 0.5) -> MatMul(v) -> Transpose(0 2 1 3)
                 -> Reshape [0, 0, 8] -> MatMul Wo + bo -> y [N,4,8]
  reshape_inferred.onnx  the same after onnx.shape_inference.infer_shapes
                 (value_info with the batch symbolic)
  flatten.onnx   reshapes that change the sample's shape, x [N,4,6] (rows = 4):
                 MatMul + Add -> Relu r [N,4,5] -> Flatten(axis 1) [N,20]
                 + Reshape(r, [0, -1]) -> Gemm -> Relu [N,12]
                 -> Reshape([0, 3, -1]) [N,3,4] -> MatMul + Add -> y [N,3,2]
  gelu_tanh.onnx GELU's tanh form as torch 1.13 exports nn.GELU(approximate='tanh'):
                 x [N,6] -> Gemm -> Mul(h, h) -> Mul(h, .) -> Mul(0.044715, .)
                 -> Add(h, .) -> Mul(sqrt(2/pi), .) -> Tanh -> Add(1, .) -> Mul(h, .)
                 -> Mul(0.5, .), the constants Constant nodes after the first Mul
                 (torch's order); then the same chain with every operand order
                 swapped and the constants initializers -> Gemm -> y [N,3]
The weights are written as raw_data except b's MatMul weight (float_data),
so both encodings are read."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(13)


def w(name, *shape, raw=True):
    a = (rng.standard_normal(shape) * 0.3).astype(np.float32)
    if raw:
        return numpy_helper.from_array(a, name)
    return helper.make_tensor(name, TensorProto.FLOAT, shape, a.flatten().tolist())


def scalar(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.float32), name)


def branches():
    inits = [w("fa.weight", 16, 8), w("fa.bias", 16),
             w("onnx::MatMul_9", 6, 12, raw=False), w("fb.bias", 12),
             w("emb.weight", 20, 5),
             w("ln.weight", 33), w("ln.bias", 33),
             w("onnx::Gemm_20", 33, 4), w("head.bias", 4),
             scalar("sqrt2", np.sqrt(2.0)), scalar("one", 1.0), scalar("half", 0.5),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "axes1")]
    nodes = [
        helper.make_node("Gemm", ["a", "fa.weight", "fa.bias"], ["ha"], name="/fa/Gemm",
                         transB=1),
        helper.make_node("Relu", ["ha"], ["ra"], name="/relu/Relu"),
        helper.make_node("MatMul", ["b", "onnx::MatMul_9"], ["mb"], name="/fb/MatMul"),
        helper.make_node("Add", ["fb.bias", "mb"], ["hb"], name="/fb/Add"),
        helper.make_node("Div", ["hb", "sqrt2"], ["d"], name="/gelu/Div"),
        helper.make_node("Erf", ["d"], ["e"], name="/gelu/Erf"),
        helper.make_node("Add", ["e", "one"], ["e1"], name="/gelu/Add"),
        helper.make_node("Mul", ["hb", "e1"], ["m"], name="/gelu/Mul"),
        helper.make_node("Mul", ["m", "half"], ["gb"], name="/gelu/Mul_1"),
        helper.make_node("Gather", ["emb.weight", "idx"], ["ge"], name="/emb/Gather"),
        helper.make_node("ReduceSum", ["ge", "axes1"], ["se"], name="/ReduceSum", keepdims=0),
        helper.make_node("Concat", ["ra", "gb", "se"], ["c"], name="/Concat", axis=1),
        helper.make_node("LayerNormalization", ["c", "ln.weight", "ln.bias"], ["n"],
                         name="/ln/LayerNormalization", axis=-1, epsilon=1e-5),
        helper.make_node("Gemm", ["n", "onnx::Gemm_20", "head.bias"], ["y"], name="/head/Gemm"),
    ]
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 8]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 6]),
              helper.make_tensor_value_info("idx", TensorProto.INT64, ["batch", 3])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])]
    return helper.make_graph(nodes, "branches", inputs, outputs, inits)


def residual():
    inits = [w("onnx::MatMul_3", 8, 8)]
    nodes = [helper.make_node("MatMul", ["x", "onnx::MatMul_3"], ["h"], name="/fc/MatMul"),
             helper.make_node("Relu", ["h"], ["r"], name="/Relu"),
             helper.make_node("Add", ["r", "x"], ["s"], name="/Add"),
             helper.make_node("Identity", ["s"], ["y"], name="/Identity")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8])]
    return helper.make_graph(nodes, "residual", inputs, outputs, inits)


def split():
    inits = [w("fa.weight", 5, 4), w("fa.bias", 5),
             w("onnx::MatMul_7", 6, 7), w("fb.bias", 7),
             w("fc.weight", 3, 8), w("fc.bias", 3),
             w("head.weight", 3, 15), w("head.bias", 3),
             numpy_helper.from_array(np.array([4, 6], dtype=np.int64), "onnx::Split_1"),
             numpy_helper.from_array(np.array([2], dtype=np.int64), "starts"),
             numpy_helper.from_array(np.array([2**63 - 1], dtype=np.int64), "ends"),
             numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes")]
    nodes = [
        helper.make_node("Split", ["x", "onnx::Split_1"], ["xa", "xb"], name="/Split", axis=1),
        helper.make_node("Gemm", ["xa", "fa.weight", "fa.bias"], ["ha"], name="/fa/Gemm",
                         transB=1),
        helper.make_node("Relu", ["ha"], ["ra"], name="/Relu"),
        helper.make_node("MatMul", ["xb", "onnx::MatMul_7"], ["mb"], name="/fb/MatMul"),
        helper.make_node("Add", ["fb.bias", "mb"], ["hb"], name="/fb/Add"),
        helper.make_node("Relu", ["hb"], ["rb"], name="/Relu_1"),
        helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["xc"], name="/Slice"),
        helper.make_node("Gemm", ["xc", "fc.weight", "fc.bias"], ["hc"], name="/fc/Gemm",
                         transB=1),
        helper.make_node("Concat", ["ra", "rb", "hc"], ["c"], name="/Concat", axis=-1),
        helper.make_node("Gemm", ["c", "head.weight", "head.bias"], ["y"], name="/head/Gemm",
                         transB=1),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 10])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])]
    return helper.make_graph(nodes, "split", inputs, outputs, inits)


def reshape():
    inits = [w("onnx::MatMul_5", 6, 8), w("fc.bias", 8), w("head.weight", 3, 8),
             w("head.bias", 3),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "ax1"),
             numpy_helper.from_array(np.array([0], dtype=np.int64), "ax0"),
             numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
             numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1")]
    nodes = [
        helper.make_node("Unsqueeze", ["x", "ax1"], ["u"], name="/Unsqueeze"),
        helper.make_node("MatMul", ["u", "onnx::MatMul_5"], ["m"], name="/fc/MatMul"),
        helper.make_node("Add", ["m", "fc.bias"], ["h"], name="/fc/Add"),
        helper.make_node("Relu", ["h"], ["r"], name="/Relu"),
        helper.make_node("Shape", ["r"], ["s"], name="/Shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="/Gather", axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"], name="/Unsqueeze_1"),
        helper.make_node("Concat", ["n1", "minus1"], ["shp"], name="/Concat", axis=0),
        helper.make_node("Reshape", ["r", "shp"], ["f"], name="/Reshape"),
        helper.make_node("Squeeze", ["r", "ax1"], ["q"], name="/Squeeze"),
        helper.make_node("Flatten", ["q"], ["q2"], name="/Flatten", axis=1),
        helper.make_node("Add", ["f", "q2"], ["z"], name="/Add"),
        helper.make_node("Gemm", ["z", "head.weight", "head.bias"], ["y"], name="/head/Gemm",
                         transB=1),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])]
    return helper.make_graph(nodes, "reshape", inputs, outputs, inits)


def attention():
    inits = [w("onnx::MatMul_q", 8, 8), w("q.bias", 8), w("onnx::MatMul_k", 8, 8), w("k.bias", 8),
             w("onnx::MatMul_v", 8, 8), w("onnx::MatMul_o", 8, 8), w("o.bias", 8),
             numpy_helper.from_array(np.array([0, 0, 2, 4], dtype=np.int64), "heads"),
             numpy_helper.from_array(np.array([0, 0, 8], dtype=np.int64), "back"),
             scalar("scale", 0.5)]
    nodes = []
    for p, bias in (("q", True), ("k", True), ("v", False)):
        src = "x"
        nodes.append(helper.make_node("MatMul", [src, f"onnx::MatMul_{p}"], [f"{p}m"],
                                      name=f"/{p}/MatMul"))
        if bias:
            nodes.append(helper.make_node("Add", [f"{p}.bias", f"{p}m"], [f"{p}a"],
                                          name=f"/{p}/Add"))
        nodes.append(helper.make_node("Reshape", [f"{p}a" if bias else f"{p}m", "heads"],
                                      [f"{p}r"], name=f"/{p}/Reshape"))
        nodes.append(helper.make_node("Transpose", [f"{p}r"], [f"{p}h"], name=f"/{p}/Transpose",
                                      perm=[0, 2, 1, 3]))
    nodes += [
        helper.make_node("Transpose", ["kh"], ["kt"], name="/k/Transpose_1", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["qh", "kt"], ["sc"], name="/MatMul"),
        helper.make_node("Mul", ["sc", "scale"], ["ss"], name="/Mul"),
        helper.make_node("Softmax", ["ss"], ["p"], name="/Softmax", axis=-1),
        helper.make_node("MatMul", ["p", "vh"], ["ctx"], name="/MatMul_1"),
        helper.make_node("Transpose", ["ctx"], ["ct"], name="/Transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ct", "back"], ["cr"], name="/Reshape"),
        helper.make_node("MatMul", ["cr", "onnx::MatMul_o"], ["om"], name="/o/MatMul"),
        helper.make_node("Add", ["om", "o.bias"], ["y"], name="/o/Add"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 8])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 8])]
    return helper.make_graph(nodes, "attention", inputs, outputs, inits)


def flatten():
    inits = [w("onnx::MatMul_a", 6, 5), w("a.bias", 5), w("m.weight", 12, 20), w("m.bias", 12),
             w("onnx::MatMul_o", 4, 2), w("o.bias", 2),
             numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "flat"),
             numpy_helper.from_array(np.array([0, 3, -1], dtype=np.int64), "back")]
    nodes = [
        helper.make_node("MatMul", ["x", "onnx::MatMul_a"], ["am"], name="/a/MatMul"),
        helper.make_node("Add", ["am", "a.bias"], ["ah"], name="/a/Add"),
        helper.make_node("Relu", ["ah"], ["r"], name="/Relu"),
        helper.make_node("Flatten", ["r"], ["f"], name="/Flatten", axis=1),
        helper.make_node("Reshape", ["r", "flat"], ["f2"], name="/Reshape"),
        helper.make_node("Add", ["f", "f2"], ["z"], name="/Add"),
        helper.make_node("Gemm", ["z", "m.weight", "m.bias"], ["g"], name="/m/Gemm", transB=1),
        helper.make_node("Relu", ["g"], ["gr"], name="/Relu_1"),
        helper.make_node("Reshape", ["gr", "back"], ["h"], name="/Reshape_1"),
        helper.make_node("MatMul", ["h", "onnx::MatMul_o"], ["om"], name="/o/MatMul"),
        helper.make_node("Add", ["om", "o.bias"], ["y"], name="/o/Add"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 2])]
    return helper.make_graph(nodes, "flatten", inputs, outputs, inits)


def gelu_tanh():
    inits = [w("a.weight", 8, 6), w("a.bias", 8), w("h.weight", 3, 8), w("h.bias", 3),
             scalar("kappa", 0.044715), scalar("beta", np.sqrt(2 / np.pi)),
             scalar("one", 1.0), scalar("half", 0.5)]
    def const(name, v):
        return helper.make_node("Constant", [], [name], name="/g/" + name,
                                value=numpy_helper.from_array(np.array(v, dtype=np.float32)))
    nodes = [
        helper.make_node("Gemm", ["x", "a.weight", "a.bias"], ["h"], name="/a/Gemm", transB=1),
        helper.make_node("Mul", ["h", "h"], ["sq"], name="/g/Mul"),
        helper.make_node("Mul", ["h", "sq"], ["cube"], name="/g/Mul_1"),
        const("k", 0.044715),
        helper.make_node("Mul", ["k", "cube"], ["kc"], name="/g/Mul_2"),
        helper.make_node("Add", ["h", "kc"], ["in"], name="/g/Add"),
        const("b", np.sqrt(2 / np.pi)),
        helper.make_node("Mul", ["b", "in"], ["u"], name="/g/Mul_3"),
        helper.make_node("Tanh", ["u"], ["t"], name="/g/Tanh"),
        const("o", 1.0),
        helper.make_node("Add", ["o", "t"], ["t1"], name="/g/Add_1"),
        helper.make_node("Mul", ["h", "t1"], ["m"], name="/g/Mul_4"),
        const("p", 0.5),
        helper.make_node("Mul", ["p", "m"], ["g"], name="/g/Mul_5"),
        # the same, operands swapped, constants as initializers
        helper.make_node("Mul", ["g", "g"], ["sq2"], name="/g2/Mul"),
        helper.make_node("Mul", ["sq2", "g"], ["cube2"], name="/g2/Mul_1"),
        helper.make_node("Mul", ["cube2", "kappa"], ["kc2"], name="/g2/Mul_2"),
        helper.make_node("Add", ["kc2", "g"], ["in2"], name="/g2/Add"),
        helper.make_node("Mul", ["in2", "beta"], ["u2"], name="/g2/Mul_3"),
        helper.make_node("Tanh", ["u2"], ["t2"], name="/g2/Tanh"),
        helper.make_node("Add", ["t2", "one"], ["t12"], name="/g2/Add_1"),
        helper.make_node("Mul", ["t12", "g"], ["m2"], name="/g2/Mul_4"),
        helper.make_node("Mul", ["m2", "half"], ["g2"], name="/g2/Mul_5"),
        helper.make_node("Gemm", ["g2", "h.weight", "h.bias"], ["y"], name="/h/Gemm", transB=1),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])]
    return helper.make_graph(nodes, "gelu_tanh", inputs, outputs, inits)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, g in (("branches", branches()), ("residual", residual()), ("split", split()),
                    ("reshape", reshape()), ("attention", attention()), ("flatten", flatten()),
                    ("gelu_tanh", gelu_tanh())):
        m = helper.make_model(g, producer_name="gpp make_onnx.py",
                              opset_imports=[helper.make_opsetid("", 17)])
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out, name + ".onnx"))
        if name == "reshape":
            m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
            assert len(m.graph.value_info) > 0
            onnx.save(m, os.path.join(out, name + "_inferred.onnx"))


if __name__ == "__main__":
    main()
