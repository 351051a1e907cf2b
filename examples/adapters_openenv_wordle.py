"""Serve Wordle as an OpenEnv environment and play it through the Gymnasium client
(needs ``pip install "mtrl-gym[openenv]"``).

    python examples/adapters_openenv_wordle.py            # serve on a free port, play, stop
    mtrl-gym openenv-serve mtrl/Wordle-v0 --port 8000     # the same server from the command line

The client (``OpenEnvTextEnv``) is a ``gymnasium.Env[str, str]``: mtrl_gym's rollout
engine, trainer and evaluation take it like any env (``lambda: OpenEnvTextEnv(url)``).
Here the entropy-maximising solver plays one seeded game over the WebSocket session and
the same seed is reset again to show the task holds.
"""

from __future__ import annotations

import socket
import threading
import time


def main() -> None:
    import uvicorn

    from mtrl_gym.adapters.episode import tool_call_text
    from mtrl_gym.adapters.openenv import OpenEnvTextEnv, create_app
    from mtrl_gym.envs.wordle.solver import WordleSolver

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app("mtrl/Wordle-v0"), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)

    env = OpenEnvTextEnv(f"http://127.0.0.1:{port}")
    try:
        obs, info = env.reset(seed=42)
        first_task = info["task_id"]
        print(f"task {first_task} (seed {info['seed']}), reward range {env.reward_range}")
        solver, history, done, total = WordleSolver(), [], False, 0.0
        while not done:
            guess = solver.next_guess(history)
            obs, reward, terminated, truncated, info = env.step(tool_call_text("guess_word", {"guess": guess}))
            history.append((guess, info["feedback"]))
            total, done = total + reward, terminated or truncated
            print(obs.splitlines()[1])
        print(f"solved={info['solved']} in {info['guesses_used']} guesses, reward {total:.2f}")
        _, again = env.reset(seed=42)
        print(f"reset(seed=42) again -> task {again['task_id']} (same task: {again['task_id'] == first_task})")
    finally:
        env.close()
        server.should_exit = True
        thread.join(timeout=10)


if __name__ == "__main__":
    main()
