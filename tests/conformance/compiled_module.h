// A node test's model compiled by the tcc binary (`tcc compile`, one cubin
// architecture and host kernels) and its module run on the host or the GPU.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/ir/tensor.h"
#include "src/module/manifest_records.h"
#include "tcc_runtime.h"

namespace tcc::conformance {

// A module `tcc compile` wrote, loaded for host or GPU runs, and its folder,
// both gone with it.
class CompiledModule {
 public:
  // Compiles `model` with `tcc` into a fresh folder under the system's temp
  // folder: for the host (and sm_90, so that NVRTC takes every kernel), or
  // for this GPU alone (`on_gpu`), with `hints` as --shape-hint when not
  // empty and each of `specialize` as a --specialize. On failure `refused`
  // (exit 2: the model is outside what the compiler takes) or `failed` holds
  // tcc's first error line.
  CompiledModule(const std::string& tcc, const std::filesystem::path& model, const std::string& hints,
                 const std::vector<std::string>& specialize, bool on_gpu);
  ~CompiledModule();
  CompiledModule(const CompiledModule&) = delete;
  CompiledModule& operator=(const CompiledModule&) = delete;

  const std::string& refused() const { return refused_; }
  const std::string& failed() const { return failed_; }
  // The ops of the module's host steps, and of those the ones `tcc ops` gives
  // a GPU path that ran on the host for want of a kernel.
  const std::set<std::string>& host_ops() const { return host_ops_; }
  const std::set<std::string>& missed_gpu_paths() const { return missed_gpu_paths_; }

  // The module's host run (or GPU run) on `feeds`, the model's inputs by
  // name: a sequence or optional is fed as the tensors the manifest's
  // structured_inputs flatten it into. Returns the model's `outputs`, those
  // of structured_outputs assembled from their tensors. An output whose size
  // the data decides is allocated as the run asks.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& feeds, const std::vector<std::string>& outputs,
                          bool on_gpu);

 private:
  void read_host_steps();
  void read_structure();
  // The module's own run on its flattened inputs; its outputs in its order.
  std::vector<Tensor> run_flat(std::map<std::string, Tensor>& feeds, bool on_gpu);

  std::filesystem::path dir_;
  tcc_module* module_ = nullptr;
  std::string refused_, failed_;
  std::set<std::string> host_ops_, missed_gpu_paths_;
  std::vector<StructuredValue> structured_inputs_, structured_outputs_;
};

}  // namespace tcc::conformance
