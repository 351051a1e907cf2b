"""docs/adapters.md says what its commands need: the task-file rows `--env.taskset.tasks-file` reads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mtrl_gym.adapters.episode import EpisodeTask, resolve_episode_tasks
from mtrl_gym.error import DatasetError

DOC = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"


def _verifiers_section() -> str:
    text = DOC.read_text()
    return text[text.index("## verifiers\n"):text.index("## TRL\n")]


def test_tasks_file_row_format_is_documented_and_works(tmp_path):
    section = _verifiers_section()
    assert '`{"prompt": "<the task row as JSON>"}`' in section and "--env.taskset.tasks-file" in section
    [example] = re.findall(r"```json\n(.*?)\n```", section, flags=re.S)
    path = tmp_path / "tasks.jsonl"
    path.write_text(example + "\n")
    assert json.loads(example) == {"prompt": json.dumps({"answer": "paste", "id": "t0"})}
    assert resolve_episode_tasks("mtrl/Wordle-v0", tasks=str(path), seed=4) == [
        EpisodeTask(seed=4, row={"answer": "paste", "id": "t0"})]
    # the documented error for a bare task row
    quoted = re.search(r"`(row has no 'prompt' field)`", section).group(1)
    path.write_text(json.dumps({"answer": "paste", "id": "t0"}) + "\n")
    with pytest.raises(DatasetError, match=re.escape(quoted)):
        resolve_episode_tasks("mtrl/Wordle-v0", tasks=str(path))
