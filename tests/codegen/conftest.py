"""The codegen tests share the IR tests' helpers (oracle, operand buffers, random operations)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "ir"))
