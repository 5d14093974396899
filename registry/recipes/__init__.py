"""Saved read recipes: a versioned library of bounded read-tool sequences offered as
``recipe.*`` tools (skeleton: implemented by the recipes work)."""
