"""Device backends of the ops in :mod:`ascendflow.kernels.ops` (the reference is the ``ops`` modules themselves)."""
