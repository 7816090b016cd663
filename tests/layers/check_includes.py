#!/usr/bin/env python3
"""Fails when a source includes a header of a layer it does not depend on.

The layers, their folders and their dependencies come from layers.json, which
CMake writes from the same tcc_layer() calls that define the libraries, so the
check and the link graph cannot drift apart.

The unit tests are checked too: tests/unit/<x> tests layer tcc_<x> (driver:
the tcc executable) and includes that layer, the layers it depends on, the
headers every test may make its fixtures with (FIXTURES) and test helpers of
folders whose layer it may include.
Usage: check_includes.py SOURCE_DIR LAYERS_JSON
"""
import json
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# What any test may include to load and prepare its fixtures, whatever its layer.
FIXTURES = {"frontends/load_model.h", "frontends/onnx/tensor_io.h", "src/shape/shape_inference.h"}


def includes(path):
    """(line number, included path) of each quoted include of a file."""
    with open(path) as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield number, m.group(1)


def test_layer(folder, layers):
    """The layer tests/unit/<folder> tests: tcc_<folder> (or <folder>), or the layer owning src/<folder>."""
    for name in ("tcc_" + folder, folder):
        if name in layers:
            return name
    for name, layer in layers.items():
        if "src/" + folder in layer["dirs"]:
            return name
    return None


def check_tests(source_dir, layers, layer_of, allowed):
    unit = os.path.join(source_dir, "tests", "unit")
    errors = []
    for folder in sorted(os.listdir(unit)):
        name = test_layer(folder, layers)
        if name is None:
            continue  # shared helpers (support)
        for entry in sorted(os.listdir(os.path.join(unit, folder))):
            if not entry.endswith((".h", ".cc")):
                continue
            source = f"tests/unit/{folder}/{entry}"
            for number, target in includes(os.path.join(source_dir, source)):
                if target in FIXTURES or not os.path.exists(os.path.join(source_dir, target)):
                    continue
                parts = target.split("/")
                if parts[:2] == ["tests", "unit"] and len(parts) == 4:
                    target_layer = test_layer(parts[2], layers)  # a helper of another test folder
                else:
                    target_layer = layer_of(target)
                if target_layer is None or target_layer in allowed[name]:
                    continue
                errors.append(f"{source}:{number}: a test of {name} includes {target} of {target_layer}, "
                              f"which {name} does not depend on: move the test to tests/unit of the layer "
                              f"it tests")
    return errors


def main(source_dir, layers_json):
    with open(layers_json) as f:
        layers = json.load(f)
    owner = {}  # folder -> layer
    for name, layer in layers.items():
        for d in layer["dirs"]:
            owner[d] = name

    def layer_of(path):
        folder = os.path.dirname(path)
        return owner.get(folder)

    def closure(name, seen=None):
        seen = set() if seen is None else seen
        if name not in seen:
            seen.add(name)
            for dep in layers[name]["deps"]:
                closure(dep, seen)
        return seen

    allowed = {name: closure(name) for name in layers}
    errors = []
    for folder, name in sorted(owner.items()):
        for entry in sorted(os.listdir(os.path.join(source_dir, folder))):
            if not entry.endswith((".h", ".cc")):
                continue
            source = os.path.join(folder, entry)
            with open(os.path.join(source_dir, source)) as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = m.group(1)
                    if os.path.exists(os.path.join(source_dir, folder, target)):
                        target = os.path.normpath(os.path.join(folder, target))
                    elif not os.path.exists(os.path.join(source_dir, target)):
                        continue  # a generated or third-party header
                    target_layer = layer_of(target)
                    if target_layer is None:
                        errors.append(f"{source}:{number}: includes {target}, which belongs to no layer")
                    elif target_layer not in allowed[name]:
                        errors.append(f"{source}:{number}: {name} includes {target} of {target_layer}, "
                                      f"which it does not depend on (it depends on: "
                                      f"{', '.join(sorted(allowed[name] - {name})) or 'nothing'})")
    summary = f"{len(errors)} upward or sideways include(s) in {len(owner)} folders of {len(layers)} layers"
    test_errors = check_tests(source_dir, layers, layer_of, allowed)
    errors += test_errors
    summary += f"; {len(test_errors)} in the unit tests"
    for e in errors:
        print(e)
    print(summary)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
