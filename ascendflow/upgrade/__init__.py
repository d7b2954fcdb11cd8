"""The upgrade advisor: one deployment compiled on two software rows, and what changes (``python -m
ascendflow.upgrade``, docs/upgrade.md)."""
