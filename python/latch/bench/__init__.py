"""`python3 -m latch.bench`: trace once against trace every under PyTorch (see __main__.py)."""
