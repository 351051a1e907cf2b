"""A run folder that holds a run is refused, resumed or replaced: never silently mixed."""

from __future__ import annotations

import pytest

from mtrl_gym.error import ConfigError
from mtrl_gym.run_folder import TRAIN_ARTEFACTS, TRAIN_MARKERS, claim_output_dir


def _used(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints" / "step_000005").mkdir(parents=True)
    (run / "metrics.jsonl").write_text("{}\n")
    (run / "config.yaml").write_text("seed: 0\n")
    (run / "notes.txt").write_text("mine")
    return run


def test_a_used_folder_is_refused_with_the_three_ways_on(tmp_path):
    run = _used(tmp_path)
    with pytest.raises(ConfigError, match=r"already holds a run \(metrics.jsonl, checkpoints\): continue it with "
                                          r"--resume, replace it with --overwrite, or give a fresh --output-dir"):
        claim_output_dir(run, markers=TRAIN_MARKERS, flag="--output-dir")
    assert (run / "metrics.jsonl").is_file()


def test_resume_keeps_and_overwrite_removes_only_the_run_s_files(tmp_path):
    run = _used(tmp_path)
    assert claim_output_dir(run, markers=TRAIN_MARKERS, resume=True) == run
    assert (run / "metrics.jsonl").is_file()
    claim_output_dir(run, markers=TRAIN_MARKERS, artefacts=TRAIN_ARTEFACTS, overwrite=True)
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]
    assert claim_output_dir(tmp_path / "fresh", markers=TRAIN_MARKERS) == tmp_path / "fresh"


def test_resume_and_overwrite_together_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="--resume and --overwrite exclude each other"):
        claim_output_dir(tmp_path, markers=TRAIN_MARKERS, resume=True, overwrite=True)


def test_sft_refuses_a_folder_that_holds_a_run(tmp_path, capsys):
    from mtrl_gym.cli import main

    run = tmp_path / "sft"
    (run / "checkpoints").mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    demos = tmp_path / "demos.jsonl"
    demos.write_text("")
    assert main(["sft", "--demos", str(demos), "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--overwrite" in err and "--resume" in err
