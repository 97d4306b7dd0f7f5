// Process-local diagnostics for Python: the Runtime's snapshot as the dict debug_state()
// builds on (its teams too, and the recent-operations record of op_record.h), the running backend's description (shmem.backend_info()), the
// log level in force and the timeout. Includes pybind11 only, no torch. Not
// collective; the snapshot is taken without the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/log.h"
#include "bindings/torch/errors.h"
#include "bindings/torch/op_record.h"
#include "bindings/torch/registration.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {
namespace {

// `text` for Python: None when it is empty.
py::object TextOrNone(const std::string& text) {
  return text.empty() ? py::object(py::none()) : py::object(py::str(text));
}

void Allocations(const std::vector<AllocationRecord>& records, const void* heap_base,
                 py::list* out) {
  for (const AllocationRecord& record : records) {
    py::dict entry;
    entry["id"] = record.id;
    entry["base"] = reinterpret_cast<std::uintptr_t>(heap_base) + record.offset;
    entry["bytes"] = record.bytes;
    entry["alignment"] = record.alignment;
    out->append(entry);
  }
}

py::dict Snapshot() {
  Diagnostics d;
  {
    py::gil_scoped_release no_gil;
    d = Runtime::Process().Snapshot();
  }
  py::dict state;
  state["state"] = std::string(RuntimeStateName(d.state));
  state["lifecycle"] = d.lifecycle;
  state["root_rank"] = d.rank;
  state["root_size"] = d.size;
  state["global_ranks"] = d.global_ranks;
  state["device"] = d.device;
  state["backend"] = d.backend;
  py::dict config;
  config["heap_size"] = d.config.heap_bytes;
  config["timeout_sec"] = d.config.timeout_sec;
  config["log_level"] = static_cast<int>(d.config.log_level);
  config["backend"] = d.config.backend;
  config["wait"] = d.config.wait;
  config["quarantine_bytes"] = d.config.quarantine();
  config["max_teams"] = d.config.max_teams;
  config["max_pes"] = d.config.max_pes;
  state["config"] = config;
  state["heap_base"] = reinterpret_cast<std::uintptr_t>(d.heap_base);
  py::dict heap;
  heap["heap_size"] = d.heap.heap_bytes;
  heap["allocated"] = d.heap.allocated_bytes;
  heap["max_allocated"] = d.heap.max_allocated_bytes;
  heap["remaining"] = d.heap.remaining_bytes;
  heap["largest_free_block"] = d.heap.largest_free_block;
  heap["quarantined"] = d.heap.quarantined_bytes;
  heap["quarantined_blocks"] = d.heap.quarantined_blocks;
  state["heap"] = heap;
  py::list live, leaks, released;
  Allocations(d.live, d.heap_base, &live);
  std::vector<AllocationRecord> lost, given_up;
  for (const AllocationRecord& record : d.leaks) {
    (record.released ? given_up : lost).push_back(record);
  }
  Allocations(lost, d.heap_base, &leaks);
  Allocations(given_up, d.heap_base, &released);
  state["live_allocations"] = live;
  state["leaks"] = leaks;
  state["released"] = released;  // waiting for the agreed reclaim (Runtime::Release)
  state["latest_failure"] = TextOrNone(d.latest_failure.ok() ? "" : d.latest_failure.ToString());
  state["terminal_failure"] =
      TextOrNone(d.terminal_failure.ok() ? "" : d.terminal_failure.ToString());
  py::dict collectives;
  collectives["sequence"] = d.collective_sequence;
  collectives["in_flight"] = d.collectives_in_flight;
  collectives["stream"] = TextOrNone(d.collective_stream);
  state["collectives"] = collectives;
  py::list teams;  // the teams this PE is in, by slot (the world first)
  for (const Diagnostics::TeamRow& row : d.teams) {
    py::dict entry;
    entry["slot"] = row.info.slot;
    entry["pes"] = row.info.pes;
    entry["my_pe"] = row.info.my_pe;
    entry["predefined"] = row.info.predefined;
    entry["handles"] = row.info.handles;
    entry["sequence"] = row.info.sequence;
    entry["first_sequence"] = row.info.first_sequence;
    entry["in_flight"] = row.in_flight;
    entry["stream"] = TextOrNone(row.stream);
    teams.append(entry);
  }
  state["teams"] = teams;
  state["calls_in_flight"] = d.calls_in_flight;
  state["host_synchronizations"] = d.host_synchronizations;
  py::dict wait;
  wait["mode"] = d.wait.mode;
  const bool forever = d.wait.spin == std::chrono::nanoseconds::max();
  wait["spin_us"] = forever ? py::object(py::str("until the timeout"))
                            : py::object(py::float_(d.wait.spin.count() / 1000.0));
  wait["yield_us"] = d.wait.yield.count() / 1000.0;
  wait["sleeps"] = d.wait.sleeps;
  wait["pinned"] = d.wait.pinning;
  state["wait"] = wait;
  // Where every PE is and how this PE reaches it (docs/scale-out.md).
  py::list peers;
  for (std::size_t pe = 0; pe < d.peers.size(); ++pe) {
    py::dict entry;
    entry["pe"] = static_cast<int>(pe);
    entry["host"] = d.peers[pe].host;
    entry["transport"] = d.peers[pe].transport;
    entry["path"] = TextOrNone(d.peers[pe].path);
    peers.append(entry);
  }
  state["peers"] = peers;
  if (d.network.provider.empty()) {
    state["network"] = py::none();
  } else {
    py::dict network;
    network["provider"] = d.network.provider;
    network["version"] = d.network.version;
    network["endpoints"] = d.network.endpoints;
    py::dict counters;
    for (const auto& [name, value] : d.network.counters) counters[py::str(name)] = value;
    network["ops"] = counters;
    state["network"] = network;
  }
  const auto now = std::chrono::system_clock::now();
  py::list blocked;
  for (const BlockingOp& op : d.blocking) {
    py::dict entry;
    entry["operation"] = op.operation;
    entry["stream"] = op.stream;
    entry["since"] = std::chrono::duration<double>(op.since.time_since_epoch()).count();
    entry["waited_s"] = std::chrono::duration<double>(now - op.since).count();
    entry["waiting_for"] = op.waiting_for;
    blocked.append(entry);
  }
  state["blocked"] = blocked;
  py::list recent;
  for (const OpRecordEntry& entry : RecentOps()) {
    py::dict row;
    row["sequence"] = entry.sequence;
    row["op"] = std::string(entry.op);
    row["pe"] = entry.pe;
    row["path"] = entry.path == CallPath::kCustomOp ? "custom_op" : "function";
    recent.append(row);
  }
  state["recent_ops"] = recent;
  return state;
}

// The running backend's facts for shmem.backend_info() (runtime.h, BackendDescription). A
// question, not a failed call: outside a lifecycle it raises without noting a failure.
// `operation` names the Python call that asked (backend_info, my_pe, n_pes) in its error.
py::dict DescribeBackend(const std::string& operation) {
  BackendDescription d;
  Status status;
  {
    py::gil_scoped_release no_gil;
    status = Runtime::Process().DescribeBackend(operation, &d);
  }
  if (!status.ok()) ThrowUnnoted(status);
  py::dict out;
  out["name"] = d.name;
  out["own_core"] = d.own_core;
  out["host_addressable_heap"] = d.host_addressable_heap;
  out["granule_bytes"] = d.granule_bytes;
  out["timeout_s"] = static_cast<double>(d.timeout.count()) / 1000.0;
  return out;
}

}  // namespace

void RegisterDiagnostics(py::module_& m) {
  m.def("snapshot", &Snapshot, "Process-local diagnostics (not collective).");
  m.def("backend_description", &DescribeBackend, py::arg("operation") = "backend_info",
        "The running backend's description (not collective; INVALID_STATE naming `operation` "
        "when not ready).");
  m.def("log_level", [] { return static_cast<int>(log::Level()); },
        "The level currently in force (frozen from the config at init).");
  m.def("timeout_seconds", [] {
    return static_cast<double>(Runtime::Process().timeout().count()) / 1000.0;
  });
}

}  // namespace hyper_parallel::shmem::binding
