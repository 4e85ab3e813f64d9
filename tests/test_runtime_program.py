"""The per-rank compiled program: slicing, byte accounting, where messages land."""

from __future__ import annotations

import math
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringtree.algorithms import algorithms_for, build, get_algorithm
from ringtree.collectives import Collective
from ringtree.runtime import program
from ringtree.runtime.program import IN_PLACE_MIN_BYTES, RING_SLOTS, compile_program
from ringtree.runtime.regions import INPUT, MAX_SLICES, OUTPUT, SCRATCH, slice_bounds


def every_schedule(n: int):
    for col in Collective:
        for alg in algorithms_for(col):
            rpn = get_algorithm(col, alg).ranks_per_node_for(n)
            yield build(col, alg, n, root=n - 1, ranks_per_node=rpn)


@given(st.integers(0, 5000), st.integers(0, 5000), st.sampled_from([1, 2, 4, 8]),
       st.integers(1, 1 << 16))
def test_slices_cover_the_range_in_order(lo, length, itemsize, slice_bytes):
    hi = lo + length
    cuts = slice_bounds(lo, hi, itemsize, slice_bytes)
    assert cuts[0][0] == lo and cuts[-1][1] == hi
    assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:], strict=False))
    assert 1 <= len(cuts) <= MAX_SLICES
    sizes = [b - a for a, b in cuts]
    assert max(sizes) - min(sizes) <= 1  # near-equal, like np.array_split
    if length * itemsize >= 2 * slice_bytes and MAX_SLICES >= 2:
        assert len(cuts) >= 2  # big chunks are pipelined


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("count", [0, 1, 7, 1000])
def test_program_sends_exactly_the_schedules_bytes(n, count):
    for s in every_schedule(n):
        for rank in range(n):
            in_place = s.collective is not Collective.REDUCE_SCATTER
            prog = compile_program(s, rank, count, 4, in_place=in_place, slice_bytes=64)
            elems = sum(size(op.post) for _, op in messages(prog.sends))
            assert elems == sum(size(op.loc) for op in prog.sends)  # every part sent once
            assert elems * 4 == s.bytes_sent(rank, count, 4), (s.algorithm, s.collective)
            received = sum(size(op.post) for _, op in messages(prog.recvs))
            assert received * 4 == s.bytes_received(rank, count, 4)
            parts = sum(size(op.land) for op in prog.recvs)  # every part lands once
            assert parts == received


def size(loc) -> int:  # noqa: ANN001
    return loc[2] - loc[1]


def messages(ops):  # noqa: ANN001, ANN201
    """(index, op) of the ops that post a message (the first part of each)."""
    return [(i, op) for i, op in enumerate(ops) if op.lead == i]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(0, 3000), st.sampled_from([4, 64, 1000, 1 << 22]),
       st.sampled_from([1, 4]), st.data())
def test_sender_and_receiver_cut_every_message_the_same_way(n, count, slice_bytes, itemsize,
                                                            data):
    s = data.draw(st.sampled_from(list(every_schedule(n))))
    in_place = s.collective is not Collective.REDUCE_SCATTER
    progs = [compile_program(s, r, count, itemsize, in_place=in_place, slice_bytes=slice_bytes)
             for r in range(n)]
    for a in range(n):
        for b in range(n):
            sent = [(op.step, size(op.post)) for _, op in messages(progs[a].sends) if op.peer == b]
            got = [(op.step, size(op.post)) for _, op in messages(progs[b].recvs) if op.peer == a]
            assert sent == got, (s.algorithm, s.collective, a, b)
    for prog in progs:  # a message never outgrows a slice, except a single region
        for i, op in messages(prog.recvs):
            n_parts = sum(1 for o in prog.recvs if o.lead == i)
            assert n_parts == 1 or size(op.post) * itemsize <= slice_bytes


def test_recursive_halving_sends_each_half_as_one_message():
    s = build(Collective.REDUCE_SCATTER, "recursive", 8)
    prog = compile_program(s, 0, 8000, 4, in_place=False)
    assert [(op.step, size(op.post)) for _, op in messages(prog.sends)] == [
        (0, 4000), (1, 2000), (2, 1000)
    ]
    assert len(prog.sends) == 4 + 2 + 1  # one part per chunk, three messages


def test_scratch_slots_are_disjoint_and_counted():
    s = build(Collective.ALL_REDUCE, "ring", 4)
    prog = compile_program(
        s, 1, 1003, 4, in_place=True, slice_bytes=100, in_place_min_bytes=math.inf
    )
    slots = sorted([(op.land[1], op.land[2]) for op in prog.recvs if op.land[0] == SCRATCH]
                   + [(op.post[1], op.post[2]) for op in prog.sends if op.pack])
    assert all(a[1] <= b[0] for a, b in zip(slots, slots[1:], strict=False))
    assert prog.scratch_elems == sum(b - a for a, b in slots)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(0, 3000), st.sampled_from([4, 64, 1000, 1 << 22]),
       st.sampled_from(["ring", "tree", "dbtree", "recursive", "rabenseifner"]))
def test_in_place_all_reduce_recycles_landing_slots_only_once_applied(n, count, slice_bytes,
                                                                      alg):
    """Reduced messages land in RING_SLOTS recycled slots: a message is posted into a slot
    only after every earlier message that landed there has been applied, and the partial
    sums go to the tensor itself, so no send ever reads a recycled slot."""
    s = build(Collective.ALL_REDUCE, alg, n)
    for rank in range(n):
        with patch.object(program, "IN_PLACE_MIN_BYTES", 0):  # as if every message were big
            prog = compile_program(s, rank, count, 4, in_place=True, slice_bytes=slice_bytes)
        recycled = [(i, op) for i, op in messages(prog.recvs) if op.reduce]
        assert len({op.post[1] for _, op in recycled}) <= RING_SLOTS
        for i, op in recycled:
            assert op.post_after <= i  # posted by the time it is waited for
            for j, earlier in recycled:
                overlap = earlier.post[1] < op.post[2] and op.post[1] < earlier.post[2]
                if j < i and overlap:
                    last_part = max(q for q, o in enumerate(prog.recvs) if o.lead == j)
                    assert op.post_after > last_part
        for op in prog.recvs:
            assert not op.reduce or op.out[0] == INPUT  # partial sums in place
        slots = {(op.post[1], op.post[2]) for _, op in recycled}
        for so in prog.sends:  # nothing is ever sent from a recycled slot
            assert so.loc[0] != SCRATCH or not any(a <= so.loc[1] < b for a, b in slots)


def test_reduce_scatter_never_writes_its_input():
    s = build(Collective.REDUCE_SCATTER, "ring", 4)
    prog = compile_program(s, 2, 4000, 4, in_place=False)
    assert all(op.out[0] != INPUT for op in prog.recvs if op.out is not None)
    assert all(op.land[0] != INPUT for op in prog.recvs)
    finals = [op for op in prog.recvs if op.out is not None and op.out[0] == OUTPUT]
    # rank 2's block (elements 2000..2999) ends in the output, which holds only that block
    assert sum(op.out[2] - op.out[1] for op in finals) == prog.out_elems == 1000


def test_ring_all_reduce_lands_big_gathered_chunks_in_place():
    """All-gather data goes straight into the tensor, over the chunks this rank sent from it
    in the reduce-scatter: each such receive is posted once that send is done, in a later
    step than the send's (so that waiting for it cannot deadlock)."""
    s = build(Collective.ALL_REDUCE, "ring", 4)
    chunk = IN_PLACE_MIN_BYTES // 4  # float32 elements in a 1 MiB chunk
    prog = compile_program(s, 0, 4 * chunk, 4, in_place=True)
    gathered = [op for op in prog.recvs if not op.reduce]
    assert len(gathered) == 3 and all(op.land[0] == INPUT and op.out is None for op in gathered)
    for op in gathered:  # each lands on a chunk sent in the reduce-scatter
        (si,) = op.post_sends
        sent = prog.sends[si]
        assert sent.loc == op.land and sent.step < op.step
        assert prog.recvs[op.post_after].step == sent.step + 1


def test_ring_all_reduce_keeps_small_partial_sums_in_slots_and_stages_its_sent_chunk():
    """Below IN_PLACE_MIN_BYTES partial sums stay in slots of their own, so the all-gather
    lands in place except on the chunk sent from the tensor in step 1: that one lands in a
    slot posted at once and is copied into place once the send is done."""
    s = build(Collective.ALL_REDUCE, "ring", 4)
    prog = compile_program(s, 0, 4000, 4, in_place=True)
    reduced = [op for op in prog.recvs if op.reduce]
    assert all(op.land[0] == SCRATCH for op in reduced)
    assert [op.out[0] for op in reduced] == [SCRATCH, SCRATCH, INPUT]  # only the final sum
    gathered = [op for op in prog.recvs if not op.reduce]
    direct = [op for op in gathered if op.land[0] == INPUT]
    staged = [op for op in gathered if op.land[0] == SCRATCH]
    assert len(direct) == 2 and len(staged) == 1
    assert staged[0].out == (INPUT, 0, 1000) and staged[0].post_after == 0  # chunk 0
    assert staged[0].apply_sends and not staged[0].post_sends


def test_a_grouped_program_stages_what_lands_over_sent_data():
    """Engines that post a whole step at once (NCCL) get the old layout: one slot per
    message, the chunk sent in step 1 copied into place after that send is done."""
    s = build(Collective.ALL_REDUCE, "ring", 4)
    prog = compile_program(s, 0, 4000, 4, in_place=True, in_place_min_bytes=math.inf)
    gathered = [op for op in prog.recvs if not op.reduce]
    direct = [op for op in gathered if op.land[0] == INPUT]
    staged = [op for op in gathered if op.land[0] == SCRATCH]
    assert len(direct) == 2 and len(staged) == 1
    assert staged[0].out == (INPUT, 0, 1000)
    assert staged[0].apply_sends
    assert not any(op.post_sends for op in prog.recvs)
    slots = [op.land for op in prog.recvs if op.land[0] == SCRATCH]
    assert len(set(slots)) == len(slots)  # no slot reused


def test_an_engine_may_land_every_size_in_place():
    """A transport whose late-posted receives cost nothing (MPI over shared memory) compiles
    with in_place_min_bytes=0: small all-gather data lands in place over sent data too."""
    from ringtree.runtime.mpi import MpiTransport
    from ringtree.runtime.transport import Transport

    assert MpiTransport.in_place_min_bytes == 0 and Transport.in_place_min_bytes is None
    s = build(Collective.ALL_REDUCE, "ring", 4)
    prog = compile_program(s, 0, 4000, 4, in_place=True, in_place_min_bytes=0)
    gathered = [op for op in prog.recvs if not op.reduce]
    assert all(op.land[0] == INPUT and op.post_sends for op in gathered)
    assert all(op.out[0] == INPUT for op in prog.recvs if op.reduce)  # partial sums in place


IN_PLACE = (Collective.ALL_REDUCE, Collective.BROADCAST, Collective.REDUCE)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 6), st.integers(0, 3000), st.sampled_from([64, 4096, 1 << 20]),
       st.sampled_from([0, None, math.inf]))
def test_the_tape_posts_waits_and_applies_every_message_once_in_order(n, count, slice_bytes,
                                                                     in_place_from):
    from ringtree.runtime.tape import COPY, LOCAL, RECV, REDUCE, SEND, STEP_DONE, WAIT, compile_tape

    for s in every_schedule(n):
        for rank in range(n):
            prog = compile_program(
                s, rank, count, 4, in_place=s.collective in IN_PLACE, slice_bytes=slice_bytes,
                in_place_min_bytes=in_place_from,
            )
            at = {code: {} for code in (RECV, SEND, "wait recv", "wait send")}
            applied, steps_done = [], []
            tape = compile_tape(prog)
            for k, ins in enumerate(tape):
                code = ins[0] if ins[0] != WAIT else ("wait send" if ins[4] else "wait recv")
                if code in at:
                    assert ins[1] not in at[code], f"{s.label} rank {rank}: twice {ins}"
                    at[code][ins[1]] = k
                elif ins[0] in (REDUCE, COPY):
                    applied.append((ins[1], k))
                elif ins[0] == LOCAL:  # a kept region no message writes, copied once
                    assert ins[1:] in [(*d, *s_) for s_, d in prog.untouched]
                    assert not any(t[0] == WAIT for t in tape[:k])  # before any wait
                else:
                    assert ins[0] == STEP_DONE
                    steps_done.append(ins[1])
            leads_r = {r.lead for r in prog.recvs if r.post is not None}
            leads_s = {o.lead for o in prog.sends if o.post is not None}
            assert set(at[RECV]) == set(at["wait recv"]) == leads_r
            assert set(at[SEND]) == set(at["wait send"]) == leads_s
            assert all(at[RECV][i] < at["wait recv"][i] for i in leads_r)
            assert all(at[SEND][i] < at["wait send"][i] for i in leads_s)
            for i, k in applied:  # a part is applied after its message arrived, in order
                assert at["wait recv"][prog.recvs[i].lead] < k
            assert [i for i, _ in applied] == sorted(i for i, _ in applied)
            assert steps_done == sorted(steps_done)
