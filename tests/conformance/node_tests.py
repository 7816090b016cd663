"""Prints the folder of the ONNX node conformance tests for CMake.

Older onnx wheels ship the tests as files under onnx/backend/test/data/node;
newer wheels ship only the test definitions (onnx.backend.test.case.node), so
for those the files are written once into the folder given as argv[1], in the
same layout (model.onnx, test_data_set_N/input_K.pb, output_K.pb). A stamp with
the onnx version makes later configures reuse them.
"""

import os
import shutil
import sys
import warnings

import onnx
from onnx import numpy_helper


def proto_of(value, value_info):
    t = value_info.type
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, value_info.name)
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, value_info.name)
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, value_info.name)
    if isinstance(value, onnx.TensorProto):
        return value
    return numpy_helper.from_array(value, value_info.name)


def write_case(case, folder):
    os.makedirs(folder)
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    graph = case.model.graph
    for i, (inputs, outputs) in enumerate(case.data_sets):
        data = os.path.join(folder, f"test_data_set_{i}")
        os.makedirs(data)
        for kind, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
            for k, value in enumerate(values):
                with open(os.path.join(data, f"{kind}_{k}.pb"), "wb") as f:
                    f.write(proto_of(value, infos[k]).SerializeToString())


def main():
    shipped = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    if os.path.isdir(shipped) and os.listdir(shipped):
        print(shipped)
        return
    out = os.path.abspath(sys.argv[1])
    stamp = os.path.join(out, ".onnx_version")
    if os.path.exists(stamp) and open(stamp).read() == onnx.__version__:
        print(out)
        return
    shutil.rmtree(out, ignore_errors=True)
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        # Some cases compute expected infinities on purpose (1/0).
        warnings.simplefilter("ignore")
        cases = node.collect_testcases(None)
    for case in cases:
        write_case(case, os.path.join(out, case.name))
    with open(stamp, "w") as f:
        f.write(onnx.__version__)
    print(out)


if __name__ == "__main__":
    main()
