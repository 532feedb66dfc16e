"""The desktop app as a resource: where it listens (discovery), who listens there (the
listener check), which token it takes, and starting it."""
