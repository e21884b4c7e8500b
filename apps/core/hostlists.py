"""Slurm hostlist expressions expanded exactly as Slurm's ``src/common/hostlist.c`` does (plain: no Django).

``expand("nid[001234-001235] nid001300")`` is ``["nid001234", "nid001235", "nid001300"]``: what
``scontrol show hostnames`` prints, for a one-dimensional cluster (every cluster Belvedere knows).

The grammar, from ``hostlist_create()`` (``_hostlist_create_bracketed``, ``_next_tok``,
``_parse_single_range``, ``_push_range_list``):

- tokens are separated by any run of commas, spaces, tabs and newlines (``"\\t, \\n"``) outside brackets;
- in a token the *last* ``[...]`` holds comma-separated numbers and ``lo-hi`` ranges; the width of ``lo``
  as written is the zero-padded width of every number of that range (``[08-10]`` → 08, 09, 10;
  ``[8-10]`` → 8, 9, 10); text after the ``]`` is a suffix (``a[1-2]b`` → a1b, a2b);
- more brackets before it are expanded recursively from the right: for ``B1..Bn`` the loops run
  ``B(n-1)`` outermost, then ``B(n-2)`` … ``B1``, and ``Bn`` innermost (``row[0,1]_rack[2-3]_blade[4,5]``
  starts row0_rack2_blade4, row0_rack2_blade5, row1_rack2_blade4: Slurm's test2.20), not the plain
  left-to-right product;
- nothing is sorted and nothing is made unique (``tux[2,1-2]`` → tux2, tux1, tux2: scontrol(1));
- errors: a ``[`` without ``]``, an empty or non-numeric range, ``hi < lo``, a negative number, more
  than 65,536 hosts in one range or more than 65,536 numbers in a prefix bracket.

python-hostlist (``hostlist.expand_hostlist``) disagrees with Slurm on its own cases: whitespace does
not separate (``"nid[001234-001235] nid001300"`` gives the host ``"nid001234 nid001300"``), duplicates
are dropped unless asked, and three or more brackets come out in left-to-right product order. Hence
this module; compressing a list of names into an expression (``collect_hostlist``) still uses it.
"""

SEPARATORS = "\t, \n"
MAX_RANGE = 64 * 1024  # MAX_SLURM_NODES: hosts in one lo-hi range
MAX_PREFIX_CNT = 64 * 1024
MAX_RANGES = 256 * 1024
MAX_HOSTS = 1_000_000  # Belvedere's own bound on one expansion (a node list is at most a machine)
_SPACE = " \t\n\v\f\r"


class HostlistError(ValueError):
    """Not a Slurm hostlist expression; the message says what is wrong."""


def tokens(expression: str) -> list[str]:
    """Split like ``_next_tok``: on separators, but never inside a ``[...]`` pair."""
    result, position, length = [], 0, len(expression)
    while True:
        while position < length and expression[position] in SEPARATORS:
            position += 1
        if position >= length:
            return result
        start = parse = end = position
        while True:
            while end < length and expression[end] not in SEPARATORS:
                end += 1
            extended = False
            while True:
                opening = expression.find("[", parse)
                if opening < 0 or opening > end:
                    break
                closing = expression.find("]", parse)
                if closing < 0 or closing < opening:
                    break
                if closing < end:
                    parse = closing + 1
                    continue
                end, extended = closing, True
                break
            if not extended:
                break
        result.append(expression[start:end])
        position = end


def _strtoul(text: str) -> tuple[int | None, str]:
    """C's strtoul in base 10: leading white space and a sign, then digits; (value, rest) or (None, text)."""
    index = 0
    while index < len(text) and text[index] in _SPACE:
        index += 1
    negative = index < len(text) and text[index] in "+-" and text[index] == "-"
    if index < len(text) and text[index] in "+-":
        index += 1
    digits = index
    while index < len(text) and text[index].isascii() and text[index].isdigit():
        index += 1
    if index == digits:
        return None, text
    value = min(int(text[digits:index]), 2**64 - 1)
    return ((2**64 - value) % 2**64 if negative else value), text[index:]


def _ranges(text: str, where: str) -> list[tuple[int, int, int]]:
    """``1-3,5,08-10`` → [(lo, hi, width), ...] as ``_parse_range_list`` reads it."""
    ranges = []
    for part in text.split(","):
        if len(ranges) >= MAX_RANGES:
            raise HostlistError(f"{where}: more than {MAX_RANGES} ranges")
        if "x" in part:
            raise HostlistError(f"{where}: invalid range {part!r}")
        low_text, dash, high_text = part.partition("-")
        if dash and high_text.startswith("-"):
            raise HostlistError(f"{where}: invalid range {part!r} (negative numbers are not allowed)")
        low, rest = _strtoul(low_text)
        if low is None:
            raise HostlistError(f"{where}: invalid range {part!r}")
        if dash and high_text:
            high, rest = _strtoul(high_text)  # text after the start's digits is ignored here, as in Slurm
            if high is None or rest:
                raise HostlistError(f"{where}: invalid range {part!r}")
        elif rest:  # "5a"; "5-" is read as 5, as Slurm does
            raise HostlistError(f"{where}: invalid range {part!r}")
        else:
            high = low
        if low > high:
            raise HostlistError(f"{where}: invalid range {part!r} (the end is below the start)")
        if high - low + 1 > MAX_RANGE:
            raise HostlistError(f"{where}: too many hosts in range {part!r}")
        ranges.append((low, high, len(low_text)))
    return ranges


def _push(out: list[str], prefix: str, suffix: str, ranges, where: str) -> None:
    """``_push_range_list``: a ``[...]`` left in the prefix multiplies the hosts, right to left."""
    opening = prefix.rfind("[")
    closing = prefix.rfind("]", opening + 1) if opening >= 0 else -1
    if opening >= 0 and closing >= 0:
        head, inner, tail = prefix[:opening], prefix[opening + 1:closing], prefix[closing + 1:]
        prefix_ranges = _ranges(inner, where)
        if sum(high - low + 1 for low, high, _ in prefix_ranges) > MAX_PREFIX_CNT:
            raise HostlistError(f"{where}: more than {MAX_PREFIX_CNT} numbers in a bracket before the last")
        for low, high, width in prefix_ranges:
            for number in range(low, high + 1):
                _push(out, f"{head}{number:0{width}d}{tail}", suffix, ranges, where)
        return
    for low, high, width in ranges:
        if len(out) + high - low + 1 > MAX_HOSTS:
            raise HostlistError(f"{where}: more than {MAX_HOSTS} hosts")
        out.extend(f"{prefix}{number:0{width}d}{suffix}" for number in range(low, high + 1))


def expand(expression: str) -> list[str]:
    """Every host name of ``expression``, in Slurm's order, duplicates kept; HostlistError if invalid."""
    hosts: list[str] = []
    for token in tokens(expression or ""):
        opening = token.rfind("[")
        if opening < 0:
            hosts.append(token)
            continue
        closing = token.find("]", opening)
        if closing < 0:
            raise HostlistError(f"{token[:80]!r}: '[' without ']'")
        _push(hosts, token[:opening], token[closing + 1:], _ranges(token[opening + 1:closing], repr(token[:80])), repr(token[:80]))
        if len(hosts) > MAX_HOSTS:
            raise HostlistError(f"{token[:80]!r}: more than {MAX_HOSTS} hosts")
    return hosts
