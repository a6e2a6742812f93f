"""Rep.restrict(H): the same rep read as a rep of a group acting on the same space (thesis Sec. 3.4: RPP between a
group and a subgroup needs the layers' reps under both)."""

from __future__ import annotations

import numpy as np
import pytest
from core_strategies import rep_exprs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symkit.groups import SL, SO, O, SO2eR3
from symkit.reps import PseudoScalar, Scalar, V

PAIRS = [(O(3), SO(3)), (O(3), SO2eR3()), (SL(3), SO(3))]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), pair=st.sampled_from(range(len(PAIRS))))
def test_a_restricted_rep_acts_as_the_original_on_the_subgroup(data, pair):
    G, H = PAIRS[pair]
    rep = data.draw(rep_exprs(G, max_size=40))
    restricted = rep.restrict(H)
    assert restricted.size == rep.size
    assert restricted.G in (None, H)
    for h in H.samples(2, seed=data.draw(st.integers(0, 99))):
        assert np.allclose(restricted.rho(h), rep.rho(h), atol=1e-10)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), pair=st.sampled_from(range(len(PAIRS))))
def test_a_subgroup_has_at_least_as_many_equivariant_maps(data, pair):
    G, H = PAIRS[pair]
    rep = data.draw(rep_exprs(G, max_size=30))
    hom = rep >> rep
    assert hom.restrict(H).rank() >= hom.rank()


def test_known_ranks_grow_from_the_group_to_the_subgroup():
    # V -> V: O(3) and SO(3) allow multiples of the identity; rotations about z also a plane rotation and the z part
    assert (V(O(3)) >> V(O(3))).rank() == 1
    assert (V(O(3)) >> V(O(3))).restrict(SO(3)).rank() == 1
    assert (V(O(3)) >> V(O(3))).restrict(SO2eR3()).rank() == 3
    # the pseudoscalar sign(det g) has an invariant under SO(3), none under O(3)
    assert PseudoScalar(O(3)).rank() == 0 and PseudoScalar(O(3)).restrict(SO(3)).rank() == 1
    assert V(O(3)).restrict(SO(3)) == V(SO(3)) and Scalar.restrict(SO(3)) is Scalar


def test_restricting_to_a_group_on_another_space_or_a_mixed_rep_is_refused():
    with pytest.raises(ValueError, match="acts on R\\^2, but O\\(3\\) acts on R\\^3"):
        V(O(3)).restrict(SO(2))
    with pytest.raises(ValueError, match="mixes the groups"):
        (V(O(3)) * V(SO(2))).restrict(SO(3))
    with pytest.raises(TypeError, match="expected a Group"):
        V(O(3)).restrict("SO(3)")
