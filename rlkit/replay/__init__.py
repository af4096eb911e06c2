"""Replay: uniform and prioritized buffers, the sum tree, n-step windows."""
