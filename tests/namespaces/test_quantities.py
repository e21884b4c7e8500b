"""Kubernetes quantities are read exactly and compared as numbers, never as text."""
from decimal import Decimal

import pytest

from apps.namespaces.quantities import QuantityError, bytes_text, cpu_text, parse_quantity, whole


@pytest.mark.parametrize("text, value", [
    ("500m", Decimal("0.5")), ("4", Decimal(4)), (4, Decimal(4)), ("1.5", Decimal("1.5")), ("64Gi", Decimal(64 * 2**30)),
    ("1536Mi", Decimal(1536 * 2**20)), ("1.5Gi", Decimal(1536 * 2**20)), ("2k", Decimal(2000)), ("1e3", Decimal(1000)),
    ("128974848", Decimal(128974848)), ("129e6", Decimal(129_000_000)), ("123Mi", Decimal(123 * 2**20)), (".5", Decimal("0.5")),
])
def test_grammar(text, value):
    assert parse_quantity(text) == value


def test_equal_values_written_differently_compare_equal():
    assert parse_quantity("1.5Gi") == parse_quantity("1536Mi") and parse_quantity("1500m") == parse_quantity("1.5")
    assert parse_quantity("1Gi") > parse_quantity("1G")  # binary and decimal are not the same


@pytest.mark.parametrize("text, message", [
    ("", "not a Kubernetes quantity"), ("4 Gi", "not a Kubernetes quantity"), ("4GB", "not a Kubernetes quantity"),
    ("-1", "negative"), ("1e400", "exponent 400 is out of range"), ("99999999999999999999999Gi", "larger than any cluster"),
    ("４", "characters other than ASCII"), (True, "a number with an optional unit"), (None, "a number with an optional unit"),
    (["4"], "a quantity is text"), ("0x10", "not a Kubernetes quantity"), ("NaN", "not a Kubernetes quantity"),
])
def test_refusals(text, message):
    with pytest.raises(QuantityError, match=message):
        parse_quantity(text)


def test_counts_and_canonical_text():
    assert whole("3") == 3
    with pytest.raises(QuantityError, match="whole number"):
        whole("1.5")
    assert cpu_text(Decimal("1.5")) == "1500m" and cpu_text(Decimal(8)) == "8"
    assert bytes_text(parse_quantity("1.5Gi")) == "1536Mi" and bytes_text(parse_quantity("100Gi")) == "100Gi"


def test_exa_and_exbi_are_units_not_exponents():
    assert parse_quantity("2E") == 2 * 10**18 and parse_quantity("1Ei") == 2**60
    assert parse_quantity("3e2") == 300 and parse_quantity("5E-1") == Decimal("0.5")
