"""Graph capture: ``cudagraph_mode`` and the capture sizes the target release derives (:mod:`.capture`)."""
