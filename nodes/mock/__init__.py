"""Scriptable ``mock`` ToolEndpoint provider used by Gateway tests and benchmarks."""

from doraforge.nodes.mock.endpoint import CRASH_EXIT_STATUS, DESCRIPTOR, ENDPOINT_ID, definition

__all__ = ["CRASH_EXIT_STATUS", "DESCRIPTOR", "ENDPOINT_ID", "definition"]
