"""The PAOS agent layer and the ``doraforge`` operator CLI."""
