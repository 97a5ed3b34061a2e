// atto/nn/module.h: the base of every layer and model.
//
//   struct Mlp : nn::Module {
//     nn::Linear fc, proj;
//     Mlp(int64_t C, Rng& rng) : fc(C, 4 * C, true, rng), proj(4 * C, C, true, rng) {
//       register_module("c_fc", fc);
//       register_module("c_proj", proj);
//     }
//   };
//   for (auto& p : mlp.named_parameters()) ...   // "c_fc.weight", "c_fc.bias", ...
//
// A module owns Tensor members and registers them under their state_dict names; submodules are
// members registered by reference, so a module is neither copyable nor movable. Names join
// with '.', as in PyTorch. Parameters are created with requires_grad = true.
//
// Dropout needs random numbers: the owner of a model passes its Rng explicitly with
// set_rng(&rng), which reaches every submodule. train(false) turns dropout off.
//
// Data parallelism (train/data_parallel.h): a replica built like a model and given
// alias_parameters(model) computes with the model's parameter values and gradients of its own;
// set_rng(&rng, first_row) makes its dropout masks rows first_row.. of the masks the whole
// batch would get from the same Rng state.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "autograd/parameter.h"
#include "base/error.h"

namespace atto::nn {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter under its full name, each tensor once (a tied weight keeps its first name).
  NamedParameters named_parameters() const;
  // Those that train: requires_grad (a frozen one, as under LoRA, does not). What the optimizer
  // steps and the gradient exchange sums.
  NamedParameters trainable_parameters() const;
  // Which parameters a state dict holds: all, those that train, or the frozen ones.
  enum class Which { All, Trainable, Frozen };
  // Every (name, tensor) pair, tied tensors under each of their names: what a checkpoint holds.
  std::vector<std::pair<std::string, Tensor>> state_dict(Which which = Which::All) const;
  // Copies values into the parameters by name; every parameter of `which` must be present with
  // its shape, and no other.
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& source,
                       Which which = Which::All);
  int64_t num_parameters() const;
  int64_t num_trainable_parameters() const;

  // Makes every parameter of this module a view of the same-named parameter of `src` (a
  // module of the same structure): the same values, no copy, and a gradient of its own.
  // Parameters tied in src stay tied here. src's optimizer steps reach this module too.
  void alias_parameters(const Module& src);

  void train(bool on = true);
  bool training() const { return training_; }
  void eval() { train(false); }
  // first_row: the batch this module sees is rows first_row.. of a larger one (a shard).
  void set_rng(Rng* rng, int64_t first_row = 0);
  Rng* rng() const { return rng_; }
  int64_t first_row() const { return first_row_; }
  void zero_grad();

 protected:
  // Registers a parameter member (the module keeps the Tensor; we keep its address).
  void register_parameter(const std::string& name, Tensor& t, ParamKind kind);
  void register_module(const std::string& name, Module& m);

 private:
  void collect(const std::string& prefix, std::vector<std::tuple<std::string, Tensor*, ParamKind>>& out) const;

  struct Param {
    std::string name;
    Tensor* tensor;
    ParamKind kind;
  };
  std::vector<Param> params_;
  std::vector<std::pair<std::string, Module*>> children_;
  bool training_ = true;
  Rng* rng_ = nullptr;
  int64_t first_row_ = 0;
};

}  // namespace atto::nn
