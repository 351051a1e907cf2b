"""Demonstrations without an env (trainers.demos.drill_demos): the assistant writes a list of
actions in turn; the tokens must be what the rollout engine would render for that conversation."""

from __future__ import annotations

import pytest

from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.serving import ServingSettings
from mtrl_gym.rollout.template import ChatRenderer
from mtrl_gym.trainers.demos import drill_demos

PREFIX = '<tool_call>{"name": "guess_word", "arguments": {"guess": "'
SERVING = ServingSettings(assistant_prefix=PREFIX, stop=('"',))


def test_a_drill_renders_like_the_chat_template_with_loss_on_the_actions_only(chatml_tokenizer):
    actions = [[PREFIX + 'C R A N E"}}</tool_call>', PREFIX + 'S L A T E"}}</tool_call>', PREFIX + 'P I O U S"'],
               [PREFIX + 'R E S I N"']]
    demos = drill_demos(actions, chatml_tokenizer, SERVING, system="Spell words.", first_message="A word, please.")
    chat = ChatRenderer(chatml_tokenizer)
    assert [len(t.turn_spans) for t in demos] == [3, 1] and [t.task_id for t in demos] == ["drill-0", "drill-1"]
    first = demos[0]
    # the whole conversation as the template renders it, the last turn still open (closed by a reply in a rollout)
    assert chat.render(first.messages) == chat.decode(first.token_ids) + "<|im_end|>\n"
    assert [m["role"] for m in first.messages] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                                   "assistant"]
    assert [m["content"] for m in first.messages if m["role"] == "tool"] == ["OK", "OK"]
    # loss on each action after the prefill, cut after the stop string; nothing else
    spans = [chat.decode(first.token_ids[a:b]) for a, b in first.turn_spans]
    assert spans == ['C R A N E"', 'S L A T E"', 'P I O U S"']
    assert sum(first.loss_mask) == sum(b - a for a, b in first.turn_spans) == first.sampled_tokens
    assert all(first.loss_mask[a:b] == [1] * (b - a) for a, b in first.turn_spans)
    assert chat.decode(first.token_ids[:first.prompt_length]).endswith("<|im_start|>assistant\n")
    assert chat.decode(first.token_ids[first.turn_spans[0][0] - len(chat.encode(PREFIX)):first.turn_spans[0][0]]) \
        == PREFIX
    assert len(first.token_ids) == len(first.loss_mask) == len(first.logprobs)


def test_a_drill_action_without_the_prefill_is_refused(chatml_tokenizer):
    with pytest.raises(ConfigError, match="format prefill"):
        drill_demos([["crane"]], chatml_tokenizer, SERVING, system="Spell words.", first_message="A word.")


def test_a_drill_without_a_stop_string_ends_each_turn_with_the_end_of_turn_token_once(chatml_tokenizer):
    serving = ServingSettings(assistant_prefix="Word: ")
    (demo,) = drill_demos([["Word: crane", "Word: slate"]], chatml_tokenizer, serving, system="Spell words.",
                          first_message="A word.")
    chat = ChatRenderer(chatml_tokenizer)
    # each turn closed by its own end-of-turn token, not twice (the last turn's newline comes with a reply)
    assert chat.render(demo.messages) == chat.decode(demo.token_ids) + "\n"
    assert [m["content"] for m in demo.messages if m["role"] == "assistant"] == ["Word: crane", "Word: slate"]
    assert [chat.decode(demo.token_ids[a:b]) for a, b in demo.turn_spans] == ["crane<|im_end|>", "slate<|im_end|>"]
