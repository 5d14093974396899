"""Geometry the motion tests measure with."""

from __future__ import annotations

import numpy as np


def distance_to_segment(point: np.ndarray, start: np.ndarray, end: np.ndarray) -> float:
    """Distance (m) of ``point`` from the segment ``start``-``end``."""
    direction = end - start
    share = float(np.clip(np.dot(point - start, direction) / np.dot(direction, direction), 0, 1))
    return float(np.linalg.norm(point - (start + share * direction)))
