"""``python -m flexmatch.testing.fake_llm``: serve until interrupted."""

import sys

from flexmatch.testing.fake_llm.command import main

if __name__ == "__main__":  # not when a tool imports every module (the API docs do)
    sys.exit(main())
