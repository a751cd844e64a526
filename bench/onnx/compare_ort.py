"""opfuse fused vs ONNX Runtime (CPU, every graph optimisation on, 2 threads) on ONNX models.

For each model: the same random inputs go to `opfuse run` (the fused plan, JIT-compiled, the
schedule the AOT build uses) and to an ONNX Runtime session; outputs are compared within
opfuse's graph tolerance (rtol 1e-4, atol 2e-4) and both are timed (median of --reps runs,
after warm-up). ONNX Runtime is timed through I/O binding, which keeps Python's per-call cost
out of the loop as far as the Python API allows (a few microseconds remain).

Usage: python compare_ort.py --opfuse build/tools/opfuse --out results.json MODEL.onnx...
Exit status 1 if an output differs.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort


def median_time(call, reps, warmup=5):
    """The median wall time of `call()` over `reps` calls, after `warmup` untimed ones."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ort_time(path, feeds, reps):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    outs = sess.run(None, feeds)
    binding = sess.io_binding()
    for name, value in feeds.items():
        binding.bind_cpu_input(name, value)
    for o in sess.get_outputs():
        binding.bind_output(o.name)
    t = median_time(lambda: sess.run_with_iobinding(binding), reps)
    names = [o.name for o in sess.get_outputs()]
    return t, dict(zip(names, outs))


def openvino_time(path, feeds, reps):
    """OpenVINO's CPU plugin as its users run a single request: the latency hint, 2 inference
    threads. Its precision hint is f32: on CPUs with bf16 (AVX512_BF16, AMX) OpenVINO would
    otherwise compute in bf16, a different answer from every other column. Returns the
    median time, the outputs, and what ran (version, precision, threads)."""
    import openvino as ov
    core = ov.Core()
    compiled = core.compile_model(path, "CPU", {"PERFORMANCE_HINT": "LATENCY",
                                                "INFERENCE_NUM_THREADS": 2,
                                                "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    t = median_time(lambda: request.infer(feeds), reps)
    outs = {o.get_any_name(): request.get_tensor(o).data.copy() for o in compiled.outputs}
    precision = compiled.get_property("INFERENCE_PRECISION_HINT")
    what = (f"OpenVINO {ov.get_version().split('-')[0]} CPU, "
            f"{getattr(precision, 'get_type_name', lambda: str(precision))()}, "
            f"{compiled.get_property('INFERENCE_NUM_THREADS')} threads, latency hint")
    return t, outs, what


def integer_bounds(opfuse, path):
    """The values each integer input may take, from `opfuse check` (the tables it indexes)."""
    log = subprocess.run([opfuse, "check", path], capture_output=True, text=True, check=True).stdout
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"input (\S+) .* values in \[0, (\d+)\)", log)}


def opfuse_time(opfuse, path, feeds, reps, work, check=False, plan=None):
    args = [opfuse, "run", path, "--reps", str(reps), "--outputs", work] + (["--check"] if check else [])
    if plan:
        args += ["--plan", plan]
    for name, value in feeds.items():
        f = os.path.join(work, name + ".in.npy")
        np.save(f, value)
        args += ["--input", f"{name}={f}"]
    run = subprocess.run(args, capture_output=True, text=True)
    log = run.stdout
    if check and (run.returncode != 0 or "reference: match" not in log):
        sys.stdout.write(log + run.stderr)
        raise SystemExit(f"{path}: opfuse's outputs differ from its reference executor")
    run.check_returncode()
    m = re.search(r"time: median ([0-9.e+-]+) ms", log)
    kernels = re.search(r"plan: (\d+) kernels for (\d+) ops", log)
    rewrites = [l for l in log.splitlines() if l.startswith("canonicalize:")]
    return float(m.group(1)) * 1e-3, kernels.groups(), rewrites


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opfuse", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--torch-eager", help="torch_eager.json of export_torch_blocks.py: a PyTorch "
                    "eager column for the models PyTorch exported")
    ap.add_argument("--check", action="store_true",
                    help="also compare opfuse's outputs with its reference executor")
    ap.add_argument("--unfused", type=int, default=0, metavar="ROUNDS",
                    help="also time opfuse's unfused plan (every op its own kernel), alternating "
                         "fused and unfused ROUNDS times; medians of the rounds are reported")
    ap.add_argument("--openvino", action="store_true",
                    help="also time OpenVINO (CPU plugin, latency hint, f32, 2 threads), its "
                         "outputs checked like opfuse's")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    eager = {}
    if a.torch_eager and os.path.exists(a.torch_eager):
        with open(a.torch_eager) as f:
            eager = json.load(f)["eager_s"]
    rows, bad = [], 0
    rng = np.random.default_rng(1)
    print(f"{'model':38} {'kernels':>9} {'opfuse ms':>10} {'ORT ms':>10} {'ORT/opfuse':>10} "
          f"{'torch ms':>9} {'torch/opfuse':>12}  max|err|"
          + (f" {'unfused ms':>10} {'unf/fused':>9}" if a.unfused else "")
          + (f" {'OpenVINO ms':>11} {'OV/opfuse':>9}" if a.openvino else ""))
    for path in a.models:
        probe = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds, bounds = {}, None
        for i in probe.get_inputs():
            if i.type == "tensor(float)":
                feeds[i.name] = rng.uniform(-1, 1, size=i.shape).astype(np.float32)
            else:  # token ids, masks: integers where opfuse says they index ([0, n))
                dtype = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}[i.type]
                bounds = bounds if bounds is not None else integer_bounds(a.opfuse, path)
                if i.name not in bounds:
                    raise SystemExit(f"{path}: opfuse check gives no range for integer input {i.name}")
                feeds[i.name] = rng.integers(0, bounds[i.name], size=i.shape).astype(dtype)
        t_ort, want = ort_time(path, feeds, a.reps)
        t_ov = None
        if a.openvino:
            t_ov, ov_outs, ov_what = openvino_time(path, feeds, a.reps)
            ov_ok = all(np.allclose(ov_outs[k].reshape(w.shape), w, rtol=1e-4, atol=2e-4)
                        for k, w in want.items() if k in ov_outs)
        with tempfile.TemporaryDirectory() as work:
            t_opf, (kernels, ops), rewrites = opfuse_time(a.opfuse, path, feeds, a.reps, work,
                                                          a.check)
            t_unf = None
            if a.unfused:
                # The same emitter on the unfused plan; fused and unfused alternate.
                unf_plan = os.path.join(work, "unfused.plan.json")
                subprocess.run([a.opfuse, "plan", path, "--no-fusion", "--json", unf_plan],
                               capture_output=True, check=True)
                fused_t, unf_t = [t_opf], []
                for r in range(a.unfused):
                    unf_t.append(opfuse_time(a.opfuse, path, feeds, a.reps, work, plan=unf_plan)[0])
                    if r + 1 < a.unfused:
                        fused_t.append(opfuse_time(a.opfuse, path, feeds, a.reps, work)[0])
                t_opf, t_unf = statistics.median(fused_t), statistics.median(unf_t)
                # The outputs compared below are the fused plan's, rerun last.
                opfuse_time(a.opfuse, path, feeds, 1, work)
            err, ok = 0.0, True
            for name, w in want.items():
                got = np.load(os.path.join(work, name + ".npy")).reshape(w.shape)
                diff = np.abs(got - w)
                err = max(err, float(diff.max()))
                ok = ok and bool(np.all(diff <= 2e-4 + 1e-4 * np.abs(w)))
        bad += 0 if ok else 1
        name = os.path.basename(path)
        row = {"model": name, "kernels": int(kernels), "ops": int(ops),
               "opfuse_s": t_opf, "onnxruntime_s": t_ort, "ort_over_opfuse": t_ort / t_opf,
               "max_abs_error": err, "match": ok, "rewrites": rewrites}
        if t_unf is not None:
            row["opfuse_unfused_s"] = t_unf
            row["unfused_over_fused"] = t_unf / t_opf
        if t_ov is not None:
            # An OpenVINO whose outputs differ from ONNX Runtime's is reported, never a time to
            # beat: it computed something else.
            row.update(openvino_s=t_ov, openvino_over_opfuse=t_ov / t_opf, openvino=ov_what,
                       openvino_matches_ort=ov_ok)
        torch_col = f"{'-':>9} {'-':>12}"
        if name in eager:  # the module PyTorch exported, run eagerly (its own weights)
            row["pytorch_eager_s"] = eager[name]
            row["torch_over_opfuse"] = eager[name] / t_opf
            torch_col = f"{eager[name] * 1e3:9.4f} {eager[name] / t_opf:12.2f}"
        rows.append(row)
        print(f"{name:38} {kernels:>4}/{ops:<4} {t_opf*1e3:10.4f} {t_ort*1e3:10.4f} "
              f"{t_ort/t_opf:10.2f} {torch_col}  {err:.2e}{'' if ok else '  MISMATCH'}"
              + (f" {t_unf*1e3:10.4f} {t_unf/t_opf:9.2f}" if t_unf is not None else "")
              + (f" {t_ov*1e3:11.4f} {t_ov/t_opf:9.2f}{'' if ov_ok else ' OV-MISMATCH'}"
                 if t_ov is not None else ""))
    with open(a.out, "w") as f:
        json.dump({"onnxruntime": ort.__version__, "threads": 2, "results": rows}, f, indent=2)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
