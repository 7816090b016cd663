#!/usr/bin/env python3
"""Fails when a source file (C++ or Python) of the project's code, tests, benchmarks, examples or scripts is over the line limit.

The files still over it are named in an allow-list (one path a line, relative
to SOURCE_DIR; '#' starts a comment), which may only shrink: a file over the
limit that the list does not name fails, and so does a listed file that is no
longer over it (or no longer exists), so that it leaves the list when it is split.
Usage: check_file_sizes.py SOURCE_DIR ALLOW_LIST [LIMIT]
"""
import os
import sys

FOLDERS = ("src", "frontends", "passes", "codegen", "profiles", "tests", "bench", "examples", "scripts")
SUFFIXES = (".h", ".cc", ".c", ".py")


def is_python_script(path):
    """An executable script without a suffix whose first line names python."""
    if os.path.splitext(path)[1] or not os.access(path, os.X_OK):
        return False
    with open(path, "rb") as f:
        return b"python" in f.readline()


def main(source_dir, allow_list, limit=900):
    with open(allow_list) as f:
        allowed = {line.split("#")[0].strip() for line in f} - {""}
    lines = {}
    for folder in FOLDERS:
        for root, _, files in os.walk(os.path.join(source_dir, folder)):
            for name in files:
                if name.endswith(SUFFIXES) or is_python_script(os.path.join(root, name)):
                    path = os.path.join(root, name)
                    with open(path, "rb") as f:
                        lines[os.path.relpath(path, source_dir)] = f.read().count(b"\n")
    errors = []
    for path, n in sorted(lines.items()):
        if n > limit and path not in allowed:
            errors.append(f"{path}: {n} lines, over the limit of {limit}: split it by responsibility")
    for path in sorted(allowed):
        if path not in lines:
            errors.append(f"{allow_list}: {path} no longer exists: take it off the list")
        elif lines[path] <= limit:
            errors.append(f"{allow_list}: {path} has {lines[path]} lines, no longer over {limit}: take it off the list")
    for e in errors:
        print(e)
    print(f"{len(errors)} problem(s); {len(allowed)} file(s) allowed over {limit} lines")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:4])))
