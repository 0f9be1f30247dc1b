"""``python -m lab`` from the checkout's root: the demo (make demo), and ``python -m lab study|tune|sweep|sharpening``."""

import sys

from .command import main

sys.exit(main())
