"""Validates `tcc explain --format json` against docs/explain.schema.json.

Runs explain on every example of examples/ (each model+trace+flags line of
examples/expected.txt, and each model without a trace) and on every TORCH_TRACE
fixture of tests/explain/torch_trace, validates each report
with the standard JSON Schema validator, and checks that the reports together
exercise every guard kind, a break, a recompile and advice (so the schema's
branches are all tested). Mutated reports must be rejected, so the schema is
not vacuous.

Usage: validate_schema.py TCC SOURCE_DIR. Exit 77 (skipped) without jsonschema.
"""
import copy
import json
import os
import subprocess
import sys

try:
    import jsonschema
except ImportError:
    print("jsonschema is not installed in this Python (scripts/lib.sh installs it); skipping")
    sys.exit(77)


def explain(tcc, root, args):
    r = subprocess.run([tcc, "explain", *args, "--format", "json"], cwd=root, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tcc explain {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def example_runs(root):
    runs, models = [], []
    with open(os.path.join(root, "examples", "expected.txt")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            model, trace, *flags = line.split(" -> ")[0].split()
            runs.append(["examples/" + model, "--trace", "examples/" + trace, *flags])
            if model not in models:
                models.append(model)
    runs += [["examples/" + m] for m in models]
    # What torch.compile logged (tests/explain/torch_trace), alone and beside a model's prediction.
    scenarios = sorted(os.listdir(os.path.join(root, "tests", "explain", "torch_trace")))
    runs += [["--torch-trace", "tests/explain/torch_trace/" + s] for s in scenarios]
    runs.append(["examples/" + models[0], "--torch-trace", "tests/explain/torch_trace/" + scenarios[0]])
    return runs


def main():
    tcc, root = sys.argv[1], sys.argv[2]
    with open(os.path.join(root, "docs", "explain.schema.json")) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)

    failures = 0
    reports = []
    for args in example_runs(root):
        report = explain(tcc, root, args)
        errors = sorted(validator.iter_errors(report), key=lambda e: list(e.absolute_path))
        for e in errors:
            print(f"FAIL {' '.join(args)}: at /{'/'.join(map(str, e.absolute_path))}: {e.message}")
        failures += bool(errors)
        reports.append(report)
    print(f"validated {len(reports)} reports")

    torch_runs = [r["torch_trace"] for r in reports if "torch_trace" in r]
    reports = [r for r in reports if "graphs" in r]
    kinds = {g["kind"] for r in reports for graph in r["graphs"] for v in graph["guards"] for g in v["guards"]}
    seen = {
        "every guard kind": kinds == {"TENSOR_MATCH", "EQUALS_MATCH", "SHAPE_ENV"},
        "a graph break": any(r["graph_breaks"] for r in reports),
        "a recompile": any(r["recompiles"] for r in reports),
        "advice": any(r["advice"] for r in reports),
        "a report without a trace": any(r["trace"] is None for r in reports),
        "torch's graph breaks and recompiles": any(t["graph_breaks"] for t in torch_runs)
        and any(t["recompiles"] for t in torch_runs),
        "a cudagraph skip reason": any("cudagraph_skip_reason" in c for t in torch_runs for c in t["compiles"]),
    }
    for what, ok in seen.items():
        if not ok:
            print(f"FAIL the examples' reports lack {what} (guard kinds seen: {sorted(kinds)})")
            failures += 1

    # Each mutation breaks one documented rule; the schema must notice.
    full = next(r for r in reports if r["graph_breaks"] and r["recompiles"])
    mutations = {
        "a missing top-level key": lambda r: r.pop("graph_count"),
        "an extra top-level key": lambda r: r.update(extra=1),
        "an unknown break reason": lambda r: r["graph_breaks"][0].update(reason="mystery"),
        "an unknown guard kind": lambda r: r["graphs"][0]["guards"][0]["guards"][0].update(kind="TYPE_MATCH"),
        "a malformed compile id": lambda r: r["recompiles"][0].update(compile_id="0-1"),
        "a negative count": lambda r: r.update(calls=-1),
        "a string size": lambda r: next(g for v in r["graphs"][0]["guards"] for g in v["guards"]
                                        if g["kind"] == "TENSOR_MATCH")["size"].append("8"),
    }
    torch_full = {"torch_trace": next(t for t in torch_runs if t["graph_breaks"] and t["recompiles"])}
    torch_mutations = {
        "an unknown torch break kind": lambda r: r["torch_trace"]["graph_breaks"][0].update(kind="mystery"),
        "a torch recompile reason without its compile id": lambda r: r["torch_trace"]["recompiles"][0].update(
            reasons=["lr == 0.1"]),
        "a torch report missing its compiles": lambda r: r["torch_trace"].pop("compiles"),
        "an empty cudagraph skip reason": lambda r: r["torch_trace"]["compiles"][0].update(cudagraph_skip_reason=""),
    }
    mutations.update(torch_mutations)
    for what, mutate in mutations.items():
        bad = copy.deepcopy(torch_full if what in torch_mutations else full)
        mutate(bad)
        if validator.is_valid(bad):
            print(f"FAIL the schema accepts a report with {what}")
            failures += 1

    if failures:
        sys.exit(1)
    print(f"all reports valid; all {len(mutations)} mutated reports rejected")


if __name__ == "__main__":
    main()
