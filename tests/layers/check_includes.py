#!/usr/bin/env python3
"""Fails when a source includes a header of a layer it does not depend on.

The layers, their folders and their dependencies come from layers.json, which
CMake writes from the same tcc_layer() calls that define the libraries, so the
check and the link graph cannot drift apart. Usage: check_includes.py SOURCE_DIR LAYERS_JSON
"""
import json
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


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
    for e in errors:
        print(e)
    print(f"{len(errors)} upward or sideways include(s) in {len(owner)} folders of {len(layers)} layers")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
