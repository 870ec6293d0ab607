#include "learn/torch_fed.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <cmath>
#include <sstream>

#include "fmt/format.h"

namespace dais::learn {
namespace {

StatusOr<torch::jit::script::Module> Load(const std::string& bytes) {
  try {
    std::istringstream in(bytes);
    return torch::jit::load(in);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("model: LibTorch cannot load it: ") + e.what());
  }
}

std::vector<torch::Tensor> Params(torch::jit::script::Module& m) {
  std::vector<torch::Tensor> out;
  for (torch::Tensor p : m.parameters()) out.push_back(p);
  return out;
}

size_t Count(const std::vector<torch::Tensor>& ps) {
  size_t n = 0;
  for (const auto& p : ps) n += static_cast<size_t>(p.numel());
  return n;
}

Status Assign(std::vector<torch::Tensor>& ps, const std::vector<float>& v) {
  if (Count(ps) != v.size()) {
    return InvalidArgument(
        fmt::format("parameters: {} values for a module of {}", v.size(), Count(ps)));
  }
  torch::NoGradGuard no_grad;
  size_t at = 0;
  for (auto& p : ps) {
    const int64_t n = p.numel();
    p.copy_(torch::from_blob(const_cast<float*>(v.data() + at), p.sizes(), torch::kFloat32));
    at += static_cast<size_t>(n);
  }
  return OkStatus();
}

std::vector<float> Flatten(const std::vector<torch::Tensor>& ps) {
  std::vector<float> out;
  out.reserve(Count(ps));
  for (const auto& p : ps) {
    const torch::Tensor c = p.detach().to(torch::kFloat32).contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

torch::Tensor Logits(torch::jit::script::Module& m, const torch::Tensor& x) {
  torch::jit::IValue out = m.forward({x});
  if (out.isTuple()) out = out.toTuple()->elements().at(0);
  torch::Tensor t = out.toTensor();
  return t.dim() == 1 ? t.unsqueeze(1) : t;
}

torch::Tensor Features(const Dataset& d) {
  return torch::from_blob(const_cast<float*>(d.x.data()),
                          {static_cast<int64_t>(d.rows()), static_cast<int64_t>(d.num_features)},
                          torch::kFloat32)
      .clone();
}

torch::Tensor Loss(const torch::Tensor& logits, const torch::Tensor& y) {
  if (logits.size(1) == 1) {
    return torch::binary_cross_entropy_with_logits(logits.select(1, 0), y);
  }
  return torch::nn::functional::cross_entropy(logits, y.to(torch::kLong));
}

Status CheckRows(torch::jit::script::Module& m, const Dataset& d, int64_t* classes) {
  int64_t k = 0;
  try {
    torch::NoGradGuard no_grad;
    k = Logits(m, Features(d).slice(0, 0, 1)).size(1);
  } catch (const std::exception& e) {
    return InvalidArgument(
        fmt::format("data: the module refuses rows of {} values: {}", d.num_features, e.what()));
  }
  const int64_t n = k == 1 ? 2 : k;
  for (size_t i = 0; i < d.rows(); ++i) {
    const float v = d.y[i];
    if (v < 0 || v >= static_cast<float>(n) || v != std::floor(v)) {
      return InvalidArgument(fmt::format(
          "data: row {}: y {} is not a class of the module (0 to {})", i + 1, v, n - 1));
    }
  }
  *classes = k;
  return OkStatus();
}

}  // namespace

StatusOr<std::vector<float>> ModuleParameters(const std::string& torchscript) {
  ASSIGN_OR_RETURN(auto m, Load(torchscript));
  return Flatten(Params(m));
}

StatusOr<LocalResult> TrainLocal(const std::string& torchscript, const std::vector<float>& global,
                                 const Dataset& data, const LocalTraining& o) {
  ASSIGN_OR_RETURN(auto m, Load(torchscript));
  std::vector<torch::Tensor> ps = Params(m);
  RETURN_IF_ERROR(Assign(ps, global));
  int64_t k = 0;
  RETURN_IF_ERROR(CheckRows(m, data, &k));
  std::vector<torch::Tensor> anchor;  // the global parameters, for FedProx
  for (const auto& p : ps) anchor.push_back(p.detach().clone());
  for (auto& p : ps) p.set_requires_grad(true);
  torch::optim::SGD opt(ps, torch::optim::SGDOptions(o.learning_rate));
  m.train();
  const torch::Tensor x = Features(data);
  const torch::Tensor y = torch::from_blob(const_cast<float*>(data.y.data()),
                                           {static_cast<int64_t>(data.rows())}, torch::kFloat32)
                              .clone();
  torch::Generator gen = at::detail::createCPUGenerator(o.seed);
  const int64_t rows = x.size(0);
  LocalResult r;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    const torch::Tensor perm = torch::randperm(rows, gen);
    double total = 0;
    for (int64_t b = 0; b < rows; b += o.batch_size) {
      const torch::Tensor idx = perm.slice(0, b, std::min(rows, b + o.batch_size));
      opt.zero_grad();
      torch::Tensor loss = Loss(Logits(m, x.index_select(0, idx)), y.index_select(0, idx));
      total += loss.item<double>() * static_cast<double>(idx.size(0));
      if (o.proximal_mu > 0) {
        for (size_t i = 0; i < ps.size(); ++i) {
          loss = loss + 0.5 * o.proximal_mu * (ps[i] - anchor[i]).pow(2).sum();
        }
      }
      loss.backward();
      opt.step();
    }
    r.loss = total / static_cast<double>(rows);
  }
  m.eval();
  r.delta = Flatten(ps);
  for (size_t i = 0; i < r.delta.size(); ++i) r.delta[i] -= global[i];
  return r;
}

StatusOr<Scores> ScoreParameters(const std::string& torchscript, const std::vector<float>& params,
                                 const Dataset& data) {
  ASSIGN_OR_RETURN(auto m, Load(torchscript));
  std::vector<torch::Tensor> ps = Params(m);
  RETURN_IF_ERROR(Assign(ps, params));
  int64_t k = 0;
  RETURN_IF_ERROR(CheckRows(m, data, &k));
  torch::NoGradGuard no_grad;
  m.eval();
  const torch::Tensor logits = Logits(m, Features(data));
  Scores s;
  s.rows = data.rows();
  s.auc = std::nan("");
  const torch::Tensor logp = k == 1 ? torch::Tensor() : torch::log_softmax(logits, 1);
  const torch::Tensor pred = k == 1 ? (logits.select(1, 0) > 0).to(torch::kLong) : logits.argmax(1);
  double right = 0, loss = 0;
  for (size_t i = 0; i < data.rows(); ++i) {
    const auto c = static_cast<int64_t>(data.y[i]);
    const auto row = static_cast<int64_t>(i);
    right += pred[row].item<int64_t>() == c ? 1 : 0;
    if (k > 1) loss -= logp[row][c].item<double>();
  }
  s.accuracy = right / static_cast<double>(data.rows());
  s.logloss = k > 1 ? loss / static_cast<double>(data.rows()) : std::nan("");
  return s;
}

Status SaveWithParameters(const std::string& torchscript, const std::vector<float>& params,
                          const std::string& path) {
  ASSIGN_OR_RETURN(auto m, Load(torchscript));
  std::vector<torch::Tensor> ps = Params(m);
  RETURN_IF_ERROR(Assign(ps, params));
  try {
    m.eval();
    m.save(path);
  } catch (const std::exception& e) {
    return Internal("cannot save " + path + ": " + e.what());
  }
  return OkStatus();
}

}  // namespace dais::learn
