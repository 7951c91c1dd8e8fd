// Members that only some torch 2.x releases have, reached through
// requires-expressions so that one source builds against all of them
// (torch_names.h holds the *names* that differ, which Meson finds).
//
//   since torch (PyPI wheels' headers)  what the adapter does without it
//   2.8  Store::clone()                  a TCPStore is reconnected by hand
//   2.9  Backend::Options::group_name    the group's name is the adapter's own
//   2.11 c10::Stream::native_handle()    CUDA tensors are refused, naming torch
//                                        (checkDenseTensor)
//
// The virtual functions newer torch added to c10d::Backend (shutdown, abort
// and supportsCoalescing in 2.7; split and getBackendOptions in 2.9) are
// declared in coil_backend.h without `override`, and coil_backend.cc checks
// that where the base has them, their signatures are ours.
#pragma once

#include <c10/core/Stream.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>

#include <string>
#include <vector>

namespace coil_torch::torch_compat {

/// Options::group_name, or "" on a torch without it.
template <class Options>
std::string groupName(const Options& options) {
  if constexpr (requires { options.group_name; })
    return options.group_name;
  else
    return {};
}

/// Sets Options::group_name where torch has it.
template <class Options>
void setGroupName(Options& options, const std::string& name) {
  if constexpr (requires { options.group_name; }) options.group_name = name;
}

/// True when this torch's c10::Stream gives its native handle (the
/// cudaStream_t of a CUDA stream), which CUDA tensors need.
template <class Stream = c10::Stream>
inline constexpr bool kStreamsHaveNativeHandles = requires(const Stream& s) { s.native_handle(); };

template <class Stream>
void* nativeHandle(const Stream& stream) {
  if constexpr (kStreamsHaveNativeHandles<Stream>) {
    return stream.native_handle();
  } else {
    TORCH_CHECK(false, "coil backend: CUDA tensors need torch 2.11 or later (its "
                       "c10::Stream::native_handle); this is torch ", TORCH_VERSION);
    return nullptr;
  }
}

namespace detail {
// PrefixStore keeps its prefix protected; a pointer to the member, named
// through a class derived from it, reads it without a copy of torch's class.
struct PrefixOf : c10d::PrefixStore {
  static const std::string& of(const c10d::PrefixStore& store) {
    return store.*(&PrefixOf::prefix_);
  }
};
}  // namespace detail

/// A second connection to the same store, for a thread that blocks in
/// wait(): torch's TCPStore serialises its operations on one lock, which a
/// wait holds until it returns, so a waiting thread sharing the caller's
/// connection would stall every other store operation of the process.
/// Store::clone() where torch has it; before that, the PrefixStores over
/// a TCPStore are rebuilt over a new client of its host and port. nullptr
/// when the store cannot be cloned (a FileStore or HashStore: they hold no
/// lock across waits, so sharing them is safe).
template <class Store>
c10::intrusive_ptr<c10d::Store> cloneStore(const c10::intrusive_ptr<Store>& store) {
  if constexpr (requires { store->clone(); }) {
    try {
      return store->clone();
    } catch (const c10::Error&) {
      return {};
    }
  } else {
    std::vector<std::string> prefixes;  // outermost first
    c10::intrusive_ptr<c10d::Store> inner = store;
    while (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(inner.get())) {
      prefixes.push_back(detail::PrefixOf::of(*prefixed));
      inner = prefixed->getUnderlyingStore();
    }
    auto* tcp = dynamic_cast<c10d::TCPStore*>(inner.get());
    if (tcp == nullptr) return {};
    c10d::TCPStoreOptions options;
    options.port = tcp->getPort();
    options.isServer = false;
    options.waitWorkers = false;
    options.timeout = tcp->getTimeout();
    c10::intrusive_ptr<c10d::Store> rebuilt =
        c10::make_intrusive<c10d::TCPStore>(tcp->getHost(), options);
    for (auto p = prefixes.rbegin(); p != prefixes.rend(); ++p)
      rebuilt = c10::make_intrusive<c10d::PrefixStore>(*p, rebuilt);
    return rebuilt;
  }
}

}  // namespace coil_torch::torch_compat
