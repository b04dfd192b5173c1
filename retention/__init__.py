"""Retention policies (time, size, log start offset) as a pure plan, and the code that applies it."""
