"""The SVG picture: valid XML, one panel per step, one arrow per transfer, cells filled by
the share of inputs each chunk holds, ring and tree layouts."""

import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ringtree.algorithms import BuildSpec, build, registered
from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.schedule import Action, Schedule, Step, Transfer
from ringtree.trace.svg import MAX_CHUNKS, choose_layout, schedule_svg, write_svg

NS = {"svg": "http://www.w3.org/2000/svg"}


#: every algorithm that runs without nodes (the pictures take any of them)
FLAT_ALGORITHMS = [a for a in registered() if not a.needs_nodes]


def panels(doc, kind):
    return [p for p in doc.iter(f"{{{NS['svg']}}}svg") if p.get("class") == f"panel {kind}"]


def groups(elem, cls):
    return [g for g in elem.iter(f"{{{NS['svg']}}}g") if g.get("class") == cls]


def rank_boxes(panel):
    """rank -> (x, y) of its box, and rank -> [cell fill heights / cell height]."""
    where, fills = {}, {}
    for g in groups(panel, "rank"):
        box = g.find("svg:rect", NS)
        rank = int(g.find("svg:text", NS).text.split()[1])
        where[rank] = (float(box.get("x")), float(box.get("y")))
        fills[rank] = []
        for cell in groups(g, "cell"):
            rects = cell.findall("svg:rect", NS)
            full = float(rects[0].get("height"))
            filled = float(rects[1].get("height")) if len(rects) > 1 and rects[1].get(
                "fill") != "none" else 0.0
            fills[rank].append(filled / full)
    return where, fills


def binary_tree_broadcast(n=7):
    """Heap-numbered binary tree (parent of i is (i-1)//2), one layer per step."""
    depth = [0] * n
    for i in range(1, n):
        depth[i] = depth[(i - 1) // 2] + 1
    steps = tuple(
        Step(tuple(Transfer((i - 1) // 2, i, 0) for i in range(n) if depth[i] == d), "broadcast")
        for d in range(1, max(depth) + 1)
    )
    return Schedule(Collective.BROADCAST, "binary-tree", n, 1, steps, root=0)


@given(
    algorithm=st.sampled_from(FLAT_ALGORITHMS),
    n=st.integers(1, 9),
    root=st.integers(0, 8),
    chunks=st.integers(1, 5),
)
def test_one_panel_per_step_and_one_arrow_per_transfer(algorithm, n, root, chunks):
    s = algorithm.build(n, BuildSpec(root=root % n, n_chunks=chunks))
    assume(s.n_chunks <= MAX_CHUNKS)  # an all-to-all on 9 ranks has 81 blocks: too many to draw
    doc = ET.fromstring(schedule_svg(s))
    assert len(panels(doc, "start")) == 1
    steps = panels(doc, "step")
    assert len(steps) == s.n_steps
    for k, (panel, step) in enumerate(zip(steps, s.steps, strict=True)):
        assert panel.get("data-step") == str(k + 1)
        for action in Action:
            arrows = groups(panel, f"transfer {action.value}")
            assert len(arrows) == sum(t.action is action for t in step.transfers)
        assert len(groups(panel, "rank")) == n


def test_ring_all_reduce_cells_fill_as_the_sums_grow():
    s = build("all-reduce", "ring", 4)
    doc = ET.fromstring(schedule_svg(s))
    (start,), steps = panels(doc, "start"), panels(doc, "step")
    _, before = rank_boxes(start)
    assert before == {r: [0.25] * 4 for r in range(4)}  # each rank: its own input
    # reduce-scatter, step k (from 1): rank i+1 adds chunk i-k+1, which then holds k+1 inputs
    for k in (1, 2, 3):
        _, fill = rank_boxes(steps[k - 1])
        for i in range(4):
            assert fill[(i + 1) % 4][(i - k + 1) % 4] == pytest.approx((k + 1) / 4)
    _, after = rank_boxes(steps[-1])
    assert after == {r: [1.0] * 4 for r in range(4)}  # all-reduce done: all complete


def test_ring_layout_is_a_circle_and_tree_layout_has_layers():
    ring = build("all-reduce", "ring", 4)
    assert choose_layout(ring) == "circle"
    where, _ = rank_boxes(panels(ET.fromstring(schedule_svg(ring)), "start")[0])
    # rank 0 at the top, then clockwise: right, bottom, left
    assert where[0][1] < where[1][1] < where[2][1]
    assert where[3][0] < where[0][0] < where[1][0]

    tree = binary_tree_broadcast(7)
    assert choose_layout(tree) == "tree"
    where, _ = rank_boxes(panels(ET.fromstring(schedule_svg(tree)), "start")[0])
    layer = {0: [0], 1: [1, 2], 2: [3, 4, 5, 6]}
    ys = [{where[r][1] for r in ranks} for ranks in layer.values()]
    assert all(len(y) == 1 for y in ys) and min(ys[0]) < min(ys[1]) < min(ys[2])
    assert where[1][0] < where[0][0] < where[2][0]  # the root is centred over its children
    assert [where[r][0] for r in (3, 4, 5, 6)] == sorted(where[r][0] for r in (3, 4, 5, 6))
    # a forced circle works too, and a chain named "ring" stays on its ring
    assert choose_layout(tree, "circle") == "circle"
    assert choose_layout(build("broadcast", "ring", 5)) == "circle"


def test_limits_and_bad_layout_are_one_line_errors(tmp_path):
    with pytest.raises(RingtreeError, match="33 ranks"):
        schedule_svg(build("all-gather", "ring", 33))
    with pytest.raises(RingtreeError, match="unknown layout 'spiral'"):
        schedule_svg(build("all-gather", "ring", 3), layout="spiral")
    with pytest.raises(RingtreeError, match="cannot write"):
        write_svg(str(tmp_path / "no" / "x.svg"), build("all-gather", "ring", 3))
    path = tmp_path / "x.svg"
    write_svg(str(path), build("reduce-scatter", "ring", 5))
    assert len(panels(ET.parse(path).getroot(), "step")) == 4


def test_schedules_on_several_nodes_get_a_frame_per_node():
    s = replace(build("all-reduce", "ring", 6), ranks_per_node=3)
    assert choose_layout(s) == "nodes"
    start = panels(ET.fromstring(schedule_svg(s)), "start")[0]
    frames = [r for r in start.iter(f"{{{NS['svg']}}}rect") if r.get("class") == "node"]
    assert len(frames) == 2
    where, _ = rank_boxes(start)
    for rank, (x, y) in where.items():
        f = frames[rank // 3]
        fx, fy = float(f.get("x")), float(f.get("y"))
        assert fx < x < fx + float(f.get("width")) and fy < y < fy + float(f.get("height"))
    with pytest.raises(RingtreeError, match="layout 'nodes' needs a schedule on several nodes"):
        schedule_svg(build("all-reduce", "ring", 6), layout="nodes")


def test_arrows_keep_off_other_ranks_boxes_and_inside_the_panel():
    # root 0 over 1, 2, 3 in one layer; 1 -> 3 and 3 -> 1 would run straight through rank 2
    steps = (
        Step((Transfer(0, 1, 0), Transfer(0, 2, 1), Transfer(0, 3, 2))),
        Step((Transfer(1, 3, 0), Transfer(3, 1, 2))),
    )
    s = Schedule(Collective.BROADCAST, "tree-ish", 4, 3, steps, root=0)
    panel = panels(ET.fromstring(schedule_svg(s, layout="tree")), "step")[1]
    where, _ = rank_boxes(panel)
    x2, y2 = where[2]
    box = next(g for g in groups(panel, "rank")).find("svg:rect", NS)
    w, h = float(box.get("width")), float(box.get("height"))
    width, height = float(panel.get("width")), float(panel.get("height"))
    curves = [g.find("svg:path", NS).get("d").split() for g in groups(panel, "transfer copy")]
    assert len(curves) == 2
    for d in curves:
        (ax, ay), (cx, cy), (bx, by) = [(float(d[i]), float(d[i + 1])) for i in (1, 4, 6)]
        for i in range(21):
            t = i / 20
            x = (1 - t) ** 2 * ax + 2 * (1 - t) * t * cx + t * t * bx
            y = (1 - t) ** 2 * ay + 2 * (1 - t) * t * cy + t * t * by
            air = 4  # pixels of air between an arrow and a box it passes
            assert not (x2 - air <= x <= x2 + w + air and y2 - air <= y <= y2 + h + air)
            assert 0 < x < width and 0 < y < height, "arrow off the panel"
    # the two arrows bulge to opposite sides (each to the left of its direction)
    assert (float(curves[0][5]) - y2) * (float(curves[1][5]) - y2) < 0
