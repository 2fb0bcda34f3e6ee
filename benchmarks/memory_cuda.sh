#!/usr/bin/env bash
# The memory benchmark's CUDA runs, by hand on a machine with a CUDA GPU, from the repository root:
#
#     bash benchmarks/memory_cuda.sh [FOLDER]
#
# First the tests that need a CUDA device (the allocator's peak, the GPU's queue, module times
# read from events), then ``benchmarks.memory`` where the GPU is busy (ResNet-18 on 256 and 128
# images of 224x224, GPT-2 small on 8x1024 tokens) and where launching kernels is the work
# (ResNet-18 on 64 images, GPT-2 small on 2x512 tokens); about 4 minutes on an H200. Each case's
# whole output and its measurements as JSON (``--dump``) go to FOLDER (default
# benchmarks/results/memory-cuda); the summary lines are printed.
set -euo pipefail
out=${1:-benchmarks/results/memory-cuda}
mkdir -p "$out"
python -m pytest -q -rs tests/test_memory.py tests/test_profiling.py -k cuda
case_() {
    local name=$1
    shift
    PYTHONPATH=. python -m benchmarks.memory --device cuda --dump "$out/$name.json" "$@" > "$out/$name.txt"
    grep -v "each round\|each step" "$out/$name.txt"
}
case_ resnet18-256x224 --only resnet18 --images 256 --size 224 --rounds 30
case_ resnet18-128x224 --only resnet18 --images 128 --size 224 --rounds 40
case_ gpt2-8x1024 --only gpt2 --batch 8 --seq-len 1024 --rounds 8
case_ resnet18-64x224 --only resnet18 --images 64 --size 224 --rounds 20
case_ gpt2-2x512 --only gpt2 --batch 2 --seq-len 512 --rounds 15
