"""Where the workers run: parallel sizes checked against the model and hardware (:mod:`.topology`) and which worker
ranks run on which node, under which launcher (:mod:`.nodes`)."""
