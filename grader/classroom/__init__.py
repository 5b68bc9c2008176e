"""What an instructor runs to grade a class: batches (local processes or Slurm arrays), records, the
nbgrader gradebook, batch outputs, the class report and item analysis."""
