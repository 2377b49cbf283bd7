"""The bounded kernel cache: LRU order, one creation per key however many threads ask,
nested creation without deadlock, errors not cached; and the primitives use it."""

import threading

import pytest

import einjit
from einjit import primitives
from einjit.runtime.cache import (
    DEFAULT_KERNEL_CACHE_SIZE,
    BoundedCache,
    CacheSizeError,
    RecursiveCreationError,
    kernel_cache_size,
)

JOIN_TIMEOUT = 60   # seconds; a thread still alive after it is a deadlock


def run_threads(targets):
    threads = [threading.Thread(target=t) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads), "deadlock"


def test_least_recently_used_is_evicted_first():
    cache = BoundedCache(3)
    made = []

    def maker(key):
        def create():
            made.append(key)
            return object()
        return create

    values = {key: cache.get(key, maker(key)) for key in "abc"}
    assert cache.get("a", maker("a")) is values["a"]     # a becomes the most recent
    cache.get("d", maker("d"))                            # evicts b, the least recent
    assert cache.keys() == ["c", "a", "d"] and len(cache) == 3
    assert "b" not in cache
    again = cache.get("b", maker("b"))                    # made anew, evicts c
    assert again is not values["b"] and cache.keys() == ["a", "d", "b"]
    assert made == ["a", "b", "c", "d", "b"]
    assert (cache.hits, cache.misses) == (1, 5)
    cache.resize(1)
    assert cache.keys() == ["b"]
    cache.clear()
    assert len(cache) == 0


def test_zero_capacity_caches_nothing():
    cache = BoundedCache(0)
    first = cache.get("k", object)
    assert cache.get("k", object) is not first and len(cache) == 0


def test_concurrent_requests_create_once():
    cache = BoundedCache(8)
    started = threading.Event()
    release = threading.Event()
    calls = []

    def create():
        calls.append(threading.get_ident())
        started.set()
        release.wait(JOIN_TIMEOUT)   # held until every other thread has asked
        return object()

    results = []
    waiters_started = []

    def ask():
        results.append(cache.get("key", create))

    def ask_later():
        started.wait(JOIN_TIMEOUT)
        waiters_started.append(1)
        ask()

    def let_go():
        started.wait(JOIN_TIMEOUT)
        while len(waiters_started) < 7:
            threading.Event().wait(0.001)
        threading.Event().wait(0.05)   # the waiters are inside get() by now (or hit later)
        release.set()

    run_threads([ask] + [ask_later] * 7 + [let_go])
    assert len(calls) == 1 and cache.misses == 1
    assert len(results) == 8 and all(r is results[0] for r in results)


def test_a_failed_creation_reaches_every_waiter_and_is_not_cached():
    cache = BoundedCache(8)
    started = threading.Event()
    release = threading.Event()

    def failing():
        started.set()
        release.wait(JOIN_TIMEOUT)
        raise KeyError("generation failed")

    outcomes = []

    def ask():
        try:
            cache.get("key", failing)
        except KeyError as exc:
            outcomes.append(str(exc))

    def ask_later():
        started.wait(JOIN_TIMEOUT)
        ask()

    def let_go():
        started.wait(JOIN_TIMEOUT)
        threading.Event().wait(0.05)
        release.set()

    run_threads([ask, ask_later, ask_later, let_go])
    assert outcomes == ["'generation failed'"] * 3
    assert "key" not in cache
    assert cache.get("key", lambda: 42) == 42


def test_nested_creation_does_not_deadlock():
    """A value whose creation asks the cache for others (a loop nest asking for its
    primitives), from several threads at once, some asking for the inner keys directly."""
    cache = BoundedCache(16)
    created = []

    def leaf(name):
        def create():
            created.append(name)
            threading.Event().wait(0.01)
            return ("leaf", name)
        return create

    def nest(name, parts):
        def create():
            created.append(name)
            return ("nest", name, tuple(cache.get(p, leaf(p)) for p in parts))
        return create

    outer = []

    def ask_outer():
        outer.append(cache.get("outer", lambda: ("outer", cache.get("n1", nest("n1", "xy")),
                                                  cache.get("n2", nest("n2", "yz")))))

    def ask_leaf():
        cache.get("y", leaf("y"))

    run_threads([ask_outer, ask_outer, ask_leaf, ask_leaf, ask_outer])
    assert len(outer) == 3 and all(o is outer[0] for o in outer)
    assert outer[0] == ("outer", ("nest", "n1", (("leaf", "x"), ("leaf", "y"))),
                        ("nest", "n2", (("leaf", "y"), ("leaf", "z"))))
    assert sorted(created) == ["n1", "n2", "x", "y", "z"]   # each once


def test_creation_asking_for_its_own_key_raises_instead_of_waiting_forever():
    cache = BoundedCache(4)

    def loop():
        return cache.get("self", loop)

    with pytest.raises(RecursiveCreationError, match="'self'"):
        cache.get("self", loop)
    assert cache.get("self", lambda: 1) == 1   # nothing left pending


@pytest.mark.parametrize("environ, expected", [
    ({}, DEFAULT_KERNEL_CACHE_SIZE),
    ({"EINJIT_KERNEL_CACHE_SIZE": "16"}, 16),
    ({"EINJIT_KERNEL_CACHE_SIZE": "0"}, 0),
    ({"EINJIT_KERNEL_CACHE_SIZE": ""}, DEFAULT_KERNEL_CACHE_SIZE),     # empty: unset
])
def test_kernel_cache_size_from_the_environment(environ, expected):
    assert kernel_cache_size(environ) == expected


@pytest.mark.parametrize("value", ["-1", "many", "1.5"])
def test_bad_kernel_cache_size_names_the_value(value):
    with pytest.raises(CacheSizeError, match=f"EINJIT_KERNEL_CACHE_SIZE={value!r}"):
        kernel_cache_size({"EINJIT_KERNEL_CACHE_SIZE": value})
    with pytest.raises(ValueError):
        BoundedCache(-1)


def test_primitives_share_one_bounded_cache():
    assert DEFAULT_KERNEL_CACHE_SIZE == 1024
    assert primitives._cache.capacity == kernel_cache_size()
    first = einjit.unary("relu", 3, 5)
    assert einjit.unary("relu", 3, 5) is first
    assert einjit.unary("relu", 3, 5, trans_b=True) is not first


def test_a_primitive_generated_inside_another_generation_does_not_deadlock():
    """What a loop-nest generator does: ask for primitives while its own entry is pending."""
    def plan():
        return (einjit.unary("identity", 7, 9), einjit.binary("add", 7, 9))

    results = []
    run_threads([lambda: results.append(primitives._cache.get(("test-plan", 7, 9), plan))
                 for _ in range(3)])
    assert len(results) == 3 and all(r is results[0] for r in results)
    assert results[0][0] is einjit.unary("identity", 7, 9)
