"""``python -m bench``."""

from bench import main

raise SystemExit(main())
