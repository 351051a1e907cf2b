"""``mtrl-gym openenv-serve ENV``: serve an environment as an OpenEnv environment server.

Each WebSocket session (``/ws``) plays its own env; ``reset`` takes ``seed`` and ``task``
(a task row) and the same seed gives the same task. See :mod:`mtrl_gym.adapters.openenv`.
"""

from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("openenv-serve", help="serve an environment as an OpenEnv server",
                       description="Serve an mtrl_gym environment over OpenEnv's protocol "
                                   '(needs: pip install "mtrl-gym[openenv]").')
    p.add_argument("env_id", help="environment id, e.g. mtrl/Wordle-v0")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    p.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    p.add_argument("--env-kwargs", default=None, help='gymnasium.make keyword arguments as JSON, e.g. \'{"max_steps": 8}\'')
    p.add_argument("--max-sessions", type=int, default=64, help="most concurrent WebSocket sessions (default: %(default)s)")
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default: %(default)s)")
    p.set_defaults(func=run)


def run(args) -> int:
    from mtrl_gym.error import ConfigError

    env_kwargs = {}
    if args.env_kwargs:
        try:
            env_kwargs = json.loads(args.env_kwargs)
        except ValueError as e:
            raise ConfigError(f"--env-kwargs must be a JSON object, got {args.env_kwargs!r} ({e})") from None
        if not isinstance(env_kwargs, dict):
            raise ConfigError(f"--env-kwargs must be a JSON object, got {args.env_kwargs!r}")
    if not 0 < args.port < 65536:
        raise ConfigError(f"--port must be in 1..65535, got {args.port}")
    from mtrl_gym.adapters.openenv import serve

    print(f"serving {args.env_id} over OpenEnv at http://{args.host}:{args.port} (WebSocket /ws)", flush=True)
    serve(args.env_id, host=args.host, port=args.port, env_kwargs=env_kwargs, max_sessions=args.max_sessions,
          log_level=args.log_level)
    return 0
