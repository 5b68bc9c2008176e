"""Course libraries that exercises, references and hidden suites share: simulators, catalogues, parsers.

Trusted course code: rank workers, the judge and student modules may all import it.
"""
