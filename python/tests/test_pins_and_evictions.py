"""Pinned pages and eviction subscriptions from Python (the C API's
pp_pin/pp_unpin and pp_subscribe_evictions/pp_drain_evictions)."""

import errno

import numpy as np
import pytest

import pagepilot

PAGE = pagepilot.PAGE_SIZE


def _sweep(region, passes):
    a = region.array(np.uint8)
    for i in range(passes):
        a[::PAGE] = i + 1  # one store per page, every page
    del a


def test_pinned_pages_are_never_evicted_under_pressure():
    with pagepilot.map_anon(256 * PAGE, budget=32 * PAGE, policy="fifo") as r:
        r.subscribe_evictions(capacity=10_000)
        _sweep(r, 1)
        unpinned = {e.offset // PAGE for e in r.drain_evictions()}
        assert set(range(8)) <= unpinned  # without pins, FIFO evicts them
        r.pin(0, 8 * PAGE)  # brings them in: evicts 8 others
        assert len(r.drain_evictions()) == 8
        assert r.stats()["pinned_pages"] == 8
        before = r.stats()["evictions"]
        _sweep(r, 3)
        events = r.drain_evictions()
        assert len(events) == r.stats()["evictions"] - before > 3 * 200
        assert min(e.offset for e in events) >= 8 * PAGE
        r.unpin(0, 8 * PAGE)
        assert r.stats()["pinned_pages"] == 0
        _sweep(r, 1)
        assert {e.offset // PAGE for e in r.drain_evictions()} >= set(range(8))


def test_pins_past_the_budget_or_outside_the_region_are_refused():
    with pagepilot.map_anon(64 * PAGE, budget=16 * PAGE) as r:
        with pytest.raises(pagepilot.PinError, match="pass the budget") as e:
            r.pin(0, 16 * PAGE)  # one frame must stay free for faults
        assert e.value.errno == errno.ENOMEM
        assert r.stats()["pinned_pages"] == 0  # nothing pinned on failure
        with pytest.raises(pagepilot.PinError, match="outside the region") as e:
            r.pin(60 * PAGE, "1MB")
        assert e.value.errno == errno.EINVAL
        with pytest.raises(pagepilot.PinError) as e:
            r.unpin(0, PAGE)  # not pinned
        assert e.value.errno == errno.EINVAL
        r.pin("4K", "60K")  # sizes as everywhere: 15 pages
        assert r.stats()["pinned_pages"] == 15
    with pytest.raises(pagepilot.ClosedError):
        r.pin(0, PAGE)


def test_drained_evictions_equal_the_regions_eviction_count():
    with pagepilot.map_anon(128 * PAGE, budget=16 * PAGE, policy="clock") as r:
        assert r.drain_evictions() == []  # off by default
        r.subscribe_evictions()
        _sweep(r, 4)
        events = r.drain_evictions(max=10)
        assert len(events) == 10
        events += r.drain_evictions()
        stats = r.stats()
        assert len(events) == stats["evictions"] > 0
        assert stats["evictions_lost"] == 0
        assert all(e.offset % PAGE == 0 and e.offset < 128 * PAGE for e in events)
        assert all(e.modified for e in events)  # every page was written
        assert "offset" in repr(events[0])
        assert r.drain_evictions() == []


def test_a_full_queue_drops_the_oldest_events_and_counts_them():
    with pagepilot.map_anon(128 * PAGE, budget=16 * PAGE, policy="fifo") as r:
        r.subscribe_evictions(capacity=5)
        _sweep(r, 2)
        events = r.drain_evictions()
        stats = r.stats()
        assert len(events) == 5
        assert stats["evictions_lost"] == stats["evictions"] - 5
        r.subscribe_evictions(0)  # off
        _sweep(r, 1)
        assert r.drain_evictions() == []
