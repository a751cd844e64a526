"""opfuse fused vs ONNX Runtime (CPU, every graph optimisation on, 2 threads) on ONNX models.

For each model: the same random inputs go to `opfuse run` (the fused plan, JIT-compiled, the
schedule the AOT build uses) and to an ONNX Runtime session; outputs are compared within
opfuse's graph tolerance (rtol 1e-4, atol 2e-4 times the largest output where it passes 1:
tolerance.py) and both are timed (median of --reps runs, after warm-up). ONNX Runtime is timed
through I/O binding, which keeps Python's per-call cost out of the loop as far as the Python
API allows (a few microseconds remain).

With --rounds N every column (ONNX Runtime, OpenVINO, opfuse fused, opfuse unfused) is timed
once a round, in turn, N rounds, and each column's median over the rounds is reported: on a
shared machine whose speed drifts by tens of percent within minutes, columns timed minutes
apart are not comparable, columns alternated are. With --aot opfuse's columns run the AOT
libraries (`opfuse compile --shared`, then `opfuse run --library`), built once, not the JIT.

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

from tolerance import within


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


def ort_timer(path, feeds, reps):
    """A session of the model: (a function timing it, median of `reps` calls; its outputs)."""
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
    names = [o.name for o in sess.get_outputs()]
    return (lambda: median_time(lambda: sess.run_with_iobinding(binding), reps)), dict(zip(names, outs))


def openvino_timer(path, feeds, reps):
    """OpenVINO's CPU plugin as its users run a single request: the latency hint, 2 inference
    threads. Its precision hint is f32: on CPUs with bf16 (AVX512_BF16, AMX) OpenVINO would
    otherwise compute in bf16, a different answer from every other column. Returns a function
    timing it (median), the outputs, and what ran (version, precision, threads)."""
    import openvino as ov
    core = ov.Core()
    compiled = core.compile_model(path, "CPU", {"PERFORMANCE_HINT": "LATENCY",
                                                "INFERENCE_NUM_THREADS": 2,
                                                "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    request.infer(feeds)
    outs = {o.get_any_name(): request.get_tensor(o).data.copy() for o in compiled.outputs}
    precision = compiled.get_property("INFERENCE_PRECISION_HINT")
    what = (f"OpenVINO {ov.get_version().split('-')[0]} CPU, "
            f"{getattr(precision, 'get_type_name', lambda: str(precision))()}, "
            f"{compiled.get_property('INFERENCE_NUM_THREADS')} threads, latency hint")
    return (lambda: median_time(lambda: request.infer(feeds), reps)), outs, what


def integer_bounds(opfuse, path):
    """The values each integer input may take, from `opfuse check` (the tables it indexes)."""
    log = subprocess.run([opfuse, "check", path], capture_output=True, text=True, check=True).stdout
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"input (\S+) .* values in \[0, (\d+)\)", log)}


def opfuse_time(opfuse, path, feeds, reps, work, check=False, plan=None, library=None):
    args = [opfuse, "run", path, "--reps", str(reps), "--outputs", work] + (["--check"] if check else [])
    if plan:
        args += ["--plan", plan]
    if library:
        args += ["--library", library]
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
    kernels = kernels.groups() if kernels else None
    if library:  # the library's plan, written beside it by `opfuse compile`
        with open(re.sub(r"\.so$", ".plan.json", library)) as f:
            summary = json.load(f)["summary"]
        kernels = (str(summary["kernels_fused"]), str(summary["kernels_unfused"]))
    rewrites = [l for l in log.splitlines() if l.startswith("canonicalize:")]
    return float(m.group(1)) * 1e-3, kernels, rewrites


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opfuse", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--torch-eager", help="torch_eager.json of export_torch_blocks.py: a PyTorch "
                    "eager column for the models PyTorch exported")
    ap.add_argument("--check", action="store_true",
                    help="also compare opfuse's outputs with its reference executor")
    ap.add_argument("--unfused", action="store_true",
                    help="also time opfuse's unfused plan (every op its own kernel)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every column once a round, in turn, this many rounds; each "
                         "column's median over the rounds is reported")
    ap.add_argument("--aot", action="store_true",
                    help="opfuse's columns run AOT libraries (opfuse compile --shared, built "
                         "once) through `opfuse run --library`, not the JIT")
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
        time_ort, want = ort_timer(path, feeds, a.reps)
        time_ov = None
        if a.openvino:
            time_ov, ov_outs, ov_what = openvino_timer(path, feeds, a.reps)
            ov_ok = all(within(ov_outs[k].reshape(w.shape), w)
                        for k, w in want.items() if k in ov_outs)
        with tempfile.TemporaryDirectory() as work:
            libs = {}
            if a.aot:  # built once; every round runs them
                for strategy in ["fused"] + (["unfused"] if a.unfused else []):
                    d = os.path.join(work, strategy)
                    built = subprocess.run([a.opfuse, "compile", path, "--shared", "--strategy",
                                            strategy, "--out", d, "--name", "net"],
                                           capture_output=True, text=True)
                    if built.returncode != 0:
                        sys.stdout.write(built.stdout + built.stderr)
                        raise SystemExit(f"{path}: opfuse compile ({strategy}) failed")
                    libs[strategy] = os.path.join(d, "net.so")
            unf_plan = None
            if a.unfused and not a.aot:  # the same emitter on the unfused plan
                unf_plan = os.path.join(work, "unfused.plan.json")
                subprocess.run([a.opfuse, "plan", path, "--no-fusion", "--json", unf_plan],
                               capture_output=True, check=True)
            # Rounds: every column once a round, in turn. The fused plan's first run also
            # checks it (--check) and leaves its outputs in `work`; the unfused plan writes
            # its own elsewhere.
            unf_out = os.path.join(work, "unfused_outputs")
            os.makedirs(unf_out)
            times = {"ort": [], "ov": [], "fused": [], "unfused": []}
            for r in range(a.rounds):
                times["ort"].append(time_ort())
                if time_ov:
                    times["ov"].append(time_ov())
                t, k, rw = opfuse_time(a.opfuse, path, feeds, a.reps, work, a.check and r == 0,
                                       library=libs.get("fused"))
                times["fused"].append(t)
                if r == 0:
                    (kernels, ops), rewrites = k, rw
                if a.unfused:
                    times["unfused"].append(opfuse_time(a.opfuse, path, feeds, a.reps, unf_out,
                                                        plan=unf_plan,
                                                        library=libs.get("unfused"))[0])
            err, ok = 0.0, True
            for name, w in want.items():
                got = np.load(os.path.join(work, name + ".npy")).reshape(w.shape)
                diff = np.abs(got - w)
                err = max(err, float(diff.max()))
                ok = ok and within(got, w)
        med = {k: statistics.median(v) if v else None for k, v in times.items()}
        t_ort, t_ov, t_opf, t_unf = med["ort"], med["ov"], med["fused"], med["unfused"]
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
        json.dump({"onnxruntime": ort.__version__, "threads": 2, "rounds": a.rounds,
                   "opfuse": "AOT libraries (opfuse compile --shared)" if a.aot else "JIT",
                   "results": rows}, f, indent=2)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
