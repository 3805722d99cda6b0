// The fused steps as libtorch optimizers: torch::optim::SGD, Adagrad, Adam and AdamW whose
// step() is one fused op per parameter (train_ops.h, fp32 parameters). Options, parameter
// groups, state and serialization are torch's own, so a FusedAdam saves and loads as an Adam.
#pragma once

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace ipex::train {

class FusedSGD : public torch::optim::SGD {
  public:
    using torch::optim::SGD::SGD;
    at::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdagrad : public torch::optim::Adagrad {
  public:
    using torch::optim::Adagrad::Adagrad;
    at::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdam : public torch::optim::Adam {
  public:
    using torch::optim::Adam::Adam;
    at::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdamW : public torch::optim::AdamW {
  public:
    using torch::optim::AdamW::AdamW;
    at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace ipex::train
