"""The course's planning assumptions: numbers every planner in section 5 (21-25) shares, and no formula.

This module holds assumptions, not answers. The byte and flop counts that the planners need (model states
under ZeRO, activations per layer, flops per step) are what exercises 21 and 22 ask the learner to derive, so
none of them ships here: each planning exercise writes the figures it uses in its own files, and the
judge checks them with the references, which never leave solutions/ (docs/authoring.md, "The trust
boundary"). Bytes everywhere, never GB.
"""

from __future__ import annotations

MFU = 0.40
"""Model flops utilisation the planners assume. Llama 3 (arXiv 2407.21783, Table 4, as relayed by
glennklockwood.com/garden/llama-3.1) reports 380-430 TFLOPs per H100 for 405B on 8k-16k GPUs, 38-43% of the
dense bf16 peak; ground-truth.md §12 works its examples at 40%."""

USABLE_MEMORY_FRACTION = 0.90
"""Share of a GPU's memory a plan may fill. A course assumption, not a measurement: the rest goes to the CUDA
context, NCCL buffers, temporary tensors and allocator fragmentation, none of which the formulas count."""

RECOMPUTE = ("none", "selective", "full")
"""Activation recomputation policies (Korthikanti et al. 2022, arXiv 2205.05198, §5): keep everything,
recompute attention's score-sized tensors in backward, or keep only each layer's input."""
