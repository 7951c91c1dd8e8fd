// The Python extension module `_coil_torch_ext`: binds CoilBackend as a
// subclass of torch's c10d Backend, so the object python/coil_torch's
// creator returns can be registered with a ProcessGroup.
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <string>

#include "coil.h"
#include "coil_backend.h"

namespace py = pybind11;

PYBIND11_MODULE(_coil_torch_ext, m) {
  m.doc() = "coil collectives as a torch.distributed (c10d) backend; use the coil_torch package";
  // CoilBackend's base must be known to pybind11 before it is bound.
  py::module_::import("torch.distributed");

  py::class_<coil_torch::CoilBackend, c10d::Backend, c10::intrusive_ptr<coil_torch::CoilBackend>>(
      m, "CoilBackend")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       int64_t timeoutMs, const std::string& key, const std::string& groupName,
                       bool defaultGroup) {
             return c10::make_intrusive<coil_torch::CoilBackend>(
                 store, rank, size, std::chrono::milliseconds(timeoutMs), key, groupName,
                 defaultGroup);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"),
           py::arg("key"), py::arg("group_name"), py::arg("default_group") = false,
           // Joining waits on the store and on every rank: let other Python
           // threads run meanwhile.
           py::call_guard<py::gil_scoped_release>(),
           "Joins a coil communicator of `size` ranks through `store` (rank 0 puts the unique "
           "id under `key`); every coil wait times out after `timeout_ms`. `default_group`: "
           "the job's default group, whose rank 0 waits at shutdown for the job's p2p "
           "connectors.")
      // torch's new_group, when the default group has a device_id and its
      // backend splits, calls this on the ranks left out of the new group
      // (NCCL's members split the parent). coil's members join through the
      // store instead, which also works when only they call new_group
      // (use_local_synchronization), so the others have nothing to do.
      .def("perform_nocolor_split", [](coil_torch::CoilBackend&, const c10::Device&) {},
           py::arg("device"),
           "Nothing: a coil new_group joins its members through the store, without the "
           "others (split_group is what splits).");

  m.def("coil_version", [] {
    int v = 0;
    coilGetVersion(&v);
    return v;
  }, "coil's version code: major*10000 + minor*100 + patch.");
}
