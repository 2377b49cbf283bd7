"""The memory a caller and one native worker thread share to hand a loop nest over, and the
records from which the caller's run_tasks writes a step's tasks into the slots.

One slot per worker, two cache lines. The caller writes the first for each task and the
worker polls it; the worker writes the second when it finishes a task and the caller polls
it, so neither side's stores evict the line the other is polling until there is news:

    line 0, the caller's: SEQUENCE  the number of the latest task posted (the worker's futex)
                          FUNCTION  the nest's entry; 0 tells the worker to return
                          ARGUMENTS the nest's five uint64 arguments (in0, in1, out, begin, end)
                          SPINS     how many polls a side makes before it sleeps
    line 1, the worker's: DONE      the number of the latest task finished (the caller's futex)
                          WORKER_SLEEPS, CALLER_SLEEPS  1 while that side may be asleep in
                                    the kernel (the other side's cue to wake it: each flag is
                                    written only on the way into a sleep and out of it)
                          TAKEN     the number of the latest task taken, by the worker or by
                                    the caller that posted it

A side about to sleep sets its flag, fences, and reads the word it polls once more; the other
side stores that word, fences, and reads the flag: with both fences at least one of them sees
the other's store, so a sleeper is always woken and a side that polls is never woken.

Either side takes a task by an atomic compare-and-swap of TAKEN from the number before the
task's to the task's: the worker before it calls the function, the caller once its own task
is done. The caller then runs a task its worker has not taken (the worker, not yet scheduled
on a core another process holds, would keep the whole step waiting) and does not wait for
that slot. A worker that finds its task taken skips it and sleeps until the next: it was
late, most likely queued behind the caller on the caller's core, where polling would keep it
(the kernel's balancer moves a busy thread only after milliseconds), and a wake-up lets the
kernel place it on an idle core.

Each number is a uint64 whose value stays below 2**32: the Linux futex compares 32 bits (the
low half of a little-endian word), so the sequence numbers wrap at FUTEX_VALUES. A task of
function 0 is finished (done stored) without a call, and the worker then returns.

One call of run_tasks hands a whole step over: it reads each task from a record of
TASK_BYTES (the function, then where its first OPERAND_COUNT arguments lie in the call's
operand array, then its last two arguments), so a step's records are built once and a call
passes only its operands. Each backend generates the functions over slots
(generate_worker_loop, generate_run_tasks, generate_spin) and the claim of a nest's chunks
(generate_claim: a task's function where threads take chunks until none is left, so that a
faster thread takes more); einjit.codegen.workers runs them.
"""

from __future__ import annotations

from einjit.backends import LINE_BYTES

SEQUENCE = 0
FUNCTION = 8
ARGUMENTS = 16
ARGUMENT_COUNT = 5
SPINS = ARGUMENTS + 8 * ARGUMENT_COUNT
DONE = LINE_BYTES
WORKER_SLEEPS = DONE + 8
CALLER_SLEEPS = DONE + 16
TAKEN = DONE + 24
SLOT_BYTES = 2 * LINE_BYTES

TASK_FUNCTION = 0
TASK_OPERANDS = 8       # a byte offset into the call's operand array
TASK_BEGIN = 16         # the last two arguments (a nest's share: begin, end)
TASK_END = TASK_BEGIN + 8  # next to begin: a backend may load the two as a pair
TASK_BYTES = 32
OPERAND_COUNT = 3       # the arguments from the operand array (a nest's in0, in1, out)
assert OPERAND_COUNT + 2 == ARGUMENT_COUNT

# A nest's chunks that its threads claim one at a time (each backend's generate_claim): a
# table of uint64 words, its start on a cache line. Each share's chunks are numbered in a
# line of their own (every claim writes it); a thread claims from its own share first, in
# order, then from the shares after it, wrapping around, until it finds them all claimed.
CLAIM_FUNCTION = 0          # the nest's entry
CLAIM_SHARES = 8            # how many shares
# the address of the bounds (chunk i is [bounds[i], bounds[i + 1])), which start where the
# last share's line ends: a claim passing its lines wraps around there
CLAIM_BOUNDS = 16
# share s's line is at LINE_BYTES * (1 + s):
CLAIM_NEXT = 0              # the number of its next chunk to claim
CLAIM_END = 8               # the number past its last chunk

FUTEX_VALUES = 1 << 32
# Linux futex operations on a word only this process maps (<linux/futex.h>: FUTEX_WAIT and
# FUTEX_WAKE with FUTEX_PRIVATE_FLAG)
FUTEX_WAIT_PRIVATE = 128
FUTEX_WAKE_PRIVATE = 129
