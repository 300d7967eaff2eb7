"""pyretrieve: policy-filtered hybrid retrieval inside Postgres."""
