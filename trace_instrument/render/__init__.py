"""Rendering typed results: exit codes, terminal text, JSON, GitHub annotations, JUnit, Markdown.

Everything a command prints is computed here from the engine's results (never
from message text); the CLI only chooses the format and writes the output.
"""
