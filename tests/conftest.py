"""Shared test settings: hypothesis runs derandomized so CI is reproducible (a fixed, broad set of examples)."""
from hypothesis import settings

settings.register_profile("reproducible", derandomize=True, deadline=None)
settings.load_profile("reproducible")
