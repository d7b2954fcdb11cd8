"""Hydra search-path plugin: adds ascendflow's ``recipes/`` root so ``+recipe=NAME`` works from any directory."""

from __future__ import annotations

import os
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

#: The repository's recipes root (``recipes/recipe/<name>.yaml``); ``$ASCENDFLOW_RECIPES`` overrides it.
RECIPES_DIR = Path(os.environ.get("ASCENDFLOW_RECIPES", Path(__file__).resolve().parents[2] / "recipes"))


class AscendflowSearchPathPlugin(SearchPathPlugin):
    """Appends ``file://<repo>/recipes`` to Hydra's config search path for ascendflow's own config."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        """Add the recipes root after the primary config, only when the primary config is ascendflow's ``conf/``."""
        conf_dir = str(RECIPES_DIR.parent / "conf")
        if any(conf_dir in str(entry.path) for entry in search_path.get_path()):
            search_path.append(provider="ascendflow-recipes", path=f"file://{RECIPES_DIR}")
