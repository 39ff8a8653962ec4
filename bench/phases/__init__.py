"""The phases of a run, in the order suites.py runs them; each records figures into the Run."""
