"""The bridge without its command line: ``run_stdio(BridgeConfig(url=URL))`` for
``--url URL``, and no click. A benchmark contender only (bench/README.md, "Start-up"): it
shows what parsing the command line with click costs at start-up."""

import sys

from bridge.core.config import BridgeConfig
from bridge.serve.loop import run_stdio

if __name__ == "__main__":
    sys.exit(run_stdio(BridgeConfig(url=sys.argv[sys.argv.index("--url") + 1])))
