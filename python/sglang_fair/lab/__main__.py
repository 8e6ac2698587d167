import sys

from sglang_fair.lab.registry import main

sys.exit(main())
