"""Loading and validating the catalog: anchor specs (YAML) and templates (Python)."""

from trace_instrument.spec.loader import SpecError, load_catalog

__all__ = ["SpecError", "load_catalog"]
