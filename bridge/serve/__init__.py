"""One run of the bridge: the loop, each message's task, recovery, and the composition root."""
