import gymnasium; gymnasium.register('harden_toys/Vowel-v0', entry_point='toy_envs:VowelEnv', disable_env_checker=True)
