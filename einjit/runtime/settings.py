"""Integer settings read from EINJIT_* environment variables, all checked one way: unset or
empty means the default, anything but an integer >= the least allowed is an error naming the
variable and its value."""

from __future__ import annotations

import os


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
