"""``python -m flexmatch.testing.fake_llm``: serve until interrupted."""

import sys

from flexmatch.testing.fake_llm.command import main

sys.exit(main())
