"""What this catches: a congestion controller that looks right on a slide and diverges after two events.

- marking: the >Kmax branch returning Pmax instead of 1, `<=` against the draw (a 0.0 draw marking an
  unmarkable packet), CNPs not paced, or paced with `>` so a mark exactly N us later is dropped.
- rate_decrease: cutting with alpha before its update, forgetting R_T <- R_C, no floor at min_rate, stage
  counters that survive a CNP, g ignored.
- rate_increase: F-1 (or F+1) fast-recovery steps, hyper increase when only ONE counter passed F, R_T growing
  past the line rate, additive increase that forgets to average R_C toward R_T.
- simulate: timers that keep running across a CNP, the byte counter counting bits, events out of order.
- swift: flow scaling without the square root, no max_mdf cap, several cuts per RTT, AI not divided by cwnd,
  pacing when cwnd >= 1.
Every trajectory is compared event by event with the reference: phases exactly, numbers within 1e-9 relative
(float rounding only: the same arithmetic in another order differs in the last bits).
"""

from __future__ import annotations

import importlib.util
import math
import random
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from grader.harness import World

# The trusted rank programs, run in the judge with the REFERENCE modules to produce the expected values.
_PROGRAMS = Path(__file__).resolve().parents[2] / "exercises" / "18_roce" / "rank_programs.py"
_spec = importlib.util.spec_from_file_location("rank_programs_18", _PROGRAMS)
programs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(programs)

REL = 1e-9  # float rounding only (see the module docstring)


class _ReferenceContext:
    def __init__(self, reference) -> None:
        self._reference = reference

    def submission(self, module: str) -> ModuleType:
        return self._reference(module)


def run(world: World, program: str, **inputs: Any) -> Any:
    """A rank program of exercises/18_roce/rank_programs.py on the one rank, with the student's modules."""
    [res] = world.run(f"rank_programs:{program}", inputs=inputs)
    return res.value


def expect(reference, program: str, **inputs: Any) -> Any:
    """The same rank program in the judge, with the reference modules."""
    return getattr(programs, program)(_ReferenceContext(reference), **inputs)


def same(got: Any, want: Any, what: str) -> None:
    """Structural equality: same keys, same lengths, strings and ints exact, floats within REL."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            keys = sorted(got) if isinstance(got, dict) else type(got).__name__
            raise AssertionError(f"{what}: expected keys {sorted(want)}, got {keys}")
        for key in want:
            same(got[key], want[key], f"{what}[{key!r}]")
    elif isinstance(want, list | tuple):
        if not isinstance(got, list | tuple) or len(got) != len(want):
            n = len(got) if isinstance(got, list | tuple) else type(got).__name__
            raise AssertionError(f"{what}: expected {len(want)} entries, got {n}: {got!r:.300}")
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            same(g, w, f"{what}[{i}]")
    elif isinstance(want, bool) or isinstance(want, str) or want is None:
        if got != want or type(got) is not type(want):
            raise AssertionError(f"{what}: expected {want!r}, got {got!r}")
    else:
        if type(got) not in (int, float) or not math.isclose(got, want, rel_tol=REL, abs_tol=1e-12):
            raise AssertionError(f"{what}: expected {want!r}, got {got!r}")


# ------------------------------------------------------------------------------------------------------------
# 18.marking

KB = 1024


@pytest.mark.part("18.marking")
class TestMarking:
    @pytest.mark.concept("red_ramp")
    def test_probability_at_and_around_the_thresholds(self, world: World) -> None:
        kmin, kmax = 5 * KB, 200 * KB
        cases = {
            0: 0.0,
            kmin: 0.0,
            kmin + 195: 0.01 * 195 / (kmax - kmin),
            (kmin + kmax) // 2: 0.005,
            kmax: 0.01,
        }
        cases |= {kmax + 1: 1.0, 10 * kmax: 1.0}
        for q, want in cases.items():
            [res] = world.call("ecn", "mark_probability", args=[(q,)])
            same(res.returned, want, f"mark_probability({q})")

    @pytest.mark.concept("red_ramp")
    def test_probability_with_other_thresholds(self, world: World, reference) -> None:
        ecn = reference("ecn")
        for q in (0, 10_000, 10_001, 55_000, 99_999, 100_000, 100_001):
            kwargs = {"kmin": 10_000, "kmax": 100_000, "pmax": 0.2}
            [res] = world.call("ecn", "mark_probability", args=[(q,)], kwargs=kwargs)
            same(res.returned, ecn.mark_probability(q, **kwargs), f"mark_probability({q}, {kwargs})")

    @pytest.mark.concept("red_ramp")
    def test_marks_follow_the_draws(self, world: World, reference) -> None:
        rng = random.Random(18)
        queue = [rng.choice([0, 5 * KB, 6 * KB, 100 * KB, 200 * KB, 201 * KB, 300 * KB]) for _ in range(300)]
        draws = [rng.random() for _ in queue]
        # edge draws: 0.0 must not mark a packet whose probability is 0; draws just either side of p = 0.5%
        queue += [0, 5 * KB, 104960, 104960]
        draws += [0.0, 0.0, 0.0050001, 0.0049999]
        [res] = world.call("ecn", "mark_packets", args=[(queue, draws)])
        same(res.returned, reference("ecn").mark_packets(queue, draws), "mark_packets")

    @pytest.mark.concept("cnp_pacing")
    def test_cnp_pacing(self, world: World) -> None:
        marks = [3, 10, 52, 53, 102, 103, 153, 400, 449, 450, 451]
        # 3 sent; 10, 52 < 53 absorbed; 53 = 3 + 50 sent; 102 absorbed, 103 sent; 153 sent; 400 sent;
        # 449 absorbed; 450 sent (exactly N later); 451 absorbed
        [res] = world.call("ecn", "cnp_times", args=[(marks,)])
        same(res.returned, [3, 53, 103, 153, 400, 450], "cnp_times with N = 50 us")
        [res] = world.call("ecn", "cnp_times", args=[(marks,)], kwargs={"interval_us": 1})
        same(res.returned, marks, "cnp_times with N = 1 us: every mark")
        [res] = world.call("ecn", "cnp_times", args=[([],)])
        same(res.returned, [], "cnp_times of no marks")

    @pytest.mark.concept("marks_to_cnps")
    def test_queue_trace_to_cnps(self, world: World, reference) -> None:
        trace = programs.episode_trace()
        args = (trace["arrivals_us"], trace["queue_bytes"], trace["uniforms"])
        # The CNPs of the marks the student's own mark_packets makes (the ramp is red_ramp's to grade): the
        # chain from marks to the NP's paced CNPs.
        for kwargs in ({}, {"kmin": 50 * KB, "kmax": 150 * KB, "pmax": 0.3, "interval_us": 20}):
            ramp = {k: v for k, v in kwargs.items() if k != "interval_us"}
            [marks] = world.call("ecn", "mark_packets", args=[args[1:]], kwargs=ramp)
            assert isinstance(marks.returned, list) and len(marks.returned) == len(args[0]), (
                f"mark_packets must return one bool per packet, got {marks.returned!r:.200}"
            )
            marked = [t for t, m in zip(args[0], marks.returned, strict=True) if m]
            pacing = {"interval_us": kwargs["interval_us"]} if kwargs else {}
            want = reference("ecn").cnp_times(marked, **pacing)
            [res] = world.call("ecn", "cnps_for_queue_trace", args=[args], kwargs=kwargs)
            same(res.returned, want, f"CNPs of the scripted episode's marks, {kwargs or 'defaults'}")


# ------------------------------------------------------------------------------------------------------------
# 18.rate_decrease

PAPER: dict[str, Any] = {}  # DcqcnParams defaults: the paper's values
FAST: dict[str, Any] = {"g": 1 / 16, "min_rate_mbps": 1000.0}  # big g: alpha moves visibly every event


def replay(
    world: World,
    reference,
    params: dict,
    events: list[str],
    state: dict | None = None,
    keys: tuple[str, ...] | None = None,
) -> None:
    """Compare the state after each event with the reference's; only `keys` of it, where given."""
    got = run(world, "replay_rp", params=params, events=events, state=state)
    want = expect(reference, "replay_rp", params=params, events=events, state=state)
    if keys is not None and isinstance(got, list) and all(isinstance(x, dict) for x in got):
        got = [{k: x[k] for k in keys if k in x} for x in got]
        want = [{k: x[k] for k in keys} for x in want]
    same(got, want, f"state after each of {events} (params {params}, start {state})")


def drawn_params(seed: int) -> dict[str, Any]:
    """A reaction point the README never shows: line rate, gains, clocks and steps drawn from a fixed seed."""
    r = random.Random(1800 + seed)
    line = r.choice([25_000.0, 100_000.0, 200_000.0, 400_000.0])
    return {
        "line_rate_mbps": line,
        "g": r.choice([1 / 4, 1 / 16, 1 / 32, 1 / 128]),
        "alpha_timer_us": r.randint(1, 80),
        "rate_timer_us": r.randint(5, 300),
        "byte_counter_bytes": r.choice([20_000, 64_000, 150_000, 500_000]),
        "fast_recovery_steps": r.randint(1, 6),
        "rate_ai_mbps": r.choice([5.0, 40.0, 200.0]),
        "rate_hai_mbps": r.choice([50.0, 400.0, 2000.0]),
        "min_rate_mbps": r.choice([1.0, 100.0, line / 8]),
        "initial_alpha": r.choice([1.0, 1023 / 1024, 0.5]),
    }


def drawn_events(seed: int, n: int, choices: list[str]) -> list[str]:
    r = random.Random(1850 + seed)
    return [r.choice(choices) for _ in range(n)]


# what the increase rules change: alpha moves only on CNPs and quiet periods (18.rate_decrease)
INCREASE_KEYS = ("rc", "rt", "timer_count", "byte_count", "phase")


@pytest.mark.part("18.rate_decrease")
class TestRateDecrease:
    @pytest.mark.concept("multiplicative_cut")
    def test_first_cnp_halves_the_rate(self, world: World) -> None:
        [after] = run(world, "replay_rp", params=PAPER, events=["cnp"])
        # alpha = 1: (1 - g) * 1 + g = 1, so the cut is by alpha / 2 = one half; R_T keeps the line rate
        same(
            after,
            {"rc": 20_000.0, "rt": 40_000.0, "alpha": 1.0, "timer_count": 0, "byte_count": 0, "phase": None},
            "after one CNP at line rate",
        )

    @pytest.mark.concept("alpha_decay")
    def test_alpha_decays_between_cnps(self, world: World, reference) -> None:
        replay(world, reference, PAPER, ["cnp"] + ["alpha"] * 20)
        replay(world, reference, FAST, ["alpha"] * 5)

    @pytest.mark.concept("multiplicative_cut")
    def test_cut_uses_the_updated_alpha(self, world: World, reference) -> None:
        # after 10 quiet periods alpha < 1: the next CNP raises it first, then cuts with the raised value
        replay(world, reference, FAST, ["cnp"] + ["alpha"] * 10 + ["cnp"])
        replay(world, reference, PAPER, ["alpha"] * 200 + ["cnp", "alpha", "cnp"])

    @pytest.mark.concept("multiplicative_cut")
    def test_target_remembers_the_rate_before_the_cut(self, world: World, reference) -> None:
        state = {"rc": 12_345.0, "rt": 39_000.0, "alpha": 0.3}
        replay(world, reference, FAST, ["cnp", "cnp"], state)

    @pytest.mark.concept("new_episode_resets")
    def test_cnp_resets_the_increase_stages(self, world: World, reference) -> None:
        # the increase stages only: the cut's rates are multiplicative_cut's to grade
        state = {"rc": 10_000.0, "rt": 20_000.0, "alpha": 0.5, "timer_count": 7, "byte_count": 3}
        replay(world, reference, FAST, ["cnp"], state, keys=("timer_count", "byte_count", "phase"))

    @pytest.mark.concept("multiplicative_cut")
    def test_drawn_reaction_points(self, world: World, reference) -> None:
        for seed in (1, 2, 3):
            events = drawn_events(seed, 30, ["cnp", "cnp", "alpha"])
            replay(world, reference, drawn_params(seed), events, keys=("rc", "rt", "alpha"))

    @pytest.mark.concept("min_rate_floor")
    def test_rate_never_below_min_rate(self, world: World) -> None:
        # a property of the student's own trajectory (the size of each cut is multiplicative_cut's): R_C never
        # goes below the floor, and 40 cuts of any size from a half to a quarter bring it down to the floor
        for params, floor in ((FAST, FAST["min_rate_mbps"]), ({"min_rate_mbps": 100.0}, 100.0)):
            trace = run(world, "replay_rp", params=params, events=["cnp"] * 40)
            assert isinstance(trace, list) and all(isinstance(x, dict) for x in trace), (
                f"states: {trace!r:.200}"
            )
            rates = [x.get("rc") for x in trace]
            assert all(isinstance(r, int | float) and r >= floor for r in rates), (
                f"R_C after each of 40 CNPs with {params}: {rates}; it never goes below {floor} Mb/s"
            )
            same(rates[-1], floor, f"R_C after 40 cuts of 40 Gb/s, floored at {floor} Mb/s")


# ------------------------------------------------------------------------------------------------------------
# 18.rate_increase

AFTER_CUT = {"rc": 20_000.0, "rt": 30_000.0, "alpha": 0.9}


@pytest.mark.part("18.rate_increase")
class TestRateIncrease:
    @pytest.mark.concept("increase_phases")
    def test_fast_recovery_then_additive(self, world: World) -> None:
        trace = run(world, "replay_rp", params=PAPER, events=["timer"] * 7, state=AFTER_CUT)
        phases = [s["phase"] for s in trace]
        same(phases, ["fast_recovery"] * 5 + ["additive"] * 2, "phases of 7 timer events, F = 5")
        # fast recovery halves the gap to R_T = 30000 five times: 25000, 27500, 28750, 29375, 29687.5
        same(
            [s["rc"] for s in trace[:5]], [25000.0, 27500.0, 28750.0, 29375.0, 29687.5], "R_C, fast recovery"
        )
        # additive: R_T += 40, then average
        same(trace[5]["rt"], 30_040.0, "R_T after the first additive step")
        same(trace[5]["rc"], (30_040.0 + 29_687.5) / 2, "R_C after the first additive step")

    @pytest.mark.concept("increase_phases")
    def test_hyper_needs_both_counters_past_f(self, world: World, reference) -> None:
        params = {"rate_hai_mbps": 400.0, "rate_ai_mbps": 40.0}
        replay(
            world, reference, params, ["timer"] * 12, AFTER_CUT, keys=INCREASE_KEYS
        )  # timer alone: never hyper
        replay(
            world,
            reference,
            params,
            ["timer"] * 6 + ["bytes"] * 7 + ["timer"] * 3,
            AFTER_CUT,
            keys=INCREASE_KEYS,
        )
        replay(world, reference, params, ["bytes", "timer"] * 8, AFTER_CUT, keys=INCREASE_KEYS)

    @pytest.mark.concept("increase_phases")
    def test_other_fast_recovery_counts(self, world: World, reference) -> None:
        for f in (1, 3):
            params = {"fast_recovery_steps": f}
            replay(
                world,
                reference,
                params,
                ["timer"] * (f + 2) + ["bytes"] * (f + 2),
                AFTER_CUT,
                keys=INCREASE_KEYS,
            )

    @pytest.mark.concept("line_rate_cap")
    def test_target_capped_at_line_rate(self, world: World, reference) -> None:
        state = {"rc": 39_900.0, "rt": 39_990.0, "alpha": 0.1, "timer_count": 9, "byte_count": 9}
        replay(world, reference, {"rate_hai_mbps": 500.0}, ["timer"] * 4, state, keys=INCREASE_KEYS)
        trace = run(world, "replay_rp", params={"rate_hai_mbps": 500.0}, events=["timer"] * 40, state=state)
        same(trace[-1]["rt"], 40_000.0, "R_T after 40 hyper steps: the line rate")

    @pytest.mark.concept("increase_phases")
    def test_drawn_recoveries(self, world: World, reference) -> None:
        for seed in (4, 5, 6):
            params = drawn_params(seed)
            line = params["line_rate_mbps"]
            state = {"rc": line / 3, "rt": line * 0.6, "alpha": 0.7}
            events = drawn_events(seed, 40, ["timer", "timer", "bytes"])
            replay(world, reference, params, events, state, keys=INCREASE_KEYS)

    @pytest.mark.concept("increase_phases")
    def test_random_increase_events(self, world: World, reference) -> None:
        rng = random.Random(1818)
        events = [rng.choice(["alpha", "timer", "timer", "bytes"]) for _ in range(60)]
        replay(
            world,
            reference,
            {"fast_recovery_steps": 2, "g": 1 / 64, "rate_hai_mbps": 1000.0},
            events,
            AFTER_CUT,
            keys=INCREASE_KEYS,
        )


# ------------------------------------------------------------------------------------------------------------
# 18.simulate


def simulate(world: World, reference, params: dict, cnps: list[int], duration: int) -> dict:
    kwargs = {"params": params, "cnp_times_us": cnps, "duration_us": duration}
    got = run(world, "simulate", **kwargs)
    if not isinstance(got, dict) or "events" not in got:
        raise AssertionError(f"simulate must return a dict with 'events', got {got!r:.200}")
    want = expect(reference, "simulate", **kwargs)
    # events first: a wrong event list explains every later difference in the numbers
    same(got["events"], want["events"], f"events of simulate({params}, CNPs at {cnps})")
    same(got, want, f"simulate({params}, CNPs at {cnps})")
    return got


@pytest.mark.part("18.simulate")
class TestSimulate:
    @pytest.mark.concept("clock_restart")
    def test_no_cnp_no_change(self, world: World, reference) -> None:
        got = simulate(world, reference, PAPER, [], 400)
        same(got["rate_mbps"], [40_000.0] * 401, "R_C without congestion")

    @pytest.mark.concept("clock_restart")
    def test_timers_restart_at_every_cnp(self, world: World, reference) -> None:
        simulate(world, reference, PAPER, [10, 40, 200], 700)
        simulate(world, reference, {"alpha_timer_us": 30, "rate_timer_us": 70}, [5, 100, 101], 600)

    @pytest.mark.concept("clock_restart")
    def test_byte_counter_counts_bytes(self, world: World, reference) -> None:
        # 150 KB at 20 Gb/s (2500 bytes per us) fills in 60 us: byte events interleave with the 55 us timer
        simulate(world, reference, {"byte_counter_bytes": 150_000}, [1], 1200)
        simulate(world, reference, {"byte_counter_bytes": 40_000, "fast_recovery_steps": 2}, [3, 300], 900)

    @pytest.mark.concept("clock_restart")
    def test_drawn_clocks(self, world: World, reference) -> None:
        # other K, T, B, F and line rates, CNPs at drawn times, some of them in consecutive microseconds
        for seed in (7, 8):
            r = random.Random(1870 + seed)
            cnps = sorted({r.randint(1, 700) for _ in range(r.randint(1, 6))})
            cnps += [cnps[-1] + 1]
            simulate(world, reference, drawn_params(seed), cnps, 900)

    @pytest.mark.concept("event_interleaving")
    def test_drawn_event_sequences(self, world: World, reference) -> None:
        for seed in (9, 10):
            events = drawn_events(seed, 80, ["cnp", "alpha", "timer", "timer", "bytes", "bytes"])
            replay(world, reference, drawn_params(seed), events)

    @pytest.mark.concept("event_interleaving")
    def test_random_event_sequence(self, world: World, reference) -> None:
        # the whole reaction point, CNPs and increases interleaved, without the clock
        rng = random.Random(1818)
        events = [rng.choice(["cnp", "alpha", "alpha", "timer", "timer", "bytes"]) for _ in range(120)]
        replay(world, reference, {"fast_recovery_steps": 2, "g": 1 / 64}, events)

    @pytest.mark.concept("clock_restart")
    def test_scripted_episode(self, world: World, reference) -> None:
        # the CNPs come from the reference's ecn.py, so that only dcqcn.py is graded here (18.marking checks
        # the CNPs of the same episode)
        trace = programs.episode_trace()
        cnps = reference("ecn").cnps_for_queue_trace(
            trace["arrivals_us"], trace["queue_bytes"], trace["uniforms"]
        )
        simulate(world, reference, programs.EPISODE_PARAMS, cnps, programs.EPISODE_US)


# ------------------------------------------------------------------------------------------------------------
# 18.swift

SWIFT = {
    "base_target_us": 20.0,
    "per_hop_us": 2.0,
    "fs_range_us": 10.0,
    "fs_min_cwnd": 0.25,
    "fs_max_cwnd": 64.0,
}


def window(trace: Any) -> Any:
    """The action and the window after each ACK: what the increase and decrease rules decide (the pacing
    interval and the target of the new window are graded by their own tests)."""
    if isinstance(trace, list) and all(isinstance(x, dict) for x in trace):
        return [{k: x.get(k) for k in ("action", "cwnd")} for x in trace]
    return trace


@pytest.mark.part("18.swift")
class TestSwift:
    @pytest.mark.concept("delay_target")
    def test_target_delay_scales_with_hops_and_window(self, world: World, reference) -> None:
        for cwnd, hops, want in [(0.25, 3, 36.0), (64.0, 3, 26.0), (1000.0, 0, 20.0), (0.01, 1, 32.0)]:
            got = run(world, "swift_target", params=SWIFT, cwnd=cwnd, hops=hops)
            same(got, want, f"target delay at cwnd {cwnd}, {hops} hops (flow scaling clamped to [0, 10])")
        for cwnd in (0.5, 1.0, 4.0, 16.0):
            got = run(world, "swift_target", params=SWIFT, cwnd=cwnd, hops=2)
            same(got, expect(reference, "swift_target", params=SWIFT, cwnd=cwnd, hops=2), f"target at {cwnd}")

    @pytest.mark.concept("additive_increase")
    def test_additive_increase(self, world: World, reference) -> None:
        acks = [[t, 10.0, 1] for t in range(0, 200, 10)]
        for cwnd in (0.2, 1.0, 8.0):
            got = run(world, "replay_swift", params=SWIFT, acks=acks, cwnd=cwnd)
            want = expect(reference, "replay_swift", params=SWIFT, acks=acks, cwnd=cwnd)
            same(window(got), window(want), f"AI from {cwnd}")

    @pytest.mark.concept("delay_decrease")
    def test_decrease_once_per_rtt_and_capped(self, world: World, reference) -> None:
        # RTT 100 us, 4x the target: the first cut would be by 62% and is capped at max_mdf = 50%; then hold
        # until a whole RTT (100 us) has passed. At 150 the RTT sample is 30 us: the next cut may come at 180.
        acks = [[0, 100.0, 1], [40, 100.0, 1], [99, 100.0, 1], [100, 100.0, 1], [150, 30.0, 4]]
        acks += [[179, 30.0, 1], [180, 30.0, 1]]
        got = run(world, "replay_swift", params=SWIFT, acks=acks, cwnd=16.0)
        actions = ["decrease", "hold", "hold", "decrease", "decrease", "hold", "decrease"]
        same([s["action"] for s in got], actions, "actions")
        same(got[0]["cwnd"], 8.0, "cwnd after a cut capped at max_mdf = 0.5")
        want = expect(reference, "replay_swift", params=SWIFT, acks=acks, cwnd=16.0)
        same(window(got), window(want), "decrease trace")

    @pytest.mark.concept("delay_decrease")
    def test_drawn_senders(self, world: World, reference) -> None:
        # Swift parameters and ACK streams drawn from a fixed seed: delays around and far above the target
        for seed in (11, 12, 13):
            r = random.Random(1880 + seed)
            params = {
                "base_target_us": r.uniform(5.0, 60.0),
                "per_hop_us": r.uniform(0.0, 5.0),
                "fs_range_us": r.uniform(0.0, 40.0),
                "fs_min_cwnd": r.choice([0.01, 0.1, 0.5]),
                "fs_max_cwnd": r.choice([16.0, 100.0, 400.0]),
                "ai": r.choice([0.5, 1.0, 2.0]),
                "beta": r.uniform(0.2, 1.0),
                "max_mdf": r.uniform(0.1, 0.9),
                "max_cwnd": 500.0,
            }
            acks, now = [], 0.0
            for _ in range(40):
                now += r.uniform(0.5, 60.0)
                acks.append([now, r.uniform(2.0, 4 * params["base_target_us"]), r.randint(1, 8)])
            start = {"params": params, "acks": acks, "cwnd": r.uniform(0.05, 40.0), "hops": r.randint(0, 6)}
            got = run(world, "replay_swift", **start)
            want = expect(reference, "replay_swift", **start)
            same(window(got), window(want), f"Swift trace with {params}, {start['hops']} hops")

    @pytest.mark.concept("pacing_below_one")
    def test_window_clamped_and_paced(self, world: World, reference) -> None:
        acks = [[i * 5000, 5000.0, 1] for i in range(12)] + [[20_000 + i, 1.0, 50] for i in range(5)]
        params = SWIFT | {"min_cwnd": 0.05, "max_cwnd": 20.0}
        got = run(world, "replay_swift", params=params, acks=acks, cwnd=2.0)
        same(got, expect(reference, "replay_swift", params=params, acks=acks, cwnd=2.0), "clamp and pacing")
        same(got[11]["cwnd"], 0.05, "cwnd floored at min_cwnd")
        same(got[11]["pacing_us"], 5000.0 / 0.05, "pacing interval = RTT / cwnd below one packet")
        same(got[-1]["cwnd"], 20.0, "cwnd capped at max_cwnd")
        same(got[-1]["pacing_us"], 0.0, "no pacing with cwnd >= 1")
