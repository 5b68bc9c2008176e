"""The core every audience shares: the course catalogue, results and their formats, concept scoring,
staging a submission, and the rank sandbox. It imports nothing else of the grader."""
