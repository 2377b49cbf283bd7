"""Verbose mode: the "einjit" logger reports plans built, kernels and loop nests generated
(primitive, shapes, ISA, bytes, time) and cache misses (INFO) and hits (DEBUG);
EINJIT_VERBOSE turns a stderr handler on."""

import io
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import einjit
from einjit import log
from einjit.codegen import compile_operation
from einjit.primitives import _cache as kernel_cache

REPO = Path(__file__).resolve().parents[2]


def _messages(caplog, level=None):
    return [r.getMessage() for r in caplog.records
            if r.name == "einjit" and (level is None or r.levelno == level)]


@pytest.mark.native
def test_a_new_kernel_is_reported_once_then_hits(caplog):
    caplog.set_level(logging.DEBUG, logger="einjit")
    kernel_cache.clear()
    einjit.brgemm(24, 5, 7, 3)
    einjit.brgemm(24, 5, 7, 3)
    info = _messages(caplog, logging.INFO)
    generated = [m for m in info if m.startswith("generated brgemm")]
    assert len(generated) == 1
    match = re.fullmatch(r"generated brgemm 24 5 7 3 for (\S+): (\d+) bytes in ([\d.]+) ms",
                         generated[0])
    assert match, generated
    kernel = einjit.brgemm(24, 5, 7, 3)
    assert match[1] == kernel.target.name and int(match[2]) == len(kernel.code)
    assert [m for m in info if m.startswith("kernel cache miss")] == [
        f"kernel cache miss: ('brgemm', (24, 5, 7, 3), '{kernel.target.name}')"]
    hits = [m for m in _messages(caplog, logging.DEBUG) if m.startswith("kernel cache hit")]
    assert len(hits) == 2


def test_foreign_isa_and_unary_kernels_are_reported(caplog):
    caplog.set_level(logging.INFO, logger="einjit")
    kernel_cache.clear()
    kernel = einjit.unary("relu", 13, 9, trans_b=True, isa="aarch64")
    (line,) = [m for m in _messages(caplog) if m.startswith("generated unary")]
    assert line.startswith("generated unary relu 13 9 True for aarch64:neon: "
                           f"{len(kernel.code)} bytes")
    assert not [m for m in _messages(caplog) if "cache hit" in m]   # INFO: no hits


@pytest.mark.native
def test_plans_nests_and_plan_cache(caplog):
    caplog.set_level(logging.DEBUG, logger="einjit")
    compile_operation.cache_clear()
    einjit.einsum.__globals__["_PLANS"].clear()
    rng = np.random.default_rng(1)
    a = rng.standard_normal((9, 11)).astype(np.float32)
    b = rng.standard_normal((11, 13)).astype(np.float32)
    for _ in range(3):
        np.testing.assert_allclose(einjit.einsum("ij,jk->ik", a, b), a @ b, rtol=1e-5,
                                   atol=1e-5)
    messages = _messages(caplog)
    plans = [m for m in messages if m.startswith("plan [")]
    assert len(plans) == 1
    assert "sizes [9, 11, 13]" in plans[0] and "1 steps" in plans[0] and "gemm" in plans[0]
    nests = [m for m in messages if m.startswith("generated loop nest")]
    assert len(nests) == 1 and re.search(r": \d+ bytes in [\d.]+ ms$", nests[0])
    assert len([m for m in messages if m.startswith("plan cache miss")]) == 1
    assert len([m for m in messages if m.startswith("plan cache hit")]) == 2


def test_quiet_without_configuration(caplog):
    caplog.set_level(logging.WARNING, logger="einjit")
    kernel_cache.clear()
    einjit.binary("max", 5, 6)
    assert _messages(caplog) == []


def test_configure_writes_to_a_stream():
    stream = io.StringIO()
    logger = logging.getLogger("einjit")
    level = logger.level
    handler = log.configure(1, stream)
    try:
        kernel_cache.clear()
        einjit.binary("sub", 7, 3)
        einjit.binary("sub", 7, 3)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    lines = stream.getvalue().splitlines()
    assert any(line.startswith("einjit: generated binary sub 7 3 for ") for line in lines)
    assert not any("hit" in line for line in lines)
    assert log.configure(0) is None


@pytest.mark.parametrize("value", ["yes", "3", "-1"])
def test_bad_setting_is_refused(value):
    with pytest.raises(log.VerboseSettingError, match="EINJIT_VERBOSE"):
        log.verbose_level({"EINJIT_VERBOSE": value})
    with pytest.raises(ValueError):
        log.configure(5)


@pytest.mark.native
def test_environment_variable_in_a_fresh_process():
    program = ("import numpy as np, einjit\n"
               "a = np.ones((4, 6), np.float32)\n"
               "b = a.T.copy()\n"
               "einjit.einsum('ij,jk->ik', a, b); einjit.einsum('ij,jk->ik', a, b)")
    env = dict(os.environ, EINJIT_VERBOSE="2", PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert any(line.startswith("einjit: plan [") for line in lines)
    assert any(line.startswith("einjit: generated loop nest") for line in lines)
    assert any(line.startswith("einjit: plan cache hit") for line in lines)
    quiet = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                           env=dict(env, EINJIT_VERBOSE="0"), timeout=120)
    assert quiet.returncode == 0 and quiet.stderr == ""
