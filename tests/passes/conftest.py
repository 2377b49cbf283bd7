"""The pass tests share the IR tests' helpers (oracle, random operations, the seeds' configs)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "ir"))
