"""Bad arguments raise the documented exceptions with the C API's messages."""

import errno

import pytest

import pagepilot


def test_a_missing_file_raises_map_error_with_enoent(tmp_path):
    missing = tmp_path / "nope.bin"
    with pytest.raises(pagepilot.MapError) as e:
        pagepilot.map_file(missing, budget="1MB")
    assert str(e.value) == f"backing file {missing} does not exist"
    assert e.value.errno == errno.ENOENT
    assert isinstance(e.value, pagepilot.PagepilotError)


def test_an_unknown_policy_raises_map_error_listing_the_policies(zero_file):
    with pytest.raises(pagepilot.MapError, match=r"policy `nope`: unknown policy `nope`; available: .*clock"):
        pagepilot.map_file(zero_file, budget="1MB", policy="nope")


def test_a_simulator_only_policy_is_refused_live(zero_file):
    with pytest.raises(pagepilot.MapError, match="opt"):
        pagepilot.map_file(zero_file, budget="1MB", policy="opt")


def test_a_budget_below_a_page_raises_map_error(zero_file):
    with pytest.raises(pagepilot.MapError) as e:
        pagepilot.map_file(zero_file, budget=100)
    assert str(e.value) == "budget of 100 bytes is smaller than one page (4096 bytes)"
    with pytest.raises(pagepilot.MapError, match="smaller than one page"):
        pagepilot.map_anon("1MB", budget="1KB")


def test_bad_sizes_raise_value_error_naming_the_argument(zero_file):
    with pytest.raises(ValueError, match="budget: `40 parsecs` is not a size"):
        pagepilot.map_file(zero_file, budget="40 parsecs")
    with pytest.raises(ValueError, match="budget: -5"):
        pagepilot.map_file(zero_file, budget=-5)
    with pytest.raises(TypeError, match="budget: expected a size"):
        pagepilot.map_file(zero_file, budget=1.5)
    with pytest.raises(ValueError, match="size"):
        pagepilot.map_anon("lots", budget="1MB")


def test_a_zero_length_anonymous_region_is_refused():
    with pytest.raises(pagepilot.MapError, match="region length 0 is invalid"):
        pagepilot.map_anon(0, budget="1MB")


def test_a_policy_of_the_wrong_type_raises_type_error(zero_file):
    with pytest.raises(TypeError, match="policy"):
        pagepilot.map_file(zero_file, budget="1MB", policy=42)


def test_bad_option_values_raise_map_error_naming_the_option(zero_file):
    with pytest.raises(pagepilot.MapError, match="option `handler_threads`"):
        pagepilot.map_file(zero_file, budget="1MB", handler_threads=1000)
    with pytest.raises(pagepilot.MapError, match="min_frames"):
        pagepilot.map_file(zero_file, budget="1MB", min_frames=100000, daemon=False)


def test_an_empty_file_is_refused(tmp_path):
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    with pytest.raises(pagepilot.MapError, match="is empty"):
        pagepilot.map_file(empty, budget="1MB")


def test_pickling_an_anonymous_region_is_refused():
    import pickle

    with pagepilot.map_anon("1MB", "256K") as r:
        with pytest.raises(TypeError, match="anonymous region cannot be pickled"):
            pickle.dumps(r)


def test_a_pool_below_a_page_raises_pool_error():
    with pytest.raises(pagepilot.PoolError, match="at least one page"):
        pagepilot.Pool(100)


def test_connecting_where_no_daemon_listens_raises_daemon_error(tmp_path):
    sock = tmp_path / "no-daemon.sock"
    with pytest.raises(pagepilot.DaemonError) as e:
        pagepilot.connect(sock)
    assert str(sock) in str(e.value)
    assert e.value.errno == errno.ENOENT
