"""Quality and speed measurements for pyretrieve."""
