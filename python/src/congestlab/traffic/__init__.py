"""Traffic runners: check -> start -> wait -> parse; each records argv and tool version."""
