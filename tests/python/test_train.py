"""atto.train against `atto train`: the same configuration and seed give the same bits."""
import json

import pytest

import atto
from conftest import TINY_KEYS


def last_losses(run):
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [d["train_loss"] for d in lines if "train_loss" in d]
    val = [d["val_loss"] for d in lines if "val_loss" in d]
    return train[-1], val[-1]


def test_train_equals_atto_train(run_dir, work, names):
    seen = []
    r = atto.train(data=names, out=work / "py", threads=1, progress=seen.append, **TINY_KEYS)
    assert isinstance(r, atto.TrainResult)
    assert (r.steps, r.interrupted, r.metric) == (60, False, "val_loss")
    assert (work / "py" / "model.safetensors").read_bytes() == (run_dir / "model.safetensors").read_bytes()
    assert last_losses(work / "py") == last_losses(run_dir)
    # progress: every logged step (log_every 10) and evaluation (eval_every 30)
    assert [p.step for p in seen] == [10, 20, 30, 40, 50, 60]
    assert [p.step for p in seen if p.val_loss is not None] == [30, 60]
    assert all(isinstance(p, atto.Progress) and p.total_steps == 60 for p in seen)
    assert r.best_score == pytest.approx(seen[-1].best_score)
    with atto.Model(work / "py") as m:
        assert m.info["config"]["model"]["d_model"] == 32


def test_stop_and_resume_equals_one_run(run_dir, work, names):
    out = work / "stopped"
    r = atto.train(data=str(names), out=str(out), threads=1, progress=lambda p: p.step < 30, **TINY_KEYS)
    assert r.interrupted and 30 <= r.steps < 60  # it ends after the step under way
    r = atto.train(out=out, resume=True, threads=1)
    assert not r.interrupted and r.steps == 60
    assert (out / "model.safetensors").read_bytes() == (run_dir / "model.safetensors").read_bytes()


def test_callback_exception_stops_and_is_raised(work, names):
    class Boom(Exception):
        pass

    def progress(p):
        if p.step == 20:
            raise Boom("from the callback")

    with pytest.raises(Boom, match="from the callback"):
        atto.train(data=names, out=work / "boom", threads=1, progress=progress, **TINY_KEYS)
    assert (work / "boom" / "train_state.safetensors").exists()  # stopped with its state saved


def test_force_and_existing_run(work, names, run_dir):
    with pytest.raises(atto.Error, match="run"):
        atto.train(data=names, out=run_dir, threads=1, **TINY_KEYS)
    r = atto.train(data=names, out=work / "forced", threads=1, force=True, steps=10, d_model=16, n_heads=2,
                   n_layers=1)
    assert r.steps == 10


def test_example_script(cli, run_dir, work, names):
    """examples/python/train_and_generate.py: atto train's weights, atto sample's and atto score's output."""
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "python" / "train_and_generate.py"
    out = work / "example"
    r = subprocess.run([sys.executable, example, "train", names, out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "step 60/60  train loss" in r.stdout
    assert (out / "model.safetensors").read_bytes() == (run_dir / "model.safetensors").read_bytes()
    want = cli("sample", "--model", out, "-n", "10", "--seed", "42").stdout.splitlines()
    assert r.stdout.splitlines()[-10:] == want
    r = subprocess.run([sys.executable, example, "score", run_dir, "mari", "jo"], capture_output=True, text=True)
    want = [l for l in cli("score", "--model", run_dir, "mari", "jo").stdout.splitlines()
            if l.startswith(("mari", "jo", "  total -log p"))]
    assert r.stdout.splitlines() == want
    r = subprocess.run([sys.executable, example, "score", run_dir, "ma ri"], capture_output=True, text=True)
    assert r.returncode == 1 and "unknown character ' '" in r.stderr


def test_ctrl_c_stops_training_with_its_state_saved(work, names):
    import _thread
    import threading

    seen = []

    def progress(p):
        seen.append(p.step)
        if p.step == 20:
            threading.Thread(target=_thread.interrupt_main).start()

    with pytest.raises(KeyboardInterrupt):
        atto.train(data=names, out=work / "ctrl_c", threads=1, progress=progress, **dict(TINY_KEYS, steps=5000))
    assert seen[-1] < 5000 and (work / "ctrl_c" / "train_state.safetensors").exists()
