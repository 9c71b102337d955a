"""The MetaKernelBench evaluator: imports one candidate kernel, checks it
against the problem's reference and times it (PROTOCOL.md, "Correctness" and
"Timing"). The C judge starts one such process per evaluation and talks to it
in JSON lines; see protocol.py."""
