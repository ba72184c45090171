"""Property tests of the TASPO weights (engine/credit.py): bounds, mean 1, no PI -> uniform, sign
symmetry, more credit for a larger aligned shift when the outcome is good."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from s3gym_tui.engine.credit import (action_shifts, group_advantages, phi, taspo_weights,
                                     token_weights)

shift = st.floats(min_value=-5, max_value=5, allow_nan=False)
tokens = st.lists(shift, min_size=0, max_size=6)
maybe_tokens = st.one_of(st.none(), tokens)
actions = st.lists(maybe_tokens, min_size=0, max_size=8)
advantage = st.floats(min_value=-10, max_value=10, allow_nan=False)
kappa = st.floats(min_value=0, max_value=1)
tau = st.floats(min_value=0.05, max_value=5)
eps_w = st.floats(min_value=0, max_value=1)


@settings(max_examples=300, deadline=None)
@given(advantage, actions, kappa, tau, eps_w)
def test_weights_are_bounded_and_average_one(a, shifts, k, t, e):
    w = taspo_weights(a, shifts, kappa=k, tau=t, eps_w=e)
    assert len(w) == len(shifts)
    assert all(1 - e <= x <= 1 + e for x in w)
    aligned = [x for x, s in zip(w, shifts) if s is not None]
    if aligned:  # PI only moves credit between the aligned actions: their mean stays 1
        assert math.fsum(aligned) / len(aligned) == pytest.approx(1.0, abs=1e-9)
    assert all(x == 1.0 for x, s in zip(w, shifts) if s is None)


@settings(max_examples=100, deadline=None)
@given(advantage, st.integers(min_value=0, max_value=8), kappa, tau, eps_w)
def test_no_pi_is_plain_grpo(a, n, k, t, e):
    assert taspo_weights(a, [None] * n, kappa=k, tau=t, eps_w=e) == [1.0] * n


@settings(max_examples=300, deadline=None)
@given(advantage, actions, kappa, tau, eps_w)
def test_sign_of_advantage_mirrors_weights(a, shifts, k, t, e):
    up = taspo_weights(a, shifts, kappa=k, tau=t, eps_w=e)
    down = taspo_weights(-a, shifts, kappa=k, tau=t, eps_w=e)
    assert [u - 1 for u in up] == pytest.approx([1 - d for d in down], abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=0.01, max_value=10), st.lists(tokens, min_size=2, max_size=6),
       st.integers(min_value=0, max_value=5), st.floats(min_value=0.01, max_value=3), kappa, tau,
       st.floats(min_value=0.01, max_value=1))
def test_larger_aligned_shift_earns_more_credit_when_outcome_is_good(a, shifts, which, bump, k, t, e):
    which %= len(shifts)
    assume(shifts[which])  # an aligned action with tokens
    before = taspo_weights(a, shifts, kappa=k, tau=t, eps_w=e)
    raised = [list(s) for s in shifts]
    raised[which] = [x + bump for x in raised[which]]
    after = taspo_weights(a, raised, kappa=k, tau=t, eps_w=e)
    d_before, d_after = action_shifts(shifts, k)[which], action_shifts(raised, k)[which]
    assert after[which] >= before[which] - 1e-12
    d_all = [d for d in action_shifts(raised, k) if d is not None]
    centred = [abs(d - sum(d_all) / len(d_all)) / t for d in d_all]
    if d_after > d_before + 1e-3 and max(centred) < 3:  # tanh not saturated: a strict gain
        assert after[which] > before[which]
    bad = taspo_weights(-a, raised, kappa=k, tau=t, eps_w=e)  # a bad outcome: the blame moves the other way
    assert bad[which] <= taspo_weights(-a, shifts, kappa=k, tau=t, eps_w=e)[which] + 1e-12


def test_worked_example():
    # Two aligned actions, d = 0.4 and 0: centred +-0.2, q = +-tanh(0.2), w = 1 +- 0.25 * tanh(0.2).
    w = taspo_weights(2.0, [[0.4, 0.4], [0.0], None], kappa=0.1, tau=1.0, eps_w=0.5)
    assert w == pytest.approx([1 + 0.25 * math.tanh(0.2), 1 - 0.25 * math.tanh(0.2), 1.0])
    # Shifts below kappa are filtered out: nothing to tell the two actions apart.
    assert taspo_weights(2.0, [[0.05], [-0.05]], kappa=0.1) == [1.0, 1.0]
    assert taspo_weights(0.0, [[3.0], [-3.0]]) == [1.0, 1.0]  # no outcome signal, no redistribution


def test_phi_filters_small_and_non_finite_shifts():
    assert phi(0.2, 0.3) == 0 and phi(-0.3, 0.3) == -0.3 and phi(float("inf"), 0) == 0


@settings(max_examples=200, deadline=None)
@given(advantage, actions, kappa, tau, eps_w)
def test_token_weights_bounded_and_average_one(a, shifts, k, t, e):
    w = token_weights(a, shifts, kappa=k, tau=t, eps_w=e)
    flat = [x for ws in w if ws is not None for x in ws]
    assert all(1 - e <= x <= 1 + e for x in flat)
    if flat:
        assert math.fsum(flat) / len(flat) == pytest.approx(1.0, abs=1e-9)
    assert [ws is None for ws in w] == [s is None for s in shifts]


def test_bad_parameters_are_refused():
    for kw in ({"tau": 0}, {"eps_w": 1.5}, {"kappa": -1}):
        with pytest.raises(ValueError):
            taspo_weights(1.0, [[0.1]], **kw)


def test_group_advantages():
    adv = group_advantages([1.0, 0.0, None, 1.0, 0.0], delta=0.0)
    assert adv == pytest.approx([1.0, -1.0, None, 1.0, -1.0])
    assert group_advantages([None, None]) == [None, None]
    assert group_advantages([0.7]) == [0.0]
