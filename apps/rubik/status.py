"""What a search kernel call returns, and the deepest search it supports."""

DONE, FOUND, PAUSED = 0, 1, 2   # subtree exhausted / solution on the stack / budget used up
MAX_DEPTH = 40
