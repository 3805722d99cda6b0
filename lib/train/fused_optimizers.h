// The fused steps as libtorch optimizers: torch::optim::SGD, Adagrad, Adam and AdamW whose
// step() is one fused op per parameter (train_ops.h), and Lamb and Lars over the same options
// types (torch::optim has neither). Options, parameter groups, state and serialization are
// torch's own, so a FusedAdam saves and loads as an Adam.
//
// Split bf16 master weights: split_to_bf16() turns every fp32 parameter into its bf16 top (in
// place, with set_data: modules keep the same tensor) and keeps the int16 trail in the
// optimizer; each step then updates the fp32 master top + trail exactly as the fp32 step on the
// same (bf16) gradient would. trail(p) and master(p) read them; torch::save / torch::load of
// the optimizer carry the trails.
//
// Sparse gradients (an Embedding's sparse COO gradient, sparse dimension 1) go to the sparse
// steps in FusedSGD (momentum 0) and FusedAdagrad; weight decay with a sparse gradient is an
// error, as in torch.
#pragma once

#include <c10/core/TensorImpl.h>
#include <c10/util/Optional.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <unordered_map>

namespace ipex::train {

// The trails of an optimizer's split parameters (the class above it in each Fused optimizer).
template <typename Base>
class WithSplitMasters : public Base {
  public:
    using Base::Base;

    // Splits every fp32 parameter of every group (a parameter already split stays as it is).
    void split_to_bf16();
    // The trail of a split parameter; nullopt for an fp32 one.
    c10::optional<at::Tensor> trail(const at::Tensor &param) const;
    // The parameter's fp32 master weight: top + trail recombined, or the fp32 parameter itself.
    at::Tensor master(const at::Tensor &param) const;

    void save(torch::serialize::OutputArchive &archive) const override;
    void load(torch::serialize::InputArchive &archive) override;

  private:
    std::unordered_map<const c10::TensorImpl *, at::Tensor> trails_;
};

class FusedSGD : public WithSplitMasters<torch::optim::SGD> {
  public:
    using WithSplitMasters<torch::optim::SGD>::WithSplitMasters;
    at::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdagrad : public WithSplitMasters<torch::optim::Adagrad> {
  public:
    using WithSplitMasters<torch::optim::Adagrad>::WithSplitMasters;
    at::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdam : public WithSplitMasters<torch::optim::Adam> {
  public:
    using WithSplitMasters<torch::optim::Adam>::WithSplitMasters;
    at::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdamW : public WithSplitMasters<torch::optim::AdamW> {
  public:
    using WithSplitMasters<torch::optim::AdamW>::WithSplitMasters;
    at::Tensor step(LossClosure closure = nullptr) override;
};

// Lamb (ipex::lamb_step) with Adam's options and state: lr, betas, eps, weight_decay (amsgrad
// must stay false; the step raises otherwise).
class FusedLamb : public WithSplitMasters<torch::optim::Adam> {
  public:
    using WithSplitMasters<torch::optim::Adam>::WithSplitMasters;
    at::Tensor step(LossClosure closure = nullptr) override;
};

// Lars's coefficients beside SGD's options (IPEX's Lars: eeta 1e-3, epsilon 0).
struct LarsCoefficients {
    double eeta = 1e-3;
    double epsilon = 0;
};

// Lars (ipex::lars_step) with SGD's options and state: lr, momentum, weight_decay (dampening
// and nesterov must stay 0 / false; the step raises otherwise), and the coefficients for all
// groups.
class FusedLars : public WithSplitMasters<torch::optim::SGD> {
  public:
    FusedLars(std::vector<torch::optim::OptimizerParamGroup> groups, torch::optim::SGDOptions defaults,
              LarsCoefficients coefficients = {});
    FusedLars(std::vector<at::Tensor> params, torch::optim::SGDOptions defaults, LarsCoefficients coefficients = {});
    at::Tensor step(LossClosure closure = nullptr) override;
    const LarsCoefficients &coefficients() const { return coefficients_; }

  private:
    LarsCoefficients coefficients_;
};

}  // namespace ipex::train
