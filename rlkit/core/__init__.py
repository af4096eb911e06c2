"""The bottom layer: data shapes and messages, shared arithmetic, config validation, the
run history and the result every run extends, network helpers. Imports nothing above it."""
