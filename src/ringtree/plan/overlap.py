"""The overlap model: how much of a round of communication compute does not hide.

A round is n calls run one after another on one stream (NCCL runs a process group's collectives
in order), next to a compute window of W seconds split into n equal slices. Either call k
becomes ready when slice k ends (gradient buckets: DDP launches a bucket's all-reduce once
backward has produced its gradients; Li et al. 2020), or slice k may start only once call k is
done (parameter prefetch: ZeRO-3/FSDP gathers a layer before computing it). With calls of t
seconds except the last of t_last, the communication ends

    max_k ( k W/n + sum_{j >= k} t_j )

and the exposed time is that minus W. For equal calls both readings give the same
``max(t, n t - (n - 1) W / n)``: with enough compute everything but one call is hidden; without
(W = 0), all of it shows. One unbucketed all-reduce (n = 1) is fully exposed, which is why DDP
buckets gradients.
"""

from __future__ import annotations


def exposed_s(call_s: float, last_s: float, n_calls: int, window_s: float) -> float:
    """Exposed seconds of ``n_calls`` serial calls (``n_calls - 1`` of ``call_s``, the last of
    ``last_s``) beside ``window_s`` seconds of compute, under the model above."""
    if n_calls <= 0:
        return 0.0
    total = (n_calls - 1) * call_s + last_s
    slice_s = window_s / n_calls
    ends = [slice_s + total, window_s + last_s]  # k = 1 and k = n
    if n_calls >= 2:
        ends.append(window_s - slice_s + call_s + last_s)  # k = n - 1
    return max(0.0, max(ends) - window_s)
