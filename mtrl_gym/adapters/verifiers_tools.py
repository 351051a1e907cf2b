"""An mtrl_gym env's tools as a verifiers tool server (MCP), so the harness offers them natively.

verifiers' harness sends the model the tools of its MCP servers, as OpenAI ``tools``; a
tool-calling model then answers with native ``tool_calls``. :class:`MtrlToolset` serves
the env's tool schemas (bare names, each property's JSON schema as the env wrote it), and
:class:`mtrl_gym.adapters.verifiers.MtrlTask` answers every call through verifiers' tool
gate with the env's own reply, so the calls are played by the one env of the rollout
(host-side) and never by this server. If a harness runs a tool without asking the gate,
the server answers that the env did not see the call (and the rollout stops there).

verifiers starts the server as ``python -m mtrl_gym.adapters.verifiers_tools`` with its
config in the environment (``VF_CONFIG``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Annotated, Any

from mtrl_gym.adapters.schema import annotation
from mtrl_gym.error import DependencyNotInstalled

try:
    import verifiers.v1 as vf
    from pydantic import Field, WithJsonSchema
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise DependencyNotInstalled("verifiers", "verifiers") from e

__all__ = ["NOT_PLAYED", "MtrlToolset", "MtrlToolsetConfig", "tool_function"]

#: The reply of a tool this server runs itself (a harness that skipped verifiers' tool gate).
NOT_PLAYED = ("This call did not reach the environment: the harness ran the tool without asking verifiers' "
              "tool gate. Use a harness that supports tool interception (the default one does).")


class MtrlToolsetConfig(vf.ToolsetConfig):
    """The tools to serve."""

    tools: list[dict[str, Any]] = Field(default_factory=list)
    """OpenAI-style tool schemas (``info["tools"]`` of the env)."""


def tool_function(tool: Mapping[str, Any]):
    """An async function whose signature carries ``tool``'s parameters (each with its exact JSON schema)."""
    fn = tool.get("function", tool)
    params = fn.get("parameters") if isinstance(fn.get("parameters"), Mapping) else {}
    props = params.get("properties") if isinstance(params.get("properties"), Mapping) else {}
    required = params.get("required") if isinstance(params.get("required"), list) else []

    async def call(**arguments: Any) -> str:
        return NOT_PLAYED

    parameters = []
    for arg, schema in props.items():
        schema = dict(schema) if isinstance(schema, Mapping) else {}
        hint = Annotated[annotation(schema), WithJsonSchema(schema)]
        default = inspect.Parameter.empty if arg in required else schema.get("default")
        parameters.append(inspect.Parameter(str(arg), inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=hint))
    call.__name__ = call.__qualname__ = str(fn.get("name") or "tool")
    call.__doc__ = str(fn.get("description") or "")
    call.__signature__ = inspect.Signature(parameters, return_annotation=str)
    call.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": str}
    return call


class MtrlToolset(vf.Toolset[MtrlToolsetConfig, vf.State]):
    """Serves the env's tools under their own names (no server prefix)."""

    TOOL_PREFIX = None

    def register(self, mcp) -> None:
        for tool in self.config.tools:
            fn = tool_function(tool)
            mcp.add_tool(fn, name=fn.__name__, description=fn.__doc__ or None)


if __name__ == "__main__":
    MtrlToolset.run()
