"""Megatron-LM rank layout: which tensor/context/data/pipeline/expert coordinates a global rank has,
which communicators (process groups) it belongs to, which layers it holds, and where Slurm puts it.

Pure: must not import django. Standard library and numpy only.

The rules restate Megatron-LM's ``RankGenerator`` (reference notes, topology-megatron.md §2):

* An order string such as ``tp-cp-ep-dp-pp`` lists the parallel dimensions; the **leftmost varies
  fastest**: ``rank = Σ_j i_j · Π_{m<j} s_m``. Dimensions missing from the string must have size 1;
  they are appended (Megatron appends in the order tp, pp, dp, ep, cp; with size 1 the position
  changes no rank).
* A group for a token set T holds all ranks that differ only in their coordinates in T.
* Two generators run on the same ranks ("MoE parallel folding"): the dense one (tp, cp, dp, pp;
  ep = 1) for attention and the expert one (tp = etp, ep, dp = edp, pp; cp = 1) for MoE layers.
  One generator cannot have both ep > 1 and cp > 1, but the job can: cp lives in the dense view,
  ep in the expert view. As ``initialize_model_parallel`` asserts, both views must give the same
  pipeline groups, and when pp > 1 is not last in the order, the same data-parallel size (dp = edp).
  With pp = 1 neither constrains anything: every pipeline group is a single rank.
  ``tests/ranks/megatron_reference.py`` restates Megatron's construction; a property test checks
  that this module accepts exactly what it accepts and builds the same groups.
* Virtual pipeline (interleaved schedule) does not move ranks; it decides which layers a pipeline
  rank holds: chunk c of pipeline rank r is virtual stage ``c·PP + r``.

Not modelled: ``gtp_remat`` (an extra axis after tp in new Megatron versions),
``num_distributed_optimizer_instances`` sub-groups, ``--pipeline-model-parallel-layout`` and
``account_for_embedding/loss_in_pipeline_split``; for those, take layer ranges from the job's log.

Group arrays are built by reshaping ``arange(W)`` to the generator's grid and moving the group's
axes last, so every kind for 10,752 ranks takes well under a millisecond of numpy work.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from math import prod
from collections.abc import Iterable, Mapping

import numpy as np

from apps.core.perf import gc_paused

TOKENS: tuple[str, ...] = ("tp", "cp", "ep", "dp", "pp")
# Megatron appends missing tokens in the order of its size dictionary, not of TOKENS.
_APPEND_ORDER: tuple[str, ...] = ("tp", "pp", "dp", "ep", "cp")
DEFAULT_ORDER = "tp-cp-ep-dp-pp"
TP_PP_DP_ORDER = "tp-cp-ep-pp-dp"  # what --use-tp-pp-dp-mapping selects

# kind -> (generator, tokens whose coordinates vary inside one group)
_KIND_TOKENS: dict[str, tuple[str, frozenset[str]]] = {
    "tp": ("dense", frozenset({"tp"})),
    "pp": ("dense", frozenset({"pp"})),
    "dp": ("dense", frozenset({"dp"})),
    "cp": ("dense", frozenset({"cp"})),
    "dp-cp": ("dense", frozenset({"dp", "cp"})),
    "tp-cp": ("dense", frozenset({"tp", "cp"})),
    "tp-dp": ("dense", frozenset({"tp", "dp"})),
    "tp-dp-cp": ("dense", frozenset({"tp", "dp", "cp"})),
    "mp": ("dense", frozenset({"tp", "pp"})),
    "ep": ("expert", frozenset({"ep"})),
    "etp": ("expert", frozenset({"tp"})),
    "edp": ("expert", frozenset({"dp"})),
    # Megatron also builds these two from the expert generator ("tp-ep" and "tp-ep-pp" there).
    "etp-ep": ("expert", frozenset({"tp", "ep"})),
    "etp-ep-pp": ("expert", frozenset({"tp", "ep", "pp"})),
}
# Derived from the pp groups rather than from a token set.
_PIPELINE_END_KINDS = ("embedding", "position-embedding")
GROUP_KINDS: tuple[str, ...] = (*_KIND_TOKENS, *_PIPELINE_END_KINDS)

# The portal-facing names of the group tokens of each kind (etp/edp for the expert view), so that
# callers can compute "group size = product of the sizes of the kind's tokens".
KIND_SIZE_TOKENS: dict[str, tuple[str, ...]] = {
    "tp": ("tp",), "pp": ("pp",), "dp": ("dp",), "cp": ("cp",), "dp-cp": ("dp", "cp"),
    "tp-cp": ("tp", "cp"), "tp-dp": ("tp", "dp"), "tp-dp-cp": ("tp", "dp", "cp"), "mp": ("tp", "pp"),
    "ep": ("ep",), "etp": ("etp",), "edp": ("edp",), "etp-ep": ("etp", "ep"), "etp-ep-pp": ("etp", "ep", "pp"),
}




class LayoutError(ValueError):
    """The parallel sizes, order string, layer split or placement cannot describe a Megatron job.

    The message says what is wrong and what to change."""


def _check_count(name: str, value: object, *, minimum: int = 1, optional: bool = False) -> None:
    # bool is an int subclass; True as a size is always a mistake.
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise LayoutError(f"{name} must be {what}, got {value!r}")


def parse_order(order: str) -> tuple[str, ...]:
    """The tokens of ``order`` (lower-cased), followed by the known tokens it leaves out.

    Raises :class:`LayoutError` for unknown or repeated tokens. Whether a left-out token may be
    left out (its size must be 1) is checked by whoever knows the sizes."""
    if not isinstance(order, str):
        raise LayoutError(f"order must be a string like {DEFAULT_ORDER!r}, got {order!r}")
    normalised = order.strip().lower()
    tokens = [token.strip() for token in normalised.split("-")]
    seen: list[str] = []
    for token in tokens:
        if token not in TOKENS:
            raise LayoutError(f"unknown token {token!r} in order {order!r}; known: {', '.join(TOKENS)}")
        if token in seen:
            raise LayoutError(f"order {order!r} repeats {token!r}; name each of {', '.join(TOKENS)} at most once")
        seen.append(token)
    return (*seen, *(token for token in _APPEND_ORDER if token not in seen))


def _given_tokens(order: str) -> set[str]:
    return {token.strip() for token in order.strip().lower().split("-")}


class RankGenerator:
    """One Megatron rank generator: sizes per token, laid out by an order string.

    ``sizes`` maps tokens (tp, cp, ep, dp, pp; missing = 1) to sizes; the world size is their
    product. :class:`RankLayout` builds two of these (dense and expert)."""

    def __init__(self, sizes: Mapping[str, int], order: str = DEFAULT_ORDER, names: Mapping[str, str] | None = None):
        # names: how messages call each token (the expert view says etp/edp for its tp/dp).
        self.names: dict[str, str] = {token: (names or {}).get(token, token) for token in TOKENS}
        unknown = set(sizes) - set(TOKENS)
        if unknown:
            raise LayoutError(f"unknown size name(s) {sorted(unknown)}; known: {', '.join(TOKENS)}")
        full = {token: int(sizes.get(token, 1)) for token in TOKENS}
        for token, size in full.items():
            _check_count(self.names[token], size)
        if full["ep"] > 1 and full["cp"] > 1:
            raise LayoutError(
                "ep and cp cannot both be > 1 in one generator (Megatron builds experts in a second "
                "generator: set ep for experts, cp for attention)"
            )
        self.order: tuple[str, ...] = parse_order(order)
        given = _given_tokens(order)
        for token in TOKENS:
            if token not in given and full[token] > 1:
                raise LayoutError(
                    f"{self.names[token]}={full[token]} but order {order!r} has no {token!r}; every size > 1 must be "
                    f"named in the order (e.g. {DEFAULT_ORDER!r})"
                )
        self.sizes: dict[str, int] = full
        self.ordered_sizes: tuple[int, ...] = tuple(full[token] for token in self.order)
        # stride of a token = product of the sizes of the tokens left of it (leftmost fastest).
        self.strides: dict[str, int] = {}
        stride = 1
        for token, size in zip(self.order, self.ordered_sizes):
            self.strides[token] = stride
            stride *= size
        self.world_size: int = stride

    def coords(self, rank: int) -> dict[str, int]:
        return {token: (rank // self.strides[token]) % self.sizes[token] for token in TOKENS}

    def rank(self, coords: Mapping[str, int]) -> int:
        rank = 0
        for token in TOKENS:
            value = int(coords.get(token, 0))
            if not 0 <= value < self.sizes[token]:
                raise LayoutError(f"{self.names[token]}={value} is outside 0..{self.sizes[token] - 1}")
            rank += value * self.strides[token]
        return rank

    def all_coords(self, ranks: np.ndarray) -> dict[str, np.ndarray]:
        return {token: (ranks // self.strides[token]) % self.sizes[token] for token in TOKENS}

    def groups(self, tokens: Iterable[str]) -> np.ndarray:
        """2-D array: one row per group, members ascending, rows ordered by first member.

        The grid ``arange(W).reshape(reversed ordered sizes)`` has the slowest token first (C
        order). Keeping the grid's axis order while moving the group's axes last makes each row
        ascending (a slower axis's stride exceeds the span of all faster ones) and the rows ordered
        by their first member (the row index walks the other axes in the same slow-to-fast order)."""
        wanted = set(tokens)
        grid_tokens = self.order[::-1]
        grid = np.arange(self.world_size, dtype=np.int64).reshape(self.ordered_sizes[::-1])
        outside = [axis for axis, token in enumerate(grid_tokens) if token not in wanted]
        inside = [axis for axis, token in enumerate(grid_tokens) if token in wanted]
        size = prod(self.sizes[token] for token in wanted)
        return grid.transpose(outside + inside).reshape(-1, size)


@dataclass(frozen=True)
class ParallelSizes:
    """The parallel sizes of a Megatron job, as its arguments name them.

    ``dp`` may be left out and derived from the world size (:meth:`for_world`); ``etp`` defaults to
    ``tp``. ``vpp`` is the number of model chunks per pipeline rank (None: no interleaving).
    ``first_stage_layers``/``last_stage_layers`` are ``--decoder-first/last-pipeline-num-layers``.
    Construction checks what does not depend on the world size; :meth:`for_world` the rest."""

    tp: int
    pp: int
    cp: int = 1
    ep: int = 1
    dp: int | None = None
    etp: int | None = None
    vpp: int | None = None
    order: str = DEFAULT_ORDER
    num_layers: int | None = None
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "cp", "ep"):
            _check_count(name, getattr(self, name))
        for name in ("dp", "etp", "vpp", "num_layers"):
            _check_count(name, getattr(self, name), optional=True)
        for name in ("first_stage_layers", "last_stage_layers"):
            _check_count(name, getattr(self, name), minimum=0, optional=True)
        parse_order(self.order)
        # Store the order lower-cased and stripped so equal layouts compare equal.
        object.__setattr__(self, "order", "-".join(token.strip() for token in self.order.strip().lower().split("-")))
        given = _given_tokens(self.order)
        for name, token, size in (("tp", "tp", self.tp), ("pp", "pp", self.pp), ("cp", "cp", self.cp),
                                  ("ep", "ep", self.ep), ("dp", "dp", self.dp or 1), ("etp", "tp", self.etp or 1)):
            if size > 1 and token not in given:
                raise LayoutError(
                    f"{name}={size} but order {self.order!r} has no {token!r}; every size > 1 must be "
                    f"named in the order (e.g. {DEFAULT_ORDER!r})"
                )
        # Computing the split once validates it; stage_layers() recomputes (cheap) when asked.
        self.stage_layers()

    # ---- world size ----------------------------------------------------------------------------

    @classmethod
    def resolve(cls, world_size: int, **fields: object) -> "ParallelSizes":
        """``ParallelSizes(**fields)`` checked against ``world_size``, with dp and etp filled in."""
        return cls(**fields).for_world(world_size)  # type: ignore[arg-type]

    def for_world(self, world_size: int) -> "ParallelSizes":
        """A copy with ``dp`` (= W / (tp·pp·cp)) and ``etp`` filled in, after checking that both the
        dense and the expert generator tile ``world_size`` and share their pipeline groups."""
        _check_count("world size", world_size)
        model = self.tp * self.pp * self.cp
        if world_size % model:
            raise LayoutError(
                f"tp={self.tp} x pp={self.pp} x cp={self.cp} = {model} does not divide the world size {world_size}"
            )
        dp = world_size // model
        if self.dp is not None and self.dp != dp:
            raise LayoutError(
                f"tp={self.tp} x pp={self.pp} x cp={self.cp} x dp={self.dp} = {model * self.dp} but the world "
                f"size is {world_size}; leave dp out to derive it (here it would be {dp})"
            )
        etp = self.tp if self.etp is None else self.etp
        expert_model = etp * self.ep * self.pp
        if world_size % expert_model:
            raise LayoutError(
                f"etp={etp} x ep={self.ep} x pp={self.pp} = {expert_model} does not divide the world size "
                f"{world_size} (experts use etp x ep x edp x pp ranks; change ep or etp)"
            )
        edp = world_size // expert_model
        given = _given_tokens(self.order)
        for name, size in (("dp", dp), ("edp", edp)):
            if size > 1 and "dp" not in given:
                raise LayoutError(
                    f"{name}={size} (derived from the world size {world_size}) but order {self.order!r} has no "
                    f"'dp'; add it (e.g. {DEFAULT_ORDER!r})"
                )
        resolved = replace(self, dp=dp, etp=etp)
        dense, expert = resolved._generators(world_size)
        # Megatron's two checks (initialize_model_parallel). With pp = 1 both pass whatever the
        # order: every pp group is a single rank, the same in both views.
        if self.pp > 1 and dense.strides["pp"] != expert.strides["pp"]:
            # Same PP and W: the pp groups coincide exactly when the pp strides do (the group of rank
            # 0 is {0, s, 2s, ...}); equal groups are listed alike (ascending, by first member).
            raise LayoutError(
                f"with order {self.order!r} pipeline stages are {dense.strides['pp']} ranks apart for attention "
                f"(tokens before pp: {self._before_pp('dense')}) but {expert.strides['pp']} for experts "
                f"({self._before_pp('expert')}); Megatron requires identical pp groups in both views: make "
                "these products equal, or put pp last in the order"
            )
        if self.pp > 1 and self.order.split("-")[-1] != "pp" and dp != edp:
            raise LayoutError(
                f"with order {self.order!r} (pp not last) and pp={self.pp}, Megatron requires the same data-parallel "
                f"size for attention and experts, but dp={dp} and edp={edp} (edp = world size / (etp x ep x pp)); "
                "make tp x cp equal etp x ep, or put pp last in the order"
            )
        return resolved

    def expert_dp(self, world_size: int) -> int:
        """edp = W / (etp·ep·pp), the data-parallel size of the expert view."""
        resolved = self.for_world(world_size)
        return world_size // (resolved.etp * resolved.ep * resolved.pp)  # type: ignore[operator]

    def _before_pp(self, view: str) -> str:
        names = {"tp": "etp" if view == "expert" else "tp", "dp": "edp" if view == "expert" else "dp", "cp": "cp", "ep": "ep"}
        skip = "ep" if view == "dense" else "cp"  # size 1 in that view
        before = []
        for token in parse_order(self.order):
            if token == "pp":
                break
            if token != skip:
                before.append(names[token])
        return " x ".join(before) or "none"

    def _generators(self, world_size: int) -> tuple[RankGenerator, RankGenerator]:
        assert self.dp is not None and self.etp is not None, "call for_world() first"
        dense = RankGenerator({"tp": self.tp, "cp": self.cp, "ep": 1, "dp": self.dp, "pp": self.pp}, self.order)
        edp = world_size // (self.etp * self.ep * self.pp)
        expert = RankGenerator({"tp": self.etp, "cp": 1, "ep": self.ep, "dp": edp, "pp": self.pp}, self.order,
                               names={"tp": "etp", "dp": "edp"})
        return dense, expert

    # ---- layers --------------------------------------------------------------------------------

    @property
    def chunks(self) -> int:
        """Model chunks per pipeline rank (1 without a virtual pipeline)."""
        return self.vpp or 1

    def stage_layers(self) -> list[int] | None:
        """Number of transformer layers per pipeline rank, or None when num_layers is unknown."""
        first, last, layers, pp, v = self.first_stage_layers, self.last_stage_layers, self.num_layers, self.pp, self.chunks
        if self.vpp is not None and self.vpp > 1 and pp == 1:
            raise LayoutError(f"vpp {self.vpp} needs pp > 1 (the interleaved schedule splits pipeline stages into chunks)")
        if layers is None:
            if first is not None or last is not None:
                raise LayoutError("first_stage_layers/last_stage_layers need num_layers")
            return None
        if first is None and last is None:
            if layers % (pp * v):
                if self.vpp is None:
                    raise LayoutError(f"num_layers {layers} is not divisible by pp {pp}")
                raise LayoutError(f"num_layers {layers} is not divisible by pp {pp} x vpp {v} = {pp * v}")
            return [layers // pp] * pp
        if pp == 1:
            raise LayoutError("first_stage_layers/last_stage_layers need pp > 1 (with pp 1 one stage holds every layer)")
        # Megatron: the stages not given explicitly share what is left evenly.
        middle_layers = layers - (first or 0) - (last or 0)
        middle_stages = pp - (first is not None) - (last is not None)
        if middle_layers < 0:
            raise LayoutError(
                f"first_stage_layers {first or 0} + last_stage_layers {last or 0} = {(first or 0) + (last or 0)} "
                f"exceeds num_layers {layers}"
            )
        if middle_stages == 0:
            if middle_layers:
                raise LayoutError(
                    f"with pp {pp} there are no middle stages, so first_stage_layers {first} + last_stage_layers "
                    f"{last} must equal num_layers {layers}"
                )
            per_middle = 0
        elif middle_layers % middle_stages:
            raise LayoutError(
                f"the {middle_layers} layers left after the first/last stages are not divisible by the "
                f"{middle_stages} remaining pipeline stages; change first_stage_layers/last_stage_layers"
            )
        else:
            per_middle = middle_layers // middle_stages
        counts = [per_middle] * pp
        if first is not None:
            counts[0] = first
        if last is not None:
            counts[-1] = last
        if v > 1:
            for name, count in (("first_stage_layers", first), ("last_stage_layers", last), ("middle-stage layers", per_middle)):
                if count is not None and count % v:
                    raise LayoutError(f"{name} {count} is not divisible by vpp {v}; every stage splits into {v} equal chunks")
        return counts


class RankLayout:
    """Every rank of one job: coordinates in the dense and expert views, groups, layers.

    ``sizes`` may leave dp/etp unset; they are derived from ``world_size``."""

    def __init__(self, sizes: ParallelSizes, world_size: int):
        self.sizes: ParallelSizes = sizes.for_world(world_size)
        self.world_size: int = world_size
        self.dense, self.expert = self.sizes._generators(world_size)
        self.tp, self.cp, self.pp, self.ep = self.sizes.tp, self.sizes.cp, self.sizes.pp, self.sizes.ep
        self.dp: int = self.dense.sizes["dp"]
        self.etp: int = self.expert.sizes["tp"]
        self.edp: int = self.expert.sizes["dp"]
        self._groups: dict[str, np.ndarray] = {}
        self._group_index: dict[str, np.ndarray] = {}

    def __repr__(self) -> str:
        return (f"RankLayout(W={self.world_size}, tp={self.tp}, cp={self.cp}, dp={self.dp}, pp={self.pp}, "
                f"etp={self.etp}, ep={self.ep}, edp={self.edp}, order={self.sizes.order!r})")

    @property
    def sizes_by_name(self) -> dict[str, int]:
        """Sizes under the names coords() uses (tp, cp, dp, pp, etp, ep, edp)."""
        return {"tp": self.tp, "cp": self.cp, "dp": self.dp, "pp": self.pp, "etp": self.etp, "ep": self.ep, "edp": self.edp}

    # ---- coordinates ---------------------------------------------------------------------------

    def _check_rank(self, rank: int) -> int:
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < self.world_size:
            raise LayoutError(f"rank {rank!r} is outside 0..{self.world_size - 1}")
        return int(rank)

    def coords(self, rank: int) -> dict[str, int]:
        """Dense coordinates tp, cp, dp, pp and expert coordinates etp, ep, edp of ``rank``."""
        rank = self._check_rank(rank)
        dense, expert = self.dense.coords(rank), self.expert.coords(rank)
        return {"tp": dense["tp"], "cp": dense["cp"], "dp": dense["dp"], "pp": dense["pp"],
                "etp": expert["tp"], "ep": expert["ep"], "edp": expert["dp"]}

    def rank_of(self, *, tp: int | None = None, cp: int | None = None, dp: int | None = None, pp: int | None = None,
                etp: int | None = None, ep: int | None = None, edp: int | None = None) -> int:
        """The rank with these coordinates (missing ones = 0). Dense coordinates (tp/cp/dp) and
        expert ones (etp/ep/edp) may be given together, as coords() returns them; they must then
        name the same rank. pp is shared by both views."""
        dense_given = any(value is not None for value in (tp, cp, dp))
        expert_given = any(value is not None for value in (etp, ep, edp))
        pp = pp or 0
        rank = None
        if dense_given or not expert_given:
            rank = self.dense.rank({"tp": tp or 0, "cp": cp or 0, "dp": dp or 0, "pp": pp})
        if expert_given:
            expert_rank = self.expert.rank({"tp": etp or 0, "ep": ep or 0, "dp": edp or 0, "pp": pp})
            if rank is not None and rank != expert_rank:
                raise LayoutError(
                    f"tp/cp/dp/pp name rank {rank} but etp/ep/edp/pp name rank {expert_rank}; give one view's "
                    "coordinates or consistent ones"
                )
            rank = expert_rank
        assert rank is not None
        return rank

    def all_coords(self) -> dict[str, np.ndarray]:
        """Arrays of length W indexed by rank: tp, cp, dp, pp, etp, ep, edp (``.tolist()`` for JSON)."""
        ranks = np.arange(self.world_size, dtype=np.int64)
        dense, expert = self.dense.all_coords(ranks), self.expert.all_coords(ranks)
        return {"tp": dense["tp"], "cp": dense["cp"], "dp": dense["dp"], "pp": dense["pp"],
                "etp": expert["tp"], "ep": expert["ep"], "edp": expert["dp"]}

    # ---- groups --------------------------------------------------------------------------------

    def groups_array(self, kind: str) -> np.ndarray:
        """Groups of ``kind`` as a 2-D array (rows = groups, ascending; rows ordered by first member).
        Cached; do not modify the returned array."""
        if kind in self._groups:
            return self._groups[kind]
        if kind in _KIND_TOKENS:
            view, tokens = _KIND_TOKENS[kind]
            array = (self.dense if view == "dense" else self.expert).groups(tokens)
        elif kind == "embedding":
            # First and last stage of each pipeline; a single rank when there is one stage.
            pipelines = self.groups_array("pp")
            array = pipelines[:, [0, -1]] if self.pp > 1 else pipelines
        elif kind == "position-embedding":
            array = self.groups_array("pp")[:, [0]]
        else:
            raise LayoutError(f"unknown group kind {kind!r}; known: {', '.join(GROUP_KINDS)}")
        array.flags.writeable = False
        self._groups[kind] = array
        return array

    def groups(self, kind: str) -> list[list[int]]:
        """Groups of ``kind`` as Megatron builds them: members ascending, groups by first member."""
        return self.groups_array(kind).tolist()

    def group_of(self, kind: str, rank: int) -> list[int]:
        """The group of ``kind`` that holds ``rank``; [] for embedding kinds when the rank is not a
        first/last pipeline stage (Megatron gives such ranks no embedding group)."""
        rank = self._check_rank(rank)
        if kind not in self._group_index:
            array = self.groups_array(kind)
            index = np.full(self.world_size, -1, dtype=np.int64)
            index[array.ravel()] = np.repeat(np.arange(array.shape[0]), array.shape[1])
            self._group_index[kind] = index
        row = int(self._group_index[kind][rank])
        return [] if row < 0 else self.groups_array(kind)[row].tolist()

    def all_groups(self) -> dict[str, list[list[int]]]:
        """Every kind's groups as lists (see :meth:`groups`); :meth:`groups_array` skips the lists."""
        arrays = {kind: self.groups_array(kind) for kind in GROUP_KINDS}
        with gc_paused():  # ~200,000 small ints and lists, no cycles: 3-4x faster without full GC passes
            return {kind: array.tolist() for kind, array in arrays.items()}

    # ---- virtual pipeline ----------------------------------------------------------------------

    def _check_pp_rank(self, pp_rank: int) -> None:
        if not 0 <= pp_rank < self.pp:
            raise LayoutError(f"pp_rank {pp_rank} is outside 0..{self.pp - 1}")

    def layers_of(self, pp_rank: int) -> list[tuple[int, int]]:
        """Per model chunk, the 0-based half-open range of transformer layers ``pp_rank`` holds.

        The model is the sequence of virtual stages c·PP + r, stage r's chunk holding
        stage_layers[r] / vpp layers: so chunk c starts at c·L/vpp plus the chunk sizes of the
        pipeline ranks before r (uniform: ``c·L/v + r·L/(PP·v)``)."""
        self._check_pp_rank(pp_rank)
        counts = self.sizes.stage_layers()
        if counts is None:
            raise LayoutError("num_layers is not set; layer ranges need it")
        v = self.sizes.chunks
        per_round = self.sizes.num_layers // v  # type: ignore[operator]
        before = sum(counts[:pp_rank]) // v
        size = counts[pp_rank] // v
        return [(c * per_round + before, c * per_round + before + size) for c in range(v)]

    def virtual_stage(self, pp_rank: int, chunk: int) -> int:
        """Position of (pp_rank, chunk) in the model's sequence of virtual stages: chunk·PP + pp_rank."""
        self._check_pp_rank(pp_rank)
        if not 0 <= chunk < self.sizes.chunks:
            raise LayoutError(f"chunk {chunk} is outside 0..{self.sizes.chunks - 1} (vpp {self.sizes.vpp})")
        return chunk * self.pp + pp_rank


def block_placement(world_size: int, hosts: list[str], tasks_per_node: int) -> list[tuple[str, int]]:
    """Slurm's default block distribution: rank r runs on hosts[r // tasks_per_node] as local rank
    r % tasks_per_node. ``hosts`` is the step's node list in Slurm's order."""
    _check_count("tasks_per_node", tasks_per_node)
    _check_count("world size", world_size, minimum=0)
    capacity = len(hosts) * tasks_per_node
    if world_size > capacity:
        needed = -(-world_size // tasks_per_node)
        raise LayoutError(
            f"world size {world_size} needs {needed} nodes at {tasks_per_node} tasks per node but only "
            f"{len(hosts)} host(s) were given ({capacity} slots)"
        )
    return [(hosts[rank // tasks_per_node], rank % tasks_per_node) for rank in range(world_size)]
