"""A support call with two seats (``mtrl/SOP-CustomerCall-v0``): the agent follows the SOP, the customer holds the facts.

The ``mtrl/SOP-CustomerService-v0`` domain (broadband fault calls), except that the
caller's details (account number, name, passcode, device label, reported fault) are not in
the task inputs: they are held by the ``customer`` seat, and the ``agent`` seat must ask for
them with the ``ask_customer`` tool. The customer can be a model seat or the scripted
customer of :mod:`mtrl_gym.envs.multiagent.policies`, which answers exactly what a
question asks (:func:`question_topics`). The grade is the domain's strict grader minus a
penalty for each question about details the agent was already told.

>>> call = parallel_env()
>>> obs, infos = call.reset(seed=0)
>>> call.agents, infos["customer"]["waiting"]
(['agent', 'customer'], True)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.envs.multiagent.base import CycleAECEnv, CycleGame, CycleParallelEnv, SeatUpdate
from mtrl_gym.envs.sandbox.final import CHARSET, clean_text
from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop.base import SOPEnv
from mtrl_gym.envs.sop.customer_service import CustomerService
from mtrl_gym.envs.sop.customer_service.tools import TOOLS as SERVICE_TOOLS
from mtrl_gym.parsing import ToolCallParser

__all__ = ["CustomerCallEnv", "CustomerCallParallelEnv", "CallGame", "CallDomain", "env", "parallel_env", "SEATS",
           "FACTS", "question_topics", "REPEAT_PENALTY", "DEFAULT_MAX_QUESTIONS", "DEFAULT_MAX_CYCLES",
           "customer_reply"]

SEATS = ("agent", "customer")
#: The details only the customer knows: fact key -> how the customer names it.
FACTS: dict[str, str] = {"account_id": "Account number", "caller_name": "Name", "passcode": "Passcode",
                         "device_label": "Device label", "reported_fault": "Fault"}
#: Reward taken off for each question that asks only for details the agent was already told.
REPEAT_PENALTY = 0.1
DEFAULT_MAX_QUESTIONS = 10
DEFAULT_MAX_CYCLES = 64
_MAX_QUESTION_CHARS = 500
_MAX_ANSWER_CHARS = 600

_TOPIC_PATTERNS: dict[str, re.Pattern[str]] = {
    "account_id": re.compile(r"\b(?:account|customer)\s*(?:number|no|id|#)|\baccount\b(?!\s*holder)"),
    "caller_name": re.compile(r"\bnames?\b|\bwho\b"),
    "passcode": re.compile(r"\bpass\s*code|\bpassword|\bpin\b|\bsecurity code"),
    "device_label": re.compile(r"\bdevices?\b|\blabel|\brouter|\bhub\b|\bmodem|\bserial|\bequipment"),
    "reported_fault": re.compile(r"\bfault|\bproblem|\bissue|\bwrong\b|\bsymptom|\btrouble|\bhappening|"
                                 r"\bcalling about|\bcategory"),
}


def question_topics(question: str) -> tuple[str, ...]:
    """The facts (keys of :data:`FACTS`, in that order) a question asks for: a keyword match, linear in length.

    >>> question_topics("Could you give me your account number and passcode?")
    ('account_id', 'passcode')
    >>> question_topics("How are you today?")
    ()
    """
    text = question[:_MAX_QUESTION_CHARS].lower()
    return tuple(key for key, pattern in _TOPIC_PATTERNS.items() if pattern.search(text))


def customer_reply(question: str, facts: Mapping[str, str]) -> str:
    """What the scripted customer says: exactly the facts the question asks for, or a request to rephrase."""
    topics = question_topics(question)
    if not topics:
        return ("Sorry, I'm not sure what you need from me. I can tell you my account number, my name, my "
                "passcode, the label on the device or what the fault is.")
    return " ".join(f"{FACTS[k]}: {facts[k]}." for k in topics)


@tool
def ask_customer(ctx: ToolContext, question: str) -> str:
    """Ask the customer on the line a question; their answer is this call's result.

    Args:
        question: The question, in plain words (for example, what their account number is).
    """
    raise ToolError("ask_customer is answered by the customer, not by the console")  # the game intercepts it


_CALLER_SECTION = f"""## The caller

The task inputs do not hold the caller's details. The account number, the caller's name, the
telephone passcode, the label of the faulty device and the reported fault are known only to the
customer on the line: ask for them with `ask_customer(question)` and use them exactly as the
customer gives them. The customer answers only what you ask. A message that asks the customer runs
no other tool, and the answer arrives as that call's result. Each question that asks only for
details the customer already gave you takes {REPEAT_PENALTY} off the call's score."""


class CallDomain(CustomerService):
    """The CustomerService SOP with the caller's details held by the customer seat."""

    name = "CustomerCall"
    tools = ToolSet([*SERVICE_TOOLS.values(), ask_customer])
    request = ("A customer has called to report a broadband fault; they are on the line. Handle the call by "
               "following the SOP, then submit the final JSON record.")

    @property
    def sop_text(self) -> str:
        return CustomerService().sop_text

    def task_inputs(self, world: Mapping[str, Any]) -> dict[str, Any]:
        return {"call_date": world["inputs"]["call_date"]}

    def system_text(self) -> str:
        return f"{self.role.strip()}\n\n{self.sop_text.strip()}\n\n{_CALLER_SECTION}\n\n{self.answer_format()}"


class _CallSOPEnv(SOPEnv):
    """The agent's console: the SOP env of :class:`CallDomain` (``ask_customer`` never reaches it)."""

    domain = CallDomain()


def _persona(facts: Mapping[str, str]) -> str:
    details = "\n".join(f"- {FACTS[k]}: {facts[k]}" for k in FACTS)
    return ("You are a customer of Kestrel Broadband, on the phone with a support agent about a fault with your "
            "broadband. Answer the agent's questions briefly and truthfully with the details below, exactly as "
            "written. Answer only what you are asked; never volunteer other details.\n\nYour details:\n" + details)


class CallGame(CycleGame):
    """The rules of the customer call, one cycle at a time; see :class:`CustomerCallEnv`."""

    seats = SEATS
    charset = CHARSET
    observation_chars = 65_536
    action_chars = 100_000

    def __init__(self, max_cycles: int = DEFAULT_MAX_CYCLES, max_questions: int = DEFAULT_MAX_QUESTIONS,
                 difficulty: Mapping[str, Any] | None = None, split: str = "train"):
        super().__init__(max_cycles)
        if isinstance(max_questions, bool) or not isinstance(max_questions, int) or max_questions < 1:
            from mtrl_gym.error import ConfigError

            raise ConfigError(f"`max_questions` must be an int >= 1, got {max_questions!r}")
        self.max_questions = max_questions
        self.console = _CallSOPEnv(difficulty=difficulty, split=split)
        self.reward_range = (-REPEAT_PENALTY * max_questions, 1.0)
        self._parser = ToolCallParser(self.console.tool_schemas)
        self._over = True

    # ------------------------------------------------------------------ reset

    def reset(self, rng: np.random.Generator, options: Mapping[str, Any]) -> dict[str, SeatUpdate]:
        # Keys other than "task" are ignored: PettingZoo's checkers pass {"options": 1}.
        task = {"task": options["task"]} if "task" in options else None
        obs, info = self.console.reset(seed=int(rng.integers(2**31)), options=task)
        self.facts = {k: str(self.console.state["inputs"][k]) for k in FACTS}
        self._told: set[str] = set()
        self._pending: dict[str, Any] | None = None
        self._over, self.cycle, self.questions, self.repeats = False, 0, 0, 0
        agent = dict(info, seat="agent", waiting=False, questions_asked=0, repeated_questions=0)
        customer = {"system_prompt": _persona(self.facts), "tools": [], "task_id": info["task_id"], "seat": "customer",
                    "waiting": True, "facts": dict(self.facts), "question": None}
        self._task_id = info["task_id"]
        return {"agent": SeatUpdate(obs, info=agent),
                "customer": SeatUpdate("The support agent is picking up your call. Wait for their questions.",
                                       info=customer)}

    # ------------------------------------------------------------------ cycles

    def waiting(self, seat: str) -> bool:
        if self._over:
            return False
        return (self._pending is None) if seat == "customer" else (self._pending is not None)

    def resolve(self, actions: Mapping[str, str | None]) -> dict[str, SeatUpdate]:
        if self._over:
            raise RuntimeError("the game has ended; call reset() before step()")
        self.cycle += 1
        if self._pending is not None:
            updates = self._answer(actions.get("customer") or "")
        else:
            updates = self._agent_turn(actions.get("agent") or "")
        if not self._over and self.cycle >= self.max_cycles:
            self._over = True
            for u in updates.values():
                u.truncated = True
                u.reward = self._score(0.0)
                u.text += f"\nThe call reached its limit of {self.max_cycles} turns and was ended."
        for seat, u in updates.items():
            u.info.update(waiting=self.waiting(seat), cycle=self.cycle, questions_asked=self.questions,
                          repeated_questions=self.repeats)
        return updates

    def _agent_turn(self, action: str) -> dict[str, SeatUpdate]:
        calls = self._parser(action).calls
        asks = [c for c in calls if c.name == "ask_customer"]
        if not asks:
            obs, reward, terminated, truncated, info = self.console.step(action)
            self._over = terminated or truncated
            info = dict(info, seat="agent")
            agent = SeatUpdate(obs, self._score(reward) if self._over else 0.0, terminated, truncated, info)
            note = "The call is over." if self._over else "The agent is working on your case."
            customer = SeatUpdate(note, agent.reward, terminated, truncated, self._customer_info(None))
            if self._over:  # cooperative: the customer's result is the call's
                customer.info["success"] = bool(info.get("success", False))
            return {"agent": agent, "customer": customer}
        ask = asks[0]
        results = [{"tool_call_id": c.id, "name": c.name,
                    "content": "Ignored: one question per message." if c.name == "ask_customer" else
                    "Ignored: a message that asks the customer runs no other tool; call it again next turn."}
                   for c in calls if c is not ask]
        question = ask.arguments.get("question", next(iter(ask.arguments.values()), None)
                                     if len(ask.arguments) == 1 else None)
        tool_calls = [{"id": c.id, "name": c.name, "arguments": c.arguments, "format": c.format} for c in calls]
        base = {"seat": "agent", "tool_calls": tool_calls, "format_error": False, "error": None, "repeated": False}
        problem = None
        if ask.error or not isinstance(question, str) or not question.strip():
            problem = ('Invalid call to ask_customer: it needs one argument "question" with the question as text.',
                       "bad_arguments")
        elif self.questions >= self.max_questions:
            problem = (f"The customer will not answer more questions (the limit is {self.max_questions}).",
                       "question_limit")
        if problem is not None:
            results.insert(0, {"tool_call_id": ask.id, "name": ask.name, "content": problem[0]})
            info = dict(base, tool_results=results, format_error=problem[1] == "bad_arguments", error=problem[1])
            obs = "\n".join(r["content"] for r in results)
            return {"agent": SeatUpdate(obs, info=info),
                    "customer": SeatUpdate("The agent is working on your case.", info=self._customer_info(None))}
        question = clean_text(question.strip())[:_MAX_QUESTION_CHARS]
        topics = question_topics(question)
        repeated = bool(topics) and set(topics) <= self._told
        self.questions += 1
        self.repeats += repeated
        self._told.update(topics)
        self._pending = {"call": ask, "others": results, "base": dict(base, repeated=repeated, topics=list(topics))}
        agent = SeatUpdate("Your question was put to the customer; their answer comes next turn.",
                           info=dict(base, tool_results=[], repeated=repeated, topics=list(topics)))
        customer = SeatUpdate(f"The support agent asks: {question}", info=self._customer_info(question))
        return {"agent": agent, "customer": customer}

    def _answer(self, text: str) -> dict[str, SeatUpdate]:
        pending, self._pending = self._pending, None
        answer = clean_text(text.strip())[:_MAX_ANSWER_CHARS] or "(the customer said nothing)"
        call = pending["call"]
        results = [{"tool_call_id": call.id, "name": call.name, "content": f"Customer: {answer}"}, *pending["others"]]
        info = dict(pending["base"], tool_results=results)
        agent = SeatUpdate("\n".join(r["content"] for r in results), info=info)
        customer = SeatUpdate("The agent is working on your case.", info=self._customer_info(None))
        return {"agent": agent, "customer": customer}

    def _customer_info(self, question: str | None) -> dict[str, Any]:
        return {"seat": "customer", "question": question, "facts": dict(self.facts), "tool_calls": [],
                "tool_results": [], "format_error": False}

    def _score(self, outcome: float) -> float:
        return float(outcome) - REPEAT_PENALTY * self.repeats


_MANUAL = """A broadband fault call with two seats: a support agent following an SOP, and the customer who knows the details.

    ## Description
    The ``mtrl/SOP-CustomerService-v0`` domain (authenticate, validate the account, set the
    priority, check outages, open a ticket, diagnose, fix, escalate) where the caller's
    details are not in the task inputs. The ``agent`` seat has the SOP console tools plus
    ``ask_customer(question)``; the ``customer`` seat knows the account number, the caller's
    name, the passcode, the device label and the reported fault (drawn from the seeded
    world) and answers the agent's questions. Cooperative: both seats get the same reward.

    ## Agents
    ``agent``, ``customer`` (turn order within a cycle). In a cycle exactly one seat acts:
    the customer after the agent asked it something, the agent otherwise; the other one
    is *waiting* (``info["waiting"]``) and its action is ignored.

    ## Action Space
    ``Text`` per seat: the model's raw message. Any string is accepted.

    ## Action Format
    Agent: as ``mtrl/SOP-CustomerService-v0`` (``<tool_call>{"name": ..., "arguments":
    {...}}</tool_call>``, several per message, final answer with ``submit(answer={...})``),
    plus ``ask_customer(question=...)``. Customer: plain text, passed to the agent as the
    result of its ``ask_customer`` call (cleaned, at most 600 characters).

    ## Observation Space
    ``Dict({"text": Text})`` per seat. Agent: the request and ``call_date`` at reset, then
    the tool results (the customer's answer as ``Customer: ...``) and notes. Customer: its
    persona and details are its ``system_prompt``; its observation is the agent's question.

    ## Invalid Actions
    The agent's as the SOP env's. A message with ``ask_customer`` runs no other tool (they
    get an "Ignored" result) and only its first question is put; a question without text
    (``error="bad_arguments"``) or past ``max_questions`` (``"question_limit"``) is answered
    by the console and not put. Nothing raises.

    ## Starting State
    A world seed drawn from the env's seeded RNG within the ``split``'s range, or
    ``options={"task": row}`` (``seed`` and optionally ``difficulty``, ``id``; rows of
    ``mtrl/SOP-CustomerService-v0`` without ``prompt``). Other option keys are ignored.

    ## Rewards
    On the final cycle, for both seats: the domain's strict grade (1.0 when the final record
    and the recorded actions match the SOP, else 0.0) minus 0.1 for every question that
    asked only for details already given (:func:`question_topics` decides what a question
    asks for). In ``[-0.1 * max_questions, 1.0]``.

    ## Episode End
    ``terminated`` when the agent submits or runs out of tool calls (30); ``truncated`` after
    the console's turn limit (40 agent tool turns) or ``max_cycles`` (64) cycles.

    ## Information
    Agent: as ``mtrl/SOP-CustomerService-v0`` at reset and after its tool turns (on the final
    cycle ``answer``, ``grade_result``, ``success``, ...); after a question ``tool_calls``,
    ``tool_results``, ``topics``, ``repeated``. Every cycle: ``seat``, ``waiting``, ``cycle``,
    ``questions_asked``, ``repeated_questions``. Customer: ``question`` (what to answer, or
    None), ``facts`` (its own details), ``waiting``.

    ## Arguments
    ``mtrl_gym.registry.make_multiagent("mtrl/SOP-CustomerCall-v0", parallel=False, max_cycles=64,
    max_questions=10, difficulty={"noise": 1}, split="train")``.

    ## Version History
    - v0: initial version.
    """


class CustomerCallEnv(CycleAECEnv):
    __doc__ = _MANUAL
    game_class = CallGame
    metadata = {"render_modes": ["ansi"], "name": "customer_call_v0", "is_parallelizable": True}

    def __init__(self, *, max_cycles: int = DEFAULT_MAX_CYCLES, max_questions: int = DEFAULT_MAX_QUESTIONS,
                 difficulty: Mapping[str, Any] | None = None, split: str = "train", render_mode: str | None = None):
        super().__init__(render_mode=render_mode, max_cycles=max_cycles, max_questions=max_questions,
                         difficulty=difficulty, split=split)


class CustomerCallParallelEnv(CycleParallelEnv):
    __doc__ = _MANUAL.replace("A broadband fault call", "Parallel API. A broadband fault call", 1)
    game_class = CallGame
    metadata = {"render_modes": ["ansi"], "name": "customer_call_v0", "is_parallelizable": True}

    def __init__(self, *, max_cycles: int = DEFAULT_MAX_CYCLES, max_questions: int = DEFAULT_MAX_QUESTIONS,
                 difficulty: Mapping[str, Any] | None = None, split: str = "train", render_mode: str | None = None):
        super().__init__(render_mode=render_mode, max_cycles=max_cycles, max_questions=max_questions,
                         difficulty=difficulty, split=split)


def profile():
    """The CustomerService SOP's task splits (the call plays the same generated worlds)."""
    import dataclasses

    return dataclasses.replace(_CallSOPEnv.profile(), reference_policies={}, secret=None)  # seats: see the kit's docs


def env(**kwargs: Any) -> CustomerCallEnv:
    """The AEC env (PettingZoo's ``env()`` convention)."""
    return CustomerCallEnv(**kwargs)


def parallel_env(**kwargs: Any) -> CustomerCallParallelEnv:
    """The Parallel env (PettingZoo's ``parallel_env()`` convention)."""
    return CustomerCallParallelEnv(**kwargs)
