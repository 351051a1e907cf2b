import sys

from mtrl_gym.cli import main

sys.exit(main())
