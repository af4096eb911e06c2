"""What a Ctrl-C (``SIGINT``, JupyterLab's stop button) does to a training run: save a
checkpoint on the way out (:func:`save_on_interrupt`), and never in the middle of bookkeeping
that a checkpoint must see whole (:func:`interrupts_deferred`)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def save_on_interrupt(save: Callable[[], Path | None], env_steps: Callable[[], int]
                      ) -> Iterator[None]:
    """On ``KeyboardInterrupt`` (JupyterLab's stop button), save a checkpoint, say where, and
    let the interrupt through. A save that fails is reported, not raised: the interrupt is what
    the person asked for.

    A second Ctrl-C while the checkpoint is being written (a person who presses stop twice)
    does not cut the save short: it is held until the file is written, and said at once
    (:func:`_while_saving`). Off the main thread, where no handler can be set, a second
    interrupt does stop the save, and the message says that no checkpoint was saved."""
    try:
        yield
    except KeyboardInterrupt:
        try:
            with _while_saving():
                path = save()
            if path is not None:
                print(f"interrupted at env step {env_steps()}; checkpoint saved to {path}")
        except KeyboardInterrupt:
            print("interrupted again while saving; no checkpoint saved")
        except Exception as error:  # noqa: BLE001 - the interrupt is what matters
            print(f"interrupted; no checkpoint saved ({type(error).__name__}: {error})")
        raise


@contextmanager
def _while_saving() -> Iterator[None]:
    """Inside the block, a Ctrl-C is answered with a line ("still saving") and dropped: the
    first one is already stopping the run, and the save must end whole. Where no handler can
    be set (off the main thread, or a handler not set from Python), it does nothing."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is None):
        yield
        return

    def still_saving(signum, frame) -> None:
        print("still saving the checkpoint: the run stops as soon as it is written")

    previous = signal.signal(signal.SIGINT, still_saving)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold back a Ctrl-C (``SIGINT``, JupyterLab's stop button) that arrives inside the block
    until the block has ended, then deliver it.

    Wraps bookkeeping that a checkpoint must see whole: transitions handed to the buffer and
    the env-step count that says how many there are (an interrupt between the two would save
    a checkpoint whose count and buffer disagree). The one-process loops wrap a whole step in
    it, so their checkpoints fall between two steps and resume bit-identically. Outside the
    main thread (where Python delivers signals), or where the handler was not set from Python,
    it does nothing.

    Cost: two ``sigaction`` calls, about 8 us per block on the 2-core CI machine. The loops
    enter it once per fragment (single process: every ``train_every`` env steps, 0.3-0.6% of
    a DQN or SAC step there; Ray driver: once per 100-step fragment).
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is None):
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            signal.raise_signal(signal.SIGINT)  # now, through the handler that was there
