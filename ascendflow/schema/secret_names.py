"""Which environment names are secret, and what replaces a secret value (pure; imports nothing of ascendflow).

The bottom of :mod:`ascendflow.schema`: :mod:`ascendflow.schema.errors` masks a secret value in a validation error
and :mod:`ascendflow.schema.secrets` builds the masking on top, so both read the names from here.
"""

from __future__ import annotations

import re
from typing import Iterable

#: Name parts that mark a variable as secret (``HF_TOKEN``, ``WANDB_API_KEY``, ``AWS_SECRET_ACCESS_KEY``,
#: ``DB_PASSWORD``, ``GOOGLE_APPLICATION_CREDENTIALS``...), matched case-insensitively as ``_``-separated words.
SECRET_WORDS = ("TOKEN", "KEY", "APIKEY", "SECRET", "PASSWORD", "PASSWD", "PASS", "CREDENTIAL", "AUTH",
                "PRIVATE", "COOKIE")
SECRET_NAME = re.compile(r"(?:^|_)(?:" + "|".join(SECRET_WORDS) + r")S?(?:_|$)", re.IGNORECASE)
#: What replaces a secret value in params, tags and files.
MASK = "***"


def is_secret(name: str, marked: Iterable[str] = ()) -> bool:
    """True when ``name`` looks secret or is listed in ``marked``."""
    return name in set(marked) or bool(SECRET_NAME.search(name))
