"""The positive control of issue 32 (benchmarks/positive_control.py is its command line):
training prompts, the target's answers, drafters fine-tuned at set Japanese shares,
their traces and analyses, and study.json."""
