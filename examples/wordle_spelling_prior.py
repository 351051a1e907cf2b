"""How well a model knows Wordle words in each written form: a word against its own letters shuffled.

    python examples/wordle_spelling_prior.py                       # the base SmolLM2-135M, 200 words
    python examples/wordle_spelling_prior.py --adapter runs/wordle-cpu/sft/checkpoints/step_000160/adapter

A guess spelled out (``C R A T E``) lets a small model read the board's letters one token each,
and a guess written as a word (``crate``) is what it has seen in text. This probe measures the
second half of that trade before any training: for ``--words`` answer words of the *training*
split (drawn with ``--seed``; ``--split val`` for an adapter, whose training data may hold the
training words), the model scores the word, an anagram of its letters and a
one-letter change of it (neither an allowed guess), each written in one form as the assistant's
reply to "Name a five-letter English word, spelled out." (the chat template), and the table gives
the mean margin in nats, log P(word) - log P(other), and how often the word is ahead. A large
margin means the model's prior already tells a word from a non-word in that form; a small one,
that training must teach the spelling. Measured in docs/wordle_runs.md. Results: stdout and, with
``--out``, a JSON file.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from mtrl_gym.envs.wordle import game

#: The forms compared; "spelled" is the env's and the CPU recipe's (:func:`game.spell`).
FORMS = {
    "word": lambda w: w,
    "spelled": game.spell,
    "lower": lambda w: " ".join(w),
    "hyphens": lambda w: "-".join(w),
    "HYPHENS": lambda w: "-".join(w.upper()),
    "dots": lambda w: " ".join(c + "." for c in w.upper()),
}
QUESTION = "Name a five-letter English word, spelled out."


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="smollm2-135m", help="embedded short name or local folder (default smollm2-135m)")
    p.add_argument("--adapter", default=None, help="a LoRA adapter folder to probe on top of the model")
    p.add_argument("--words", type=int, default=200,
                   help="answer words of the split (default 200; the training split has 640, the validation 128)")
    p.add_argument("--split", choices=("train", "val"), default="train",
                   help="where the words come from (default train; val for an adapter, whose training "
                        "data may hold the training words)")
    p.add_argument("--seed", type=int, default=0, help="draws the words, anagrams and changes (default 0)")
    p.add_argument("--batch", type=int, default=32, help="replies scored per forward pass (default 32)")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    if not 1 <= args.words <= (640 if args.split == "train" else 128) or args.batch < 1:
        p.error(f"--words takes 1..640 with --split train, 1..128 with --split val, and --batch >= 1; "
                f"got {args.words} ({args.split}) and {args.batch}")
    return args


def non_words(word: str, rng: random.Random) -> tuple[str, str]:
    """An anagram of ``word`` and a one-letter change of it, neither an allowed guess."""
    allowed = game.allowed_index()
    anagram = change = None
    for _ in range(1000):
        letters = list(word)
        rng.shuffle(letters)
        anagram = anagram or ("".join(letters) if "".join(letters) not in allowed else None)
        i = rng.randrange(game.WORD_LENGTH)
        swapped = word[:i] + rng.choice("abcdefghijklmnopqrstuvwxyz") + word[i + 1:]
        change = change or (swapped if swapped not in allowed else None)
        if anagram and change:
            return anagram, change
    raise ValueError(f"no anagram or one-letter change of {word!r} outside the allowed guesses")


def reply_logprobs(model, tokenizer, prefix: list[int], replies: list[str], batch: int) -> list[tuple[float, int]]:
    """Summed log-probability and token count of each reply after ``prefix`` (right-padded batches)."""
    import torch

    out = []
    for start in range(0, len(replies), batch):
        chunk = [tokenizer(r, add_special_tokens=False).input_ids for r in replies[start:start + batch]]
        width = len(prefix) + max(map(len, chunk))
        ids = torch.zeros(len(chunk), width, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, reply in enumerate(chunk):
            ids[row, :len(prefix) + len(reply)] = torch.tensor(prefix + reply)
            mask[row, :len(prefix) + len(reply)] = 1
        with torch.no_grad():
            logp = model(input_ids=ids, attention_mask=mask).logits.float().log_softmax(-1)
        for row, reply in enumerate(chunk):
            pos = torch.arange(len(prefix) - 1, len(prefix) - 1 + len(reply))
            out.append((logp[row, pos, torch.tensor(reply)].sum().item(), len(reply)))
    return out


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    import torch

    from mtrl_gym import models
    from mtrl_gym.trainers.grpo.config import GRPOConfig
    from mtrl_gym.trainers.grpo.data import load_task_splits

    config = GRPOConfig.load("cpu-sft")
    train, val = load_task_splits(config.env, config.train_tasks, None, train_size=config.train_size,
                                val_size=config.val_size, split_seed=config.split_seed)
    rng = random.Random(args.seed)
    words = [row["answer"] for row in rng.sample(train if args.split == "train" else val, args.words)]
    triples = [(w, *non_words(w, rng)) for w in words]
    model, tokenizer = models.load(args.model, dtype=torch.float32)
    if args.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(Path(args.adapter).expanduser()))
    model.eval()
    prefix = tokenizer.apply_chat_template([{"role": "user", "content": QUESTION}], tokenize=False,
                                           add_generation_prompt=True)
    prefix_ids = tokenizer(prefix, add_special_tokens=False).input_ids
    results = {"words": args.words, "split": args.split, "seed": args.seed, "model": args.model, "adapter": args.adapter, "forms": {}}
    print("| form | e.g. | tokens a word | word over its anagram, mean nats (word ahead) | "
          "word over a one-letter change (word ahead) |\n| --- | --- | --- | --- | --- |")
    for name, form in FORMS.items():
        scored = reply_logprobs(model, tokenizer, prefix_ids, [form(x) for t in triples for x in t], args.batch)
        word, anagram, change = (scored[k::3] for k in range(3))
        margins = {other: [w[0] - o[0] for w, o in zip(word, others)]
                   for other, others in (("anagram", anagram), ("change", change))}
        r = results["forms"][name] = {
            "example": form("crate"), "tokens": sum(n for _, n in word) / len(word),
            **{f"{k}_margin": sum(m) / len(m) for k, m in margins.items()},
            **{f"{k}_ahead": sum(x > 0 for x in m) for k, m in margins.items()}}
        print(f"| {name} | `{r['example']}` | {r['tokens']:.1f} | {r['anagram_margin']:+.2f} "
              f"({r['anagram_ahead']}/{len(words)}) | {r['change_margin']:+.2f} ({r['change_ahead']}/{len(words)}) |",
              flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
