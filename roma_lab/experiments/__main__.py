"""``python -m roma_lab.experiments``: see :mod:`roma_lab.experiments._cli`."""

from ._cli import main

raise SystemExit(main())
