"""The ``widetable`` command line: a thin layer of parsing and formatting over the library.

``main()`` is the console-script entry point; ``app`` is the typer application.
Importing a command module registers its commands; the order of these imports
is the order of ``widetable --help``.
"""

from .app import app, main

# isort: split
from . import tables  # noqa: F401

# isort: split
from . import transfer  # noqa: F401

# isort: split
from . import tools  # noqa: F401

# isort: split
from . import streams  # noqa: F401

# isort: split
from . import search  # noqa: F401

# isort: split
from . import sql  # noqa: F401

# isort: split
from . import serve  # noqa: F401

# isort: split
from . import bigtable  # noqa: F401

# isort: split
from . import design  # noqa: F401

__all__ = ["app", "main"]
