#!/usr/bin/env bash
# The main job on a bundled example (no network beyond package installs, no model download):
# a small PyTorch image classifier defined in code (examples/torch/small_cnn.py, seeded random weights) becomes an
# ONNX model, checked against torch with onnxruntime on the same inputs; that ONNX model becomes a PyTorch program
# again (.pt2, and a readable .py with its weights in .safetensors), checked against the ONNX model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
amanda=.venv/bin/amanda
mkdir -p out
set -x
$amanda convert examples.torch.small_cnn:build --input "x:float32[batch,3,32,32]" --to amanda/onnx/18 \
  -o out/small_cnn.onnx --explain --check --dim batch=2
$amanda convert out/small_cnn.onnx --to amanda/pytorch -o out/small_cnn.pt2 --explain --check --dim batch=3
$amanda convert out/small_cnn.onnx --to amanda/pytorch -o out/small_cnn.py
$amanda check out/small_cnn.onnx out.small_cnn:MainGraph --input "x:float32[batch,3,32,32]" --dim batch=2
