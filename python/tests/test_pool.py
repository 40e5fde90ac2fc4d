"""Frame pools shared by regions."""

import numpy as np

import pagepilot


def test_regions_in_a_pool_share_its_frames(data_file):
    path, data = data_file
    with pagepilot.Pool("512K") as pool:
        with pagepilot.map_file(path, budget="256K", pool=pool, daemon=False) as a, \
             pagepilot.map_anon("2M", budget="256K", pool=pool, daemon=False) as b:
            assert np.array_equal(np.frombuffer(a, dtype=np.uint8), data)
            np.frombuffer(b, dtype=np.uint8)[:] = 3
            s = pool.stats()
            assert s["total_frames"] == 128
            assert len(s["holders"]) == 2
            assert a.stats()["budget_frames"] + b.stats()["budget_frames"] <= 128
    assert "closed" in repr(pool)
