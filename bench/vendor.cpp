#include "bench/vendor.h"

#include <cmath>
#include <memory>
#include <vector>

#ifdef OPFUSE_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef OPFUSE_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace opfuse::bench {
namespace {

#ifdef OPFUSE_HAVE_OPENBLAS
// C[M,N] = alpha * A[M,K] x B[K,N] (B transposed when trans_b: B is [N,K]).
void sgemm(int M, int N, int K, const float* A, const float* B, float* C, bool trans_b = false,
           float alpha = 1.0f) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
              K, B, trans_b ? K : N, 0.0f, C, N);
}

std::string openblas_implementation() {
  return std::string("OpenBLAS ") + openblas_get_config() + ", core " + openblas_get_corename();
}

std::optional<VendorBaseline> openblas_model(const std::string& model, ZooCase& c);

std::optional<VendorBaseline> openblas(const std::string& model, ZooCase& c) {
  auto v = openblas_model(model, c);
  if (v) v->implementation = openblas_implementation();
  return v;
}

std::optional<VendorBaseline> openblas_model(const std::string& model, ZooCase& c) {
  if (model == "mlp") {
    const auto& xs = c.graph.tensor("x").shape;
    const int M = int(xs[0]), D = int(xs[1]), H = int(c.graph.tensor("w1").shape[1]);
    auto h = std::make_shared<std::vector<float>>(size_t(M) * H);
    return VendorBaseline{"OpenBLAS", [&c, h, M, D, H] {
                            sgemm(M, H, D, c.in("x"), c.in("w1"),
                                  h->data());
                            const float* b = c.in("b1");
                            for (int i = 0; i < M; ++i) {
                              float* row = h->data() + size_t(i) * H;
                              for (int j = 0; j < H; ++j) {
                                const float t = row[j] + b[j];
                                row[j] = 0.5f * t * (1.0f + std::erf(t * float(M_SQRT1_2)));
                              }
                            }
                            sgemm(M, D, H, h->data(), c.in("w2"),
                                  c.outputs.begin()->second.data.data());
                          }};
  }
  if (model == "attention") {
    const auto& xs = c.graph.tensor("x").shape;  // [B, L, D]
    const int B = int(xs[0]), L = int(xs[1]), D = int(xs[2]);
    auto q = std::make_shared<std::vector<float>>(size_t(B) * L * D),
         k = std::make_shared<std::vector<float>>(q->size()),
         v = std::make_shared<std::vector<float>>(q->size()),
         s = std::make_shared<std::vector<float>>(size_t(L) * L);
    std::string scale_name;
    for (const auto& p : c.graph.params()) {
      if (p.rfind("attn_scale", 0) == 0) scale_name = p;
    }
    return VendorBaseline{"OpenBLAS", [&c, q, k, v, s, B, L, D, scale_name] {
                            const float* x = c.in("x");
                            sgemm(B * L, D, D, x, c.in("wq"), q->data());
                            sgemm(B * L, D, D, x, c.in("wk"), k->data());
                            sgemm(B * L, D, D, x, c.in("wv"), v->data());
                            const float scale = c.params[scale_name].data[0];
                            float* out = c.outputs.begin()->second.data.data();
                            for (int b = 0; b < B; ++b) {
                              const size_t off = size_t(b) * L * D;
                              sgemm(L, L, D, q->data() + off, k->data() + off, s->data(), true,
                                    scale);
                              for (int i = 0; i < L; ++i) {  // numerically stable softmax per row
                                float* row = s->data() + size_t(i) * L;
                                float mx = row[0];
                                for (int j = 1; j < L; ++j) mx = std::max(mx, row[j]);
                                float sum = 0;
                                for (int j = 0; j < L; ++j) sum += row[j] = std::exp(row[j] - mx);
                                for (int j = 0; j < L; ++j) row[j] /= sum;
                              }
                              sgemm(L, D, L, s->data(), v->data() + off, out + off);
                            }
                          }};
  }
  return std::nullopt;
}
#endif

#ifdef OPFUSE_HAVE_ONEDNN
struct OneDnnCbr {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::vector<std::pair<dnnl::primitive, std::unordered_map<int, dnnl::memory>>> steps;
  std::vector<float> w_folded, b_folded;
};

std::optional<VendorBaseline> onednn(const std::string& model, ZooCase& c) {
  if (model != "cbr_pool" && model != "mixed") return std::nullopt;
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  auto net = std::make_shared<OneDnnCbr>();
  const auto& xs = c.graph.tensor("x").shape;  // NHWC
  const memory::dim N = xs[0], H = xs[1], W = xs[2], C = xs[3];
  const auto& ws = c.graph.tensor("w").shape;  // [Cout, Cin, 3, 3]
  const memory::dim O = ws[0], K = ws[2];
  // Fold batch norm into the conv: w' = w * g / sqrt(v + eps), b' = beta - mean * g / sqrt(v +
  // eps).
  const graph::Node* bn = nullptr;
  for (const auto& n : c.graph.nodes()) {
    if (n.op == "batch_norm") bn = &n;
  }
  const auto& gamma = c.params[bn->inputs[1]].data;
  const auto& beta = c.params[bn->inputs[2]].data;
  const auto& mean = c.params[bn->inputs[3]].data;
  const auto& var = c.params[bn->inputs[4]].data;
  const double eps = std::get<double>(bn->attrs.at("epsilon"));
  net->w_folded = c.params["w"].data;
  net->b_folded.resize(O);
  for (memory::dim o = 0; o < O; ++o) {
    const float f = float(gamma[o] / std::sqrt(double(var[o]) + eps));
    for (memory::dim i = 0; i < C * K * K; ++i) net->w_folded[o * C * K * K + i] *= f;
    net->b_folded[o] = beta[o] - mean[o] * f;
  }
  // The user's NHWC input; the convolution's source in the layout oneDNN prefers (blocked
  // nChw8c/nChw16c on its AVX2/AVX-512 JIT kernels: forcing nhwc on oneDNN 2.6's AVX2 build
  // selected `ref:any`, its reference loops, 80x slower).
  const memory::desc src_user_md({N, C, H, W}, dt::f32, tag::nhwc);
  const memory::desc src_any({N, C, H, W}, dt::f32, tag::any);
  const memory::desc w_any({O, C, K, K}, dt::f32, tag::any), b_md({O}, dt::f32, tag::x);
  const memory::desc dst_any({N, O, H, W}, dt::f32, tag::any);
  post_ops ops;
  ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
  primitive_attr attr;
  attr.set_post_ops(ops);
  const auto conv_pd = convolution_forward::primitive_desc(
      convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                src_any, w_any, b_md, dst_any, {1, 1}, {K / 2, K / 2},
                                {K / 2, K / 2}),
      attr, net->eng);
  // Weights reordered once into the primitive's preferred layout (setup, not timed).
  memory w_user({{O, C, K, K}, dt::f32, tag::oihw}, net->eng, net->w_folded.data());
  memory w_mem(conv_pd.weights_desc(), net->eng);
  reorder(w_user, w_mem).execute(net->strm, w_user, w_mem);
  memory b_mem(b_md, net->eng, net->b_folded.data());
  std::vector<std::string> impls{"conv " + std::string(conv_pd.impl_info_str())};
  memory src_user(src_user_md, net->eng, const_cast<float*>(c.in("x")));  // read only
  memory src_mem = src_user;
  if (conv_pd.src_desc() != src_user_md) {  // the input's reorder is part of the inference
    src_mem = memory(conv_pd.src_desc(), net->eng);
    const auto r = reorder::primitive_desc(src_user, src_mem);
    impls.push_back("input reorder " + std::string(r.impl_info_str()));
    net->steps.push_back({reorder(r), {{DNNL_ARG_FROM, src_user}, {DNNL_ARG_TO, src_mem}}});
  }
  memory conv_dst(conv_pd.dst_desc(), net->eng);
  net->steps.push_back({convolution_forward(conv_pd),
                        {{DNNL_ARG_SRC, src_mem},
                         {DNNL_ARG_WEIGHTS, w_mem},
                         {DNNL_ARG_BIAS, b_mem},
                         {DNNL_ARG_DST, conv_dst}}});
  for (const auto& n : c.graph.nodes()) {
    if (n.op != "max_pool" && n.op != "avg_pool") continue;
    const auto& os = c.graph.tensor(n.outputs[0]).shape;
    const memory::desc pool_any({N, O, os[1], os[2]}, dt::f32, tag::any);
    const auto pool_pd = pooling_forward::primitive_desc(
        pooling_forward::desc(
            prop_kind::forward_inference,
            n.op == "max_pool" ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding,
            conv_pd.dst_desc(), pool_any, {2, 2}, {2, 2}, {0, 0}, {0, 0}),
        net->eng);
    memory pool_dst(pool_pd.dst_desc(), net->eng);
    impls.push_back(n.op + " " + pool_pd.impl_info_str());
    net->steps.push_back(
        {pooling_forward(pool_pd), {{DNNL_ARG_SRC, conv_dst}, {DNNL_ARG_DST, pool_dst}}});
    memory user({{N, O, os[1], os[2]}, dt::f32, tag::nhwc}, net->eng,
                c.outputs[n.outputs[0]].data.data());
    const auto r = reorder::primitive_desc(pool_dst, user);
    impls.push_back("output reorder " + std::string(r.impl_info_str()));
    net->steps.push_back({reorder(r), {{DNNL_ARG_FROM, pool_dst}, {DNNL_ARG_TO, user}}});
  }
  VendorBaseline v{"oneDNN", [net] {
                     for (auto& [prim, args] : net->steps) prim.execute(net->strm, args);
                     net->strm.wait();
                   }};
  const dnnl_version_t* ver = dnnl_version();
  v.implementation = "oneDNN " + std::to_string(ver->major) + "." + std::to_string(ver->minor) +
                     "." + std::to_string(ver->patch) + ":";
  for (const auto& i : impls) {
    v.implementation += " " + i + ";";
    // oneDNN names its reference implementations "ref:..." (and "simple:" reorders are
    // plain loops too, but only a reorder's, whose cost is the data it moves).
    v.reference_code = v.reference_code || i.find(" ref:") != std::string::npos ||
                       i.find(" ref_") != std::string::npos;
  }
  v.implementation.pop_back();
  return v;
}
#endif

}  // namespace

std::optional<VendorBaseline> vendor_baseline(const std::string& model, ZooCase& c) {
#ifdef OPFUSE_HAVE_ONEDNN
  if (auto v = onednn(model, c)) return v;
#endif
#ifdef OPFUSE_HAVE_OPENBLAS
  if (auto v = openblas(model, c)) return v;
#endif
  (void)model;
  (void)c;
  return std::nullopt;
}

}  // namespace opfuse::bench
