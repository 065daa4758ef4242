"""Image datasets."""
