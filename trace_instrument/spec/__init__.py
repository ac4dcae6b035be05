"""Loading and validating the catalog: anchor specs (YAML) and templates (Python)."""

from trace_instrument.spec.loader import load_catalog
from trace_instrument.spec.yamlnodes import SpecError

__all__ = ["SpecError", "load_catalog"]
