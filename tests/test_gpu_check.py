"""``make gpu-check`` (scripts/gpu-check) on a machine without a CUDA device: it says so in one line and runs nothing
(exit status 2), so a CPU machine never mistakes it for a pass."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_check_refuses_a_python_without_cuda():
    env = {**os.environ, "GPU_PY": sys.executable, "CUDA_VISIBLE_DEVICES": ""}  # no device, on any machine
    res = subprocess.run([str(ROOT / "scripts" / "gpu-check")], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2, res
    assert "no CUDA device visible" in res.stderr and sys.executable in res.stderr
    assert "==" not in res.stdout  # no step ran
