"""The optimizer: passes, each a pure function from a TensorOperation to a new one.

    fuse(op, min_size)        fuse small dims that continue each other in every tensor
    split(op, max_size, min_size)  split dims too large for a kernel block
    identify(op)              choose the prim dims and the primitive
    reorder(op)               order the seq loops for locality
    shared(op, num_threads)   share the outer loops among threads
    optimize(op, num_threads=None, **pass_options)   all of them, in that order
    peel(op, num_threads)     a contraction whose kernel dims split cannot cut into large
                              blocks, as parts over ranges of those dims (before optimize)

Every pass keeps what the op computes (the reference executor gives the same result, up to
the order of the k sums); the tests check that on random operations.
"""

from einjit.passes.fuse import fuse
from einjit.passes.identify import identify
from einjit.passes.optimize import optimize
from einjit.passes.reorder import reorder
from einjit.passes.shared import shared
from einjit.passes.split import split

__all__ = ["fuse", "split", "identify", "reorder", "shared", "optimize"]
