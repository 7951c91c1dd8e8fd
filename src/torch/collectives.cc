// CoilBackend's collectives: check the arguments here, on the caller's
// thread; make the coil call in the queued body, on the worker thread.
//
// Bodies capture tensors (cheap handles) and the comm by value. They stage
// non-contiguous tensors through contiguous copies (Staged) and copy results
// back. Reductions run on reducible() views (a complex tensor as its pairs
// of reals) and map dtype and op through reductionFor(); pure data
// movement uses movedElements(), which moves any dtype.
#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "coil_backend.h"
#include "coil_calls.h"
#include "cuda_op.h"
#include "sparse_allreduce.h"
#include "tensor_args.h"
#include "tensor_lists.h"
#include "torch_names.h"
#include "uneven_all_gather.h"
#include "uneven_reduce_scatter.h"

namespace coil_torch {
namespace {

// The only tensor of a one-tensor-per-process call.
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* opName) {
  TORCH_CHECK(tensors.size() == 1, "coil backend: ", opName,
              " takes one tensor per process, got ", tensors.size());
  checkDenseTensor(tensors[0], opName);
  return tensors[0];
}

// Elements in one dim-0 row (the unit of all-to-all split sizes).
int64_t rowNumel(const at::Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 1; d < t.dim(); ++d) n *= t.size(d);
  return n;
}

// Split sizes for all-to-all: the given ones, checked, or equal parts.
std::vector<int64_t> splitsFor(const std::vector<int64_t>& given, const at::Tensor& t, int size,
                               const char* what) {
  TORCH_CHECK(t.dim() >= 1, "coil backend: alltoall_base: the ", what,
              " tensor needs at least one dimension to split");
  if (given.empty()) {
    TORCH_CHECK(t.size(0) % size == 0, "coil backend: alltoall_base: the ", what,
                " tensor's first dimension (", t.size(0), ") does not split evenly over ", size,
                " ranks");
    return std::vector<int64_t>(size, t.size(0) / size);
  }
  TORCH_CHECK(given.size() == static_cast<size_t>(size), "coil backend: alltoall_base: ", what,
              " split sizes has ", given.size(), " entries, expected ", size);
  for (int64_t s : given)
    TORCH_CHECK(s >= 0, "coil backend: alltoall_base: negative ", what, " split size ", s);
  const int64_t total = std::accumulate(given.begin(), given.end(), int64_t{0});
  TORCH_CHECK(total == t.size(0), "coil backend: alltoall_base: ", what, " split sizes add up to ",
              total, ", but the first dimension is ", t.size(0));
  return given;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> CoilBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "coil backend: allreduce got no input tensors");
  if (tensors[0].defined() && tensors[0].is_sparse()) {
    std::vector<at::Tensor> entries = tensors;
    for (const at::Tensor& t : entries) {
      checkSparseAllReduce(t, opts.reduceOp);
      TORCH_CHECK(t.sizes() == entries[0].sizes() && t.scalar_type() == entries[0].scalar_type(),
                  "coil backend: allreduce: sparse tensors ", t.sizes(), " ",
                  dtypeName(t.scalar_type()), " and ", entries[0].sizes(), " ",
                  dtypeName(entries[0].scalar_type()), " in one list (they need one shape and dtype)");
    }
    CommRef c = commRef();
    return enqueue(c10d::OpType::ALLREDUCE, entries, [entries, size = size_, c]() mutable {
      if (entries.size() == 1) return sparseAllReduceSum(entries[0], size, c.get());
      at::Tensor sum = entries[0].clone();  // as gloo: the entries summed here first
      for (size_t i = 1; i < entries.size(); ++i) sum.add_(entries[i]);
      sparseAllReduceSum(sum, size, c.get());
      for (at::Tensor& t : entries) t.copy_(sum);
    });
  }
  checkLikeFirst(tensors, "allreduce", "input");
  const std::vector<at::Tensor> reals = reducible(tensors, opts.reduceOp, "allreduce");
  Reduction red = reductionFor(reals[0].scalar_type(), opts.reduceOp, "allreduce");
  CommRef c = commRef();
  if (tensors.size() > 1) {
    return enqueue(c10d::OpType::ALLREDUCE, tensors, [entries = reals, red, c]() mutable {
      ScopedReduceOp op(red, entries[0].scalar_type(), c.get());
      at::Tensor acc = combineEntries(entries, red.op);
      check(coilAllReduce(acc.data_ptr(), acc.data_ptr(), acc.numel(), red.type, op.get(), c.get(),
                          opStream()),
            "coilAllReduce");
      copyIntoEach(acc, entries);
    });
  }
  const at::Tensor& t = reals[0];
  return enqueue(c10d::OpType::ALLREDUCE, {tensors[0]}, [t, red, c] {
    Staged s(t);
    ScopedReduceOp op(red, t.scalar_type(), c.get());
    check(coilAllReduce(s.data(), s.data(), t.numel(), red.type, op.get(), c.get(), opStream()),
          "coilAllReduce");
    s.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> CoilBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "coil backend: allreduce_coalesced got no tensors");
  checkSameKind(tensors, tensors[0].scalar_type(), -1, "allreduce_coalesced", "tensors");
  std::vector<at::Tensor> reals = reducible(tensors, opts.reduceOp, "allreduce_coalesced");
  Reduction red = reductionFor(reals[0].scalar_type(), opts.reduceOp, "allreduce_coalesced");
  CommRef c = commRef();
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, tensors, [reals, red, c]() mutable {
    // One all-reduce over the tensors laid end to end.
    at::Tensor flat = flattenInto(reals);
    ScopedReduceOp op(red, flat.scalar_type(), c.get());
    check(coilAllReduce(flat.data_ptr(), flat.data_ptr(), flat.numel(), red.type, op.get(), c.get(),
                        opStream()),
          "coilAllReduce");
    unflattenFrom(flat, reals);
  });
}

c10::intrusive_ptr<c10d::Work> CoilBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  checkLikeFirst(tensors, "broadcast", "input");
  checkRank(opts.rootRank, size_, "broadcast", "root rank");
  TORCH_CHECK(opts.rootTensor >= 0 && opts.rootTensor < static_cast<int64_t>(tensors.size()),
              "coil backend: broadcast: rootTensor ", opts.rootTensor, " is out of range for ",
              tensors.size(), " tensor", tensors.size() == 1 ? "" : "s");
  const int root = static_cast<int>(opts.rootRank);
  const size_t rootTensor = static_cast<size_t>(opts.rootTensor);
  std::vector<at::Tensor> entries = tensors;
  CommRef c = commRef();
  return enqueue(c10d::OpType::BROADCAST, entries, [entries, root, rootTensor, c]() mutable {
    // Into entry rootTensor on every rank, then copied into the others.
    const at::Tensor& t = entries[rootTensor];
    Staged s(t);
    Elements e = movedElements(t.scalar_type(), t.numel());
    check(coilBroadcast(s.data(), s.data(), e.count, e.type, root, c.get(), opStream()), "coilBroadcast");
    s.writeBack();
    for (size_t i = 0; i < entries.size(); ++i)
      if (i != rootTensor) entries[i].copy_(t);
  });
}

c10::intrusive_ptr<c10d::Work> CoilBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  checkRank(opts.rootRank, size_, "reduce", "root rank");
  TORCH_CHECK(opts.rootTensor == 0, "coil backend: reduce: rootTensor must be 0");
  const at::Tensor r = reducible(t, opts.reduceOp, "reduce");
  Reduction red = reductionFor(r.scalar_type(), opts.reduceOp, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  CommRef c = commRef();
  return enqueue(c10d::OpType::REDUCE, {t}, [r, red, root, isRoot, c] {
    Staged s(r);
    ScopedReduceOp op(red, r.scalar_type(), c.get());
    check(coilReduce(s.data(), s.data(), r.numel(), red.type, op.get(), root, c.get(), opStream()),
          "coilReduce");
    if (isRoot) s.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> CoilBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& /*opts*/) {
  checkLikeFirst(inputs, "allgather", "input");
  const at::Tensor& in = inputs[0];
  // One output list per input, each with every rank's inputs (k per rank).
  const size_t perList = inputs.size() * static_cast<size_t>(size_);
  TORCH_CHECK(outputs.size() == inputs.size(), "coil backend: allgather needs one output list per "
              "input tensor (", inputs.size(), "), got ", outputs.size());
  if (inputs.size() == 1 && outputs[0].size() == perList &&
      std::any_of(outputs[0].begin(), outputs[0].end(),
                  [&](const at::Tensor& o) { return o.numel() != in.numel(); }))
    return allgatherUneven(outputs[0], in);
  std::vector<at::Tensor> outs;
  for (size_t j = 0; j < outputs.size(); ++j) {
    TORCH_CHECK(outputs[j].size() == perList, "coil backend: allgather: output list ", j, " has ",
                outputs[j].size(), " tensors, expected ", perList, " (",
                inputs.size() == 1 ? "one per rank" : "one per rank and input", ")");
    checkSameKind(outputs[j], in.scalar_type(), in.numel(), "allgather", "output");
    outs.insert(outs.end(), outputs[j].begin(), outputs[j].end());
  }
  std::vector<at::Tensor> ins = inputs;
  const int size = size_;
  CommRef c = commRef();
  return enqueue(c10d::OpType::ALLGATHER, outs, [ins, outs, perList, size, c]() mutable {
    at::Tensor mine = ins.size() == 1 ? ins[0].contiguous() : flattenInto(ins);
    at::Tensor flat = at::empty({size * mine.numel()}, mine.options());
    Elements e = movedElements(mine.scalar_type(), mine.numel());
    check(coilAllGather(mine.data_ptr(), flat.data_ptr(), e.count, e.type, c.get(), opStream()),
          "coilAllGather");
    for (size_t first = 0; first < outs.size(); first += perList) {
      std::vector<at::Tensor> list(outs.begin() + first, outs.begin() + first + perList);
      unflattenFrom(flat, list);
    }
  }, ins);
}

c10::intrusive_ptr<c10d::Work> CoilBackend::allgatherUneven(std::vector<at::Tensor>& outputs,
                                                             const at::Tensor& input) {
  // As ProcessGroupNCCL: output r takes rank r's input, whatever its size.
  checkSameKind(outputs, input.scalar_type(), -1, "allgather", "output");
  TORCH_CHECK(outputs[rank_].numel() == input.numel(), "coil backend: allgather: output[", rank_,
              "] has ", outputs[rank_].numel(), " elements, but this rank's input has ",
              input.numel(), " (outputs may differ in size, one per rank's input)");
  std::vector<at::Tensor> outs = outputs;
  const int rank = rank_;
  CommRef c = commRef();
  return enqueue(c10d::OpType::ALLGATHER, outs, [in = input, outs, rank, c]() mutable {
    allGatherUneven(in, outs, rank, c.get());
  }, {input});
}

c10::intrusive_ptr<c10d::Work> CoilBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputTensorLists, std::vector<at::Tensor>& inputTensors,
    const c10d::AllgatherOptions& /*opts*/) {
  TORCH_CHECK(!inputTensors.empty(), "coil backend: allgather_coalesced got no input tensors");
  TORCH_CHECK(outputTensorLists.size() == static_cast<size_t>(size_),
              "coil backend: allgather_coalesced needs one output list per rank (", size_,
              "), got ", outputTensorLists.size());
  for (const at::Tensor& t : inputTensors) checkDenseTensor(t, "allgather_coalesced");
  for (size_t r = 0; r < outputTensorLists.size(); ++r) {
    TORCH_CHECK(outputTensorLists[r].size() == inputTensors.size(),
                "coil backend: allgather_coalesced: output list ", r, " has ",
                outputTensorLists[r].size(), " tensors, expected one per input (",
                inputTensors.size(), ")");
    for (size_t i = 0; i < inputTensors.size(); ++i) {
      const at::Tensor& out = outputTensorLists[r][i];
      checkDenseTensor(out, "allgather_coalesced");
      TORCH_CHECK(out.scalar_type() == inputTensors[i].scalar_type() &&
                      out.numel() == inputTensors[i].numel(),
                  "coil backend: allgather_coalesced: output [", r, "][", i, "] (", out.numel(),
                  " x ", dtypeName(out.scalar_type()), ") does not match input ", i, " (",
                  inputTensors[i].numel(), " x ", dtypeName(inputTensors[i].scalar_type()), ")");
    }
  }
  std::vector<at::Tensor> flatOutputs;
  for (const auto& list : outputTensorLists)
    for (const at::Tensor& t : list) flatOutputs.push_back(t);
  std::vector<at::Tensor> inputs = inputTensors;
  const int size = size_;
  CommRef c = commRef();
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, flatOutputs,
                 [inputs, flatOutputs, size, c]() mutable {
    // One all-gather of the inputs' bytes laid end to end (the dtypes may
    // differ), then each rank's block is cut back into its tensors.
    std::vector<at::Tensor> bytes;
    for (const at::Tensor& t : inputs) bytes.push_back(t.contiguous().view({-1}).view(at::kByte));
    at::Tensor packed = flattenInto(bytes);
    const int64_t block = packed.numel();
    at::Tensor gathered = at::empty({size * block}, packed.options());
    if (block > 0)
      check(coilAllGather(packed.data_ptr(), gathered.data_ptr(), block, coilUint8, c.get(),
                          opStream()),
            "coilAllGather");
    for (int r = 0; r < size; ++r) {
      std::vector<at::Tensor> pieces;
      for (size_t i = 0; i < inputs.size(); ++i)
        pieces.push_back(at::empty({bytes[i].numel()}, packed.options()));
      unflattenFrom(gathered.narrow(0, r * block, block), pieces);
      for (size_t i = 0; i < inputs.size(); ++i) {
        at::Tensor& out = flatOutputs[r * inputs.size() + i];
        out.copy_(pieces[i].view(out.scalar_type()).view(out.sizes()));
      }
    }
  }, inputs);
}

c10::intrusive_ptr<c10d::Work> CoilBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions& /*opts*/) {
  checkDenseTensor(input, "all_gather_into_tensor");
  checkSameKind({output}, input.scalar_type(), size_ * input.numel(), "all_gather_into_tensor",
                "output");
  CommRef c = commRef();
  return enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, [output, input, c] {
    Staged in(input), out(output);
    Elements e = movedElements(input.scalar_type(), input.numel());
    check(coilAllGather(in.data(), out.data(), e.count, e.type, c.get(), opStream()), "coilAllGather");
    out.writeBack();
  }, {input});
}

c10::intrusive_ptr<c10d::Work> CoilBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  TORCH_CHECK(outputs.size() == inputs.size(), "coil backend: allgather_into_tensor_coalesced: ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkDenseTensor(inputs[i], "allgather_into_tensor_coalesced");
    checkSameKind({outputs[i]}, inputs[i].scalar_type(), size_ * inputs[i].numel(),
                  "allgather_into_tensor_coalesced", "output");
  }
  CommRef c = commRef();
  return enqueue(torch_names::kAllgatherIntoTensorCoalesced, outputs, [outputs, inputs, c] {
    for (size_t i = 0; i < inputs.size(); ++i) {
      Staged in(inputs[i]), out(outputs[i]);
      Elements e = movedElements(inputs[i].scalar_type(), inputs[i].numel());
      check(coilAllGather(in.data(), out.data(), e.count, e.type, c.get(), opStream()), "coilAllGather");
      out.writeBack();
    }
  }, inputs);
}

c10::intrusive_ptr<c10d::Work> CoilBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  checkRank(opts.rootRank, size_, "gather", "root rank");
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  std::vector<at::Tensor> outs;
  if (isRoot) {
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                "coil backend: gather needs one output list of ", size_, " tensors on the root");
    checkSameKind(outputs[0], in.scalar_type(), in.numel(), "gather", "output");
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "coil backend: gather: only the root rank passes output tensors");
  }
  const int size = size_;
  CommRef c = commRef();
  return enqueue(c10d::OpType::GATHER, outs, [in, outs, root, isRoot, size, c]() mutable {
    Staged s(in);
    at::Tensor flat = isRoot ? at::empty({size * in.numel()}, in.options()) : at::Tensor();
    Elements e = movedElements(in.scalar_type(), in.numel());
    check(coilGather(s.data(), isRoot ? flat.data_ptr() : nullptr, e.count, e.type, root, c.get(),
                     opStream()),
          "coilGather");
    if (isRoot) unflattenFrom(flat, outs);
  }, {in});
}

c10::intrusive_ptr<c10d::Work> CoilBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  checkRank(opts.rootRank, size_, "scatter", "root rank");
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  std::vector<at::Tensor> ins;
  if (isRoot) {
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                "coil backend: scatter needs one input list of ", size_, " tensors on the root");
    checkSameKind(inputs[0], out.scalar_type(), out.numel(), "scatter", "input");
    ins = inputs[0];
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "coil backend: scatter: only the root rank passes input tensors");
  }
  CommRef c = commRef();
  return enqueue(c10d::OpType::SCATTER, {out}, [out, ins, root, isRoot, c] {
    Staged s(out);
    at::Tensor flat = isRoot ? flattenInto(ins) : at::Tensor();
    Elements e = movedElements(out.scalar_type(), out.numel());
    check(coilScatter(isRoot ? flat.data_ptr() : nullptr, s.data(), e.count, e.type, root, c.get(),
                      opStream()),
          "coilScatter");
    s.writeBack();
  }, ins);
}

c10::intrusive_ptr<c10d::Work> CoilBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
              "coil backend: reduce_scatter needs one input list of ", size_, " tensors");
  // As gloo, the blocks may differ in size: block r is rank r's output, and
  // every rank passes the same sizes.
  checkSameKind(inputs[0], out.scalar_type(), -1, "reduce_scatter", "input");
  TORCH_CHECK(inputs[0][rank_].numel() == out.numel(), "coil backend: reduce_scatter: input[",
              rank_, "] has ", inputs[0][rank_].numel(), " elements, but this rank's output has ",
              out.numel());
  const at::Tensor realOut = reducible(out, opts.reduceOp, "reduce_scatter");
  Reduction red = reductionFor(realOut.scalar_type(), opts.reduceOp, "reduce_scatter");
  std::vector<at::Tensor> ins = reducible(inputs[0], opts.reduceOp, "reduce_scatter");
  const bool even = std::all_of(ins.begin(), ins.end(),
                                [&](const at::Tensor& t) { return t.numel() == realOut.numel(); });
  const int rank = rank_;
  CommRef c = commRef();
  return enqueue(c10d::OpType::REDUCE_SCATTER, {out}, [out = realOut, ins, red, even, rank, c] {
    ScopedReduceOp op(red, out.scalar_type(), c.get());
    if (!even) return reduceScatterUneven(out, ins, rank, red.type, op.get(), c.get());
    at::Tensor flat = flattenInto(ins);
    Staged s(out);
    check(coilReduceScatter(flat.data_ptr(), s.data(), out.numel(), red.type, op.get(), c.get(),
                            opStream()),
          "coilReduceScatter");
    s.writeBack();
  }, ins);
}

c10::intrusive_ptr<c10d::Work> CoilBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  checkDenseTensor(output, "reduce_scatter_tensor");
  checkSameKind({input}, output.scalar_type(), size_ * output.numel(), "reduce_scatter_tensor",
                "input");
  const at::Tensor realOut = reducible(output, opts.reduceOp, "reduce_scatter_tensor");
  const at::Tensor realIn = reducible(input, opts.reduceOp, "reduce_scatter_tensor");
  Reduction red = reductionFor(realOut.scalar_type(), opts.reduceOp, "reduce_scatter_tensor");
  CommRef c = commRef();
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output},
                 [output = realOut, input = realIn, red, c] {
    Staged in(input), out(output);
    ScopedReduceOp op(red, output.scalar_type(), c.get());
    check(coilReduceScatter(in.data(), out.data(), output.numel(), red.type, op.get(), c.get(), opStream()),
          "coilReduceScatter");
    out.writeBack();
  }, {input});
}

c10::intrusive_ptr<c10d::Work> CoilBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "coil backend: reduce_scatter_tensor_coalesced: ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  std::vector<Reduction> reds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    checkDenseTensor(outputs[i], "reduce_scatter_tensor_coalesced");
    checkSameKind({inputs[i]}, outputs[i].scalar_type(), size_ * outputs[i].numel(),
                  "reduce_scatter_tensor_coalesced", "input");
  }
  const std::vector<at::Tensor> realOuts =
      reducible(outputs, opts.reduceOp, "reduce_scatter_tensor_coalesced");
  const std::vector<at::Tensor> realIns =
      reducible(inputs, opts.reduceOp, "reduce_scatter_tensor_coalesced");
  for (const at::Tensor& out : realOuts)
    reds.push_back(
        reductionFor(out.scalar_type(), opts.reduceOp, "reduce_scatter_tensor_coalesced"));
  CommRef c = commRef();
  return enqueue(torch_names::kReduceScatterTensorCoalesced, outputs,
                 [outputs = realOuts, inputs = realIns, reds, c] {
                   for (size_t i = 0; i < outputs.size(); ++i) {
                     Staged in(inputs[i]), out(outputs[i]);
                     ScopedReduceOp op(reds[i], outputs[i].scalar_type(), c.get());
                     check(coilReduceScatter(in.data(), out.data(), outputs[i].numel(),
                                             reds[i].type, op.get(), c.get(), opStream()),
                           "coilReduceScatter");
                     out.writeBack();
                   }
                 }, inputs);
}

c10::intrusive_ptr<c10d::Work> CoilBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& outputSplits,
                                                          std::vector<int64_t>& inputSplits,
                                                          const c10d::AllToAllOptions& /*opts*/) {
  checkDenseTensor(input, "alltoall_base");
  checkSameKind({output}, input.scalar_type(), -1, "alltoall_base", "output");
  CommRef c = commRef();
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK(input.numel() == output.numel() && input.numel() % size_ == 0,
                "coil backend: alltoall_base: input and output need the same number of "
                "elements, divisible by ",
                size_, " (got ", input.numel(), " and ", output.numel(), ")");
    const int size = size_;
    return enqueue(c10d::OpType::ALLTOALL_BASE, {output}, [output, input, size, c] {
      Staged in(input), out(output);
      Elements e = movedElements(input.scalar_type(), input.numel() / size);
      check(coilAlltoAll(in.data(), out.data(), e.count, e.type, c.get(), opStream()), "coilAlltoAll");
      out.writeBack();
    }, {input});
  }
  // Uneven splits: one send and one receive per peer, as a coil group.
  std::vector<int64_t> sendRows = splitsFor(inputSplits, input, size_, "input");
  std::vector<int64_t> recvRows = splitsFor(outputSplits, output, size_, "output");
  TORCH_CHECK(rowNumel(input) == rowNumel(output),
              "coil backend: alltoall_base: input and output rows differ in size (",
              rowNumel(input), " and ", rowNumel(output), " elements)");
  return enqueue(c10d::OpType::ALLTOALL_BASE, {output}, [output, input, sendRows, recvRows, c] {
    Staged in(input), out(output);
    const int64_t row = rowNumel(input);
    const size_t elemBytes = input.element_size();
    std::vector<Transfer> transfers;
    int64_t sendOffset = 0, recvOffset = 0;
    for (size_t peer = 0; peer < sendRows.size(); ++peer) {
      auto* sendData = static_cast<char*>(in.data()) + sendOffset * row * elemBytes;
      auto* recvData = static_cast<char*>(out.data()) + recvOffset * row * elemBytes;
      transfers.push_back(Transfer{true, sendData,
                                   movedElements(input.scalar_type(), sendRows[peer] * row),
                                   static_cast<int>(peer)});
      transfers.push_back(Transfer{false, recvData,
                                   movedElements(input.scalar_type(), recvRows[peer] * row),
                                   static_cast<int>(peer)});
      sendOffset += sendRows[peer];
      recvOffset += recvRows[peer];
    }
    runTransferGroup(transfers, c.get());
    out.writeBack();
  }, {input});
}

c10::intrusive_ptr<c10d::Work> CoilBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& /*opts*/) {
  TORCH_CHECK(inputs.size() == static_cast<size_t>(size_) && outputs.size() == inputs.size(),
              "coil backend: alltoall needs ", size_, " input and ", size_,
              " output tensors, got ", inputs.size(), " and ", outputs.size());
  checkSameKind(inputs, inputs[0].scalar_type(), -1, "alltoall", "input");
  checkSameKind(outputs, inputs[0].scalar_type(), -1, "alltoall", "output");
  CommRef c = commRef();
  return enqueue(c10d::OpType::ALLTOALL, outputs, [outputs, inputs, c] {
    std::vector<Staged> ins, outs;
    std::vector<Transfer> transfers;
    ins.reserve(inputs.size());
    outs.reserve(outputs.size());
    for (size_t peer = 0; peer < inputs.size(); ++peer) {
      ins.emplace_back(inputs[peer]);
      outs.emplace_back(outputs[peer]);
      transfers.push_back(Transfer{true, ins.back().data(),
                                   movedElements(inputs[peer].scalar_type(), inputs[peer].numel()),
                                   static_cast<int>(peer)});
      transfers.push_back(
          Transfer{false, outs.back().data(),
                   movedElements(outputs[peer].scalar_type(), outputs[peer].numel()),
                   static_cast<int>(peer)});
    }
    runTransferGroup(transfers, c.get());
    for (Staged& s : outs) s.writeBack();
  }, inputs);
}

}  // namespace coil_torch
