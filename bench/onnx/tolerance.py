"""The benchmarks' check of a network's outputs against another runtime's or PyTorch's."""
import numpy as np


def within(got, want):
    """opfuse's graph tolerance, |got - want| <= atol + rtol |want| (rtol 1e-4, atol 2e-4), its
    absolute part scaled by the output's largest magnitude where that passes 1: f32 sums round
    in proportion to their terms, and random-weight networks make large outputs (ResNet-50's
    logits reach ~600, where 2e-4 is 3e-7 of them: opfuse, ONNX Runtime and PyTorch differ from
    each other by 3e-4 to 9e-4 there)."""
    want = np.asarray(want, dtype=np.float64)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    return bool(np.all(np.abs(np.asarray(got, dtype=np.float64) - want)
                       <= 2e-4 * scale + 1e-4 * np.abs(want)))
