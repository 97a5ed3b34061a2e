"""examples/python/notebook.py, run as a script with a tiny configuration: it trains, samples and
saves its figures (attention maps and the embeddings' PCA) as one PNG file."""
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "python" / "notebook.py"


def test_notebook_example_saves_its_figures(work, names):
    pytest.importorskip("matplotlib")
    png = work / "notebook.png"
    cmd = [sys.executable, SCRIPT, "--data", names, "--png", png, "--run", work / "notebook", "--steps", "20",
           "--d-model", "16", "--n-layers", "2", "--n-heads", "2", "--threads", "1", "--text", "mariel"]
    r = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"training data: {names} (300 lines)")
    assert lines[1].startswith("20 steps in ")
    assert len(lines) == 2 + 10 + 1 and lines[-1] == f"figures: {png}"  # ten samples between
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"  # a PNG file
    width, height = struct.unpack(">II", data[16:24])  # its IHDR chunk
    assert width >= 600 and height >= 600
    assert len(data) > 20_000  # a drawing, not an empty canvas
