"""Declarative HTTP API tools: JSON service bundles exposed as ``api__<service>__<tool>``."""
