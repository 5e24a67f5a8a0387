"""probe=customization: the cost of a custom loss and a custom callback in each wrapper, measured and verified."""
