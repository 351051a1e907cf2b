"""A frozen copy of the Wordle env and the parser as they were before the speed rewrite.

Test-only reference (commit 7f628cc of ``mtrl_gym/envs/wordle/{env,knowledge,prompts}.py``
and ``mtrl_gym/parsing.py``, imports made relative, nothing else changed). The
differential tests replay the same seeds and actions through this copy and the package
and require identical observations, rewards and ``info``; the parser tests require the
new general parser to agree with this one. Do not edit: it is the old behaviour.
"""
