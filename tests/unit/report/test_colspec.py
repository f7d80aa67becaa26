"""A number with its spread: the digits the spread leaves meaningful (issue 41 item 7)."""

import pytest

from specbench.report.colspec import spread_digits, with_ci, with_sd


@pytest.mark.parametrize(("spread", "digits"), [
    (0.05, 2),     # one significant digit of 0.05 (it begins 50): 1.90x [1.85–1.95]
    (0.3185, 2),   # two of 0.32 (it begins 32)
    (0.529, 1),    # one of 0.5
    (0.0097, 3),   # rounds up to 0.010: two digits of it
    (4.1, 0),      # a σ of 4 tok/s: whole tokens
    (25.3, 0),
])
def test_the_spread_sets_the_digits(spread, digits):
    assert spread_digits(spread, 0, 5) == digits


def test_a_value_and_its_interval_in_one_cell_the_reference_digits_without_one():
    assert with_ci(1.9, 1.85, 1.95) == "1.90x [1.85–1.95]"
    assert with_ci(1.511, 1.223, 1.860) == "1.51x [1.22–1.86]"
    assert with_ci(1.459, 1.013, 2.071) == "1.5x [1.0–2.1]"  # a wide interval leaves one decimal meaningful
    assert with_ci(1.0, 0.9999, 1.0001) == "1.000x [1.000–1.000]"  # never past the reference's three
    assert with_ci(1.297, None, None) == "1.297x" and with_ci(None, 1.0, 1.2) == "—"


def test_a_mean_with_its_standard_deviation():
    assert with_sd(327.254, 4.1) == "327 ± 4"
    assert with_sd(327.254, 0.31) == "327.25 ± 0.31"
    assert with_sd(327.254, None) == "327.25" and with_sd(None, 1.0) == "—"
