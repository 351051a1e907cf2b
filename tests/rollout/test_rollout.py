"""Rollout engine: token-in/token-out trajectories, masks, groups, failures, budgets, metrics."""

from __future__ import annotations

import time

import gymnasium
import pytest
from gymnasium import spaces

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from mtrl_gym.error import ConfigError, InvalidTask, SamplerError  # noqa: E402
from mtrl_gym.rollout.template import ChatRenderer, env_reply_messages, render_tools  # noqa: E402
from mtrl_gym.rollout.engine import RolloutConfig, RolloutEngine, aggregate_metrics, collect  # noqa: E402
from mtrl_gym.rollout.samplers.base import SampleResult, Sampler, SamplingParams  # noqa: E402
from mtrl_gym.rollout.samplers.hf import HFSampler  # noqa: E402
from mtrl_gym.rollout.trajectory import Trajectory, load_jsonl, save_jsonl  # noqa: E402

ECHO_TOOL = {"type": "function", "function": {
    "name": "echo", "description": "Echo the text back.",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
SMALL = SamplingParams(temperature=1.0, max_new_tokens=12)


class EchoEnv(gymnasium.Env[str, str]):
    """A contract-following test env: odd turns answer with a tool result, even turns with a user
    message (and a format error). Reward 0.1 per turn, 1.0 on the last; task fields ``turns``,
    ``explode_at`` (step raises), ``sleep`` (seconds per step); ``{"bad": True}`` fails reset."""

    reward_range = (-1.0, 2.0)
    success_threshold = 1.0

    def __init__(self):
        self.observation_space = spaces.Text(100_000)
        self.action_space = spaces.Text(100_000)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        task = dict((options or {}).get("task") or {})
        if task.get("bad"):
            raise InvalidTask("bad task row")
        draw = int(self.np_random.integers(10_000))
        self.task, self.t = task, 0
        task_id = task.get("id", f"rand{draw}")
        obs = f"Task {task_id}: say something about {draw}."
        return obs, {"system_prompt": "You are a test agent.", "tools": [ECHO_TOOL], "task_id": task_id}

    def step(self, action):
        self.t += 1
        if self.task.get("explode_at") == self.t:
            raise RuntimeError("env exploded")
        time.sleep(self.task.get("sleep", 0))
        last = self.t >= self.task.get("turns", 3)
        info = {"tool_calls": [], "tool_results": [], "format_error": False, "solved": last, "chars": len(action)}
        if self.t % 2:
            content = f"echo: {action[:20]}"
            info["tool_calls"] = [{"id": f"call_{self.t}", "name": "echo", "arguments": {"text": action[:20]}}]
            info["tool_results"] = [{"tool_call_id": f"call_{self.t}", "name": "echo", "content": content}]
            obs = content + f"\nTurns left: {self.task.get('turns', 3) - self.t}"
        else:
            info["format_error"] = True
            obs = f"You said {len(action)} characters."
        return obs, (1.0 if last else 0.1), last, False, info


class NoRangeEnv(EchoEnv):
    reward_range = (float("-inf"), float("inf"))


class ScriptedSampler(Sampler):
    """Returns scripted text per turn (with EOS unless ``close=False``) and records everything."""

    name = "scripted"

    def __init__(self, tokenizer, texts=("hello <tool_call>x</tool_call>", "second  turn\n", "3rd ünïcödé"),
                 close=True, raise_on_call=None, error_sessions=()):
        self.tok, self.texts, self.close_turns = tokenizer, list(texts), close
        self.raise_on_call, self.error_sessions = raise_on_call, set(error_sessions)
        self.calls, self.log, self.ended = 0, [], []

    def sample(self, requests):
        self.calls += 1
        if self.raise_on_call == self.calls:
            raise SamplerError("endpoint down")
        out = []
        for req in requests:
            turn = sum(1 for r, _ in self.log if r.session_id == req.session_id)
            if req.session_id.endswith(tuple(self.error_sessions)) and turn == 1:
                res = SampleResult([], [], "error", prompt_tokens=len(req.prompt_ids), error="boom")
            else:
                ids = self.tok.encode(self.texts[turn % len(self.texts)], add_special_tokens=False)
                ids = ids[:req.params.max_new_tokens - int(self.close_turns)]
                ids += [self.tok.eos_token_id] if self.close_turns else []
                res = SampleResult(ids, [-0.25 - 0.01 * i for i in range(len(ids))],
                                   "stop" if self.close_turns else "length", prompt_tokens=len(req.prompt_ids))
            self.log.append((req, res))
            out.append(res)
        return out

    def end_session(self, session_id):
        self.ended.append(session_id)


def _rows(n, **extra):
    return [{"id": f"task{i}", **extra} for i in range(n)]


def _check_token_level(traj: Trajectory, renderer: ChatRenderer, sampled: list[SampleResult] | None = None):
    """Masked-in tokens are exactly the sampled ones; everything else is masked; no drift."""
    n = len(traj.token_ids)
    assert len(traj.loss_mask) == n == len(traj.logprobs)
    inside = set()
    for s, e in traj.turn_spans:
        inside.update(range(s, e))
    assert [i for i in range(n) if traj.loss_mask[i]] == sorted(inside)
    assert all(traj.logprobs[i] == 0.0 for i in range(n) if i not in inside)
    if sampled is not None:
        assert [traj.token_ids[s:e] for s, e in traj.turn_spans] == [r.token_ids for r in sampled]
        assert [traj.logprobs[s:e] for s, e in traj.turn_spans] == [r.logprobs for r in sampled]
    assert all(traj.loss_mask[i] == 0 for i in range(traj.prompt_length))
    assert renderer.decode(traj.token_ids) == renderer.render(traj.messages, traj.tools)


def _with_template(tokenizer, prefix: str):
    import copy

    tok = copy.deepcopy(tokenizer)
    tok.chat_template = prefix + tok.chat_template
    return tok


def _sampled_by_session(sampler: ScriptedSampler):
    by: dict[str, list] = {}
    for req, res in sampler.log:
        by.setdefault(req.session_id, []).append((req, res))
    return by


def test_scripted_episodes_keep_tokens_exactly_and_render_without_drift(chatml_tokenizer):
    sampler = ScriptedSampler(chatml_tokenizer)
    with RolloutEngine(EchoEnv, sampler, chatml_tokenizer, group_size=2) as engine:
        trajs = engine.collect(_rows(2, turns=3), seed=0)
        sessions = sorted(_sampled_by_session(sampler))
        by = _sampled_by_session(sampler)
        assert len(trajs) == 4 and sorted(sampler.ended) == sessions
        for traj, sid in zip(trajs, sessions):
            assert sid.endswith(f"-{traj.group_id}-{traj.sample_index}")
            _check_token_level(traj, engine.renderer, [res for _, res in by[sid]])
            assert traj.stop_reason == "terminated" and traj.terminated and not traj.failed
            assert traj.turn_rewards == [0.1, 0.1, 1.0] and traj.reward == pytest.approx(1.2)
            # assistant content is the text without the end-of-turn token
            assert [m["content"] for m in traj.messages if m["role"] == "assistant"] == sampler.texts
            roles = [m["role"] for m in traj.messages]
            assert roles == ["system", "user", "assistant", "tool", "user", "assistant", "user", "assistant",
                             "tool", "user"]


def test_assistant_prefix_is_masked_context_and_part_of_the_action(chatml_tokenizer):
    prefix = '<tool_call>{"name": "echo", "arguments": {"text": "'
    sampler = ScriptedSampler(chatml_tokenizer)
    with RolloutEngine(EchoEnv, sampler, chatml_tokenizer, assistant_prefix=prefix) as engine:
        (traj,) = engine.collect(_rows(1, turns=3), seed=0)
        by = _sampled_by_session(sampler)
        (sid,) = by
        _check_token_level(traj, engine.renderer, [res for _, res in by[sid]])
    prefix_ids = chatml_tokenizer.encode(prefix, add_special_tokens=False)
    for (req, _), (start, _end) in zip(by[sid], traj.turn_spans):
        # each request ends with the prefix, and the turn's sampled tokens follow it directly
        assert req.prompt_ids[-len(prefix_ids):] == prefix_ids == traj.token_ids[start - len(prefix_ids):start]
        assert req.prompt_ids == traj.token_ids[:start]
    assistant = [m["content"] for m in traj.messages if m["role"] == "assistant"]
    assert all(a.startswith(prefix + sampler.texts[i][:3]) for i, a in enumerate(assistant))
    assert traj.messages[3]["content"].startswith("echo: " + prefix[:14])  # the env saw prefix + sample


def test_turn_cut_without_end_token_is_closed_with_masked_env_tokens(chatml_tokenizer):
    sampler = ScriptedSampler(chatml_tokenizer, close=False)
    with RolloutEngine(EchoEnv, sampler, chatml_tokenizer) as engine:
        (traj,) = engine.collect(_rows(1, turns=2), seed=0)
        _check_token_level(traj, engine.renderer, [res for _, res in sampler.log])
        end = traj.turn_spans[0][1]
        closing = chatml_tokenizer.encode("<|im_end|>\n<|im_start|>tool\n", add_special_tokens=False)
        assert traj.token_ids[end:end + len(closing)] == closing
        assert traj.loss_mask[end:end + len(closing)] == [0] * len(closing)
        assert traj.metrics["cut_turns"] == 2


def test_tiny_model_rollout_keeps_sampled_tokens_and_masks_env_tokens(tiny_model, chatml_tokenizer):
    hf = HFSampler(tiny_model, chatml_tokenizer)
    recorded: list = []
    real = hf.sample

    def spy(requests):
        results = real(requests)
        recorded.extend(zip(requests, results))
        return results

    hf.sample = spy
    with RolloutEngine(EchoEnv, hf, chatml_tokenizer, group_size=2, sampling=SMALL) as engine:
        trajs = engine.collect(_rows(2, turns=4), seed=1)
    for traj in trajs:
        mine = [(q, r) for q, r in recorded if q.session_id.endswith(f"-{traj.group_id}-{traj.sample_index}")]
        _check_token_level(traj, engine.renderer, [r for _, r in mine])
        # each request's prompt is exactly the trajectory so far: no re-tokenisation of earlier turns
        for (req, _), (start, _) in zip(mine, traj.turn_spans):
            assert req.prompt_ids == traj.token_ids[:start]
        # token counts add up
        assert traj.sampled_tokens == sum(traj.loss_mask) == traj.trainable_tokens
        m = traj.metrics
        assert m["prompt_tokens"] + m["sampled_tokens"] + m["env_tokens"] == len(traj.token_ids)
        assert traj.prefill_tokens + traj.cached_tokens == sum(len(q.prompt_ids) for q, _ in mine)
        assert traj.cached_tokens > 0  # KV reuse from the second turn on
    assert hf.num_sessions == 0  # sessions are ended with their episodes


def test_groups_share_their_task_and_groups_differ(chatml_tokenizer):
    sampler = ScriptedSampler(chatml_tokenizer)
    trajs = collect(EchoEnv, [None, None], sampler, chatml_tokenizer, group_size=3, seed=11)
    prompts = {}
    for t in trajs:
        prompts.setdefault(t.group_id, set()).add(tuple(t.token_ids[:t.prompt_length]))
        assert t.seed == 11 + t.group_id
    assert all(len(p) == 1 for p in prompts.values())
    assert prompts[0] != prompts[1]
    assert len({t.task_id for t in trajs if t.group_id == 0}) == 1
    rows = collect(EchoEnv, _rows(2), sampler, chatml_tokenizer, group_size=2)
    assert [t.task_id for t in rows] == ["task0", "task0", "task1", "task1"]


def test_sampler_crash_fails_the_episodes_with_the_minimum_reward(chatml_tokenizer):
    sampler = ScriptedSampler(chatml_tokenizer, raise_on_call=2)
    trajs = collect(EchoEnv, _rows(2), sampler, chatml_tokenizer, group_size=2)
    for t in trajs:
        assert t.failed and t.stop_reason == "failed" and t.reward == -1.0
        assert t.failure_reason == "sampler: SamplerError: endpoint down"
        assert t.num_turns == 1 and t.turn_rewards == [0.1]
    agg = aggregate_metrics(trajs)
    assert agg["failure_rate"] == 1.0 and agg["failures"] == 4.0 and agg["reward_mean"] == -1.0


def test_one_bad_episode_does_not_stop_the_others(chatml_tokenizer):
    sampler = ScriptedSampler(chatml_tokenizer, error_sessions=("-0-1",))
    tasks = [{"id": "a"}, {"id": "b", "explode_at": 2}, {"id": "c", "bad": True}]
    trajs = collect(EchoEnv, tasks, sampler, chatml_tokenizer, group_size=2)
    status = {(t.group_id, t.sample_index): (t.failed, t.failure_reason) for t in trajs}
    assert status[(0, 0)] == (False, None)
    assert status[(0, 1)] == (True, "sampler: boom")
    assert status[(1, 0)] == status[(1, 1)] == (True, "env step: RuntimeError: env exploded")
    assert status[(2, 0)] == (True, "env reset: InvalidTask: bad task row")
    assert [t.reward for t in trajs if t.failed] == [-1.0] * 5
    assert trajs[4].num_turns == 0 and trajs[4].task_id == "c"
    agg = aggregate_metrics(trajs)
    assert agg["failure_rate"] == pytest.approx(5 / 6) and agg["stop/terminated"] == pytest.approx(1 / 6)


def test_time_budget_fails_slow_episodes(chatml_tokenizer):
    trajs = collect(EchoEnv, [{"id": "slow", "sleep": 0.15, "turns": 5}, {"id": "fast", "turns": 5}],
                    ScriptedSampler(chatml_tokenizer), chatml_tokenizer, time_budget_s=0.25)
    slow, fast = trajs
    assert slow.failed and slow.stop_reason == "time_budget" and slow.reward == -1.0
    assert "time budget of 0.25 s" in slow.failure_reason
    assert not fast.failed and fast.stop_reason == "terminated"


def test_env_timeout_with_worker_threads(chatml_tokenizer):
    start = time.monotonic()
    trajs = collect(EchoEnv, [{"id": "hang", "sleep": 1.5}, {"id": "ok"}], ScriptedSampler(chatml_tokenizer),
                    chatml_tokenizer, env_workers=2, env_timeout_s=0.2)
    assert time.monotonic() - start < 1.4
    assert trajs[0].failed and "did not return within 0.2 s" in trajs[0].failure_reason
    assert not trajs[1].failed and trajs[1].num_turns == 3


def test_max_turns_and_token_budget(chatml_tokenizer):
    sampler = ScriptedSampler(chatml_tokenizer)
    (t,) = collect(EchoEnv, _rows(1, turns=5), sampler, chatml_tokenizer, max_turns=2)
    # an episode cut before the env gave its outcome gets the failure reward by default ...
    assert t.stop_reason == "max_turns" and t.num_turns == 2 and t.reward == -1.0
    assert t.turn_rewards == pytest.approx([0.1, 0.1]) and not t.failed and not t.terminated
    # ... or, on request, the sum of its turn rewards or a fixed value
    (t,) = collect(EchoEnv, _rows(1, turns=5), sampler, chatml_tokenizer, max_turns=2, unfinished_reward="sum")
    assert t.reward == pytest.approx(0.2)
    (t,) = collect(EchoEnv, _rows(1, turns=5), sampler, chatml_tokenizer, max_turns=2, unfinished_reward=-0.25)
    assert t.reward == -0.25
    with pytest.raises(ConfigError, match='`unfinished_reward` must be "min", "sum" or a number, got \'max\''):
        RolloutConfig(unfinished_reward="max")
    full = collect(EchoEnv, _rows(1, turns=5), sampler, chatml_tokenizer)[0]
    budget = full.turn_spans[2][0] + 3  # room for only 3 tokens of the third turn
    (b,) = collect(EchoEnv, _rows(1, turns=5), ScriptedSampler(chatml_tokenizer), chatml_tokenizer,
                   max_episode_tokens=budget)
    assert b.stop_reason == "token_budget" and not b.failed and b.num_turns == 3
    assert all(end <= budget for _, end in b.turn_spans)
    assert b.turn_spans[2][1] - b.turn_spans[2][0] == 3
    engine = RolloutEngine(EchoEnv, sampler, chatml_tokenizer, max_episode_tokens=10)
    (tiny,) = engine.collect(_rows(1))
    assert tiny.failed and tiny.stop_reason == "token_budget" and "no room to sample" in tiny.failure_reason


def test_context_length_of_the_model_bounds_the_episode(chatml_tokenizer):
    from tiny_models import build_tiny_llama

    (probe,) = collect(EchoEnv, _rows(1, turns=1), ScriptedSampler(chatml_tokenizer), chatml_tokenizer)
    limit = probe.prompt_length + 60
    model = build_tiny_llama(len(chatml_tokenizer), max_positions=limit)
    (t,) = collect(EchoEnv, _rows(1, turns=50), HFSampler(model, chatml_tokenizer), chatml_tokenizer,
                   sampling=SamplingParams(max_new_tokens=8))
    assert t.stop_reason == "context_length" and not t.failed and t.num_turns >= 2
    assert max(end for _, end in t.turn_spans) <= limit


def test_same_seed_same_trajectories(tiny_model, chatml_tokenizer):
    def run(seed):
        return collect(EchoEnv, _rows(2, turns=3), HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer,
                       group_size=2, sampling=SMALL, seed=seed)

    a, b, c = run(3), run(3), run(4)
    assert [t.token_ids for t in a] == [t.token_ids for t in b]
    assert [t.token_ids for t in a] != [t.token_ids for t in c]
    # episodes of a group sample differently
    assert a[0].token_ids != a[1].token_ids


def test_engine_calls_without_seed_differ_but_replay_from_config_seed(chatml_tokenizer, tiny_model):
    def two_calls():
        engine = RolloutEngine(EchoEnv, HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer,
                               sampling=SMALL, seed=5)
        return [engine.collect([None])[0].token_ids for _ in range(2)]

    first, second = two_calls(), two_calls()
    assert first == second and first[0] != first[1]


def test_trajectories_round_trip_through_jsonl(tmp_path, chatml_tokenizer):
    trajs = collect(EchoEnv, _rows(2), ScriptedSampler(chatml_tokenizer), chatml_tokenizer, group_size=2,
                    )
    path = save_jsonl(trajs, tmp_path / "t.jsonl")
    assert load_jsonl(path) == trajs


def test_a_file_stopped_while_being_written_keeps_its_old_contents(tmp_path, chatml_tokenizer):
    """A new JSONL file is written whole or not at all (demonstrations are reused when their
    file exists: a shorter one must never look complete)."""
    trajs = collect(EchoEnv, _rows(3), ScriptedSampler(chatml_tokenizer), chatml_tokenizer)
    path = save_jsonl(trajs[:1], tmp_path / "demos.jsonl")

    def stopped():
        yield from trajs
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        save_jsonl(stopped(), path)
    assert load_jsonl(path) == trajs[:1] and sorted(p.name for p in tmp_path.iterdir()) == ["demos.jsonl"]
    with pytest.raises(KeyboardInterrupt):
        save_jsonl(stopped(), tmp_path / "new.jsonl")
    assert not (tmp_path / "new.jsonl").exists()
    assert load_jsonl(save_jsonl(trajs, path, append=True)) == trajs[:1] + trajs


def test_failure_reward_comes_from_the_env_or_the_config(chatml_tokenizer):
    sampler = ScriptedSampler(chatml_tokenizer)
    with pytest.raises(ConfigError, match=r"has no finite minimum reward .* pass failure_reward="):
        RolloutEngine(NoRangeEnv, sampler, chatml_tokenizer)
    engine = RolloutEngine(NoRangeEnv, ScriptedSampler(chatml_tokenizer, raise_on_call=1), chatml_tokenizer,
                           failure_reward=-7.0)
    assert engine.collect([None])[0].reward == -7.0
    with pytest.raises(ConfigError, match="`group_size` must be >= 1, got 0"):
        RolloutConfig(group_size=0)
    with pytest.raises(ConfigError, match="`env_timeout_s` needs `env_workers`"):
        RolloutConfig(env_timeout_s=1.0)


def test_episode_metrics(chatml_tokenizer):
    (t,) = collect(EchoEnv, _rows(1, turns=3), ScriptedSampler(chatml_tokenizer), chatml_tokenizer)
    m = t.metrics
    assert (m["turns"], m["tool_calls"], m["format_errors"]) == (3.0, 2.0, 1.0)
    assert m["format_error_rate"] == pytest.approx(1 / 3)
    assert m["success"] == 1.0 and m["info/solved"] == 1.0 and m["info/chars"] == len("3rd ünïcödé")
    assert m["failed"] == 0.0 and m["cut_turns"] == 0.0 and m["sampled_tokens"] == t.sampled_tokens


def test_aggregate_metrics_by_hand():
    def traj(reward, failed=False, stop="terminated", **metrics):
        return Trajectory(task_id="t", reward=reward, failed=failed, stop_reason=stop, metrics=metrics,
                          loss_mask=[1, 1, 0], token_ids=[1, 2, 3], prefill_tokens=3, cached_tokens=1)

    agg = aggregate_metrics([traj(1.0, success=1.0), traj(-1.0, True, "failed", success=0.0), traj(0.5)],
                            prefix="rollout/")
    assert agg["rollout/num_trajectories"] == 3.0
    assert agg["rollout/reward_mean"] == pytest.approx(0.5 / 3)
    assert agg["rollout/reward_std"] == pytest.approx(((1 - 1 / 6) ** 2 + (1 + 1 / 6) ** 2 + (1 / 3) ** 2) ** 0.5
                                                       / 3 ** 0.5)
    assert (agg["rollout/reward_min"], agg["rollout/reward_max"]) == (-1.0, 1.0)
    assert agg["rollout/failure_rate"] == pytest.approx(1 / 3)
    assert agg["rollout/stop/terminated"] == pytest.approx(2 / 3)
    assert agg["rollout/success_mean"] == 0.5  # over the episodes that report it
    assert agg["rollout/kv_reuse_rate"] == 0.25 and agg["rollout/sampled_tokens_total"] == 6.0
    assert aggregate_metrics([]) == {"num_trajectories": 0.0}


def test_env_reply_messages_modes():
    info = {"tool_results": [{"tool_call_id": "c1", "name": "echo", "content": "echo: hi"}]}
    assert env_reply_messages("echo: hi", info) == [
        {"role": "tool", "content": "echo: hi", "tool_call_id": "c1", "name": "echo"}]
    assert env_reply_messages("echo: hi\nTurns left: 2", info)[1] == {"role": "user", "content": "Turns left: 2"}
    assert env_reply_messages("Other text", info)[1] == {"role": "user", "content": "Other text"}
    assert len(env_reply_messages("echo: hi\nTurns left: 2", info, "tool")) == 1
    assert env_reply_messages("obs", info, "user") == [{"role": "user", "content": "obs"}]
    assert env_reply_messages("obs", {"tool_results": []}) == [{"role": "user", "content": "obs"}]
    with pytest.raises(ValueError, match="reply mode must be one of"):
        env_reply_messages("obs", info, "bogus")


def test_tools_go_into_the_system_prompt_when_the_template_ignores_them(chatml_tokenizer):
    renderer = ChatRenderer(chatml_tokenizer)
    assert not renderer.tools_in_template
    msgs = renderer.first_messages("Be brief.", [ECHO_TOOL], "Hi")
    assert msgs[0]["content"] == "Be brief.\n\n" + render_tools([ECHO_TOOL])
    assert '<tool_call>{"name": "echo", "arguments": {"text": "..."}}</tool_call>' in msgs[0]["content"]
    assert '"name": "echo"' in renderer.render(msgs)
    assert renderer.first_messages("", [ECHO_TOOL], "Hi")[0]["content"] == render_tools([ECHO_TOOL])
    assert renderer.first_messages("", [], "Hi") == [{"role": "user", "content": "Hi"}]


def test_templates_that_render_tools_receive_them(chatml_tokenizer):
    tok = _with_template(chatml_tokenizer, "{% if tools %}<|im_start|>system\nTOOLS:{% for t in tools %}"
                                           "{{ t.function.name }};{% endfor %}<|im_end|>\n{% endif %}")
    renderer = ChatRenderer(tok)
    assert renderer.tools_in_template
    msgs = renderer.first_messages("Be brief.", [ECHO_TOOL], "Hi")
    assert msgs[0]["content"] == "Be brief."
    assert "TOOLS:echo;" in renderer.decode(renderer.prompt_ids(msgs, [ECHO_TOOL]))


def test_templates_without_a_tool_role_get_user_messages(chatml_tokenizer):
    tok = _with_template(chatml_tokenizer, "{% for m in messages %}{% if m['role'] == 'tool' %}"
                                           "{{ raise_exception('no tool role') }}{% endif %}{% endfor %}")
    with RolloutEngine(EchoEnv, ScriptedSampler(tok), tok) as engine:
        (t,) = engine.collect(_rows(1, turns=3))
        assert not t.failed and "tool" not in {m["role"] for m in t.messages}
        assert t.messages[3] == {"role": "user", "content": "echo: hello <tool_call>x</\nTurns left: 2"}
        _check_token_level(t, engine.renderer)


def test_a_reply_the_template_rejects_fails_only_that_episode(chatml_tokenizer):
    tok = _with_template(chatml_tokenizer, "{% if messages|length > 5 %}{{ raise_exception('too long') }}"
                                           "{% endif %}")
    (t,) = collect(EchoEnv, _rows(1, turns=3), ScriptedSampler(tok), tok)
    assert t.failed and t.num_turns == 2 and t.failure_reason.startswith("env reply: ")
    assert "too long" in t.failure_reason
    with pytest.raises(ConfigError, match="`seed` must be >= 0"):
        collect(EchoEnv, _rows(1), ScriptedSampler(tok), tok, seed=-1)


def test_wordle_rollout_with_a_tiny_model(tiny_model, chatml_tokenizer):
    import mtrl_gym  # noqa: F401 - registers the envs

    engine = RolloutEngine("mtrl/Wordle-v0", HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer,
                           group_size=2, max_turns=2, sampling=SMALL)
    assert engine.failure_reward == -1.5
    tasks = [{"prompt": "Guess the 5-letter word", "answer": "paste", "id": "wordle_val_0000"},
             {"answer": "riser", "id": "wordle_val_0001"}]
    trajs = engine.collect(tasks, seed=0)
    assert [t.task_id for t in trajs] == ["wordle_val_0000"] * 2 + ["wordle_val_0001"] * 2
    for t in trajs:
        assert not t.failed and t.stop_reason == "max_turns" and t.num_turns == 2
        _check_token_level(t, engine.renderer)
        assert "guess_word" in t.messages[0]["content"]  # tools reached the model via the system prompt
        assert t.metrics["info/guesses_used"] >= 0
    engine.close()


@pytest.mark.slow
def test_smollm2_plays_a_short_wordle_episode():
    import mtrl_gym  # noqa: F401
    from mtrl_gym import models

    model, tok = models.load("smollm2-135m", device="cpu")
    engine = RolloutEngine("mtrl/Wordle-v0", HFSampler(model, tok), tok, group_size=2, max_turns=2,
                           sampling=SamplingParams(temperature=0.7, max_new_tokens=32))
    trajs = engine.collect([{"answer": "paste", "id": "w0"}], seed=0)
    for t in trajs:
        assert not t.failed, t.failure_reason
        assert t.num_turns == 2 and t.task_id == "w0"
        _check_token_level(t, engine.renderer)  # the real BPE tokenizer: still no drift
        # turn 2 reused all of turn 1 but its last token; the group's second episode also got
        # the shared first prompt from the first one
        shared = t.prompt_length if t.sample_index else 0
        assert t.cached_tokens == t.turn_spans[0][1] - 1 + shared
        assert t.messages[3]["role"] in ("tool", "user") and t.messages[3]["content"]
        assert -1.5 <= t.reward <= 1.55
    assert trajs[0].token_ids[:trajs[0].prompt_length] == trajs[1].token_ids[:trajs[1].prompt_length]


def test_cli_rollout_prints_and_writes_jsonl(tiny_model, chatml_tokenizer, monkeypatch, tmp_path, capsys):
    from mtrl_gym.cli import main
    from mtrl_gym.cli import rollout as cli_rollout

    monkeypatch.setattr(cli_rollout, "_sampler", lambda args: (HFSampler(tiny_model, chatml_tokenizer),
                                                               chatml_tokenizer))
    out = tmp_path / "r.jsonl"
    code = main(["rollout", "mtrl/Wordle-v0", "--n", "4", "--group-size", "2", "--max-turns", "2",
                 "--max-tokens", "8", "--quiet", "--out", str(out)])
    assert code == 0
    trajs = load_jsonl(out)
    assert len(trajs) == 4 and [t.group_id for t in trajs] == [0, 0, 1, 1]
    text = capsys.readouterr().out
    assert "episodes 4 | reward mean" in text and f"wrote 4 trajectories to {out}" in text
    main(["rollout", "--n", "1", "--max-turns", "1", "--max-tokens", "4", "--out", str(out)])
    text = capsys.readouterr().out
    assert "=== episode 1/1 | task wordle-" in text and "[user] Let's play Wordle." in text
    assert main(["rollout", "--n", "3", "--group-size", "2"]) == 2
    assert "--n (3) must be a positive multiple of --group-size (2)" in capsys.readouterr().err


class _Counting(ScriptedSampler):
    """A scripted sampler that reports its tokens through ``on_tokens`` (as the HF sampler does)."""

    def __init__(self, tokenizer, **kwargs):
        super().__init__(tokenizer, **kwargs)
        self.on_tokens = None

    def sample(self, requests):
        results = super().sample(requests)
        if self.on_tokens is not None:
            self.on_tokens(sum(len(r.token_ids) for r in results))
        return results


def test_observers_see_every_sampler_call_token_and_turn_without_patching_the_sampler(chatml_tokenizer):
    from mtrl_gym.rollout.observers import RolloutObserver

    class Log(RolloutObserver):
        def __init__(self):
            self.events = []

        def on_sample(self, requests):
            self.events.append(("sample", requests))

        def on_tokens(self, n):
            self.events.append(("tokens", n))

        def on_turn(self, trajectories, finished):
            self.events.append(("turn", len(trajectories), finished))

    sampler = _Counting(chatml_tokenizer)
    own: list[int] = []
    sampler.on_tokens = own.append  # a callback already set keeps getting its counts
    log = Log()
    with RolloutEngine(EchoEnv, sampler, chatml_tokenizer, observers=[log]) as engine:
        trajs = engine.collect([{"id": "a", "turns": 2}, {"id": "b", "turns": 1}], seed=0)
    sampled = sum(t.sampled_tokens for t in trajs)
    assert [e for e in log.events if e[0] == "sample"] == [("sample", 2), ("sample", 1)]
    assert [e for e in log.events if e[0] == "turn"] == [("turn", 2, 1), ("turn", 2, 2)]
    assert sum(e[1] for e in log.events if e[0] == "tokens") == sum(own) == sampled > 0
    assert log.events[0] == ("sample", 2) and log.events[1][0] == "tokens"  # tokens arrive during the call
    assert sampler.on_tokens == own.append and "sample" not in vars(sampler)  # the sampler is left as it was
