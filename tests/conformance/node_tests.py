"""Prepares the folder of ONNX node conformance tests for CMake and prints it.

Older onnx wheels ship the tests as files under onnx/backend/test/data/node
(linked into the folder); newer wheels ship only the test definitions
(onnx.backend.test.case.node), so their files are written here in the same
layout (model.onnx, test_data_set_N/input_K.pb, output_K.pb).

Many ops' tests exist only at the newest opset (24 and later, where the ops
gained new element types), beyond the 13..23 tcc reads. For each such test
that ONNX's own version converter can take down to opset 23 (and the checker
then accepts), a variant <test>_opset23 is added with the converted model and
the original data sets: ONNX's expectations, ONNX's conversion.

The tests of If, Loop and Scan on tensors exist only below opset 13, and the
runner cannot run them as opset 13 (those ops' schemas changed at 11 and 13),
so each such test that the version converter takes up to 13 with its graph
inputs and outputs unchanged (Scan's opset-8 batch axis changes them) gets a
variant <test>_opset13 the same way.

The folder is argv[1]; a stamp with the onnx version makes later configures
reuse it.
"""

import os
import shutil
import sys
import warnings

import onnx
from onnx import numpy_helper

OPSET = 23  # the newest opset tcc reads
MIN_OPSET = 13  # the oldest
CONTROL_FLOW = ("If", "Loop", "Scan")


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


def has_control_flow(graph):
    for n in graph.node:
        if n.op_type in CONTROL_FLOW:
            return True
        if any(a.type == onnx.AttributeProto.GRAPH and has_control_flow(a.g) for a in n.attribute):
            return True
    return False


def signature(graph):
    return [(v.name, v.type.SerializeToString()) for v in list(graph.input) + list(graph.output)]


def add_converted_variants(out):
    """The opset-23 variants of newer tests and the opset-13 ones of control flow (above)."""
    from onnx import version_converter

    for name in sorted(os.listdir(out)):
        folder = os.path.join(out, name)
        path = os.path.join(folder, "model.onnx")
        if not os.path.isfile(path):
            continue
        model = onnx.load(path)
        opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
        if not opset:
            continue
        if opset[0] > OPSET:
            target = OPSET
        elif opset[0] < MIN_OPSET and has_control_flow(model.graph):
            target = MIN_OPSET
        else:
            continue
        try:
            converted = version_converter.convert_version(model, target)
            onnx.checker.check_model(converted, full_check=True)
        except Exception:  # no adapter, or a type the older opset does not allow
            continue
        if target == MIN_OPSET and signature(converted.graph) != signature(model.graph):
            continue
        variant = os.path.join(out, f"{name}_opset{target}")
        os.makedirs(variant)
        onnx.save(converted, os.path.join(variant, "model.onnx"))
        for data in os.listdir(folder):
            if data.startswith("test_data_set_"):
                os.symlink(os.path.join(folder, data), os.path.join(variant, data))


def main():
    out = os.path.abspath(sys.argv[1])
    stamp = os.path.join(out, ".onnx_version")
    version = f"onnx {onnx.__version__}, variants at opsets {OPSET} and {MIN_OPSET}"
    if os.path.exists(stamp) and open(stamp).read() == version:
        print(out)
        return
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    shipped = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    if os.path.isdir(shipped) and os.listdir(shipped):
        for name in os.listdir(shipped):
            os.symlink(os.path.join(shipped, name), os.path.join(out, name))
    else:
        from onnx.backend.test.case import node

        with warnings.catch_warnings():
            # Some cases compute expected infinities on purpose (1/0).
            warnings.simplefilter("ignore")
            cases = node.collect_testcases(None)
        for case in cases:
            write_case(case, os.path.join(out, case.name))
    add_converted_variants(out)
    with open(stamp, "w") as f:
        f.write(version)
    print(out)


if __name__ == "__main__":
    main()
