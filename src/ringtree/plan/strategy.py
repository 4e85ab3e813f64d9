"""How the work is split: a data-parallel flavour and the dp x tp x pp (x cp) layout, with
expert parallelism (ep, inside dp) and interleaved pipeline stages (v per GPU).

Written as the command line takes it: comma-separated items, each a data-parallel flavour
(``ddp``, ``zero1``, ``zero2``, ``zero3``, ``fsdp`` = ``zero3``), a degree (``dp=8``, ``tp=8``,
``pp=4``, ``cp=2`` context parallel, ``ep=8`` expert parallel, ``v=2`` virtual pipeline stages
per GPU, ``shard=8`` the shard group of hybrid sharding) or ``sp`` (Megatron sequence
parallelism for the TP collectives). ``tp=8`` alone means ``ddp,tp=8`` with dp = GPUs / (tp * pp
* cp). ``hsdp,shard=8`` is HSDP (PyTorch FSDP's hybrid sharding, torchtitan's
``data_parallel_shard_degree=8`` with the rest replicated): ZeRO-3 over groups of 8 consecutive
data-parallel ranks (x cp), the shard's gradients all-reduced over the dp / 8 replicas;
``zero2,shard=8`` the same without resharding after the forward.

>>> parse_strategy("zero1,tp=8,pp=2").resolve(64)
Layout(flavor='zero1', dp=4, tp=8, pp=2, sp=False, cp=1, ep=1, v=1, shard=0, etp=0)
"""

from __future__ import annotations

from dataclasses import dataclass

from ringtree.errors import RingtreeError

FLAVORS = ("ddp", "zero1", "zero2", "zero3")
_ALIASES = {"fsdp": "zero3", "zero-1": "zero1", "zero-2": "zero2", "zero-3": "zero3",
            "hsdp": "zero3"}
_DEGREES = ("dp", "tp", "pp", "cp", "ep", "v", "shard", "etp")
_ACCEPTED = (
    "ddp, zero1, zero2, zero3 (fsdp), hsdp, dp=N, tp=N, pp=N, cp=N, ep=N, etp=1, v=N, shard=N, sp, "
    "joined by commas"
)


@dataclass(frozen=True)
class Strategy:
    """A strategy as written: degrees left None are derived from the GPU count."""

    text: str
    flavor: str = "ddp"
    dp: int | None = None
    tp: int = 1
    pp: int = 1
    sp: bool = False
    cp: int = 1
    ep: int = 1
    v: int = 1
    shard: int = 0
    etp: int = 0

    def resolve(self, gpus: int) -> Layout:
        """The full layout on ``gpus`` GPUs (RingtreeError when dp * tp * pp * cp != gpus, ep
        does not divide dp, or a shard group does not divide it)."""
        split = self.tp * self.pp * self.cp
        if gpus % split:
            what = "tp x pp" + " x cp" * (self.cp > 1)
            sizes = f"{self.tp} x {self.pp}" + f" x {self.cp}" * (self.cp > 1)
            raise RingtreeError(
                f"{gpus} GPUs are not divisible by {what} = {sizes} (strategy {self.text!r})"
            )
        dp = gpus // split
        if self.dp is not None and self.dp != dp:
            raise RingtreeError(
                f"dp x tp x pp = {self.dp} x {self.tp} x {self.pp} = "
                f"{self.dp * split} but there are {gpus} GPUs (strategy {self.text!r})"
            )
        shard = self.shard if self.shard < dp else 0  # a shard of all dp ranks is FSDP
        layout = Layout(self.flavor, dp, self.tp, self.pp, self.sp, self.cp, self.ep, self.v,
                        shard, 1 if self.etp == 1 and self.tp * self.cp > 1 else 0)
        where = layout.ep_misfit()
        if where:
            raise RingtreeError(
                f"ep={self.ep} does not divide {where}: expert parallelism splits the "
                f"data-parallel group (with etp=1, the tp x cp x dp ranks) (strategy "
                f"{self.text!r})"
            )
        if shard and dp % shard:
            raise RingtreeError(f"shard={shard} does not divide dp={dp} (strategy {self.text!r})")
        return layout


@dataclass(frozen=True)
class Layout:
    """dp x tp x pp x cp = GPUs, ranked Megatron-style: TP fastest (consecutive ranks, so a TP
    group sits inside a node when tp divides the node), then CP, then DP (whose consecutive
    runs of ep members form the expert-parallel groups, and of ``shard`` members HSDP's shard
    groups; 0: no hybrid sharding), then PP (slowest). ``etp`` 1: the experts are not split
    over TP (Megatron-Core's expert_tensor_parallel_size=1, "MoE parallel folding"), and the
    expert-parallel groups are runs of ep consecutive ranks over tp x cp x dp; 0: experts split
    as the dense layers (tp), their groups inside dp."""

    flavor: str
    dp: int
    tp: int
    pp: int
    sp: bool = False
    cp: int = 1
    ep: int = 1
    v: int = 1
    shard: int = 0
    etp: int = 0

    @property
    def folded(self) -> bool:
        """Whether the expert-parallel groups span TP and CP ranks (etp=1 with tp x cp > 1)."""
        return self.etp == 1 and self.tp * self.cp > 1

    def ep_misfit(self) -> str | None:
        """What ep does not divide, or None: dp, or when folded tp x cp x dp in whole tp x cp
        blocks."""
        block = self.tp * self.cp if self.folded else 1
        if self.ep % block == 0 and self.dp % (self.ep // block) == 0:
            return None
        return (f"tp x cp x dp = {block * self.dp} in whole tp x cp blocks of {block}"
                if self.folded else f"dp={self.dp}")

    @property
    def expert_tp(self) -> int:
        """The ranks one expert is split over: 1 when folded, else tp."""
        return 1 if self.folded else self.tp

    @property
    def ep_dp(self) -> int:
        """Data-parallel indices one expert-parallel group spans: ep / (tp x cp) when folded."""
        return self.ep // (self.tp * self.cp) if self.folded else self.ep

    @property
    def edp(self) -> int:
        """Ranks holding the same experts (their gradients' reduction): tp cp dp / ep when
        folded, else dp / ep x cp."""
        return self.dp // self.ep_dp if self.folded else self.dp // self.ep * self.cp

    @property
    def gpus(self) -> int:
        """dp * tp * pp * cp."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def hybrid(self) -> bool:
        """Whether the states are sharded over HSDP's shard groups (zero2/zero3 with shard)."""
        return bool(self.shard) and self.flavor in ("zero2", "zero3")

    @property
    def shard_ranks(self) -> int:
        """Ranks one copy of the sharded states spans: dp x cp, or shard x cp under HSDP."""
        return (self.shard if self.hybrid else self.dp) * self.cp

    @property
    def name(self) -> str:
        """Canonical spelling: ``zero3``, ``ddp,tp=8``, ``zero1,tp=8,pp=4,v=2,sp``,
        ``hsdp,shard=8``."""
        parts = ["hsdp" if self.hybrid and self.flavor == "zero3" else self.flavor]
        for key in ("tp", "pp", "v", "cp", "ep", "shard"):
            value = getattr(self, key)
            parts += [f"{key}={value}"] if value > 1 and (key != "shard" or self.hybrid) else []
        parts += ["etp=1"] if self.folded else []
        parts += ["sp"] if self.sp else []
        return ",".join(parts)


def _degree(key: str, value: str, text: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise RingtreeError(f"{key}={value!r} in strategy {text!r}: expected a whole number >= 1")
    return n


def parse_flavors(text: str) -> tuple[str, ...]:
    """Data-parallel flavours, comma-separated (``zero2,zero3``; ``fsdp`` = ``zero3``;
    ``hsdp``: zero3 over one node's shard groups, for ``--search``), in FLAVORS order, hsdp
    last; RingtreeError on an unknown one."""
    known = (*FLAVORS, "hsdp")
    names = [w.strip().lower() for w in text.split(",") if w.strip()]
    chosen = {w if w == "hsdp" else _ALIASES.get(w, w) for w in names}
    if not names or chosen - set(known):
        raise RingtreeError(
            f"data-parallel flavours {text!r}: expected some of {', '.join(known)} (fsdp = "
            "zero3), joined by commas"
        )
    return tuple(f for f in known if f in chosen)


def parse_strategy(text: str) -> Strategy:
    """A Strategy from ``ddp``, ``zero3``, ``tp=8``, ``dp=4,tp=8,pp=2``, ``zero1,tp=8,sp``,
    ``ep=8,tp=1``, ``tp=8,pp=4,v=3,cp=2``, ``hsdp,shard=8``."""
    flavor: str | None = None
    hsdp = False
    degrees: dict[str, int] = {}
    sp = False
    items = [t.strip().lower() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise RingtreeError(f"empty item in strategy {text!r}: expected {_ACCEPTED}")
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        key = "v" if key in ("vpp", "vp") else key
        if eq and key in _DEGREES:
            if key in degrees:
                raise RingtreeError(f"{key} given twice in strategy {text!r}")
            degrees[key] = _degree(key, value.strip(), text)
        elif not eq and key == "sp":
            sp = True
        elif not eq and _ALIASES.get(key, key) in FLAVORS:
            if flavor is not None:
                raise RingtreeError(f"two data-parallel flavours in strategy {text!r}")
            flavor = _ALIASES.get(key, key)
            hsdp = key == "hsdp"
        else:
            raise RingtreeError(f"unknown item {item!r} in strategy {text!r}: expected {_ACCEPTED}")
    tp, pp, v = degrees.get("tp", 1), degrees.get("pp", 1), degrees.get("v", 1)
    if sp and tp == 1:
        raise RingtreeError(f"sp (sequence parallel) needs tp > 1 in strategy {text!r}")
    if v > 1 and pp == 1:
        raise RingtreeError(f"v={v} virtual stages need a pipeline (pp > 1) in strategy {text!r}")
    shard = degrees.get("shard", 0)
    _check_shard(text, flavor, hsdp, shard, degrees.get("ep", 1))
    etp = degrees.get("etp", 0)
    if etp not in (0, 1, tp):
        raise RingtreeError(f"etp={etp} in strategy {text!r}: the experts split over tp "
                            f"(the default) or not at all (etp=1)")
    return Strategy(
        text.strip(), flavor or "ddp", degrees.get("dp"), tp, pp, sp,
        degrees.get("cp", 1), degrees.get("ep", 1), v, shard, 1 if etp == 1 else 0,
    )


def _check_shard(text: str, flavor: str | None, hsdp: bool, shard: int, ep: int) -> None:
    """HSDP needs its shard group, a sharded flavour and no expert parallelism."""
    if hsdp and not shard:
        raise RingtreeError(f"hsdp needs its shard group size, e.g. hsdp,shard=8 (strategy "
                            f"{text!r})")
    if shard and flavor not in ("zero2", "zero3"):
        raise RingtreeError(f"shard={shard} is hybrid sharding: give hsdp (zero3) or zero2 "
                            f"with it (strategy {text!r})")
    if shard and ep > 1:
        raise RingtreeError(f"shard={shard} with ep={ep}: hybrid sharding of expert-parallel "
                            f"models is not modelled (strategy {text!r})")


def candidate_strategies(gpus: int, gpus_per_node: int, layers: int | None) -> list[Strategy]:
    """The strategies ``--compare`` tries when given none: every data-parallel flavour x
    tp in the powers of two up to a node x pp in the powers of two up to the layer count,
    where tp x pp divides the GPUs (tp and pp only when the model has a shape)."""
    powers = [2**k for k in range(gpus.bit_length())]
    tps = [t for t in powers if t <= gpus_per_node] if layers else [1]
    pps = [p for p in powers if p <= layers] if layers else [1]
    out = []
    for tp in tps:
        for pp in pps:
            if gpus % (tp * pp):
                continue
            for flavor in FLAVORS:
                parts = [flavor] + [f"tp={tp}"] * (tp > 1) + [f"pp={pp}"] * (pp > 1)
                out.append(Strategy(",".join(parts), flavor, None, tp, pp))
    return out
