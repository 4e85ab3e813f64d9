"""One entry point for every cost model: :func:`predict`.

>>> from ringtree.cost.links import get_link
>>> p = predict("all-reduce", "ring", 8, 14 * 10**9, get_link("nvlink4"), model="textbook")
>>> p.bytes_sent_per_worker, round(p.time_s * 1e3, 2)
(28000000000, 31.11)
"""

from __future__ import annotations

from collections.abc import Callable

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.alpha_beta import predict_alpha_beta
from ringtree.cost.forms import has_closed_form, registered
from ringtree.cost.links import LinkSpec
from ringtree.cost.prediction import Prediction
from ringtree.cost.textbook import predict_textbook
from ringtree.errors import RingtreeError

Model = Callable[[Collective, str, int, int, int, LinkSpec, BuildSpec], Prediction]
MODELS: dict[str, Model] = {"textbook": predict_textbook, "alpha-beta": predict_alpha_beta}
DEFAULT_MODEL = "alpha-beta"


def parse_model(name: str) -> str:
    """``textbook`` or ``alpha-beta`` (also ``alpha_beta``, ``alphabeta``)."""
    key = name.strip().lower().replace("_", "-")
    key = {"alphabeta": "alpha-beta"}.get(key, key)
    if key not in MODELS:
        raise RingtreeError(f"unknown cost model {name!r}: expected one of {', '.join(MODELS)}")
    return key


def predict(
    collective: Collective | str,
    algorithm: str,
    n_ranks: int,
    size_bytes: int,
    links: LinkSpec,
    model: str = DEFAULT_MODEL,
    *,
    itemsize: int = 1,
    spec: BuildSpec | None = None,
) -> Prediction:
    """The cost of ``algorithm`` for ``collective`` over ``size_bytes`` on ``n_ranks`` ranks.

    links: one Link, or ``{"intra": Link, "inter": Link}`` for algorithms on nodes.
    itemsize: bytes per element (chunks split whole elements; default: bytes).
    Uses closed forms only, so N in the thousands costs microseconds. RingtreeError on
    N < 1, a negative size, a size that is not whole elements, or an unknown model/algorithm.
    """
    col = Collective.parse(collective)
    if n_ranks < 1:
        raise RingtreeError(f"number of workers must be >= 1, got {n_ranks}")
    if size_bytes < 0:
        raise RingtreeError(f"size must be >= 0 bytes, got {size_bytes}")
    if itemsize < 1 or size_bytes % itemsize:
        raise RingtreeError(
            f"size {size_bytes} B is not a whole number of {itemsize}-byte elements"
        )
    spec = spec or BuildSpec()
    if col.has_root and not 0 <= spec.root < n_ranks:
        raise RingtreeError(f"root {spec.root} is not a rank of 0..{n_ranks - 1}")
    name = algorithm.strip().lower()
    if not has_closed_form(col, name):
        known = ", ".join(a for c, a in registered() if c is col)
        raise RingtreeError(
            f"unknown algorithm {algorithm!r} for {col.value}: expected one of {known}"
        )
    return MODELS[parse_model(model)](
        col, name, n_ranks, size_bytes // itemsize, itemsize, links, spec
    )
