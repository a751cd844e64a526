// Whole networks as PyTorch's two ONNX exporters write them, at full size and with random
// weights, built with the ONNX protobuf API (no PyTorch needed):
//
//   torchscript  torch.onnx.export(..., dynamo=False), opset 17, eval mode: BatchNorm folded
//                into the convolutions, nn.Linear as Gemm(transB = 1) after Flatten, ReLU6 as
//                Clip with input bounds, weights inside the model
//   dynamo       torch.onnx.export(...) (the default), opset 20: BatchNormalization kept,
//                adaptive average pooling as ReduceMean with axes as an input, the flatten as
//                a Reshape to a constant shape, every weight in MODEL.onnx.data beside the
//                model (external data)
//
// Networks (1x3x224x224): resnet18, resnet50 (also at batch 4: resnet50_b4, where its
// activations outgrow the caches a batch of 1 stays in), mobilenet_v2, efficientnet_b0
// (torchvision; SiLU as Sigmoid and Mul, squeeze-excitation), vit_tiny (timm vit_tiny_patch16_224:
// patch conv, class token, LayerNormalization, qkv reshaped to 5-D and unbound by Gather, erf GELU
// decomposed by TorchScript and the opset-20 Gelu op from dynamo); and from int64 token ids
// (128 tokens), bert_encoder (transformers BertModel's shapes, hidden 768, 12 heads, FFN 3072,
// vocab 30522, with 2 of its 12 layers; an attention mask) and gpt2_block (GPT2Model's
// embeddings, one block with its causal mask, ln_f; vocab 50257).
#pragma once

#include <string>
#include <vector>

namespace opfuse::testing {

enum class ExportStyle { torchscript, dynamo };

const std::vector<std::string>& network_names();
// network_names() as "resnet18, resnet50, ...", for the messages that refuse another name.
std::string network_list();
const char* style_name(ExportStyle s);
// Writes DIR/<name>_<style>.onnx (and, dynamo, DIR/<name>_<style>.onnx.data); returns the
// model's path. `image` is the input's height and width (224 for the real networks).
// `dynamic_batch`: exported with dynamic_axes={input: {0: "batch"}} (DIR/<name>_<style>_dynbatch.onnx):
// the inputs' first axis is dim_param "batch", and the reshapes that name the batch compute it
// from a tensor's shape as each exporter writes it (the static exports write constants).
// `dynamic_seq` (bert_encoder, gpt2_block): also {1: "seq"} on the token inputs
// (<...>_dynseq.onnx): position ids from Range or cut from a buffer, the causal mask cut from
// the registered bias, the reshapes taking the length from the tensors' shapes.
std::string write_network(const std::string& name, ExportStyle style, const std::string& dir,
                          int64_t image = 224, bool dynamic_batch = false, bool dynamic_seq = false);

}  // namespace opfuse::testing
