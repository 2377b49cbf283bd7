"""Shared test setup. Tests live in one folder per layer (backends/<isa>, runtime, primitives,
ir, passes, frontend, ...); helpers they share are in support.py beside this file, which pytest
puts on sys.path because this conftest.py lives here."""
