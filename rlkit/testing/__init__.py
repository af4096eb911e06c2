"""Test fixtures that must be importable by Ray worker processes (so they live in the package),
but are never loaded by ordinary use: nothing in rlkit imports this package."""
