"""Stuck and mismatched collectives found in a job's Flight Recorder dumps, one rank at a time.

PyTorch numbers every collective of a process group on each of its ranks (``collective_seq_id``: the n-th
collective of that group on that rank) and every point-to-point operation apart (``p2p_seq_id``, profiling name
``send 3->4`` / ``recv 4<-3`` in group-local ranks). Ranks that agree run the same n-th collective with the same op,
sizes and dtypes; so, per process group, aligning the ranks' entries by sequence id finds the **first collective
the members disagree on**:

* ranks that **never entered** it (their last sequence id is lower than their peers');
* ranks **stuck** in it (entered, not completed) while others completed it;
* a **mismatch**: the same sequence id with another op, other sizes or dtypes (the minority are the culprits);
* **unmatched send/recv pairs** (a send from a to b without b's recv, and the other way round);
* ranks with **no dump** (dead, or hung in Python before the watchdog could dump) while their peers wait.

:class:`Analyser` streams: :meth:`Analyser.add` reduces one rank's dump to a few numbers per process group
(first, last, last completed and first incomplete sequence id; the signature of each collective interned as an
integer and folded into per-group numpy arrays; its point-to-point operations per peer; its last entries with
their stack frames) and drops the rest, so 4,096 dumps of 2,000 entries fit in a few hundred MB.
:meth:`Analyser.result` names the verdict in one line ("rank 1,234 never entered all_reduce #5,678 of
data-parallel group 17 (511 of 512 ranks waited 600 s)").

Facts from PyTorch's sources (``torch/distributed/flight_recorder``): the matching rule by sequence id within a
process group, the p2p profiling names, ``pg_config`` ranks as global ranks sorted for group-local indices; gloo
records collectives but not point-to-point operations, leaves ``state`` at "scheduled" and marks finished work
``retired``.

Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from apps.core.perf import gc_paused

from .dumps import MAX_ENTRIES, DumpRefused, Entry, entry_from, load_plain, read_header
from .groups import DEFAULT_DESC, GroupCatalogue, Megatron

LAST_ENTRIES = 3  # per rank, kept with their frames for the page
MAX_DEVIANTS = 4096  # (rank, signature) pairs kept per group beyond the counts
GRID_RANKS = 48  # rows of the rank x sequence view
GRID_BEFORE, GRID_AFTER = 3, 1

STATUS_HANG, STATUS_MISMATCH, STATUS_HEALTHY, STATUS_INCOMPLETE = "hang", "mismatch", "healthy", "incomplete"


def _n(number: int) -> str:
    return f"{number:,}"


def _ranks_words(ranks: list[int], shown: int = 4) -> str:
    ranks = sorted(ranks)
    words = ",".join(_n(r) for r in ranks[:shown]) if len(ranks) == 1 else ", ".join(_n(r) for r in ranks[:shown])
    more = f" and {len(ranks) - shown:,} more" if len(ranks) > shown else ""
    return f"rank{'s' if len(ranks) > 1 else ''} {words}{more}"


def _seconds(seconds: float) -> str:
    if seconds >= 120 and seconds % 60 < 1:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:,.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


def _p2p_parts(op: str) -> tuple[str, int, int] | None:
    """``send 0->1`` -> ("send", 0, 1) (src, dst); ``recv 1<-0`` -> ("recv", 0, 1); group-local ranks."""
    kind, _, meta = op.partition(" ")
    try:
        if kind == "send" and "->" in meta:
            src, dst = meta.split("->")
            return "send", int(src), int(dst)
        if kind == "recv" and "<-" in meta:
            dst, src = meta.split("<-")
            return "recv", int(src), int(dst)
    except ValueError:
        return None
    return None


@dataclass
class _RankPg:
    """One rank's view of one process group, reduced."""

    min_seq: int = 0
    max_seq: int = 0
    max_done: int = 0
    first_undone: int | None = None
    undone_index: int | None = None  # raw index of the first incomplete collective
    last_index: int | None = None  # raw index of the last collective
    first_undone_ns: int | None = None
    has_collectives: bool = False


@dataclass
class _Group:
    key: tuple
    name: str
    desc: str
    declared: tuple[int, ...] | None = None
    ranks_seen: set = field(default_factory=set)
    per_rank: dict = field(default_factory=dict)  # rank -> _RankPg
    entries: dict = field(default_factory=dict)  # (rank, "last"|"undone") -> Entry
    base: int = 0
    ref: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # signature per seq (-1: none yet)
    count: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))  # ranks with an entry per seq
    dev_count: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))  # ranks whose signature differs
    deviants: dict = field(default_factory=dict)  # seq -> [(rank, sig)]
    deviant_total: int = 0
    sends: dict = field(default_factory=dict)  # (src, dst) local -> list of (p2p_seq, sig, done, created, rank-entry)
    recvs: dict = field(default_factory=dict)
    wrapped: set = field(default_factory=set)  # ranks whose ring buffer no longer starts at the program's start

    def fold(self, rank: int, seqs: list[int], sigs: list[int]) -> None:
        """Fold one rank's collective signatures into the per-seq arrays."""
        if not seqs:
            return
        seq = np.asarray(seqs, dtype=np.int64)
        sig = np.asarray(sigs, dtype=np.int64)
        lo, hi = int(seq.min()), int(seq.max())
        if self.ref.size == 0:
            self.base = lo
            self.ref = np.full(hi - lo + 1, -1, dtype=np.int64)
            self.count = np.zeros(hi - lo + 1, dtype=np.int32)
            self.dev_count = np.zeros(hi - lo + 1, dtype=np.int32)
        else:
            end = self.base + self.ref.size - 1
            if lo < self.base or hi > end:
                new_base, new_end = min(lo, self.base), max(hi, end)
                size = new_end - new_base + 1
                offset = self.base - new_base
                ref = np.full(size, -1, dtype=np.int64)
                count = np.zeros(size, dtype=np.int32)
                dev = np.zeros(size, dtype=np.int32)
                ref[offset:offset + self.ref.size] = self.ref
                count[offset:offset + self.ref.size] = self.count
                dev[offset:offset + self.ref.size] = self.dev_count
                self.base, self.ref, self.count, self.dev_count = new_base, ref, count, dev
        at = seq - self.base
        current = self.ref[at]
        unset = current < 0
        self.ref[at[unset]] = sig[unset]
        np.add.at(self.count, at, 1)
        differ = (~unset) & (current != sig)
        if differ.any():
            np.add.at(self.dev_count, at[differ], 1)
            for s, g in zip(seq[differ].tolist(), sig[differ].tolist()):
                if self.deviant_total < MAX_DEVIANTS:
                    self.deviants.setdefault(s, []).append((rank, g))
                    self.deviant_total += 1


class Analyser:
    """Feed it one rank's dump at a time (:meth:`add_bytes` / :meth:`add`), then ask :meth:`result`."""

    def __init__(self, *, world_size: int | None = None, catalogue: GroupCatalogue | None = None,
                 max_entries: int = MAX_ENTRIES, frames: bool = True):
        self.world_size = world_size
        self.catalogue = catalogue or GroupCatalogue(world_size=world_size)
        if self.catalogue.world_size is None:
            self.catalogue.world_size = world_size
        self.max_entries = max_entries
        self.frames = frames
        self.sigs: dict[Any, int] = {}
        self.sig_words: list[tuple] = []
        self.groups: dict[tuple, _Group] = {}
        self.dumped: set[int] = set()
        self.versions: dict[str, int] = {}
        self.last_entries: dict[int, list[Entry]] = {}
        self.last_progress_ns: int | None = None
        self.last_progress_rank: int | None = None
        self.latest_ns: int | None = None
        self.timeouts: dict[int, int] = {}
        self._p2p_ops: dict[str, tuple] = {}
        self._p2p_sigs: dict[int, int] = {}

    # ---- reading -------------------------------------------------------------------------------

    def _sig(self, key) -> int:
        found = self.sigs.get(key)
        if found is None:
            found = self.sigs[key] = len(self.sig_words)
            self.sig_words.append(key)
        return found

    def add_bytes(self, rank: int, data: bytes, fmt: str = "auto") -> None:
        # The cyclic collector would rescan every long-lived record (millions at 4,096 ranks) on each of the many
        # collections a dump's 2,000 dicts trigger, making the whole superlinear (10 ms/rank at 1,536 ranks against
        # 5.5 with it paused); nothing here makes a cycle, and reference counting frees each dump as usual.
        with gc_paused():
            self.add(rank, load_plain(data, fmt))

    def add(self, rank: int, plain: Any) -> None:
        """Reduce one rank's dump (what the restricted unpickler or ``json.loads`` built) into the groups."""
        if rank in self.dumped:
            raise DumpRefused(f"rank {rank} was given twice", "rank")
        header = read_header(plain, max_entries=self.max_entries)
        self.versions[header.version] = self.versions.get(header.version, 0) + 1
        declared = {name: cfg for name, cfg in header.pg_config.items()}
        raw = header.entries
        parts: dict[str, tuple[_RankPg, list[int], list[int]]] = {}
        p2p: list[tuple[str, str, int, int, int, int, bool, int]] = []
        sig_of = self.sigs
        last_key: dict[str, tuple] = {}  # per group: the raw lists of its last entry and their signature
        first_record = None
        for index, entry in enumerate(raw):
            try:
                pg = entry["process_group"]
                name = pg[0]
                seq = entry["collective_seq_id"]
                op = entry["profiling_name"]
                done = entry["state"] == "completed" or entry["retired"] is True
                ins, outs = entry["input_sizes"], entry["output_sizes"]
                idt, odt = entry["input_dtypes"], entry["output_dtypes"]
                cached = last_key.get(name)
                if cached is not None and cached[0] == op and cached[1] == ins and cached[2] == outs and cached[3] == idt \
                        and cached[4] == odt:
                    sig = cached[5]
                else:  # a new signature for this group: make it hashable and intern it
                    key = (op, tuple(map(tuple, ins)), tuple(map(tuple, outs)), tuple(idt), tuple(odt))
                    sig = sig_of.get(key)
                    if sig is None:
                        sig = self._sig(key)
                    last_key[name] = (op, ins, outs, idt, odt, sig)
                is_p2p = entry["is_p2p"]
                if first_record is None:
                    first_record = entry["record_id"]
            except (KeyError, TypeError, IndexError) as exc:
                where = f"entries[{index}]"
                raise DumpRefused(f"{where} is not a Flight Recorder entry ({type(exc).__name__}: {str(exc)[:80]}); "
                                  "every entry has process_group, collective_seq_id, profiling_name, state, sizes "
                                  "and dtypes", where) from None
            if type(seq) is not int:  # noqa: E721 - an exact int: bools and text refused
                raise DumpRefused(f"entries[{index}]: collective_seq_id must be a whole number, not {type(seq).__name__}",
                                  f"entries[{index}]")
            if is_p2p:
                p2p.append((name, pg[1], index, sig, entry.get("p2p_seq_id") or 0, done, entry["time_created_ns"] or 0))
                continue
            part = parts.get(name)
            if part is None:
                part = parts[name] = (_RankPg(min_seq=seq, max_seq=seq), [], [])
            state, seqs, sigs = part
            if seqs and seqs[-1] == seq:  # coalesced: one collective of several ops, one signature
                sigs[-1] = self._sig((sigs[-1], sig))
                if not done and (state.first_undone is None or state.first_undone > seq):
                    state.first_undone, state.undone_index = seq, index
                state.last_index = index
                continue
            seqs.append(seq)
            sigs.append(sig)
            if seq < state.min_seq:
                state.min_seq = seq
            if seq >= state.max_seq:
                state.max_seq, state.last_index = seq, index
            if done:
                if seq > state.max_done:
                    state.max_done = seq
            elif state.first_undone is None or seq < state.first_undone:
                state.first_undone, state.undone_index = seq, index
        # times from the end of the buffer (record order): the latest moment, the last completion, the timeout
        latest = last_done_ns = timeout = None
        for entry in reversed(raw[-64:]):
            created = entry.get("time_created_ns") or 0
            completed = entry.get("time_discovered_completed_ns") or 0
            if type(created) is not int or type(completed) is not int:  # noqa: E721
                raise DumpRefused("time_created_ns and time_discovered_completed_ns must be whole numbers", "entries")
            moment = completed or created
            latest = moment if latest is None else max(latest, moment)
            timeout = timeout or entry.get("timeout_ms")
        for entry in reversed(raw):
            if entry["state"] == "completed" or entry["retired"] is True:
                last_done_ns = entry.get("time_discovered_completed_ns") or entry.get("time_created_ns") or None
                break
        for state, _, _ in parts.values():
            state.has_collectives = True
            if state.undone_index is not None:
                state.first_undone_ns = raw[state.undone_index].get("time_created_ns") or None
        self.dumped.add(rank)
        if timeout:
            self.timeouts[rank] = timeout
        if latest is not None and (self.latest_ns is None or latest > self.latest_ns):
            self.latest_ns = latest
        if last_done_ns is not None and (self.last_progress_ns is None or last_done_ns > self.last_progress_ns):
            self.last_progress_ns, self.last_progress_rank = last_done_ns, rank
        descs = {}
        for name, state_seqs in parts.items():
            state, seqs, sigs = state_seqs
            desc = raw[state.last_index]["process_group"][1] if state.last_index is not None else ""
            descs[name] = desc
            group = self._group(name, desc, declared.get(name))
            group.ranks_seen.add(rank)
            group.per_rank[rank] = state
            if first_record:
                group.wrapped.add(rank)
            group.fold(rank, seqs, sigs)
            if state.last_index is not None:
                group.entries[(rank, "last")] = self._entry(raw, state.last_index)
            if state.undone_index is not None:
                group.entries[(rank, "undone")] = self._entry(raw, state.undone_index)
        parsed_ops = self._p2p_ops
        for name, desc, index, sig, p2p_seq, done, created in p2p:
            op = raw[index]["profiling_name"]
            parsed = parsed_ops.get(op)
            if parsed is None:
                parsed = parsed_ops[op] = _p2p_parts(op.partition(":")[2] or op) or ()
            group = self._group(name, desc, declared.get(name))
            if rank not in group.ranks_seen:
                group.ranks_seen.add(rank)
                group.per_rank.setdefault(rank, _RankPg())
                if first_record:
                    group.wrapped.add(rank)
            if not parsed:
                continue
            kind, src, dst = parsed
            p2p_sig = self._p2p_sigs.get(sig)
            if p2p_sig is None:
                p2p_sig = self._p2p_sigs[sig] = self._sig(("p2p",) + self.sig_words[sig][1:])
            record = (p2p_seq, p2p_sig, done, created, rank, index)
            book = group.sends if kind == "send" else group.recvs
            book.setdefault((src, dst), []).append(record)
            if not done:
                group.entries[(rank, f"p2p{index}")] = self._entry(raw, index)
        tail = [self._entry(raw, i) for i in range(max(0, len(raw) - LAST_ENTRIES), len(raw))]
        self.last_entries[rank] = tail

    def _entry(self, raw: list, index: int) -> Entry:
        return entry_from(raw[index], f"entries[{index}]", frames=self.frames)

    def _group(self, name: str, desc: str, config) -> _Group:
        ranks = config.ranks if config is not None else None
        key = (name, ranks) if ranks else (name,)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group(key=key, name=name, desc=desc or (config.desc if config else ""), declared=ranks)
        return group

    # ---- judging -------------------------------------------------------------------------------

    def _op_words(self, sig: int) -> tuple[str, list, list]:
        key = self.sig_words[sig]
        while isinstance(key[0], int):  # coalesced: (first, next)
            key = self.sig_words[key[0]]
        op = key[0].partition(":")[2] or key[0]
        return op, [list(s) for s in key[1]], list(key[3])

    def _label(self, group: _Group, megatron: Megatron | None) -> str:
        if megatron is not None:
            return megatron.label
        if group.desc and group.desc != DEFAULT_DESC and not group.desc.isdigit():
            return f"process group {group.name} ({group.desc})"
        return "the default process group" if group.desc == DEFAULT_DESC else f"process group {group.name}"

    def _judge(self, group: _Group) -> dict | None:
        """The first disagreement in ``group``, or None when its members agree."""
        members, megatron = self.catalogue.members(group.declared, group.desc, group.ranks_seen)
        members = tuple(members) if members else tuple(sorted(group.ranks_seen))
        dumped = [r for r in members if r in self.dumped]
        missing = [r for r in members if r not in self.dumped]
        label = self._label(group, megatron)
        states = {r: group.per_rank.get(r) or _RankPg() for r in dumped}
        coll = {r: s for r, s in states.items() if s.has_collectives}
        candidates = []
        # (1) a mismatch: the first seq where a member's signature differs
        if group.dev_count.size and group.dev_count.any():
            at = int(np.flatnonzero(group.dev_count)[0])
            seq = group.base + at
            ref = int(group.ref[at])
            deviants = group.deviants.get(seq, [])
            others = {}
            for rank, sig in deviants:
                others.setdefault(sig, []).append(rank)
            holders = [r for r, s in coll.items() if s.min_seq <= seq <= s.max_seq]
            odd = {r for rs in others.values() for r in rs}
            counts = {ref: len([r for r in holders if r not in odd])}
            counts.update({sig: len(rs) for sig, rs in others.items()})
            majority = max(counts, key=lambda sig: (counts[sig], sig == ref))
            culprits = sorted(odd) if majority == ref else sorted(r for r in holders if r not in set(others[majority]))
            op, sizes, dtypes = self._op_words(majority)
            theirs = self._op_words(ref if majority != ref else next(iter(others)))
            what = []
            if theirs[0] != op:
                what.append(f"{theirs[0]} instead of {op}")
            if theirs[1] != sizes:
                what.append(f"sizes {theirs[1]} instead of {sizes}")
            if theirs[2] != dtypes:
                what.append(f"dtypes {theirs[2]} instead of {dtypes}")
            when = min((s.first_undone_ns or 0 for s in coll.values() if s.first_undone == seq), default=0)
            candidates.append(dict(status=STATUS_MISMATCH, order=(seq, 0), seq=seq, op=op, sizes=sizes, dtypes=dtypes,
                                   culprits=[{"rank": r, "reason": f"called {op} #{_n(seq)} with " + "; ".join(what or ["another signature"])}
                                             for r in culprits],
                                   verdict=f"{_ranks_words(culprits)} called {op} #{_n(seq)} of {label} with "
                                           f"{'; '.join(what or ['another signature'])} ({_n(counts[majority])} of {_n(len(members))} ranks agree)",
                                   waiting=None, since_ns=when))
        # (2) ranks that never entered the next collective their peers entered
        if coll:
            top = max(s.max_seq for s in coll.values())
            behind = {r: s for r, s in states.items() if (s.max_seq if s.has_collectives else 0) < top}
            if behind:
                seq = min(s.max_seq if s.has_collectives else 0 for s in behind.values()) + 1
                never = sorted(r for r, s in behind.items() if (s.max_seq if s.has_collectives else 0) < seq)
                holder = next(r for r, s in coll.items() if s.min_seq <= seq <= s.max_seq) if any(
                    s.min_seq <= seq <= s.max_seq for s in coll.values()) else None
                entry = self._entry_at(group, holder, seq)
                op, sizes, dtypes = self._entry_words(entry, group, seq)
                waiting = [r for r, s in coll.items() if s.first_undone == seq]
                since = min((coll[r].first_undone_ns or 0 for r in waiting), default=0)
                candidates.append(dict(status=STATUS_HANG, order=(seq, 1), seq=seq, op=op, sizes=sizes, dtypes=dtypes,
                                       culprits=[{"rank": r, "reason": f"never entered {op} #{_n(seq)}"
                                                  + (f" (its last was #{_n(states[r].max_seq)})" if states[r].has_collectives else "")}
                                                 for r in never],
                                       verdict=f"{_ranks_words(never)} never entered {op} #{_n(seq)} of {label}",
                                       waiting=waiting, since_ns=since))
        # (3) ranks stuck in a collective their peers completed
        stuck_at = [(s.first_undone, r) for r, s in coll.items() if s.first_undone is not None
                    and any(o.max_done >= s.first_undone for o in coll.values())]
        if stuck_at:
            seq = min(stuck_at)[0]
            stuck = sorted(r for s, r in stuck_at if s == seq)
            entry = self._entry_at(group, stuck[0], seq)
            op, sizes, dtypes = self._entry_words(entry, group, seq)
            completed = [r for r, s in coll.items() if s.max_done >= seq]
            candidates.append(dict(status=STATUS_HANG, order=(seq, 2), seq=seq, op=op, sizes=sizes, dtypes=dtypes,
                                   culprits=[{"rank": r, "reason": f"stuck in {op} #{_n(seq)} that {_n(len(completed))} peers completed"}
                                             for r in stuck],
                                   verdict=f"{_ranks_words(stuck)} stuck in {op} #{_n(seq)} of {label} while "
                                           f"{_n(len(completed))} of {_n(len(members))} ranks completed it",
                                   waiting=stuck, since_ns=min(coll[r].first_undone_ns or 0 for r in stuck)))
        # (4) point-to-point pairs left unmatched
        candidates.extend(self._p2p(group, members, label))
        # (5) members without a dump while the others wait
        if missing and not any(c["status"] == STATUS_MISMATCH for c in candidates):
            waiting_seqs = sorted({s.first_undone for s in coll.values() if s.first_undone is not None})
            if waiting_seqs:
                seq = waiting_seqs[0]
                waiting = [r for r, s in coll.items() if s.first_undone == seq]
                entry = self._entry_at(group, waiting[0], seq)
                op, sizes, dtypes = self._entry_words(entry, group, seq)
                candidates.append(dict(status=STATUS_HANG, order=(seq, 3), seq=seq, op=op, sizes=sizes, dtypes=dtypes,
                                       culprits=[{"rank": r, "reason": "left no dump: dead, or hung outside a collective "
                                                  f"(in Python) while its peers waited in {op} #{_n(seq)}"} for r in missing],
                                       verdict=f"{_ranks_words(missing)} left no dump while {label} waited in {op} #{_n(seq)}",
                                       waiting=waiting, since_ns=min(coll[r].first_undone_ns or 0 for r in waiting)))
        if not candidates:
            # everyone entered, nobody completed: the collective itself hung (network, GPU), or the dumps were taken mid-step
            undone = {s.first_undone for s in coll.values() if s.first_undone is not None}
            if len(undone) == 1 and len(coll) == len(members) and len(members) > 1:
                seq = undone.pop()
                entry = self._entry_at(group, next(iter(coll)), seq)
                op, sizes, dtypes = self._entry_words(entry, group, seq)
                if all(coll[r].first_undone == seq for r in coll):
                    return dict(status=STATUS_HANG, order=(seq, 4), seq=seq, op=op, sizes=sizes, dtypes=dtypes, culprits=[],
                                verdict=f"every rank of {label} entered {op} #{_n(seq)} and none completed it: the collective "
                                        "itself stalled (network, GPU or NCCL), not a rank that stayed behind",
                                waiting=list(coll), since_ns=min(s.first_undone_ns or 0 for s in coll.values()),
                                group=group, members=members, megatron=megatron, label=label, missing=missing)
            return None
        best = min(candidates, key=lambda c: c["order"])
        best.update(group=group, members=members, megatron=megatron, label=label, missing=missing)
        return best

    def _entry_at(self, group: _Group, rank: int | None, seq: int) -> Entry | None:
        if rank is None:
            return None
        for kind in ("undone", "last"):
            entry = group.entries.get((rank, kind))
            if entry is not None and entry.seq == seq and not entry.is_p2p:
                return entry
        return None

    def _entry_words(self, entry: Entry | None, group: _Group, seq: int) -> tuple[str, list, list]:
        if entry is not None:
            return entry.op, [list(s) for s in entry.input_sizes], list(entry.input_dtypes)
        at = seq - group.base
        if 0 <= at < group.ref.size and group.ref[at] >= 0:
            return self._op_words(int(group.ref[at]))
        return "collective", [], []

    def _p2p(self, group: _Group, members: tuple[int, ...], label: str) -> list[dict]:
        if not group.sends and not group.recvs:
            return []
        order = sorted(members)

        def glob(local: int) -> int:
            return order[local] if group.declared or group.desc == DEFAULT_DESC or len(order) > local else local

        found = []
        for pair in sorted(set(group.sends) | set(group.recvs)):
            src, dst = glob(pair[0]), glob(pair[1])
            sends, recvs = group.sends.get(pair, []), group.recvs.get(pair, [])
            complete = src not in group.wrapped and dst not in group.wrapped and src in self.dumped and dst in self.dumped
            if complete:
                for i, (s, r) in enumerate(zip(sends, recvs)):
                    if s[1] != r[1]:
                        op_s, sizes_s, _ = self._op_words(s[1])
                        _, sizes_r, _ = self._op_words(r[1])
                        found.append(dict(status=STATUS_MISMATCH, order=(s[0], 0), seq=s[0], op=f"send {src}->{dst}",
                                          sizes=sizes_s, dtypes=[], p2p=True,
                                          culprits=[{"rank": dst, "reason": f"receives {sizes_r} where rank {src} sends {sizes_s}"}],
                                          verdict=f"rank {_n(src)} sends {sizes_s} to rank {_n(dst)} in {label}, which receives {sizes_r} "
                                                  f"(send/recv #{i + 1} of the pair)",
                                          waiting=None, since_ns=s[3]))
                        break
                if len(sends) != len(recvs):
                    i = min(len(sends), len(recvs))
                    if len(sends) > len(recvs):
                        s = sends[i]
                        culprit, words = dst, f"never posted the recv for send #{i + 1} from rank {_n(src)}"
                        verdict = f"rank {_n(dst)} never received send #{_n(i + 1)} from rank {_n(src)} in {label} (p2p #{_n(s[0])})"
                    else:
                        s = recvs[i]
                        culprit, words = src, f"never sent #{i + 1} to rank {_n(dst)}, which waits in recv"
                        verdict = f"rank {_n(src)} never sent #{_n(i + 1)} to rank {_n(dst)} in {label}, which waits in recv (p2p #{_n(s[0])})"
                    found.append(dict(status=STATUS_HANG, order=(s[0], 1), seq=s[0], op=("send" if len(sends) > len(recvs) else "recv"),
                                      sizes=self._op_words(s[1])[1], dtypes=self._op_words(s[1])[2], p2p=True,
                                      culprits=[{"rank": culprit, "reason": words}], verdict=verdict,
                                      waiting=[s[4]] if not s[2] else [], since_ns=s[3]))
                continue
            open_sends = [s for s in sends if not s[2]]
            open_recvs = [r for r in recvs if not r[2]]
            if open_sends and not open_recvs:
                s = open_sends[0]
                culprit = dst
                words = "left no dump" if dst not in self.dumped else f"never posted the recv for rank {_n(src)}'s send"
                found.append(dict(status=STATUS_HANG, order=(s[0], 1), seq=s[0], op="send", sizes=self._op_words(s[1])[1],
                                  dtypes=self._op_words(s[1])[2], p2p=True, culprits=[{"rank": culprit, "reason": words}],
                                  verdict=f"rank {_n(src)} waits to send to rank {_n(dst)} in {label}; rank {_n(dst)} {words}",
                                  waiting=[src], since_ns=s[3]))
            elif open_recvs and not open_sends:
                r = open_recvs[0]
                words = "left no dump" if src not in self.dumped else f"never sent what rank {_n(dst)} waits to receive"
                found.append(dict(status=STATUS_HANG, order=(r[0], 1), seq=r[0], op="recv", sizes=self._op_words(r[1])[1],
                                  dtypes=self._op_words(r[1])[2], p2p=True, culprits=[{"rank": src, "reason": words}],
                                  verdict=f"rank {_n(dst)} waits to receive from rank {_n(src)} in {label}; rank {_n(src)} {words}",
                                  waiting=[dst], since_ns=r[3]))
        return found

    def _grid(self, found: dict) -> dict:
        """Who reached where: the members (culprits first) x the sequence ids around the disagreement."""
        group, seq = found["group"], found["seq"]
        reached = max((s.max_seq for s in group.per_rank.values() if s.has_collectives), default=seq)
        seqs = list(range(max(1, seq - GRID_BEFORE), min(seq + GRID_AFTER, max(reached, seq)) + 1))
        culprits = [c["rank"] for c in found["culprits"]]
        members = list(found["members"])
        rows_for = culprits + [r for r in members if r not in set(culprits)]
        odd = {}
        for s in seqs:
            for rank, _ in group.deviants.get(s, []):
                odd.setdefault(s, set()).add(rank)
        culprit_set = set(culprits)
        rows, same, seen = [], 0, {}
        for rank in rows_for:
            state = group.per_rank.get(rank)
            cells = []
            for s in seqs:
                if rank not in self.dumped:
                    cells.append("no dump")
                elif state is None or not state.has_collectives or s > state.max_seq:
                    cells.append("never entered")
                elif s < state.min_seq:
                    cells.append("not in buffer")
                elif found["status"] == STATUS_MISMATCH and s == seq and rank in culprit_set:
                    cells.append("mismatch")
                elif state.first_undone is not None and s >= state.first_undone:
                    cells.append("waiting")
                else:
                    cells.append("completed")
            signature = tuple(cells)
            if rank not in culprit_set and signature in seen and len(rows) >= 8:
                seen[signature]["like"] += 1
                same += 1
                continue
            if len(rows) >= GRID_RANKS:
                same += 1
                continue
            row = {"rank": rank, "cells": cells, "like": 0}
            seen.setdefault(signature, row)
            rows.append(row)
        return {"seqs": seqs, "focus": seq, "rows": rows, "folded": same}

    def result(self) -> dict:
        """The analysis as plain data (the API's body before the job's hardware is added)."""
        judged = [found for group in self.groups.values() if (found := self._judge(group)) is not None]
        expected = self.world_size
        if expected is None:
            listed = [r for g in self.groups.values() for r in (g.declared or ())]
            expected = max([*listed, *self.dumped], default=-1) + 1 or None
        missing = sorted(set(range(expected)) - self.dumped) if expected else []
        body: dict[str, Any] = {
            "ranks_dumped": len(self.dumped), "ranks_expected": expected, "missing_dumps": missing[:1000],
            "missing_count": len(missing), "versions": self.versions, "process_groups": len(self.groups),
            "last_progress_ns": self.last_progress_ns, "last_progress_rank": self.last_progress_rank,
            "latest_ns": self.latest_ns,
        }
        if not judged:
            status = STATUS_INCOMPLETE if missing or not self.dumped else STATUS_HEALTHY
            words = (f"{len(missing):,} of {expected:,} ranks left no dump; the {len(self.dumped):,} dumps agree on every "
                     "collective, so the missing ranks' side cannot be judged" if status == STATUS_INCOMPLETE and self.dumped
                     else "no dumps yet" if not self.dumped else
                     f"all {len(self.dumped):,} ranks agree on every collective of {len(self.groups):,} process groups; "
                     "none waits on another")
            body.update(status=status, verdict=words, process_group=None, collective=None, culprits=[], findings=[],
                        waiting=None, grid=None, last_entries={})
            return body
        judged.sort(key=lambda f: (f["since_ns"] or 0, f["order"][1], f["order"][0]))
        # a hang's root is the disagreement whose waiting began first; a mismatch counts from its own time
        primary = judged[0]
        waiting = primary.get("waiting")
        wait = None
        if waiting:
            timeout = max((self.timeouts.get(r, 0) for r in waiting), default=0)
            waited_s = timeout / 1000 if timeout else ((self.latest_ns or 0) - (primary["since_ns"] or 0)) / 1e9
            wait = {"ranks": len(waiting), "of": len(primary["members"]), "seconds": round(waited_s, 1),
                    "by": "timeout_ms" if timeout else "dump times"}
        verdict = primary["verdict"]
        if wait and primary["status"] == STATUS_HANG and primary["culprits"]:
            verdict += f" ({_n(wait['ranks'])} of {_n(wait['of'])} ranks waited {_seconds(wait['seconds'])})"
        group = primary["group"]
        culprit_ranks = [c["rank"] for c in primary["culprits"]]
        # groups whose every member waits in a collective without a culprit of their own are the hang's echo, not
        # findings of their own, once another group names a culprit: counted, not listed
        stalled = [f for f in judged if not f["culprits"] and f is not primary]
        shown = [f for f in judged if f["culprits"] or f is primary] if primary["culprits"] else judged
        entries = {}
        for rank in (culprit_ranks + [r for r in (waiting or []) if r not in culprit_ranks][:2])[:12]:
            if rank in self.last_entries:
                entries[str(rank)] = [e.to_dict() for e in self.last_entries[rank]]
        body.update(
            status=primary["status"], verdict=verdict,
            process_group={"name": group.name, "desc": group.desc, "ranks": list(primary["members"]),
                           "megatron": primary["megatron"].to_dict() if primary["megatron"] else None,
                           "label": primary["label"]},
            collective={"seq_id": primary["seq"], "op": primary["op"], "sizes": primary["sizes"], "dtypes": primary["dtypes"],
                        "p2p": bool(primary.get("p2p"))},
            culprits=primary["culprits"][:256], culprit_count=len(primary["culprits"]), waiting=wait,
            stalled_elsewhere=len(stalled) if primary["culprits"] else 0,
            findings=[{"status": f["status"], "verdict": f["verdict"], "process_group": f["group"].name,
                       "desc": f["group"].desc, "megatron": f["megatron"].to_dict() if f["megatron"] else None,
                       "seq_id": f["seq"], "op": f["op"], "culprits": [c["rank"] for c in f["culprits"][:64]]}
                      for f in shown[:50]],
            grid=self._grid(primary), last_entries=entries,
        )
        return body


def analyse(dumps: Iterable[tuple[int, bytes]], *, world_size: int | None = None, catalogue: GroupCatalogue | None = None,
            progress: Callable[[int], None] | None = None, fmt: str = "auto") -> dict:
    """Analyse ``(rank, bytes)`` pairs one at a time; ``progress(n)`` after each."""
    analyser = Analyser(world_size=world_size, catalogue=catalogue)
    for count, (rank, data) in enumerate(dumps, start=1):
        analyser.add_bytes(rank, data, fmt)
        if progress is not None:
            progress(count)
    return analyser.result()
