"""The metric registry (registry.py) and the metrics every trial shape has (core.py); the rest are declared
next to the code that measures them."""

from tunbench.metrics.registry import (
    FAMILIES,
    PLACEHOLDERS,
    REGISTRY,
    Better,
    Chart,
    Family,
    Format,
    Metrics,
    MetricSpec,
    Registry,
    declare,
)

__all__ = [
    "FAMILIES",
    "PLACEHOLDERS",
    "REGISTRY",
    "Better",
    "Chart",
    "Family",
    "Format",
    "MetricSpec",
    "Metrics",
    "Registry",
    "declare",
]
