"""Settings read from EINJIT_* environment variables, all checked one way: unset or empty means
the default, anything else that is not a valid value is an error naming the variable, its
value and what is accepted. A setting read at import goes through `at_import`, which reports a
bad value as a SettingWarning and uses the default, so `import einjit` never fails on one."""

from __future__ import annotations

import os
import warnings
from typing import Callable, TypeVar

T = TypeVar("T")


class SettingWarning(UserWarning):
    """An EINJIT_* environment variable with a value einjit cannot use: the default is used."""


def int_setting(name: str, default: int, least: int, error: type[Exception],
                environ: dict | None = None) -> int:
    """The environment variable `name` as an integer >= `least`, or `default` if unset or
    empty; `error` (an exception class) for any other value."""
    value = (os.environ if environ is None else environ).get(name)
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = least - 1
    if number < least:
        raise error(f"{name}={value!r} is not valid: expected an integer >= {least}")
    return number


def at_import(read: Callable[[], T], default: T) -> T:
    """read() (a setting from the environment, raising ValueError for a bad value), or
    `default` with a SettingWarning that gives read's message and the default used."""
    try:
        return read()
    except ValueError as error:
        warnings.warn(f"{error}; using the default {default!r}", SettingWarning, stacklevel=2)
        return default
