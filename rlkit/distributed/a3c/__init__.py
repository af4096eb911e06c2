"""A2C and A3C through a gradient server (notebook 05): roles and drivers."""
