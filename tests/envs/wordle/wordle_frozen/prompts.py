"""The text the model sees in Wordle: system prompt, tool schema, task prompt, messages.

Written for mtrl_gym. No prompt contains a placeholder word the model could copy as a
guess (a small model under RL learns to echo such words: see the CPU probe notes).
"""

from __future__ import annotations

from mtrl_gym.envs.wordle.game import MAX_GUESSES

__all__ = ["SYSTEM_PROMPT", "TOOLS", "TASK_PROMPT", "HARD_MODE_RULE", "NO_GUESS_HELP"]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "guess_word",
            "description": "Play one guess: a 5-letter English word. Returns per-letter feedback.",
            "parameters": {
                "type": "object",
                "properties": {
                    "guess": {"type": "string", "description": "A 5-letter English word, letters a-z."},
                },
                "required": ["guess"],
            },
        },
    }
]

SYSTEM_PROMPT = f"""You are playing Wordle. A secret 5-letter English word has been chosen. \
Find it in at most {MAX_GUESSES} guesses.

After each guess you get feedback for every letter:
- green: the letter is in the word at this position;
- yellow: the letter is in the word, but at another position;
- gray: the letter is not in the word (or the word has no more copies of it).

Rules:
- Each guess must be a real English word of exactly 5 letters. Words not in the dictionary \
are rejected and do not use up a guess.
- Use the feedback: later guesses should keep green letters in place, include yellow \
letters somewhere else, and avoid gray letters.
- Never repeat a word you already guessed.

Make exactly one guess per turn by calling the guess_word tool, writing the call as
<tool_call>{{"name": "guess_word", "arguments": {{"guess": "..."}}}}</tool_call>
with your chosen word in place of the dots. You may think briefly before the call."""

HARD_MODE_RULE = ("\nHard mode is on: every guess must be consistent with all feedback so far "
                  "(green letters in place, yellow letters included but not where they were "
                  "marked, gray letters absent). A guess that is not is rejected without using a guess.")

TASK_PROMPT = (f"Let's play Wordle. I have chosen a secret 5-letter word. You have {MAX_GUESSES} guesses. "
               "Make your first guess with the guess_word tool.")

NO_GUESS_HELP = ('No guess found in your message. Call the tool like this: '
                 '<tool_call>{"name": "guess_word", "arguments": {"guess": "..."}}</tool_call> '
                 "with a 5-letter word in place of the dots.")
