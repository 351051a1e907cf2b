"""Tiny test models: a BPE tokenizer with SmolLM2's ChatML template and small random Llamas.

Imported by tests as ``from tiny_models import ...`` (``tests/`` is on pytest's ``pythonpath``);
nothing here downloads anything, and every builder is deterministic.
"""

from __future__ import annotations

#: SmolLM2-Instruct's chat template (ChatML), so tests render prompts exactly like the real model.
CHATML_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2 as in SmolLM2

_CORPUS = [
    "You are playing Wordle. A secret 5-letter English word has been chosen.",
    "Find it in at most 6 guesses. After each guess you get feedback for every letter.",
    "green: the letter is in the word at this position; yellow: elsewhere; gray: not in the word.",
    '<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>',
    '{"type": "function", "function": {"name": "echo", "description": "Echo the text back.", '
    '"parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}',
    "Guess 1/6: CRANE\nFeedback: C gray, R yellow, A green, N gray, E gray\nYou have 5 guesses left.",
    "system\nuser\nassistant\ntool\n", "Let's play. Make your first guess with the tool.",
    "The quick brown fox jumps over the lazy dog. 0123456789 ,.;:!?'\"()[]{}<>/\\|-_=+*&^%$#@~`",
    "slate paste riser audio pious about other there their words guess turns tools calls",
]


def build_chatml_tokenizer(vocab_size: int = 512):
    """A byte-level BPE tokenizer with SmolLM2's special tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                   pad_token="<|im_end|>", unk_token="<|endoftext|>")
    fast.chat_template = CHATML_TEMPLATE
    return fast


def build_tiny_llama(vocab_size: int, *, seed: int = 0, layers: int = 2, max_positions: int = 2048):
    """A randomly initialised Llama small enough to run hundreds of steps per second on a CPU."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=max_positions, bos_token_id=1, eos_token_id=2,
                         pad_token_id=2, tie_word_embeddings=True)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()
