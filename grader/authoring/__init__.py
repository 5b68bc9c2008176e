"""What a course author runs: check the course, generate stubs, validate the suites against the bug
corpus, the GPU check, and the student release and autograder exports."""
