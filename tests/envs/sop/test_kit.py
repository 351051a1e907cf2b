"""The domain kit's declarations: lookup tools, the one-action helper, front matter, module wiring, manuals."""

from __future__ import annotations

import inspect
import re
import types

import gymnasium
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mtrl_gym  # noqa: F401 - registers the ids
from mtrl_gym.envs.multiagent.customer_call import CallDomain
from mtrl_gym.envs.sandbox.schema import parse_docstring
from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop import SOPDomain
from mtrl_gym.envs.sop.customer_service import CustomerService
from mtrl_gym.envs.sop.document import read_document
from mtrl_gym.envs.sop.kit import OneRecord, Records, find, lookup_tool, record_once
from mtrl_gym.envs.sop.manual import SECTION_ORDER, SHARED_SECTIONS, complete_manual
from mtrl_gym.envs.sop.parts import package_parts
from mtrl_gym.error import ConfigError
from mtrl_gym.registry import list_envs

SOP_IDS = [e for e in list_envs() if e.startswith("mtrl/SOP-")]
BOXES = {"BX-1": {"box_id": "BX-1", "weight": 3}}


@tool
def get_box_written_out(ctx: ToolContext, box_id: str) -> dict:
    """Read a box: its weight.

    Args:
        box_id: The box id, e.g. "BX-1".
    """
    return find(ctx.state["boxes"], box_id, f"no box {box_id!r}; box ids look like 'BX-1'")


GET_BOX = lookup_tool("get_box_written_out", Records("boxes", "no box {!r}; box ids look like 'BX-1'"), "box_id",
                      "Read a box: its weight.", 'The box id, e.g. "BX-1".')


def _reply(t, value):
    try:
        return "ok", t.invoke({"box_id": value}, ToolContext(state={"boxes": BOXES}))
    except ToolError as e:
        return "error", str(e)


def test_a_lookup_tool_has_the_schema_and_docstring_of_the_function_it_replaces():
    assert GET_BOX.schema == get_box_written_out.schema
    assert list(GET_BOX.parameters["properties"]["box_id"]) == ["type", "description"]  # key order: chat templates
    assert parse_docstring(GET_BOX.__doc__) == ("Read a box: its weight.", {"box_id": 'The box id, e.g. "BX-1".'})
    assert GET_BOX(ToolContext(state={"boxes": BOXES}), box_id=" bx-1 ") == BOXES["BX-1"]


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), st.sampled_from(["BX-1", " bx-1", "BX-2", ""])))
def test_a_lookup_tool_replies_as_the_function_it_replaces(value):
    assert _reply(GET_BOX, value) == _reply(get_box_written_out, value)


def test_readers_normalise_ids_and_name_the_id_as_given():
    ctx = ToolContext(state={"boxes": BOXES, "box": BOXES["BX-1"]})
    assert Records("boxes", "no box {!r}", lambda v: v.replace("_", "-"))(ctx, "bx_1") == BOXES["BX-1"]
    with pytest.raises(ToolError, match=r"^no box 'BX-9' here$"):
        Records("boxes", "no box {!r} here")(ctx, "BX-9")
    one = OneRecord("box", "box_id", "no box {!r} on this truck")
    assert one(ctx, "  bx-1") is BOXES["BX-1"]
    with pytest.raises(ToolError, match=r"^no box 'BX-2' on this truck$"):
        one(ctx, "BX-2")


def test_record_once_takes_the_first_action_and_refuses_a_second_without_change():
    ctx = ToolContext(state={"cases": []})
    first = record_once(ctx, "cases", {"case_id": "C-1"}, lambda f: f"already filed as {f['case_id']}")
    assert first == {"case_id": "C-1"} and ctx.state["cases"] == [first]
    with pytest.raises(ToolError, match=r"^already filed as C-1$"):
        record_once(ctx, "cases", {"case_id": "C-2"}, lambda f: f"already filed as {f['case_id']}")
    assert ctx.state["cases"] == [{"case_id": "C-1"}]


def test_front_matter_is_read_and_the_sop_text_is_what_follows():
    text = "---\nrole: You are a clerk.\nrequest: File the form\n  below, then submit.\n---\n# SOP 1\n\n1. Step.\n"
    assert read_document(text) == ({"role": "You are a clerk.", "request": "File the form below, then submit."},
                                   "# SOP 1\n\n1. Step.\n")
    assert read_document("# SOP 1\n---\nrole: x\n") == ({}, "# SOP 1\n---\nrole: x\n")


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_the_sop_text_after_a_front_matter_block_is_kept_exactly(body):
    assert read_document("---\nrole: r\n---\n" + body) == ({"role": "r"}, body)


@pytest.mark.parametrize("text, match", [
    ("---\nrole: x\n", r"sop\.md: the front matter block opened by '---' on line 1 is never closed"),
    ("---\ntitle: x\n---\n", r"sop\.md, line 2: front matter lines are `key: value` with a key of \['role', 'request'\]"),
    ("---\nrole: x\nrole: y\n---\n", r"sop\.md, line 3: .*each once; got 'role: y'"),
    ("---\nno colon\n---\n", r"line 2: .*got 'no colon'"),
])
def test_bad_front_matter_is_an_error_naming_the_line_and_the_fix(text, match):
    with pytest.raises(ConfigError, match=match):
        read_document(text, where="sop.md")


@pytest.mark.parametrize("env_id", SOP_IDS)
def test_every_domain_reads_role_and_request_from_its_sop_and_shows_no_front_matter(env_id):
    domain = gymnasium.make(env_id).unwrapped.domain
    assert set(domain.sop_front_matter) == {"role", "request"}
    assert domain.role == domain.sop_front_matter["role"] and domain.request == domain.sop_front_matter["request"]
    assert domain.name == type(domain).__name__
    assert not domain.sop_text.startswith("---") and domain.sop_text.startswith("# ")
    assert domain.system_text().startswith(domain.role + "\n\n" + domain.sop_text.strip())


def test_a_subclass_elsewhere_shares_its_parents_sop_and_may_set_its_own_request():
    call, service = CallDomain(), CustomerService()
    assert call.role == service.role and call.sop_front_matter == service.sop_front_matter
    assert call.request != service.request and call.request.startswith("A customer has called")


def _module(name, **attrs):
    module = types.ModuleType(name)
    vars(module).update(attrs)
    return module


def _parts():
    world = _module("pkg.world", generate_world=lambda rng, difficulty: {"inputs": {}},
                    DEFAULT_DIFFICULTY={"noise": 0, "distractors": False, "boxes": 2}, DIFFICULTY_LIMITS={"boxes": (1, 3)})
    procedure = _module("pkg.procedure", expected=lambda world: {}, oracle=lambda inputs, call: {})
    tools = _module("pkg.tools", TOOLS=ToolSet([GET_BOX]), DISTRACTOR_TOOLS=())
    return world, procedure, tools


def test_the_class_statement_wires_the_domain_modules_and_the_class_body_wins():
    world, procedure, tools = _parts()

    class Boxes(SOPDomain, world=world, procedure=procedure, tools=tools):
        default_difficulty = {"noise": 1, "distractors": True, "boxes": 1}

    domain = Boxes()
    assert domain.name == "Boxes" and domain.tools is tools.TOOLS and domain.distractor_tools == ()
    assert domain.default_difficulty == {"noise": 1, "distractors": True, "boxes": 1}
    assert domain.difficulty_limits == {"boxes": (1, 3)} and domain.expected({}) == {}
    assert domain.generate(None, {}) == {"inputs": {}} and not inspect.isabstract(Boxes)
    with pytest.raises(ConfigError, match=r"difficulty knob 'boxes' of Boxes must be between 1 and 3, got 4"):
        domain.resolve_difficulty({"boxes": 4})


def test_missing_or_wrong_domain_modules_are_errors_naming_the_fix():
    world, procedure, tools = _parts()
    del procedure.oracle
    with pytest.raises(ConfigError, match=r"Boxes: module pkg\.procedure has no 'oracle'; define it there or set "
                                          r"`oracle` in the class body"):
        class Boxes(SOPDomain, world=world, procedure=procedure, tools=tools):
            pass
    with pytest.raises(ConfigError, match=r"`tools=` must be the domain's tools module, got \('get_box',\)"):
        package_parts(SOPDomain, {"tools": ("get_box",)})
    with pytest.raises(ConfigError, match=r"unknown domain part\(s\) \['sop'\].*the parts are \['world', "):
        package_parts(SOPDomain, {"sop": world})


def _headings(doc):
    return [name.strip() for title in re.findall(r"^## (.+)$", doc, re.MULTILINE) for name in title.split(",")]


@pytest.mark.parametrize("env_id", SOP_IDS)
def test_every_sop_env_manual_has_every_section_in_order(env_id):
    env_class = type(gymnasium.make(env_id).unwrapped)
    assert _headings(env_class.__doc__) == list(SECTION_ORDER), env_id
    domain = env_class.domain
    assert f"the tool-call limit ({domain.max_tool_calls})" in env_class.__doc__


def test_complete_manual_adds_only_the_shared_sections_a_docstring_lacks():
    domain = gymnasium.make("mtrl/SOP-ContentFlagging-v0").unwrapped.domain
    doc = complete_manual("Summary.\n\n    ## Description\n    Mine.\n\n    ## Episode End\n    My own.\n", domain)
    assert _headings(doc) == ["Description", *SHARED_SECTIONS]
    assert "## Episode End\nMy own." in doc and doc.startswith("Summary.\n\n## Description\nMine.")
    assert '``<tool_call>{"name": "get_report", "arguments": {"report_id": "RPT-4829130"}}</tool_call>``' in \
        doc.replace("\n", " ")
