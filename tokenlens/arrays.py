"""The numpy array types the package annotates with, declared once.

Bottom layer: numpy only, nothing of tokenlens.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

__all__ = ["F64", "I64", "Mask"]
