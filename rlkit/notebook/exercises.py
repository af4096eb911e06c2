"""Running the notebooks' exercise checks.

Each coding exercise in a notebook is a stub cell (a function whose body raises
``NotImplementedError``) followed by a check cell that compares the learner's function with
rlkit's own version on hand-made numbers, through :func:`run_check`. A notebook that is run top
to bottom with the stubs unfilled (as CI runs it) reports "not attempted yet" and carries on.
``tests/test_exercises.py`` fills every stub with its solution from ``notebooks/solutions/``
and runs the checks with :data:`STRICT` set, so an exercise whose check or solution breaks
fails the test suite.
"""

from __future__ import annotations

from collections.abc import Callable

#: When true (the solutions test sets it), a check that fails or is not attempted raises.
STRICT = False


def run_check(name: str, check: Callable[[], None]) -> None:
    """Run ``check()`` and say how the exercise stands, in one printed line. (It returns
    nothing: a check cell ends with this call, and a returned ``False`` would show as the
    cell's ``Out``, which reads like a failed check before the exercise is even tried.)

    Args:
        name: The exercise's name, shown in the message.
        check: Calls the learner's function on hand-made inputs and ``assert``s that the
            result matches rlkit's; raises ``NotImplementedError`` while the stub is unfilled.
    """
    try:
        check()
    except NotImplementedError:
        if STRICT:
            raise
        print(f"{name}: not attempted yet. Fill in the stub above, run it, then this cell.")
        return
    except AssertionError as error:
        if STRICT:
            raise
        print(f"{name}: not right yet. {error}")
        return
    print(f"{name}: correct.")
