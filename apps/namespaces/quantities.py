"""Kubernetes resource quantities, read exactly and compared as numbers.

The grammar (``k8s.io/apimachinery/pkg/api/resource``): a signed decimal number followed by an
optional suffix — binary ``Ki Mi Gi Ti Pi Ei``, decimal ``n u m k M G T P E``, or an exponent
``e<n>``/``E<n>``. Values are kept as :class:`decimal.Decimal`, so ``1.5Gi`` equals ``1536Mi`` and
``500m`` is half a CPU; text is never compared. A value with more precision than a milli-unit would
be rounded up by the API server, and absurd sizes (beyond what a cluster could hold) are refused
rather than rendered.

Plain Python: no Django.
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_GRAMMAR = re.compile(r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal("1e3"),
            "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18")}
LIMIT = Decimal("1e21")  # more than any cluster has of anything (a zettabyte of memory, 10^21 CPUs)


class QuantityError(ValueError):
    pass


def parse_quantity(text) -> Decimal:
    """The value of a quantity (``"500m"``, ``"64Gi"``, ``4``); QuantityError says what is wrong."""
    if isinstance(text, bool) or text is None:
        raise QuantityError("a quantity is a number with an optional unit, e.g. 4, 500m, 64Gi")
    if isinstance(text, int):
        text = str(text)
    if not isinstance(text, str):
        raise QuantityError("a quantity is text such as 500m or 64Gi, or a whole number")
    raw = text.strip()
    if not raw.isascii():
        raise QuantityError(f"{text!r} contains characters other than ASCII digits and units")
    match = _GRAMMAR.fullmatch(raw)
    if not match:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity: a number and one of the units "
                            "m, k, M, G, T, Ki, Mi, Gi, Ti (e.g. 500m, 16, 64Gi)")
    suffix = match.group("suffix") or ""
    exponent = suffix not in _BINARY and suffix not in _DECIMAL  # e3, E-2; but E and Ei are exa and exbi
    if exponent and abs(int(suffix[1:])) > 30:
        raise QuantityError(f"{text!r}: exponent {int(suffix[1:])} is out of range")
    try:
        number = Decimal(match.group("number"))
        if suffix in _BINARY:
            value = number * _BINARY[suffix]
        elif not exponent:
            value = number * _DECIMAL[suffix]
        else:
            value = number.scaleb(int(suffix[1:]))
    except (InvalidOperation, ValueError) as exc:
        raise QuantityError(f"{text!r} is not a number") from exc
    if value < 0:
        raise QuantityError(f"{text!r} is negative")
    if value >= LIMIT:
        raise QuantityError(f"{text!r} is larger than any cluster")
    return value


def whole(text) -> int:
    """A count (GPUs, MIG slices, PVCs): a whole number, no unit."""
    value = parse_quantity(text)
    if value != value.to_integral_value():
        raise QuantityError(f"{text!r} must be a whole number")
    return int(value)


def cpu_text(value: Decimal) -> str:
    """Canonical CPU text: whole cores as ``4``, otherwise milli-cores ``1500m``."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int((value * 1000).to_integral_value(rounding='ROUND_CEILING'))}m"


def bytes_text(value: Decimal) -> str:
    """Canonical byte text in the largest binary unit that divides it (``64Gi``, ``1536Mi``)."""
    number = int(value.to_integral_value(rounding="ROUND_CEILING"))
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        if number and number % _BINARY[suffix] == 0:
            return f"{number // _BINARY[suffix]}{suffix}"
    return str(number)


def human_bytes(value: Decimal) -> str:
    number = float(value)
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        if number >= _BINARY[suffix]:
            return f"{number / _BINARY[suffix]:.4g} {suffix}B"
    return f"{number:.0f} B"
