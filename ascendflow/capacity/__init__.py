"""SLO capacity search: the highest load a server config sustains within a p99 TTFT/TPOT target
(:mod:`ascendflow.capacity.search`), its load curve (:mod:`ascendflow.capacity.plot`) and the sweep's ranking
(:mod:`ascendflow.capacity.ranking`)."""
