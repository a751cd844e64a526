#!/usr/bin/env bash
# The main job: install what is missing, build, and run opfuse on the built-in model zoo and
# on whole networks.
# Arguments are passed to `opfuse demo`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
# The corpus's whole networks (tests/frontend/networks.h) as PyTorch's default (dynamo)
# exporter writes them, written once into the build folder, run beside the zoo.
nets="$OPFUSE_BUILD/networks"
networks=()
for n in resnet18 resnet50 mobilenet_v2 efficientnet_b0 vit_tiny bert_encoder gpt2_block; do
  [ -s "$nets/${n}_dynamo.onnx" ] ||
    "$OPFUSE_BUILD/tests/frontend/write_networks" --style dynamo "$nets" 224 "$n" > /dev/null
  networks+=(--network "$nets/${n}_dynamo.onnx")
done
exec "$OPFUSE_BUILD/tools/opfuse" demo "${networks[@]}" "$@"
