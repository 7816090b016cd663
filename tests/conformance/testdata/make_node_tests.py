"""Writes node tests of tcc's own under node_tests/ in ONNX's layout (model.onnx,
test_data_set_0/input_*.pb and output_*.pb), for the conformance runner's own
tests. Run with a Python that has onnx and numpy; the files are committed.

test_topk_symbolic_axis: TopK along a symbolic axis, which no generated kernel
walks (its rows must be static), so a compiled module runs it on the host: the
host-steps file must list it.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def write_test(root, name, model, inputs, outputs):
    folder = os.path.join(root, name)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    for prefix, values in (("input", inputs), ("output", outputs)):
        for i, (tensor_name, array) in enumerate(values):
            with open(os.path.join(data, f"{prefix}_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(array, tensor_name).SerializeToString())


def topk_symbolic_axis(root):
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=0)
    graph = helper.make_graph(
        [node], "topk_symbolic_axis",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("values", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("indices", TensorProto.INT64, [2, 3])],
        initializer=[numpy_helper.from_array(np.array([2], dtype=np.int64), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.array([[3, 1, 4], [1, 5, 9], [2, 6, 5], [3, 5, 8]], dtype=np.float32)
    order = np.argsort(-x, axis=0, kind="stable")[:2]
    write_test(root, "test_topk_symbolic_axis", model, [("x", x)],
               [("values", np.take_along_axis(x, order, axis=0)), ("indices", order.astype(np.int64))])


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "node_tests")
    topk_symbolic_axis(root)
