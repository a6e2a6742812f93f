"""The shared count-and-noun text of reports, legends and the command line."""

from hypothesis import given
from hypothesis import strategies as st

from symkit.lab._text import count


def test_one_is_singular_and_every_other_count_plural():
    assert count(1, "run") == "1 run" and count(0, "run") == "0 runs" and count(3, "seed") == "3 seeds"


@given(st.integers(min_value=-5, max_value=10**6), st.sampled_from(["run", "seed", "failed run"]))
def test_the_number_comes_first_and_the_noun_is_kept(n, noun):
    text = count(n, noun)
    assert text.startswith(f"{n} {noun}") and text.endswith("s") == (n != 1)
