"""Reverb's ``reverb.platform`` package path, kept for programs that import
``checkpointers_lib`` from it."""
