"""LibCST edit operations: inserts, rewrites, expression swaps and imports, in one pass per file."""
