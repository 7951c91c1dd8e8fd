#include "tensor_args.h"

#include <ATen/ops/cat.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "torch_compat.h"
#include "torch_names.h"

namespace coil_torch {
namespace {

struct TypePair {
  at::ScalarType torchType;
  coilDataType_t coilType;
};

// One row per torch dtype coil can hold. Bool rides on uint8 (0 or 1).
constexpr std::array<TypePair, 11> kTypes{{
    {at::ScalarType::Byte, coilUint8},
    {at::ScalarType::Char, coilInt8},
    {at::ScalarType::Int, coilInt32},
    {at::ScalarType::Long, coilInt64},
    {at::ScalarType::UInt32, coilUint32},
    {at::ScalarType::UInt64, coilUint64},
    {at::ScalarType::Half, coilFloat16},
    {at::ScalarType::Float, coilFloat32},
    {at::ScalarType::Double, coilFloat64},
    {at::ScalarType::BFloat16, coilBfloat16},
    {at::ScalarType::Bool, coilUint8},
}};

const char* reduceOpName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

[[noreturn]] void unsupportedOp(c10d::ReduceOp::RedOpType op, at::ScalarType type,
                                const char* opName) {
  TORCH_CHECK(false, "coil backend: ", opName, ": ReduceOp.", reduceOpName(op),
              " is not supported for ", dtypeName(type),
              " (coil reduces with SUM, PRODUCT, MIN, MAX, AVG and PREMUL_SUM; integers also "
              "with BAND, BOR and BXOR; booleans with SUM/BOR/MAX as OR, PRODUCT/BAND/MIN as "
              "AND and BXOR)");
}

}  // namespace

std::string dtypeName(at::ScalarType type) {
  std::ostringstream os;
  os << "torch." << c10::toString(type);
  std::string s = os.str();
  // c10 spells them "Float", "BFloat16"; torch's Python names are lower case.
  static const std::pair<const char*, const char*> kPython[] = {
      {"torch.Byte", "torch.uint8"},     {"torch.Char", "torch.int8"},
      {"torch.Short", "torch.int16"},    {"torch.Int", "torch.int32"},
      {"torch.Long", "torch.int64"},     {"torch.Half", "torch.float16"},
      {"torch.Float", "torch.float32"},  {"torch.Double", "torch.float64"},
      {"torch.BFloat16", "torch.bfloat16"}, {"torch.Bool", "torch.bool"},
      {"torch.UInt16", "torch.uint16"},  {"torch.UInt32", "torch.uint32"},
      {"torch.UInt64", "torch.uint64"},  {"torch.ComplexFloat", "torch.complex64"},
      {"torch.ComplexDouble", "torch.complex128"}, {"torch.ComplexHalf", "torch.complex32"},
  };
  for (const auto& [c10Name, pyName] : kPython)
    if (s == c10Name) return pyName;
  return s;
}

bool coilTypeOf(at::ScalarType type, coilDataType_t* out) {
  for (const TypePair& p : kTypes) {
    if (p.torchType == type) {
      *out = p.coilType;
      return true;
    }
  }
  return false;
}

Elements movedElements(at::ScalarType type, size_t numel) {
  coilDataType_t t;
  if (coilTypeOf(type, &t)) return {t, numel};
  return {coilUint8, numel * c10::elementSize(type)};
}

Reduction reductionFor(at::ScalarType type, const c10d::ReduceOp& op, const char* opName) {
  Reduction r{};
  TORCH_CHECK(coilTypeOf(type, &r.type), "coil backend: ", opName, ": dtype ", dtypeName(type),
              " is not supported for reductions (supported: uint8, int8, int32, int64, uint32, "
              "uint64, float16, bfloat16, float32, float64, bool)");
  const auto kind = op.op_;
  if (type == at::ScalarType::Bool) {
    switch (kind) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::BOR:
      case c10d::ReduceOp::MAX: r.op = coilMax; return r;
      case c10d::ReduceOp::PRODUCT:
      case c10d::ReduceOp::BAND:
      case c10d::ReduceOp::MIN: r.op = coilMin; return r;
      case c10d::ReduceOp::BXOR: r.op = coilBxor; return r;  // of bytes that are 0 or 1
      default: unsupportedOp(kind, type, opName);
    }
  }
  switch (kind) {
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      // Integers only, as gloo: coil refuses a float type too, less clearly.
      if (!at::isIntegralType(type, /*includeBool=*/false)) unsupportedOp(kind, type, opName);
      r.op = kind == c10d::ReduceOp::BAND ? coilBand
             : kind == c10d::ReduceOp::BOR ? coilBor : coilBxor;
      return r;
    case c10d::ReduceOp::SUM: r.op = coilSum; return r;
    case c10d::ReduceOp::PRODUCT: r.op = coilProd; return r;
    case c10d::ReduceOp::MIN: r.op = coilMin; return r;
    case c10d::ReduceOp::MAX: r.op = coilMax; return r;
    case c10d::ReduceOp::AVG: r.op = coilAvg; return r;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(op.supplement_, "coil backend: ", opName,
                  ": PREMUL_SUM without a factor (make it with "
                  "torch.distributed._make_nccl_premul_sum)");
      // The only supplement c10d attaches to PREMUL_SUM is this one.
      const auto* sup = static_cast<const torch_names::PreMulSumSupplement*>(op.supplement_.get());
      r.op = coilSum;  // replaced by the comm's pre-multiply op when the call runs
      r.preMulSum = true;
      if (sup->tensor_factor.defined()) {
        TORCH_CHECK(sup->tensor_factor.device().is_cpu(), "coil backend: ", opName,
                    ": the PREMUL_SUM factor must be a CPU tensor (CUDA tensors are not "
                    "supported yet)");
        r.factorTensor = sup->tensor_factor;
      } else {
        r.factor = sup->double_factor;
      }
      return r;
    }
    default: unsupportedOp(kind, type, opName);
  }
}

at::Tensor reducible(const at::Tensor& t, const c10d::ReduceOp& op, const char* opName) {
  if (!t.defined() || !t.is_complex()) return t;
  const auto kind = op.op_;
  bool realFactor = true;
  if (kind == c10d::ReduceOp::PREMUL_SUM && op.supplement_) {
    const auto* sup = static_cast<const torch_names::PreMulSumSupplement*>(op.supplement_.get());
    realFactor = !sup->tensor_factor.defined() || !sup->tensor_factor.is_complex();
  }
  TORCH_CHECK((kind == c10d::ReduceOp::SUM || kind == c10d::ReduceOp::AVG ||
               kind == c10d::ReduceOp::PREMUL_SUM) && realFactor,
              "coil backend: ", opName, ": ReduceOp.", reduceOpName(kind), " is not supported for ",
              dtypeName(t.scalar_type()),
              " (complex tensors reduce with SUM, AVG and PREMUL_SUM by a real factor, as gloo)");
  return at::view_as_real(t);
}

std::vector<at::Tensor> reducible(const std::vector<at::Tensor>& ts, const c10d::ReduceOp& op,
                                  const char* opName) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const at::Tensor& t : ts) out.push_back(reducible(t, op, opName));
  return out;
}

bool cudaTensorsEnabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("COIL_TORCH_CUDA");
    return v == nullptr || std::string(v) != "0";
  }();
  return enabled;
}

void checkDenseTensor(const at::Tensor& t, const char* opName) {
  TORCH_CHECK(t.defined(), "coil backend: ", opName, ": undefined tensor");
  TORCH_CHECK(!t.is_cuda() || cudaTensorsEnabled(), "coil backend: ", opName,
              ": CUDA tensors are refused here (COIL_TORCH_CUDA=0; got a tensor on ",
              t.device().str(), "); unset it, or move the tensor to the CPU");
  TORCH_CHECK(t.device().is_cpu() || t.is_cuda(), "coil backend: ", opName, ": tensors on ",
              t.device().str(), " are not supported; use CPU or CUDA tensors");
  TORCH_CHECK(!t.is_cuda() || torch_compat::kStreamsHaveNativeHandles<>, "coil backend: ", opName,
              ": CUDA tensors need torch 2.11 or later (its c10::Stream::native_handle gives coil "
              "the stream); this is torch ", TORCH_VERSION, ": move the tensor to the CPU");
  TORCH_CHECK(t.layout() == c10::kStrided, "coil backend: ", opName,
              ": only dense (strided) tensors are supported, got layout ", t.layout());
}

void checkSameKind(const std::vector<at::Tensor>& ts, at::ScalarType type, int64_t numel,
                   const char* opName, const char* what) {
  for (size_t i = 0; i < ts.size(); ++i) {
    checkDenseTensor(ts[i], opName);
    TORCH_CHECK(ts[i].scalar_type() == type, "coil backend: ", opName, ": ", what, "[", i,
                "] has dtype ", dtypeName(ts[i].scalar_type()), ", expected ", dtypeName(type));
    TORCH_CHECK(numel < 0 || ts[i].numel() == numel, "coil backend: ", opName, ": ", what, "[", i,
                "] has ", ts[i].numel(), " elements, expected ", numel);
  }
}

void checkLikeFirst(const std::vector<at::Tensor>& ts, const char* opName, const char* what) {
  TORCH_CHECK(!ts.empty(), "coil backend: ", opName, " got no ", what, " tensors");
  checkDenseTensor(ts[0], opName);
  checkSameKind(ts, ts[0].scalar_type(), ts[0].numel(), opName, what);
}

void checkRank(int64_t rank, int size, const char* opName, const char* what) {
  TORCH_CHECK(rank >= 0 && rank < size, "coil backend: ", opName, ": ", what, " ", rank,
              " is out of range for a group of ", size, " ranks");
}

Staged::Staged(const at::Tensor& user)
    : user_(user), buffer_(user.is_contiguous() ? user : user.contiguous()) {}

void Staged::writeBack() {
  if (!buffer_.is_same(user_)) user_.copy_(buffer_);
}

std::optional<int64_t> paddedBlockSize(const std::vector<at::Tensor>& ts) {
  int64_t largest = 0, total = 0;
  for (const at::Tensor& t : ts) {
    largest = std::max(largest, t.numel());
    total += t.numel();
  }
  if (static_cast<int64_t>(ts.size()) * largest <= 2 * total) return largest;
  return std::nullopt;
}

at::Tensor flattenInto(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const at::Tensor& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void unflattenFrom(const at::Tensor& flat, std::vector<at::Tensor>& ts) {
  int64_t offset = 0;
  for (at::Tensor& t : ts) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace coil_torch
