"""The training step tcc writes with --emit-onnx is valid ONNX that others run.

For the MLP fixture with cross-entropy and Adam: `tcc explain --train
--emit-onnx` writes the step; onnx.checker accepts it (with full shape
inference); ONNX Runtime runs it and agrees with tcc's reference interpreter
(`tcc run --reference` on the same file and inputs) on the loss, the updated
parameters and the optimizer state; and ten steps in ONNX Runtime, each fed
the previous step's updated parameters and state (ONNX inputs with defaults),
lower the loss. The forward models round-trip through the checker too.

Usage: check_onnx_export.py TCC SOURCE_DIR. Exit 77 (skipped) without onnx,
onnxruntime or numpy.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
except ImportError as e:
    print(f"{e.name} is not installed in this Python (scripts/lib.sh installs it); skipping")
    sys.exit(77)


def tcc(binary, root, *args):
    r = subprocess.run([binary, *args], cwd=root, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tcc {' '.join(args)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout


def check(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)


def main():
    binary, root = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        for fixture in ("mlp", "gpt2_block"):
            out = os.path.join(tmp, fixture + ".onnx")
            tcc(binary, root, "explain", f"tests/fixtures/{fixture}.onnx", "--emit-onnx", out, "-o", os.devnull)
            onnx.checker.check_model(onnx.load(out), full_check=True)

        step_path = os.path.join(tmp, "step.onnx")
        tcc(binary, root, "explain", "tests/fixtures/mlp.onnx", "--train", "--loss-fn", "cross_entropy",
            "--loss-on", "output", "--label", "target", "--optimizer", "adam", "--emit-onnx", step_path,
            "-o", os.devnull)
        step = onnx.load(step_path)
        onnx.checker.check_model(step, full_check=True)
        initializers = {t.name for t in step.graph.initializer}
        inputs = [i.name for i in step.graph.input]
        outputs = [o.name for o in step.graph.output]
        check(outputs[0] == "loss", f"first output is {outputs[0]}, expected loss")
        params = [o[: -len(".updated")] for o in outputs if o.endswith(".updated") and not o.endswith((".m.updated", ".v.updated"))]
        check(params and all(p in inputs and p in initializers for p in params),
              "parameters are inputs with a default value")

        rng = np.random.default_rng(0)
        feeds = {
            "input": rng.standard_normal((8, 32)).astype(np.float32),
            "target": rng.integers(0, 10, size=(8,)).astype(np.int64),
            "lr": np.array(0.01, dtype=np.float32),
            "step": np.array(1.0, dtype=np.float32),
        }
        session = ort.InferenceSession(step_path, providers=["CPUExecutionProvider"])
        ort_out = dict(zip(outputs, session.run(None, feeds)))

        in_dir, out_dir = os.path.join(tmp, "in"), os.path.join(tmp, "out")
        os.makedirs(in_dir)
        for name, value in feeds.items():
            np.save(os.path.join(in_dir, name + ".npy"), value)
        tcc(binary, root, "run", step_path, "--reference", "--inputs", in_dir, "-o", out_dir, "--format", "npy")
        for name in outputs:
            ref = np.load(os.path.join(out_dir, name + ".npy"))
            check(ref.shape == ort_out[name].shape, f"{name}: shape {ort_out[name].shape} vs tcc {ref.shape}")
            check(np.allclose(ort_out[name], ref, rtol=1e-4, atol=1e-5),
                  f"{name}: onnxruntime and tcc differ by {np.max(np.abs(ort_out[name] - ref))}")

        losses = []
        state = {}
        for i in range(10):
            feeds["step"] = np.array(i + 1, dtype=np.float32)
            result = dict(zip(outputs, session.run(None, {**feeds, **state})))
            losses.append(float(result["loss"]))
            state = {name[: -len(".updated")]: value for name, value in result.items() if name.endswith(".updated")}
        check(losses[-1] < 0.9 * losses[0], f"ten Adam steps in onnxruntime: losses {losses}")
        print(f"ok: {len(outputs)} outputs agree with tcc; loss {losses[0]:.4f} -> {losses[-1]:.4f} in ten steps")


if __name__ == "__main__":
    main()
