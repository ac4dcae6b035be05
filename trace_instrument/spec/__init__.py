"""Loading and validating the catalog: anchor specs (YAML) and templates (Python)."""

from trace_instrument.spec.catalogs import load_catalog
from trace_instrument.spec.errors import SpecError

__all__ = ["SpecError", "load_catalog"]
