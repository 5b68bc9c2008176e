"""What a student runs: grade one exercise of their own, progress, hints, checkpoints, watch mode, and
the terminal views of each."""
