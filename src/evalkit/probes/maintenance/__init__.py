"""The maintenance probe's measurements: dependencies, import cost, release history and deprecation warnings."""
