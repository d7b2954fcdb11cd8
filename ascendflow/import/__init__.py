"""``python -m ascendflow.import``: the command-line entry of :mod:`ascendflow.importer` (``import`` is a Python
keyword, so the code lives in ``ascendflow.importer``)."""
