"""Developer scripts (training, screenshots); importable so tests can check the training."""
