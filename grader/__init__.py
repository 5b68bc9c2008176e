"""distgpu's grader: the course catalog, the multi-rank harness, runners and reports."""
