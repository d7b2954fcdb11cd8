"""``python -m ascendflow.import``: import a ``vllm serve`` command as a recipe, and migrate it (see
:mod:`ascendflow.importer.cli`)."""

import sys

from ascendflow.importer.cli import main

sys.exit(main())
