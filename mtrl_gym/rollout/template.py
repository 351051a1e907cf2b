"""Chat-template rendering for token-in/token-out rollouts.

A multi-turn rollout must never re-tokenise earlier turns: the sampled assistant tokens
stay exactly as sampled, and only the *new* text of each environment reply is tokenised
and appended. :class:`ChatRenderer` does that with the model's own chat template:

* :meth:`ChatRenderer.prompt_ids` renders the first prompt (system prompt, tools, first
  observation) with the generation prompt, like ``apply_chat_template(...,
  add_generation_prompt=True)``.
* :meth:`ChatRenderer.split_assistant` turns sampled tokens into the assistant message
  text (what the environment receives) and the end-of-turn text the model emitted.
* :meth:`ChatRenderer.reply_ids` renders the conversation with the last assistant content
  replaced by a marker plus the new messages, and keeps the text after the marker: the
  template's end of the assistant turn (minus the end-of-turn token the model already
  sampled) followed by the new messages. :meth:`ChatRenderer.generation_prompt_ids` is
  the rendered difference that ``add_generation_prompt=True`` makes.

The invariant, for templates that render message contents verbatim (ChatML: SmolLM2,
Qwen2.5, ...): ``decode(token_ids) == render(messages)``, so the model saw exactly the
conversation a person reads. When a turn is cut by ``max_new_tokens`` or a stop string,
the template's full end-of-turn text (ChatML: ``"<|im_end|>\\n"``) is appended as
environment tokens (loss mask 0): the conversation stays well-formed and the model is
never trained to emit the closing it did not sample. Templates that rewrite history
(dropping earlier reasoning, trimming whitespace) still get exact sampled tokens; only
``render(messages)`` may then differ from what the model saw.

Templates that ignore ``tools`` (SmolLM2's does) get the tool schemas in the system
prompt instead, formatted by :func:`render_tools`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mtrl_gym.messages import REPLY_MODES, env_reply_messages

__all__ = ["REPLY_MODES", "ChatRenderer", "env_reply_messages", "render_tools"]

_MARK = "\u2063mtrl-gym-assistant-content\u2063"
_PROBE_TOOL = {"type": "function", "function": {
    "name": "mtrl_gym_probe_tool_7c1e", "description": "probe",
    "parameters": {"type": "object", "properties": {}, "required": []}}}
_EXAMPLE_VALUES = {"string": "...", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}


def _example_value(schema: Any) -> Any:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(kind, list):  # a union such as ["string", "null"]
        kind = next((k for k in kind if k != "null"), None)
    return _EXAMPLE_VALUES.get(kind, "...") if isinstance(kind, str) else "..."


def render_tools(tools: Sequence[Mapping[str, Any]]) -> str:
    """Tool schemas as system-prompt text, for chat templates that do not render ``tools``.

    The format is the one :mod:`mtrl_gym.parsing` reads first (Hermes tags)::

        # Tools
        You can call the tools below. Each line inside <tools></tools> is one tool's JSON schema.
        <tools>
        {"type": "function", "function": {"name": "guess_word", ...}}
        </tools>
        To call a tool, write a JSON object with its name and arguments inside
        <tool_call></tool_call> tags, for example:
        <tool_call>{"name": "guess_word", "arguments": {"guess": "..."}}</tool_call>
    """
    if not tools:
        return ""
    lines = ["# Tools",
             "You can call the tools below. Each line inside <tools></tools> is one tool's JSON schema.",
             "<tools>"]
    lines += [json.dumps(t, ensure_ascii=False) for t in tools]
    # The example call reads the first schema defensively: a schema that is not one (a
    # string, a list of properties) gives an example without arguments, never an error.
    first = tools[0] if isinstance(tools[0], Mapping) else {}
    fn = first.get("function", first)
    fn = fn if isinstance(fn, Mapping) else {}
    params = fn.get("parameters") if isinstance(fn.get("parameters"), Mapping) else {}
    props = params.get("properties") if isinstance(params.get("properties"), Mapping) else {}
    required = params.get("required")
    names = [k for k in required if isinstance(k, str)] if isinstance(required, list) else list(props)
    example_args = {k: _example_value(props.get(k)) for k in names}
    name = fn.get("name") if isinstance(fn.get("name"), str) else "tool"
    example = json.dumps({"name": name, "arguments": example_args}, ensure_ascii=False)
    lines += ["</tools>",
              "To call a tool, write a JSON object with its name and arguments inside",
              "<tool_call></tool_call> tags, for example:",
              f"<tool_call>{example}</tool_call>"]
    return "\n".join(lines)


class ChatRenderer:
    """Renders conversations through a tokenizer's chat template, token-in/token-out.

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template.
        tools_in_template: ``True`` passes tool schemas to the template, ``False`` puts them
            in the system prompt (:func:`render_tools`), ``None`` (default) checks whether
            the template renders them.
        end_token_ids: token ids that end an assistant turn (default: the tokenizer's EOS
            token). A sampled turn's last token is split off as its end-of-turn text only
            when it is one of these; other stop tokens stay part of the content.
    """

    def __init__(self, tokenizer, *, tools_in_template: bool | None = None,
                 end_token_ids: Sequence[int] | None = None):
        if getattr(tokenizer, "chat_template", None) is None:
            from mtrl_gym.error import ConfigError

            raise ConfigError("the tokenizer has no chat template; set `tokenizer.chat_template` "
                              "(a Jinja string) before rolling out")
        self.tokenizer = tokenizer
        if tools_in_template is None:
            probe = self._render([{"role": "user", "content": "x"}], [_PROBE_TOOL], False, template_tools=True)
            tools_in_template = _PROBE_TOOL["function"]["name"] in probe
        self.tools_in_template = bool(tools_in_template)
        ends = set(end_token_ids or ())
        if not ends and tokenizer.eos_token_id is not None:
            ends.add(int(tokenizer.eos_token_id))
        self.end_token_ids = frozenset(ends)

    # ---------------------------------------------------------------- text

    def _render(self, messages, tools, add_generation_prompt: bool, *, template_tools: bool | None = None) -> str:
        use_tools = self.tools_in_template if template_tools is None else template_tools
        return self.tokenizer.apply_chat_template(
            list(messages), tools=(list(tools) if use_tools and tools else None), tokenize=False,
            add_generation_prompt=add_generation_prompt)

    def render(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping] | None = None, *,
               add_generation_prompt: bool = False) -> str:
        """The conversation as text, exactly as the chat template renders it."""
        return self._render(messages, tools, add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token text (``<|im_end|>``) maps to its token."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids`` with special tokens kept and no clean-up of spaces."""
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=False,
                                     clean_up_tokenization_spaces=False)

    # ---------------------------------------------------------------- turns

    def first_messages(self, system_prompt: str, tools: Sequence[Mapping] | None,
                       observation: str) -> list[dict[str, Any]]:
        """System and user messages of the first prompt (tool text in the system prompt
        when the template does not render tools)."""
        system = system_prompt or ""
        if tools and not self.tools_in_template:
            system = f"{system}\n\n{render_tools(tools)}" if system else render_tools(tools)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": observation})
        return messages

    def prompt_ids(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping] | None = None) -> list[int]:
        """Token ids of the first prompt, ending with the generation prompt."""
        return self.encode(self._render(messages, tools, True))

    def split_assistant(self, token_ids: Sequence[int]) -> tuple[str, str]:
        """``(content, end_text)`` of a sampled turn.

        ``end_text`` is the text of the final token when it is a special token that ends
        the turn (EOS, ``<|im_end|>``); ``content`` is the rest, the raw assistant text the
        environment receives. Turns cut by ``max_new_tokens`` or a stop string have
        ``end_text == ""``.
        """
        ids = list(token_ids)
        if ids and ids[-1] in self.end_token_ids:
            return self.decode(ids[:-1]), self.decode(ids[-1:])
        return self.decode(ids), ""

    def _tail(self, messages, tools, add_generation_prompt: bool) -> str:
        """Rendered text after the last assistant message's content."""
        last = max(i for i, m in enumerate(messages) if m.get("role") == "assistant")
        probe = [dict(m) for m in messages]
        probe[last]["content"] = _MARK
        text = self._render(probe, tools, add_generation_prompt)
        return text[text.rindex(_MARK) + len(_MARK):]

    def reply_ids(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping] | None,
                  end_text: str) -> list[int]:
        """Tokens that close the last assistant turn and render the messages after it.

        ``messages`` is the whole conversation: it ends with the new environment messages,
        preceded by the assistant message just sampled (whose ``end_text`` came from
        :meth:`split_assistant`). The generation prompt is not included.
        """
        tail = self._tail(messages, tools, False)
        if end_text and tail.startswith(end_text):
            tail = tail[len(end_text):]
        return self.encode(tail)

    def generation_prompt_ids(self, messages: Sequence[Mapping[str, Any]],
                              tools: Sequence[Mapping] | None = None) -> list[int]:
        """Tokens ``add_generation_prompt=True`` appends to ``messages`` (ChatML:
        ``<|im_start|>assistant\\n``)."""
        with_prompt = self._render(messages, tools, True)
        without = self._render(messages, tools, False)
        if with_prompt.startswith(without):
            return self.encode(with_prompt[len(without):])
        # The template rewrites history when a generation prompt follows (rare): take the
        # text after the last assistant content in both renderings instead.
        a, b = self._tail(messages, tools, True), self._tail(messages, tools, False)
        return self.encode(a.removeprefix(b))
