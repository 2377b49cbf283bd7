"""Verbose mode: what einjit builds, reported through `logging` (logger "einjit").

EINJIT_VERBOSE=1 (read at import) attaches a stderr handler to the "einjit" logger at INFO:
each plan built (its tree, steps and primitives), each kernel and loop nest generated
(primitive, shapes, ISA, bytes, generation time) and each cache miss. EINJIT_VERBOSE=2 goes
down to DEBUG and adds every cache hit (one line per cached einsum call). Another value warns
(einjit.settings.SettingWarning) and leaves verbose mode off. Without the
variable einjit logs the same records, which stay silent unless the application configures
the "einjit" logger (logging.getLogger("einjit").setLevel(logging.INFO) and a handler).

The helpers below are the one-line calls the rest of einjit makes; each returns at once when
its level is off, so they cost a level check on the paths they sit on.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from einjit.errors import EinjitError
from einjit.settings import at_import

logger = logging.getLogger("einjit")
ENV = "EINJIT_VERBOSE"
_LEVELS = {0: None, 1: logging.INFO, 2: logging.DEBUG}


class VerboseSettingError(EinjitError, ValueError):
    """EINJIT_VERBOSE set to something other than 0, 1 or 2."""


def verbose_level(environ: Any = None) -> int:
    """EINJIT_VERBOSE as 0, 1 or 2 (unset or empty: 0)."""
    value = (os.environ if environ is None else environ).get(ENV, "").strip()
    if value == "":
        return 0
    if value not in ("0", "1", "2"):
        raise VerboseSettingError(f"{ENV}={value!r} is not a verbosity; expected 0 (quiet), 1 "
                                  f"(plans, generated code, cache misses) or 2 (also hits)")
    return int(value)


def configure(level: int | None = None, stream: Any = None) -> logging.Handler | None:
    """Make the "einjit" logger print at `level` (0, 1, 2; default: EINJIT_VERBOSE) to
    `stream` (stderr). Returns the handler it attached (None for 0). Called once at import."""
    level = verbose_level() if level is None else level
    if level not in _LEVELS:
        raise VerboseSettingError(f"level={level!r} is not a verbosity; expected 0, 1 or 2")
    for handler in [h for h in logger.handlers if getattr(h, "einjit_verbose", False)]:
        logger.removeHandler(handler)
    if _LEVELS[level] is None:
        return None
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter("einjit: %(message)s"))
    handler.einjit_verbose = True
    logger.addHandler(handler)
    logger.setLevel(_LEVELS[level])
    return handler


def _shape(params: tuple) -> str:
    return " ".join(str(p) for p in params)


def kernel_generated(kind: str, params: tuple, target: Any, size: int, seconds: float) -> None:
    """A primitive was generated: brgemm (m, n, k, br_size), unary (op, m, n, trans_b),
    binary (op, m, n)."""
    if logger.isEnabledFor(logging.INFO):
        logger.info("generated %s %s for %s: %d bytes in %.3f ms", kind, _shape(params),
                    getattr(target, "name", target), size, 1e3 * seconds)


def nest_generated(op: Any, size: int, seconds: float) -> None:
    """A TensorOperation's loop nest (with its primitives) was generated."""
    if logger.isEnabledFor(logging.INFO):
        calls = "; ".join(call.describe().split(" on ")[0] for call in op.kernel_calls)
        sizes = "x".join(f"{d.size}{d.type}{d.exec_type[:2]}" for d in op.dims)
        logger.info("generated loop nest %s [%s] for %s: %d bytes in %.3f ms", sizes, calls,
                    op.target.name, size, 1e3 * seconds)


def plan_built(plan: Any) -> None:
    """A plan (einjit.frontend.plan.Plan) was built: its tree and each step's primitive."""
    if logger.isEnabledFor(logging.INFO):
        steps = []
        for step in plan.steps:
            main = [c for c in step.lowered.op.kernel_calls if c.role == "main"]
            steps.append(main[0].describe().split(" on ")[0].removeprefix("main: ") if main
                         else step.lowered.op.prim_main)
        logger.info("plan %s sizes %s: %d steps (%s), %.4g MFLOP", plan.tree,
                    list(plan.tree.sizes), len(plan.steps), "; ".join(steps),
                    plan.tree.flops() / 1e6)


def sliced_plan(slicing: Any) -> None:
    """A plan was sliced to fit memory_limit (einjit.frontend.slicing.Slicing)."""
    if logger.isEnabledFor(logging.INFO):
        logger.info("%s", slicing.text().replace("\n", "; "))


def cache_miss(cache: str, key: Any) -> None:
    if logger.isEnabledFor(logging.INFO):
        logger.info("%s cache miss: %s", cache, _key_text(key))


def cache_hit(cache: str, key: Any) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s cache hit: %s", cache, _key_text(key))


def _key_text(key: Any) -> str:
    text = repr(key)
    return text if len(text) <= 160 else text[:157] + "..."


configure(at_import(verbose_level, 0))
