"""The process group of every call (:func:`assign_groups`), where the trace does not say.

GPU traces of torch >= 2.2 name each call's group (``record_param_comms``: ``Process Group
Name`` and ``Ranks``). CPU traces of torch 2.13 name it nowhere: only ``distributedInfo``'s
``pg_config`` lists the groups a rank belongs to. A rank in one group ran all its calls in it.
A rank in several: the ranks' traces together tell, because the members of a group call its
collectives in the same order -- so, replaying the ranks' calls in order, the next call of a
group is the one that every member's next unassigned call agrees on (collective, elements,
type). :func:`assign_groups` replays them that way, largest group first. Two groups' calls
that agree in all three can swap places; the counts per kind, size and group size stay right.
"""

from __future__ import annotations

from collections import deque

from ringtree.kineto.calls import Call, RankTrace
from ringtree.kineto.names import P2P


def _signature(c: Call) -> tuple[object, ...]:
    return c.collective, c.count, c.dtype, c.per_rank, c.label


def group_table(ranks: list[RankTrace]) -> dict[str, tuple[int, ...]]:
    """Every process group the ranks' traces list or their calls name, by name; a group
    without a listing of its own members is the world."""
    table: dict[str, tuple[int, ...]] = {}
    for r in ranks:
        table.update(r.process_groups)
        for c in r.calls:
            if c.group is not None and c.group_ranks is not None:
                table.setdefault(c.group, c.group_ranks)
    return table


def assign_groups(ranks: list[RankTrace]) -> list[str]:
    """Fill ``group`` and ``group_ranks`` of every call that lacks them (module doc); return
    one-line warnings about what could not be told apart."""
    table = group_table(ranks)
    world_size = max((r.world_size or 0 for r in ranks), default=0)
    world = tuple(range(max(world_size, max((r.rank for r in ranks), default=0) + 1)))
    pending: dict[int, deque[Call]] = {}
    choices: dict[int, list[tuple[str, tuple[int, ...]]]] = {}
    for r in ranks:
        choices[r.rank] = _groups_of(r.rank, table) or [("0", world)]
        pending[r.rank] = deque()
        for c in r.calls:
            if c.group_ranks is None and c.group is not None and c.group in table:
                c.group_ranks = table[c.group]
            if c.group_ranks is None and c.group_size_hint is None:
                if c.collective in P2P:  # a pair's call: no group-wide order to replay
                    c.group, c.group_ranks = choices[r.rank][0]
                else:
                    pending[r.rank].append(c)
    if all(len(g) == 1 for g in choices.values()):
        for rank, todo in pending.items():
            for c in todo:
                c.group, c.group_ranks = choices[rank][0]
        return []
    return _replay(pending, choices)


def _groups_of(rank: int, table: dict[str, tuple[int, ...]]) -> list[tuple[str, tuple[int, ...]]]:
    """The groups holding ``rank``, one per set of members (torch may list the same members
    under several names), largest first."""
    seen: dict[tuple[int, ...], str] = {}
    for name, members in table.items():
        if rank in members:
            seen.setdefault(members, name)
    return sorted(((n, m) for m, n in seen.items()), key=lambda g: -len(g[1]))


def _replay(pending: dict[int, deque[Call]],
            choices: dict[int, list[tuple[str, tuple[int, ...]]]]) -> list[str]:
    groups = sorted({g for gs in choices.values() for g in gs}, key=lambda g: -len(g[1]))
    guessed = 0
    while any(pending.values()):
        for name, members in groups:
            here = [m for m in members if m in pending]  # the ranks read
            if not here or any(not pending[m] for m in here):
                continue
            if len({_signature(pending[m][0]) for m in here}) == 1:
                for m in here:
                    c = pending[m].popleft()
                    c.group, c.group_ranks = name, members
                break
        else:  # no group's members agree: the earliest call goes to its rank's largest group
            rank = min((r for r in pending if pending[r]), key=lambda r: pending[r][0].span[0])
            c = pending[rank].popleft()
            c.group, c.group_ranks = choices[rank][0]
            guessed += 1
    alone = [r for r, gs in choices.items() if len(gs) > 1 and len(choices) == 1]
    if alone:
        return [f"rank {alone[0]} is in {len(choices[alone[0]])} process groups and only its "
                "trace was read: its calls were taken to be in its largest group (read every "
                "rank's trace to tell them apart)"]
    if not guessed:
        return []
    return [f"{guessed} calls matched no process group's other members (traces of some ranks "
            "missing?): each was taken to be in its rank's largest group"]
