"""The shrinking search (mtrl_gym.testing.shrink): minimal, same-failure, bounded, never raising."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtrl_gym.testing.shrink import show, shrink_actions, shrink_script, shrink_text


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.nested_given])  # find() inside
@given(before=st.text("abc<{[", max_size=3_000), after=st.text("xyz]}>", max_size=3_000),
       bad=st.sampled_from(["\ud800", "\x00", "\udfff"]))
def test_a_bad_character_anywhere_shrinks_to_itself(before, after, bad):
    assert shrink_text(lambda t: bad in t, before + bad + after) == bad


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.nested_given])
@given(unit=st.sampled_from(["<", "{", "ab"]), n=st.integers(50, 5_000), need=st.integers(1, 40))
def test_a_length_threshold_shrinks_to_the_shortest_failing_window(unit, n, need):
    text = unit * n
    need = min(need * len(unit), len(text))
    small = shrink_text(lambda t: len(t) >= need, text)
    assert len(small) == need and small in text


def test_an_exception_is_not_the_same_failure_and_the_budget_holds():
    def fails(t):
        if len(t) < 10:
            raise ValueError("another bug")
        return "!" in t

    assert shrink_text(fails, "x" * 100 + "!" + "y" * 100) in {"x" * 9 + "!", "!" + "y" * 9}
    assert shrink_text(lambda t: "!" in t, "a!" * 50, deadline_s=0.0) == "a!" * 50  # no time: the input
    assert shrink_text(lambda t: True, "anything") == ""


def test_actions_and_scripts_shrink_to_the_fewest_shortest_steps():
    assert shrink_actions(lambda a: any("ok" in x for x in a), ["no", "xxokxx", "no"]) == ["", "xxok"]  # prefixes
    script = {"p0": ["aaaa", "bbbb", "cccc"], "p1": ["dddd", "eeee", "ffff"]}
    assert shrink_script(lambda s: len(s["p0"]) >= 2, script) == {"p0": ["", ""], "p1": ["", ""]}


def test_show_is_short():
    assert show("abc") == "'abc'"
    assert show("ab" * 1000) == "'ab' * 1000"
    assert show("x" * 30 + "y" * 100, width=10) == "'xxxxxxxxxx'... (130 chars)"
