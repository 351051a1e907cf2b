"""How well a model knows Wordle words in each written form: a word against its own letters shuffled.

    python examples/wordle_spelling_prior.py                       # the base SmolLM2-135M, 200 words
    python examples/wordle_spelling_prior.py --split val --words 128 \
        --adapter runs/wordle-cpu/grpo/checkpoints/step_000006/adapter

A guess spelled out (``C R A T E``) lets a small model read the board's letters one token each,
and a guess written as a word (``crate``) is what it has seen in text. This probe measures the
second half of that trade before any training: for ``--words`` answer words of the *training*
split (drawn with ``--seed``; ``--split val`` for an adapter, whose training data may hold the
training words), the model scores the word, an anagram of its letters and a
one-letter change of it (neither an allowed guess), each written in one form as the assistant's
reply to "Name a five-letter English word, spelled out." (the chat template, the reply closed by
the end-of-turn token), and the table gives the mean margin in nats, log P(word) - log P(other),
and how often the word is ahead. A large margin means the model's prior already tells a word
from a non-word in that form; a small one, that training must teach the spelling. The reply is
scored in a bare chat, not in the recipe's serving format (system prompt, tool-call prefill):
for a trained adapter it is the spelling it carries, not its play. Written as a word, a
non-word usually takes more tokens than the word, which is part of its margin; the table gives
both counts. Measured in docs/wordle_runs.md. Results: stdout and, with ``--out``, a JSON file
(every word's triple and margins too).
"""

from __future__ import annotations

import argparse
import functools
import json
import random
from pathlib import Path

from mtrl_gym.envs.wordle import game
from mtrl_gym.trainers.grpo.config import GRPOConfig
from mtrl_gym.trainers.grpo.data import load_task_splits

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
#: What closes an assistant turn in the embedded models' chat template (ChatML).
END_OF_TURN = "<|im_end|>"


@functools.cache
def preset() -> GRPOConfig:
    """The CPU recipe's preset, read once when first needed: its task splits are the words drawn from."""
    return GRPOConfig.load("cpu-sft")


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
    sizes = {"train": preset().train_size, "val": preset().val_size}
    if not 1 <= args.words <= sizes[args.split] or args.batch < 1:
        p.error(f"--words takes 1..{sizes['train']} with --split train, 1..{sizes['val']} with --split val, "
                f"and --batch >= 1; got {args.words} ({args.split}) and {args.batch}")
    return args


def non_words(word: str, rng: random.Random) -> tuple[str, str]:
    """An anagram of ``word`` and a one-letter change of it, neither an allowed guess."""
    allowed = game.allowed_index()
    anagram = change = None
    for _ in range(1000):
        letters = list(word)
        rng.shuffle(letters)
        shuffled = "".join(letters)
        anagram = anagram or (shuffled if shuffled != word and shuffled not in allowed else None)
        i = rng.randrange(game.WORD_LENGTH)
        changed = word[:i] + rng.choice("abcdefghijklmnopqrstuvwxyz") + word[i + 1:]
        change = change or (changed if changed not in allowed else None)
        if anagram and change:
            return anagram, change
    raise ValueError(f"no anagram or one-letter change of {word!r} outside the allowed guesses")


def reply_logprobs(model, tokenizer, prefix: list[int], replies: list[str], batch: int,
                   end: list[int] = ()) -> list[tuple[float, int]]:
    """Summed log-probability of each reply's tokens and then ``end``'s after ``prefix``, and the
    reply's token count (``end`` not counted). Scored as the GRPO trainer scores its targets
    (:mod:`mtrl_gym.trainers.grpo.batching`): about ``batch`` replies a forward pass, the shared
    prompt computed once for each, logits only where a reply token is predicted."""
    import torch

    from mtrl_gym.trainers.grpo.batching import build_sequence, make_micro_batches, token_logprobs

    tokens = [tokenizer(r, add_special_tokens=False).input_ids + list(end) for r in replies]
    sequences = [build_sequence(prefix + t, [0] * len(prefix) + [1] * len(t), [0.0] * (len(prefix) + len(t)), 0.0,
                                index=i) for i, t in enumerate(tokens)]
    budget = len(prefix) + batch * max(map(len, tokens))
    sums = [0.0] * len(tokens)
    for micro in make_micro_batches(sequences, budget, "shared_prefix", pad_token_id=tokenizer.pad_token_id or 0):
        with torch.no_grad():
            logp, _ = token_logprobs(model, micro)
        for sequence, part in zip(micro.sequences, logp.split(micro.counts)):
            sums[sequence.index] = part.sum().item()
    return [(total, len(t) - len(end)) for total, t in zip(sums, tokens)]


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    import torch

    from mtrl_gym import models

    config = preset()
    train, val = load_task_splits(config.env, config.train_tasks, None, train_size=config.train_size,
                                  val_size=config.val_size, split_seed=config.split_seed)
    rng = random.Random(args.seed)
    words = [row["answer"] for row in rng.sample(train if args.split == "train" else val, args.words)]
    triples = [[w, *non_words(w, rng)] for w in words]
    model, tokenizer = models.load(args.model, dtype=torch.float32)
    if args.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(Path(args.adapter).expanduser()))
    model.eval()
    prefix = tokenizer.apply_chat_template([{"role": "user", "content": QUESTION}], tokenize=False,
                                           add_generation_prompt=True)
    prefix_ids = tokenizer(prefix, add_special_tokens=False).input_ids
    end = tokenizer(END_OF_TURN, add_special_tokens=False).input_ids
    results = {"words": args.words, "split": args.split, "seed": args.seed, "model": args.model,
               "adapter": args.adapter, "triples": triples, "forms": {}}
    print("| form | e.g. | tokens: word / anagram / change | word over its anagram, mean nats (word ahead) | "
          "word over a one-letter change (word ahead) |\n| --- | --- | --- | --- | --- |")
    for name, form in FORMS.items():
        scored = reply_logprobs(model, tokenizer, prefix_ids, [form(x) for t in triples for x in t], args.batch, end)
        word, anagram, change = (scored[k::3] for k in range(3))
        margins = {other: [w[0] - o[0] for w, o in zip(word, others)]
                   for other, others in (("anagram", anagram), ("change", change))}
        r = results["forms"][name] = {
            "example": form("crate"),
            **{f"{k}_tokens": sum(n for _, n in v) / len(v) for k, v in
               (("word", word), ("anagram", anagram), ("change", change))},
            **{f"{k}_margin": sum(m) / len(m) for k, m in margins.items()},
            **{f"{k}_ahead": sum(x > 0 for x in m) for k, m in margins.items()},
            **{f"{k}_margins": m for k, m in margins.items()}}
        print(f"| {name} | `{r['example']}` | {r['word_tokens']:.1f} / {r['anagram_tokens']:.1f} / "
              f"{r['change_tokens']:.1f} | {r['anagram_margin']:+.2f} ({r['anagram_ahead']}/{len(words)}) | "
              f"{r['change_margin']:+.2f} ({r['change_ahead']}/{len(words)}) |", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
