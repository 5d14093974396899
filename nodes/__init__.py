"""ToolEndpoint provider nodes and the runner that embeds forge-tool in a Dora node."""
