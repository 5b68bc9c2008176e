"""The markers a course's tests carry, registered by the judge's plugin and by a student's pytest alike.

No import beyond the standard library: a student's pytest loads this in every run (``learner.pytest_plugin``).
"""

MARKERS = (
    "part(id): the course.yml part this test scores for",
    "concept(name): the concept.yml concept the test scores for; its idea is shown",
    "generated: the test's inputs are drawn from seeds in the judge (grade validate)",
)
