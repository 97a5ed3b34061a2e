"""1,000 Model open/close cycles leave the resident memory bounded."""
import os

import pytest

import atto


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(os.environ.get("ATTO_ASAN") == "1", reason="AddressSanitizer's quarantine holds freed memory")
def test_open_close_cycles_do_not_leak(run_dir):
    def cycle():
        with atto.Model(run_dir, threads=1) as m:
            m.generate(n=1, seed=1)
            m.weights()
            m.score("ma")

    for _ in range(50):  # warm-up: allocator caches, Python's own arenas
        cycle()
    before = rss_mb()
    for _ in range(1000):
        cycle()
    grown = rss_mb() - before
    assert grown < 20, f"RSS grew by {grown:.1f} MB over 1,000 open/close cycles"
