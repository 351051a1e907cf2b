"""Text-action Gymnasium environments (one sub-package per family)."""
