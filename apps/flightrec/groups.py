"""Which Megatron-LM group a process group of a Flight Recorder dump is: TP, PP, DP, CP, EP, EDP, ...

A dump names each process group by PyTorch's id (``"0"``, ``"17"``) and the description the program gave it
(``group_desc``: Megatron-LM's ``parallel_state`` passes ``"TENSOR_MODEL_PARALLEL_GROUP"``,
``"DATA_PARALLEL_GROUP"``, ``"PIPELINE_MODEL_PARALLEL_GROUP"``, ``"CONTEXT_PARALLEL_GROUP"``,
``"EXPERT_MODEL_PARALLEL_GROUP"``, ``"EXPERT_DATA_PARALLEL_GROUP"``, ...), and NCCL's ``pg_config`` lists its
global ranks (gloo leaves it empty). :class:`GroupCatalogue` holds the job's groups by kind (from the ranks app's
layout, ``RankLayout.groups_array``) and recognises a process group by its exact rank list, or by its description
and the ranks seen in it, which also gives the members a dump did not list (gloo).

Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass

# Description words -> kind, most specific first (EXPERT_DATA_PARALLEL before DATA_PARALLEL).
DESC_KINDS = (
    ("EXPERT_DATA_PARALLEL", "edp"), ("EXPERT_TENSOR_PARALLEL", "etp"), ("EXPERT_MODEL_PARALLEL", "ep"),
    ("DATA_PARALLEL_GROUP_WITH_CP", "dp-cp"), ("TENSOR_AND_DATA", "tp-dp"), ("DATA_PARALLEL", "dp"),
    ("TENSOR_MODEL_PARALLEL", "tp"), ("PIPELINE_MODEL_PARALLEL", "pp"), ("CONTEXT_PARALLEL", "cp"),
    ("POSITION_EMBEDDING", "position-embedding"), ("EMBEDDING", "embedding"), ("MODEL_PARALLEL", "mp"),
)
# The order an exact rank list is tried in: a TP group of size 1 is also a DP group of size 1, so the first wins.
KIND_ORDER = ("tp", "cp", "dp", "pp", "ep", "edp", "etp", "dp-cp", "tp-dp", "mp", "embedding")
KIND_WORDS = {
    "tp": "tensor-parallel", "pp": "pipeline-parallel", "dp": "data-parallel", "cp": "context-parallel",
    "ep": "expert-parallel", "edp": "expert-data-parallel", "etp": "expert-tensor-parallel",
    "dp-cp": "data+context-parallel", "tp-dp": "tensor+data-parallel", "mp": "model-parallel",
    "embedding": "embedding", "position-embedding": "position-embedding",
}
DEFAULT_DESC = "default_pg"


@dataclass(frozen=True)
class Megatron:
    kind: str  # "dp"
    index: int  # which group of that kind (Megatron's order: by first member)
    ranks: tuple[int, ...]

    @property
    def label(self) -> str:
        return f"{KIND_WORDS.get(self.kind, self.kind)} group {self.index}"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "index": self.index, "label": self.label}


def kind_of_desc(desc: str) -> str | None:
    upper = (desc or "").upper()
    return next((kind for words, kind in DESC_KINDS if words in upper), None)


class GroupCatalogue:
    """The job's Megatron groups: ``groups_by_kind`` kind -> list of rank lists (each ascending)."""

    def __init__(self, groups_by_kind: dict[str, list[list[int]]] | None = None, world_size: int | None = None):
        self.world_size = world_size
        self.by_kind = {kind: [tuple(int(r) for r in group) for group in groups] for kind, groups in (groups_by_kind or {}).items()}
        self._exact: dict[tuple[int, ...], Megatron] = {}
        self._of_rank: dict[str, dict[int, int]] = {}
        for kind in KIND_ORDER + tuple(k for k in self.by_kind if k not in KIND_ORDER):
            for index, group in enumerate(self.by_kind.get(kind, ())):
                if len(group) > 1:
                    self._exact.setdefault(tuple(sorted(group)), Megatron(kind, index, tuple(sorted(group))))

    def _group_holding(self, kind: str, rank: int) -> Megatron | None:
        if kind not in self.by_kind:
            return None
        if kind not in self._of_rank:
            self._of_rank[kind] = {r: i for i, group in enumerate(self.by_kind[kind]) for r in group}
        index = self._of_rank[kind].get(rank)
        return None if index is None else Megatron(kind, index, tuple(sorted(self.by_kind[kind][index])))

    def identify(self, ranks: tuple[int, ...] | None, desc: str, observed: set[int] | frozenset[int]) -> Megatron | None:
        """The Megatron group this process group is: by its listed ranks, else by its description and the ranks
        seen in it (which must all be members), else by the seen ranks alone when they are exactly one group."""
        if ranks:
            return self._exact.get(tuple(sorted(ranks)))
        kind = kind_of_desc(desc)
        if kind and observed:
            found = self._group_holding(kind, min(observed))
            if found is not None and set(observed) <= set(found.ranks):
                return found
        if len(observed) > 1:
            return self._exact.get(tuple(sorted(observed)))
        return None

    def members(self, ranks: tuple[int, ...] | None, desc: str, observed: set[int]) -> tuple[tuple[int, ...] | None, Megatron | None]:
        """The process group's members (listed, else the Megatron group's, else every rank for the default group,
        else None: only those seen) and its Megatron identity."""
        megatron = self.identify(ranks, desc, observed)
        if ranks:
            return tuple(sorted(ranks)), megatron
        if megatron is not None:
            return megatron.ranks, megatron
        if desc == DEFAULT_DESC and self.world_size:
            return tuple(range(self.world_size)), None
        return None, None
