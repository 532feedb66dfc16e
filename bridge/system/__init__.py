"""What the bridge asks of the local operating system: private files, the log thread, Windows."""
