"""The embedded default's memory settings, chosen from the machine's memory (no server)."""

from __future__ import annotations

import pytest

from pyretrieve.embedded import GB, MB, machine_memory, memory_plan


def as_bytes(value: str) -> int:
    assert value.endswith("MB"), value
    return int(value[:-2]) * MB


@pytest.mark.parametrize("ram_gb", [0.5, 1, 2, 4, 8, 16, 24, 64, 256])
def test_each_setting_is_its_share_of_memory_within_its_bounds(ram_gb: float) -> None:
    ram = int(ram_gb * GB)
    plan = memory_plan(ram)
    got = {name: as_bytes(value) for name, value in plan.settings.items()}
    assert set(got) == {
        "shared_buffers",
        "effective_cache_size",
        "maintenance_work_mem",
        "work_mem",
    }
    assert got["shared_buffers"] == min(max(ram // 8, 128 * MB), 4 * GB) // MB * MB
    assert got["effective_cache_size"] == max(ram // 2, 512 * MB) // MB * MB
    assert got["maintenance_work_mem"] == min(max(ram // 32, 64 * MB), 1 * GB) // MB * MB
    assert got["work_mem"] == min(max(ram // 512, 4 * MB), 64 * MB) // MB * MB
    # Together they never claim more than half the machine (work_mem counted four times).
    assert got["shared_buffers"] + got["maintenance_work_mem"] + 4 * got["work_mem"] <= max(
        ram // 2, 256 * MB
    )


def test_the_plan_says_what_it_was_chosen_from() -> None:
    plan = memory_plan(16 * GB, "cgroup memory limit")
    assert plan.describe() == "chosen from 16.0 GB of cgroup memory limit"
    assert plan.settings["shared_buffers"] == "2048MB"
    with pytest.raises(ValueError, match="positive"):
        memory_plan(0)


def test_machine_memory_reads_this_machine() -> None:
    ram, source = machine_memory()
    assert ram > 256 * MB
    assert source in ("physical memory", "cgroup memory limit")
