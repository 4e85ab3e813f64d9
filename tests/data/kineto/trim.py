"""Cut a Kineto trace down to a test fixture: one step, and only the events ringtree reads.

Keeps the header (every top-level key but traceEvents), the metadata events ("ph": "M"), the
host events that start inside step ``--step``'s ProfilerStep window, and the GPU events
(kernels, memcpy, memset) whose launch does; drops flow events, python_function events and,
with ``--no-ops``, the host operators that are not collectives. Writes gzipped JSON.

    python tests/data/kineto/trim.py IN OUT.json.gz [--step N] [--no-ops]
"""

from __future__ import annotations

import argparse
import gzip
import json

GPU = {"kernel", "gpu_memcpy", "gpu_memset"}
COMM_OPS = ("c10d::", "record_param_comms", "nccl:", "gloo:", "ProfilerStep#")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--step", type=int, help="the step to keep (default: the first)")
    ap.add_argument("--no-ops", action="store_true", help="drop non-collective host operators")
    a = ap.parse_args()
    opener = gzip.open if a.src.endswith(".gz") else open
    with opener(a.src, "rt") as f:
        d = json.load(f)
    ev = d["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in ev
                   if str(e.get("name", "")).startswith("ProfilerStep#"))
    pick = [s for s in steps if a.step is None or s[2] == f"ProfilerStep#{a.step}"][0]
    lo, hi = pick[0], pick[1]
    launched = {e["args"]["correlation"] for e in ev
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and lo <= e["ts"] <= hi
                and "correlation" in e.get("args", {})}
    keep = []
    for e in ev:
        cat, name = e.get("cat"), str(e.get("name", ""))
        if e.get("ph") == "M":
            keep.append(e)
        elif e.get("ph") != "X" or cat in ("python_function", "Trace"):
            continue
        elif cat in GPU:
            if e.get("args", {}).get("correlation") in launched:
                keep.append(e)
        elif lo <= e["ts"] <= hi and not (a.no_ops and cat == "cpu_op"
                                          and not name.startswith(COMM_OPS)):
            keep.append(e)
    d["traceEvents"] = keep
    with gzip.open(a.dst, "wt") as f:
        json.dump(d, f)
    print(f"{a.dst}: {len(keep)} of {len(ev)} events ({pick[2]})")


if __name__ == "__main__":
    main()
