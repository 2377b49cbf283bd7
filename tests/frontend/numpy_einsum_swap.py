"""A pytest plugin (loaded with `-p numpy_einsum_swap`) that puts einjit.einsum in numpy's place
before any test module is imported, so a suite written for numpy.einsum calls einjit's.
einjit's own hand-overs still reach the real numpy.einsum."""

import sys

import numpy

import einjit

NUMPY_EINSUM = numpy.einsum


class _NumpyWithItsEinsum:
    """numpy as einjit's einsum module sees it: the real einsum, whatever numpy.einsum is."""

    einsum = staticmethod(NUMPY_EINSUM)

    def __getattr__(self, name):
        return getattr(numpy, name)


# sys.modules: the name einjit.einsum is the function, which hides its module
sys.modules["einjit.einsum"].np = _NumpyWithItsEinsum()
numpy.einsum = einjit.einsum
