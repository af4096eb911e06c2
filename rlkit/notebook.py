"""Small helpers for the notebooks."""

from __future__ import annotations

import inspect
from typing import Any


def show_source(obj: Any) -> None:
    """Display the source of an rlkit function or class, syntax-highlighted, in a notebook.

    The notebooks explain each piece next to the code that runs it; this shows that code
    from the package itself, so the text and the library cannot drift apart.
    """
    from IPython.display import Code, display

    display(Code(inspect.getsource(obj), language="python"))
