// Must NOT compile: creating a stream from a stream executor is forbidden by the table in
// call_sites.h. A ctest entry compiles this file and passes only when the compiler rejects it
// with the table's static_assert message.
#include "backends/host/host_stream.h"

namespace hyper_parallel::shmem::host {

void CreateStreamOnExecutor() { auto stream = HostStream::Create<CallSite::kStreamExecutor>(); }

}  // namespace hyper_parallel::shmem::host
