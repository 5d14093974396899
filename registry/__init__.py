"""Semantic tool registry: governed catalog and calls for agents, MCP, gates, API tools."""
