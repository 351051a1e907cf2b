"""Where MLflow runs go: one default store for training and evaluation, and quiet logging.

The default is a SQLite file ``mlflow.db`` in the working directory (artifacts under
``./mlruns``): no server and no network. ``$MLFLOW_TRACKING_URI`` overrides it; an explicit
URI overrides both. Open it with ``mlflow ui --backend-store-uri sqlite:///mlflow.db``.

>>> import os
>>> tracking_uri("file:/tmp/x") == "file:/tmp/x"
True
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["tracking_uri", "quiet_mlflow"]


def tracking_uri(explicit: str | None = None) -> str:
    """``explicit``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<cwd>/mlflow.db``."""
    return explicit or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def quiet_mlflow() -> None:
    """Switch mlflow's telemetry off (unless the user set it) and its INFO logging."""
    import logging

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
