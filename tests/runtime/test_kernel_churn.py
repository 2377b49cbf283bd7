"""Many distinct kernels created, run and dropped: the process's mappings (lines of
/proc/self/maps) and memory (RSS) stay where they were once the kernel cache was full.

On x86-64 hosts: 10,000 distinct unary identity kernels through the real cache (1024
kernels). On AArch64, which our machines run emulated (qemu, several times slower to
generate), 3,000 kernels through the cache shrunk to 256 for the test: the same ratio of
kernels to cache size, about ten to one.

What growth would look like without release: every kernel sealed alone costs one page, so
10,000 kept kernels add >= 39 MiB of RSS and >= 150 chunks (each a mapping); 3,000 add
>= 11 MiB and >= 40 chunks. The slack allowed below is a fraction of that.
"""

import gc

import numpy as np

import einjit
from einjit import primitives
from einjit.runtime.memory import arena

from procmaps import mapping_count, rss_bytes, writable_and_executable

if einjit.host_isa() == "x86_64":
    KERNELS, BOUND = 10_000, primitives._cache.capacity
else:
    KERNELS, BOUND = 3_000, 256
SHAPES = [(m, n) for m in range(1, 101) for n in range(1, 101)][:KERNELS]
SLACK_MAPPINGS = 6           # python's own allocator arenas coming and going
SLACK_RSS = 6 * 2**20        # bytes


def _make_and_run(m: int, n: int, a: np.ndarray, b: np.ndarray) -> None:
    kern = einjit.unary("identity", m, n)
    b[:m * n + 1] = -1.0          # one element past the output: must stay
    kern(a, b, m, m)                 # the first call seals the kernel's code
    assert np.array_equal(b[:m * n], a[:m * n]) and b[m * n] == -1.0, (m, n)


def test_distinct_kernels_do_not_grow_mappings_or_memory_past_the_cache_bound():
    cache = primitives._cache
    capacity = cache.capacity
    assert BOUND >= 64 and KERNELS >= 10 * BOUND - 300
    cache.resize(BOUND)
    cache.clear()
    gc.collect()
    a = np.random.default_rng(0).standard_normal(100 * 100 + 1).astype(np.float32)
    b = np.empty_like(a)
    try:
        baseline = arena.stats()
        warm = 2 * BOUND             # fill the cache, then let it turn over once
        for m, n in SHAPES[:warm]:
            _make_and_run(m, n, a, b)
        gc.collect()
        full = arena.stats()
        mappings, rss = mapping_count(), rss_bytes()
        peak_mappings, peak_rss, peak_chunks = mappings, rss, full.chunks
        for i, (m, n) in enumerate(SHAPES[warm:]):
            _make_and_run(m, n, a, b)
            if i % 250 == 0:
                peak_mappings = max(peak_mappings, mapping_count())
                peak_rss = max(peak_rss, rss_bytes())
                peak_chunks = max(peak_chunks, arena.stats().chunks)
        gc.collect()
        end = arena.stats()
        peak_mappings = max(peak_mappings, mapping_count())
        peak_rss = max(peak_rss, rss_bytes())
        report = (f"{KERNELS} kernels, cache {BOUND}: mappings {mappings} -> peak "
                  f"{peak_mappings}, RSS {rss / 2**20:.1f} -> peak {peak_rss / 2**20:.1f} MiB, "
                  f"arena chunks {full.chunks} -> peak {peak_chunks}")
        print(report)
        assert len(cache) == BOUND
        # only the cached kernels (and whatever other tests still hold) keep code mapped
        assert end.live_blocks <= baseline.live_blocks + BOUND, report
        assert peak_chunks <= full.chunks + 2, report
        assert peak_mappings <= mappings + SLACK_MAPPINGS, report
        assert peak_rss <= rss + SLACK_RSS, report
        assert writable_and_executable() == []
    finally:
        cache.resize(capacity)
    # dropping the cached kernels gives their chunks back
    cache.clear()
    gc.collect()
    assert arena.stats().live_blocks <= baseline.live_blocks
