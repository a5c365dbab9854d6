#!/usr/bin/env bash
# The main job on a bundled example (no network beyond package installs, no model download):
# upgrade a small ONNX image classifier written at opset 11 to the newest opset through Amanda's mapping tables,
# then run the original and the upgraded model on the same inputs with onnxruntime and compare the outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
amanda=.venv/bin/amanda
model=examples/onnx/small_cnn_opset11.onnx
mkdir -p out
set -x
$amanda inspect "$model"
$amanda convert "$model" --to amanda/onnx -o out/small_cnn_upgraded.onnx --explain
$amanda validate out/small_cnn_upgraded.onnx
$amanda check "$model" out/small_cnn_upgraded.onnx --dim batch=4 --exact
