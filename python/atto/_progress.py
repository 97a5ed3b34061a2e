"""train()'s progress display: a tqdm bar on stderr (or a notebook widget), or, without tqdm, one
line of text on stderr that rewrites itself.

    display = make(True, resume=False)   # None: show nothing
    display.update(p)           # at each of train()'s progress reports (atto.Progress)
    display.close(steps)        # at the end: steps done (None when the run failed)

make(None) (train()'s default) shows a tqdm bar when tqdm can be imported and stderr is a terminal
or the code runs in a Jupyter kernel; make(True) always shows progress (tqdm's bar, else the text
line); make(False) shows nothing.
"""
from __future__ import annotations

import importlib.util
import sys
from typing import Any, Optional


def _tqdm() -> Any:
    """tqdm's class (the notebook widget's in a Jupyter kernel that has ipywidgets), or None."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    if in_jupyter() and importlib.util.find_spec("ipywidgets") is not None:  # tqdm.notebook draws with it
        try:
            from tqdm.notebook import tqdm as notebook_tqdm

            return notebook_tqdm
        except ImportError:
            pass  # the text bar also shows in a notebook's output
    return tqdm


def in_jupyter() -> bool:
    """Whether this runs in a Jupyter kernel (notebook, lab, VS Code, Colab)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def _stderr_is_terminal() -> bool:
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return False


class _Bar:
    """A tqdm bar over the run's steps, with the last losses as its postfix. The first report
    (after log_every steps) makes it: a new run's bar starts at step 0 when training started
    (its clock set back by the report's elapsed time, so that the rate and the time left are
    right from the first report); a resumed run's at the first report's step."""

    def __init__(self, tqdm: Any, resume: bool) -> None:
        self._tqdm = tqdm
        self._resume = resume
        self._bar: Any = None
        self._postfix: dict = {}

    def update(self, p: Any) -> None:
        if self._bar is None:
            self._bar = self._tqdm(total=p.total_steps, initial=p.step if self._resume else 0, unit="step",
                                   desc="atto.train", file=sys.stderr, dynamic_ncols=True, leave=True,
                                   mininterval=0)
            if not self._resume:
                self._bar.start_t -= p.elapsed_s
                self._bar.last_print_t -= p.elapsed_s
        self._postfix["loss"] = f"{p.train_loss:.4f}"
        if p.val_loss is not None:
            self._postfix["val_loss"] = f"{p.val_loss:.4f}"
        self._bar.set_postfix(self._postfix, refresh=False)
        self._bar.update(max(0, p.step - self._bar.n))

    def close(self, steps: Optional[int]) -> None:
        if self._bar is None:
            return
        if steps is not None and steps > self._bar.n:
            self._bar.update(steps - self._bar.n)
        self._bar.close()


class _Line:
    """Without tqdm: "atto.train: step 30/60  loss 2.3105  val_loss 2.4012" on one stderr line,
    rewritten at each report (carriage return), ended by a newline."""

    def __init__(self) -> None:
        self._width = 0
        self._total = 0
        self._val: Optional[float] = None
        self._loss: Optional[float] = None
        self._step = -1

    def _show(self, step: int) -> None:
        text = f"atto.train: step {step}/{self._total}"
        if self._loss is not None:
            text += f"  loss {self._loss:.4f}"
        if self._val is not None:
            text += f"  val_loss {self._val:.4f}"
        sys.stderr.write("\r" + text.ljust(self._width))
        sys.stderr.flush()
        self._width = max(self._width, len(text))
        self._step = step

    def update(self, p: Any) -> None:
        self._total, self._loss = p.total_steps, p.train_loss
        if p.val_loss is not None:
            self._val = p.val_loss
        self._show(p.step)

    def close(self, steps: Optional[int]) -> None:
        if self._step < 0:
            return
        if steps is not None and steps != self._step:
            self._show(steps)
        sys.stderr.write("\n")
        sys.stderr.flush()


def make(progress: Optional[bool], resume: bool) -> Any:
    """The display for train(progress=..., resume=...): None (show nothing), or an object with
    update(p: Progress) and close(steps: Optional[int])."""
    if progress is False:
        return None
    tqdm = _tqdm()
    if progress is None and (tqdm is None or not (_stderr_is_terminal() or in_jupyter())):
        return None
    return _Bar(tqdm, resume) if tqdm is not None else _Line()
