"""The camera ToolEndpoint provider: ``capture`` returns a reference to the newest frame."""
