"""An independent restatement of how Megatron-LM builds its process groups, used as the oracle of
the layout property tests (tests/ranks/test_megatron_reference.py).

Written from the published algorithm of ``megatron/core/parallel_state.py`` (``RankGenerator``,
``generate_masked_orthogonal_rank_groups`` and the checks of ``initialize_model_parallel``), with
plain loops and no numpy, so that it shares no code and no trick with ``apps.ranks.layout``.
Slow on purpose: it enumerates every rank of every group.

What it restates:

* A rank generator lists its dimensions in the order string, the leftmost varying fastest; a
  dimension missing from the string must have size 1 and is appended in the order of Megatron's
  size table (tp, pp, dp, ep, cp).
* The groups for a set of dimensions (the "mask") are enumerated group by group: the group index
  is decoded, mixed-radix, over the dimensions outside the mask; the position inside the group
  over the dimensions inside it; the rank is the sum of digit x global stride.
* ``initialize_model_parallel`` builds a dense generator (tp, cp, dp, pp; ep = 1) and an expert one
  (etp, ep, edp, pp; cp = 1) and refuses when: tp x pp x cp does not divide the world size; etp x ep
  x pp does not divide it; the order does not end with pp while pp > 1 and dp != edp; or the two
  generators' pp groups are not the same lists.
"""
from __future__ import annotations

SIZE_TABLE_ORDER = ("tp", "pp", "dp", "ep", "cp")  # the order Megatron appends missing dimensions in


class MegatronRefusal(Exception):
    """Megatron would stop here (a RuntimeError or a failed assert in its code)."""


def _digits(number: int, radices: list[int]) -> list[int]:
    """Mixed-radix digits of ``number``, least significant (leftmost dimension) first."""
    digits = []
    for radix in radices:
        digits.append(number % radix)
        number //= radix
    return digits


def masked_orthogonal_groups(world_size: int, sizes: list[int], mask: list[bool]) -> list[list[int]]:
    """Every group whose members differ only in the masked dimensions, in Megatron's enumeration order."""
    strides, running = [], 1
    for size in sizes:
        strides.append(running)
        running *= size
    inside = [(size, stride) for size, stride, masked in zip(sizes, strides, mask) if masked]
    outside = [(size, stride) for size, stride, masked in zip(sizes, strides, mask) if not masked]
    group_size = 1
    for size, _ in inside:
        group_size *= size
    groups = []
    for group_index in range(world_size // group_size):
        base = sum(digit * stride for digit, (_, stride) in zip(_digits(group_index, [s for s, _ in outside]), outside))
        members = []
        for position in range(group_size):
            offset = sum(digit * stride for digit, (_, stride) in zip(_digits(position, [s for s, _ in inside]), inside))
            members.append(base + offset)
        groups.append(members)
    return groups


class ReferenceRankGenerator:
    def __init__(self, *, tp: int, ep: int, dp: int, pp: int, cp: int, order: str):
        if ep != 1 and cp != 1:
            raise MegatronRefusal("ep and cp both > 1 in one rank generator")
        size_of = {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "cp": cp}
        tokens = order.lower().split("-")
        for name in SIZE_TABLE_ORDER:
            if name not in tokens:
                if size_of[name] != 1:
                    raise MegatronRefusal(f"{name} has size {size_of[name]} but is not in the order {order!r}")
                tokens.append(name)
        self.tokens = tokens
        self.sizes = [size_of[token] for token in tokens]
        self.world_size = tp * ep * dp * pp * cp

    def get_ranks(self, token: str) -> list[list[int]]:
        wanted = token.split("-")
        mask = [name in wanted for name in self.tokens]
        return masked_orthogonal_groups(self.world_size, self.sizes, mask)


def initialize_model_parallel(world_size: int, *, tp: int, pp: int, cp: int = 1, ep: int = 1, etp: int | None = None,
                              order: str = "tp-cp-ep-dp-pp") -> dict[str, list[list[int]]]:
    """Every group Megatron builds, under the names ``apps.ranks.layout`` gives them; raises
    :class:`MegatronRefusal` where Megatron would stop."""
    model = tp * pp * cp
    if world_size % model:
        raise MegatronRefusal(f"world size {world_size} not divisible by {model}")
    dp = world_size // model
    dense = ReferenceRankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order=order)
    etp = tp if etp is None else etp
    expert_model = etp * ep * pp
    edp = world_size // expert_model
    if world_size % expert_model:
        raise MegatronRefusal(f"world size {world_size} not divisible by {expert_model}")
    expert = ReferenceRankGenerator(tp=etp, ep=ep, dp=edp, pp=pp, cp=1, order=order)
    if not (order.endswith("pp") or pp == 1 or edp == dp):
        raise MegatronRefusal("order does not end with pp and dp != edp")
    pipelines = dense.get_ranks("pp")
    if pipelines != expert.get_ranks("pp"):
        raise MegatronRefusal("pp groups differ between the dense and the expert generator")
    return {
        "dp-cp": dense.get_ranks("dp-cp"),
        "dp": dense.get_ranks("dp"),
        "cp": dense.get_ranks("cp"),
        "mp": dense.get_ranks("tp-pp"),
        "tp": dense.get_ranks("tp"),
        "pp": pipelines,
        "embedding": [[group[0], group[-1]] if len(group) > 1 else [group[0]] for group in pipelines],
        "position-embedding": [[group[0]] for group in pipelines],
        "tp-dp-cp": dense.get_ranks("tp-dp-cp"),
        "tp-dp": dense.get_ranks("tp-dp"),
        "tp-cp": dense.get_ranks("tp-cp"),
        "ep": expert.get_ranks("ep"),
        "etp": expert.get_ranks("tp"),
        "etp-ep": expert.get_ranks("tp-ep"),
        "etp-ep-pp": expert.get_ranks("tp-ep-pp"),
        "edp": expert.get_ranks("dp"),
    }
