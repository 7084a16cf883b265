"""``python -m roma_lab.simulator``: see :mod:`roma_lab.simulator._cli`."""

from ._cli import main

raise SystemExit(main())
