"""What this catches: the first things to get right in DCQCN and Swift. Run them with `grade exercise 18`.

Each check works a number out by hand from the paper's rules, on your ecn.py, dcqcn.py and swift.py. The
hidden suite replays long random event sequences and the scripted congestion episode and compares every step
with the reference. To see your rate trajectory, run `python exercises/18_roce/plot_episode.py`.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import pytest

from grader.harness import World

KB = 1024


def run(world: World, program: str, **inputs: Any) -> Any:
    [res] = world.run(f"rank_programs:{program}", inputs=inputs)
    return res.value


def close(got: Any, want: float, what: str) -> None:
    # 1e-9 relative: float rounding only
    if type(got) not in (int, float) or not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12):
        raise AssertionError(f"{what}: expected {want!r}, got {got!r}")


@pytest.mark.part("18.marking")
@pytest.mark.concept("red_ramp")
def test_red_ramp(world: World) -> None:
    # Kmin = 5 KB, Kmax = 200 KB, Pmax = 1%: nothing at Kmin, Pmax/2 halfway, Pmax at Kmax, always beyond it
    for q, want in [(5 * KB, 0.0), (int(102.5 * KB), 0.005), (200 * KB, 0.01), (300 * KB, 1.0)]:
        [res] = world.call("ecn", "mark_probability", args=[(q,)])
        close(res.returned, want, f"mark_probability({q} bytes)")


@pytest.mark.part("18.marking")
@pytest.mark.concept("cnp_pacing")
def test_one_cnp_per_50_us(world: World) -> None:
    [res] = world.call("ecn", "cnp_times", args=[([0, 1, 2, 49, 50, 51, 120],)])
    assert res.returned == [0, 50, 120], f"CNPs for marks at 0, 1, 2, 49, 50, 51, 120 us: got {res.returned}"


@pytest.mark.part("18.rate_decrease")
@pytest.mark.concept("multiplicative_cut")
def test_first_cnp(world: World) -> None:
    [after] = run(world, "replay_rp", params={}, events=["cnp"])
    # alpha starts at 1, so the first cut halves 40 Gb/s; R_T remembers 40 Gb/s
    close(after["rc"], 20_000.0, "R_C after the first CNP")
    close(after["rt"], 40_000.0, "R_T after the first CNP")


@pytest.mark.part("18.rate_decrease")
@pytest.mark.concept("alpha_decay")
def test_quiet_periods(world: World) -> None:
    trace = run(world, "replay_rp", params={}, events=["alpha", "alpha"])
    close(trace[1]["alpha"], 0.9922027587890625, "alpha after two quiet K periods from 1, g = 1/256")


@pytest.mark.part("18.rate_increase")
@pytest.mark.concept("increase_phases")
def test_five_fast_recovery_steps(world: World) -> None:
    start = {"rc": 20_000.0, "rt": 40_000.0}
    trace = run(world, "replay_rp", params={}, events=["timer"] * 6, state=start)
    phases = [s["phase"] for s in trace]
    assert phases == ["fast_recovery"] * 5 + ["additive"], f"phases of six timer expiries: {phases}"
    # F = 5 halvings of the 20 Gb/s gap leave 20000 / 32 = 625 Mb/s
    close(trace[4]["rc"], 40_000.0 - 20_000.0 / 32, "R_C after fast recovery")


@pytest.mark.part("18.simulate")
@pytest.mark.concept("clock_restart")
def test_first_timer_and_alpha_events(world: World) -> None:
    got = run(world, "simulate", params={}, cnp_times_us=[10], duration_us=120)
    # K = T = 55 us after the CNP at 10 us: both fire at 65 and at 120
    want = [
        [10, "cnp"],
        [65, "alpha"],
        [65, "timer:fast_recovery"],
        [120, "alpha"],
        [120, "timer:fast_recovery"],
    ]
    assert got["events"] == want, f"events: {got['events']}"
    close(got["rate_mbps"][64], 20_000.0, "R_C just before the first timer")
    close(got["rate_mbps"][65], 30_000.0, "R_C after the first fast-recovery step")


@pytest.mark.part("18.swift")
@pytest.mark.concept("delay_decrease")
def test_swift_cut_is_capped(world: World) -> None:
    params = {"base_target_us": 20.0, "per_hop_us": 0.0, "fs_range_us": 0.0, "beta": 0.8, "max_mdf": 0.5}
    trace = run(world, "replay_swift", params=params, acks=[[0, 25.0, 1], [1, 1000.0, 1]], cwnd=10.0)
    # 25 us against a 20 us target with beta = 0.8: a 16% cut; the second ACK comes within the same RTT: hold
    assert [s["action"] for s in trace] == ["decrease", "hold"], trace
    close(trace[0]["cwnd"], 8.4, "cwnd after one cut")
    trace = run(world, "replay_swift", params=params, acks=[[0, 1000.0, 1]], cwnd=10.0)
    close(trace[0]["cwnd"], 5.0, "cwnd after a cut capped at max_mdf")


@pytest.mark.part("18.simulate")
@pytest.mark.concept("clock_restart")
def test_congestion_episode_plot(world: World, artifact) -> None:  # type: ignore[no-untyped-def]
    """Runs the scripted congestion episode with your ecn.py and dcqcn.py; saves R_C and R_T against time."""
    spec = importlib.util.spec_from_file_location(
        "rank_programs_18", Path(__file__).parent / "rank_programs.py"
    )
    programs = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(programs)  # type: ignore[union-attr]  # trusted course code: constants only
    inputs = {
        "params": programs.EPISODE_PARAMS,
        "trace": programs.episode_trace(),
        "duration_us": programs.EPISODE_US,
    }
    (res,) = world.run("rank_programs:episode", inputs=inputs)
    run = res.value
    assert run["cnps"], "the episode's queue goes above Kmax, so the switch must send CNPs"
    assert min(run["rate_mbps"]) < run["rate_mbps"][0], "the current rate must drop after the first CNP"
    path = artifact("rate_vs_time.png", "a plot of your DCQCN rate against time")
    if path is not None:
        from coursekit.plots import save_line_plot

        series = {
            "current rate R_C": (run["t"], [r / 1000 for r in run["rate_mbps"]]),
            "target rate R_T": (run["t"], [r / 1000 for r in run["target_mbps"]]),
        }
        save_line_plot(path, series, title="DCQCN reaction point", xlabel="time (us)", ylabel="rate (Gb/s)")
