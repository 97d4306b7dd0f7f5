// Teams from Python (teams.h): the native handle object a shmem.Team holds (TeamHandle, made
// only here), the team entries (split_strided, split_2d, create, destroy, describe, the PE
// translation) and the conversion of a `team=` argument. Includes pybind11 only, no torch.
// The collective entries release the GIL; describe and the translation are process-local.
#include "bindings/torch/teams.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings/torch/errors.h"
#include "bindings/torch/registration.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {
namespace {

// What a shmem.Team's `_native` holds: a handle the Runtime made, or a marker of a predefined
// team, which stands for the current lifecycle's (resolved at each use).
struct TeamObject {
  enum class Kind : std::uint8_t { kCreated, kWorld, kNode };
  Kind kind = Kind::kCreated;
  TeamHandle handle;  // kCreated only
};

std::string_view KindName(TeamObject::Kind kind) {
  switch (kind) {
    case TeamObject::Kind::kWorld:
      return "world";
    case TeamObject::Kind::kNode:
      return "node";
    case TeamObject::Kind::kCreated:
      break;
  }
  return "created";
}

// The package's Team class (set_team_class, at import); never destroyed.
py::object& TeamClass() {
  static py::object* cls = new py::object();
  return *cls;
}

std::string TypeName(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

// An int (not a bool) that fits an int, else ShmemTypeError / ShmemValueError naming `name`,
// at `operation`.
int IntArgument(std::string_view operation, std::string_view name, py::handle value) {
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr())) {
    ThrowTypeError(operation, name, "an int",
                   TypeName(value) + " " + std::string(py::repr(value)));
  }
  int overflow = 0;
  const long long result = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0 || result < std::numeric_limits<int>::min() ||
      result > std::numeric_limits<int>::max()) {
    ThrowValueError(operation, name, "representable as int32", std::string(py::str(value)));
  }
  return static_cast<int>(result);
}

// The native handle object `value` is, or null: one type check (the caster's).
const TeamObject* AsTeamObject(py::handle value) {
  py::detail::make_caster<TeamObject> caster;
  if (!caster.load(value, /*convert=*/false)) return nullptr;
  return &py::detail::cast_op<const TeamObject&>(caster);  // the instance's own value
}

TeamHandle Resolve(const TeamObject& object) {
  switch (object.kind) {
    case TeamObject::Kind::kWorld:
      return kWorldTeam;
    case TeamObject::Kind::kNode: {
      TeamHandle node;
      Check(Runtime::Process().NodeTeam(&node));
      return node;
    }
    case TeamObject::Kind::kCreated:
      break;
  }
  return object.handle;
}

// A new team as Python sees it: None on a PE outside it.
py::object Wrap(const TeamHandle& handle) {
  if (!handle.valid()) return py::none();
  return py::cast(TeamObject{TeamObject::Kind::kCreated, handle});
}

py::object SplitStrided(py::handle parent, py::handle start_arg, py::handle stride_arg,
                        py::handle size_arg) {
  constexpr std::string_view kOp = "team_split_strided";
  const TeamHandle team = TeamArgument(kOp, parent);
  const int start = IntArgument(kOp, "start", start_arg);
  const int stride = IntArgument(kOp, "stride", stride_arg);
  const int size = IntArgument(kOp, "size", size_arg);
  TeamHandle out;
  {
    py::gil_scoped_release no_gil;
    Check(Runtime::Process().TeamSplitStrided(team, start, stride, size, &out));
  }
  return Wrap(out);
}

py::tuple Split2d(py::handle parent, py::handle xrange_arg) {
  const TeamHandle team = TeamArgument("team_split_2d", parent);
  const int xrange = IntArgument("team_split_2d", "xrange", xrange_arg);
  TeamHandle xteam, yteam;
  {
    py::gil_scoped_release no_gil;
    Check(Runtime::Process().TeamSplit2d(team, xrange, &xteam, &yteam));
  }
  return py::make_tuple(Wrap(xteam), Wrap(yteam));
}

py::object Create(py::handle pes_arg) {
  // Called by shmem.team(group) with the group's PEs: its operation is the user's call.
  if (!PyList_Check(pes_arg.ptr()) && !PyTuple_Check(pes_arg.ptr())) {
    ThrowTypeError("team", "pes", "a list of ints", TypeName(pes_arg));
  }
  std::vector<int> pes;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(pes_arg)) {
    pes.push_back(IntArgument("team", "pes item", item));
  }
  TeamHandle out;
  {
    py::gil_scoped_release no_gil;
    Check(Runtime::Process().TeamCreate(pes, &out));
  }
  return Wrap(out);
}

void Destroy(py::handle team_arg) {
  const TeamHandle team = TeamArgument("team_destroy", team_arg);
  py::gil_scoped_release no_gil;
  Check(Runtime::Process().TeamDestroy(team));
}

// What the team is now. A question, not a failed call: a refusal is raised unnoted.
py::dict Describe(py::handle team_arg) {
  const TeamHandle team = TeamArgument("team_describe", team_arg);
  TeamInfo info;
  const Status status = Runtime::Process().DescribeTeam(team, &info);
  if (!status.ok()) ThrowUnnoted(status);
  py::dict out;
  out["slot"] = info.slot;
  out["pes"] = py::tuple(py::cast(info.pes));
  out["my_pe"] = info.my_pe;
  out["sequence"] = info.sequence;
  out["first_sequence"] = info.first_sequence;
  out["handles"] = info.handles;
  out["predefined"] = info.predefined;
  return out;
}

int TeamPe(py::handle team_arg, py::handle pe_arg) {
  return WorldPe("team_pe", team_arg, IntArgument("team_pe", "pe", pe_arg));
}

std::string Repr(const TeamObject& object) {
  if (object.kind != TeamObject::Kind::kCreated) {
    return "TeamHandle(" + std::string(KindName(object.kind)) + ")";
  }
  return "TeamHandle(lifecycle=" + std::to_string(object.handle.lifecycle) +
         ", slot=" + std::to_string(object.handle.slot) +
         ", id=" + std::to_string(object.handle.id) + ")";
}

}  // namespace

TeamHandle TeamArgument(std::string_view operation, const py::handle& team) {
  if (team.is_none()) return kWorldTeam;
  const py::object& cls = TeamClass();
  if (cls) {
    const int is_team = PyObject_IsInstance(team.ptr(), cls.ptr());
    if (is_team < 0) throw py::error_already_set();
    if (is_team == 1) {
      static const py::handle kNative = PyUnicode_InternFromString("_native");  // never freed
      if (const TeamObject* object = AsTeamObject(team.attr(kNative))) return Resolve(*object);
    }
  }
  if (const TeamObject* object = AsTeamObject(team)) return Resolve(*object);
  ThrowTypeError(operation, "team", "a shmem.Team or None", TypeName(team));
}

int WorldPe(std::string_view operation, const py::handle& team, int team_pe) {
  return WorldPe(operation, TeamArgument(operation, team), team_pe);
}

int WorldPe(std::string_view operation, const TeamHandle& handle, int team_pe) {
  if (handle == kWorldTeam) return team_pe;  // the world numbers its PEs as the world does
  int world_pe = -1;
  const Status status = Runtime::Process().TeamPe(handle, team_pe, &world_pe);
  if (!status.ok()) Throw(status.Retagged(operation, "validate"));
  return world_pe;
}

void RegisterTeams(py::module_& m) {
  py::class_<TeamObject>(m, "TeamHandle",
                         "A native team handle (shmem.Team holds one; made only natively).")
      .def_property_readonly("kind", [](const TeamObject& o) { return KindName(o.kind); })
      .def_property_readonly("lifecycle", [](const TeamObject& o) { return o.handle.lifecycle; })
      .def_property_readonly("slot", [](const TeamObject& o) { return o.handle.slot; })
      .def_property_readonly("id", [](const TeamObject& o) { return o.handle.id; })
      // The team as the custom ops take it (ops.cc): [] the world, [-1] the node team,
      // [lifecycle, slot, id] a made team.
      .def_property_readonly("op_code", [](const TeamObject& o) {
        py::list code;
        if (o.kind == TeamObject::Kind::kNode) code.append(-1);
        if (o.kind == TeamObject::Kind::kCreated) {
          code.append(o.handle.lifecycle);
          code.append(o.handle.slot);
          code.append(o.handle.id);
        }
        return code;
      })
      .def("__repr__", &Repr);
  m.def("set_team_class", [](py::object cls) { TeamClass() = std::move(cls); },
        "Registers the package's Team class (team= arguments are its instances).");
  m.def("predefined_team", [](const std::string& name) {
    if (name == "world") return TeamObject{TeamObject::Kind::kWorld, {}};
    if (name == "node") return TeamObject{TeamObject::Kind::kNode, {}};
    ThrowValueError("predefined_team", "name", "one of world, node", "'" + name + "'");
  }, py::arg("name"), "The marker of a predefined team (the current lifecycle's).");
  m.def("team_split_strided", &SplitStrided, py::arg("parent"), py::arg("start"),
        py::arg("stride"), py::arg("size"),
        "Collective over the parent: the team of parent PEs start, start + stride, ... (None "
        "on a PE outside it).");
  m.def("team_split_2d", &Split2d, py::arg("parent"), py::arg("xrange"),
        "Collective over the parent: (row team, column team) of a 2-D grid xrange wide.");
  m.def("team_create", &Create, py::arg("pes"),
        "Collective over the members: the team of world PEs `pes`, in that order.");
  m.def("team_destroy", &Destroy, py::arg("team"), "Collective over the team: ends the handle.");
  m.def("team_describe", &Describe, py::arg("team"), "What the team is now (process-local).");
  m.def("team_pe", &TeamPe, py::arg("team"), py::arg("pe"),
        "The world PE number of the team's PE `pe`.");
}

}  // namespace hyper_parallel::shmem::binding
