"""A bad EINJIT_* setting read at import never makes `import einjit` fail: a SettingWarning
names the variable, its value, what is accepted and the default used instead (a fresh process
per setting, as a user sets one)."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from einjit.settings import SettingWarning, at_import

REPO = Path(__file__).resolve().parents[2]
PROGRAM = ("import numpy as np, einjit\n"
           "print(einjit.einsum('ij,jk->ik', np.ones((2, 3)), np.ones((3, 2))).sum())\n")


@pytest.mark.parametrize("name, value, accepted", [
    ("EINJIT_VERBOSE", "yes", "expected 0 (quiet), 1"),
    ("EINJIT_POOL_BYTES", "lots", "expected an integer >= 0"),
    ("EINJIT_KERNEL_CACHE_SIZE", "-1", "expected an integer >= 0"),
])
def test_a_bad_setting_warns_and_keeps_the_default(name, value, accepted):
    env = dict(os.environ, PYTHONPATH=str(REPO), EINJIT_VERBOSE="0")
    env[name] = value
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["12.0"]
    warning = [line for line in done.stderr.splitlines() if "SettingWarning" in line]
    assert len(warning) == 1, done.stderr
    assert f"{name}={value!r}" in warning[0] and accepted in warning[0]
    assert "using the default" in warning[0]
    assert "einjit:" not in done.stderr              # EINJIT_VERBOSE=yes leaves verbose mode off


def test_at_import_passes_good_values_and_only_value_errors_are_caught():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert at_import(lambda: 5, 1) == 5

    def bad():
        raise ValueError("EINJIT_X='y' is not valid")
    with pytest.warns(SettingWarning, match="EINJIT_X='y' is not valid; using the default 1"):
        assert at_import(bad, 1) == 1

    def broken():
        raise KeyError("a bug, not a setting")
    with pytest.raises(KeyError):
        at_import(broken, 1)
