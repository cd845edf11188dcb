"""Automation: the offline renderer, the sizing plan command and (later) Automation API operations."""
