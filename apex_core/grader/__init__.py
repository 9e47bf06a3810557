"""Grading: run a candidate out of process, check it against the reference, time it, score it.

This is the foundation's minimal grader. It already keeps candidate code out of the judge's
process and interleaves baseline and candidate timings; the hardened grader (sandbox limits,
nonce-bound channel, profiler proof, red-team suite) replaces it.
"""
