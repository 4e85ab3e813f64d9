"""``ringtree lab ddp --torch-profile DIR``: real torch.profiler traces, one per rank, that
``ringtree profile`` reads back: DDP's gradient all-reduce every recorded step on every rank,
the step split summing to the step, and the load the run measured."""

import json

import pytest

from ringtree.cli import main
from ringtree.kineto.load import load_run
from ringtree.lab.tutor import TutorConfig, build_tutor, n_parameters


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("prof") / "new-folder"
    assert main(["lab", "ddp", "-n", "2", "--steps", "4", "--torch-profile", str(folder),
                 "--json"]) == 0
    return folder


@pytest.mark.multiproc
def test_one_trace_per_rank_with_the_recorded_steps(traces):
    assert sorted(p.name for p in traces.iterdir()) == ["rank0.json", "rank1.json"]
    run = load_run([str(traces)])
    # steps 0 and 1 are the schedule's wait and warm-up: 2 and 3 are recorded
    assert [[s.number for s in r.steps] for r in run.ranks] == [[2, 3], [2, 3]]
    grads = n_parameters(build_tutor(0, TutorConfig())) * 4  # fp32, one bucket (25 MB cap)
    ar = [c for c in run.calls if c.collective == "all-reduce"]
    assert len(ar) == 4 and {(c.size_bytes, c.group_size) for c in ar} == {(grads, 2)}
    for r in run.ranks:
        load = r.meta["ringtree_load"]
        assert load["other_cores"] >= 0 and load["wall_s"] > 0


@pytest.mark.multiproc
def test_profile_reads_them_back(traces, capsys):
    capsys.readouterr()
    assert main(["profile", str(traces), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [s["step"] for s in d["steps"]] == [2, 3]
    for s in d["steps"]:
        parts = s["compute_s"] + s["exposed_comm_s"] + s["memory_s"] + s["idle_s"]
        assert parts == pytest.approx(s["time_s"]) and s["compute_s"] > 0


def test_an_unwritable_folder_is_refused_before_any_process(tmp_path, capsys, monkeypatch):
    from ringtree.lab import ddp

    monkeypatch.setattr(ddp, "run_lab", lambda *a, **k: pytest.fail("processes started"))
    afile = tmp_path / "file"
    afile.write_text("")
    try:
        code = main(["lab", "ddp", "--torch-profile", str(afile / "sub")])
    except SystemExit as e:
        code = e.code
    assert code == 2 and "cannot write to folder" in capsys.readouterr().err
