"""Jobs taking turns, one block of steps at a time: the controller's side of `evalkit.observe.turns`."""
