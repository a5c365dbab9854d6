#!/usr/bin/env bash
# The main job on a bundled example (no network beyond package installs, no model download):
# validate the seed's TensorFlow and PyTorch graphs against the schemas generated from the
# installed frameworks, and summarize them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
amanda=.venv/bin/amanda
tf_ns=$($amanda namespaces | awk '$1 ~ /^amanda\/tensorflow\// {print $1}' | tail -n 1)
torch_ns=$($amanda namespaces | awk '$1 ~ /^amanda\/pytorch\// {print $1}' | tail -n 1)
set -x
$amanda validate examples/seed/tf_single_layer.yaml --namespace "$tf_ns"
$amanda inspect examples/seed/tf_single_layer.yaml
$amanda validate examples/seed/pytorch_single_layer.yaml --namespace "$torch_ns"
$amanda inspect examples/seed/pytorch_single_layer.yaml
