"""pyfw.monitor: link and rank monitoring (filled in below)."""
