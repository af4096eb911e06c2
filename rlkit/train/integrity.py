"""A checkpoint's fingerprint: torch does not check its archive's CRC when it loads a file, so
bytes damaged on disk or in transit can load as wrong numbers without a word. Each checkpoint
carries the SHA-256 of its contents, recomputed and compared before it is used."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import torch


def content_digest(tree: Any) -> str:
    """SHA-256 over ``tree``'s contents: every tensor's dtype, shape and bytes, and every other
    value's ``repr``, in a fixed order (dict keys sorted). The same contents give the same
    digest however the file was serialised."""
    digest = hashlib.sha256()

    def feed(node: Any) -> None:
        if isinstance(node, torch.Tensor):
            flat = node.detach().cpu().contiguous().reshape(-1)
            digest.update(f"T{node.dtype}{tuple(node.shape)}".encode())
            digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
        elif isinstance(node, np.ndarray):
            digest.update(f"A{node.dtype}{node.shape}".encode())
            digest.update(np.ascontiguousarray(node).tobytes())
        elif isinstance(node, dict):
            digest.update(b"{")
            for key in sorted(node, key=repr):
                digest.update(repr(key).encode())
                feed(node[key])
            digest.update(b"}")
        elif isinstance(node, list | tuple):
            digest.update(b"[")
            for item in node:
                feed(item)
            digest.update(b"]")
        else:
            digest.update(repr(node).encode())

    feed(tree)
    return digest.hexdigest()
