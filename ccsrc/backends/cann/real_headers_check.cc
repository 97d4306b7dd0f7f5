// Compiled only when a CANN SHMEM install is visible at configure time (ASCEND_HOME_PATH and a
// host/shmem_host_def.h under it): checks that the hand-written ABI of vendor_abi.h matches the
// real headers, field by field. Compiling is the test; there is nothing to run.
#include <cstddef>

#include "host/shmem_host_def.h"
#if __has_include("host_device/shmem_common_types.h")
#include "host_device/shmem_common_types.h"
#endif
#if __has_include("host/init/shmem_host_init.h")
#include "host/init/shmem_host_init.h"
#endif
#if __has_include("host/data_plane/shmem_host_rma.h")
#include "host/data_plane/shmem_host_rma.h"
#endif
#if __has_include("host/data_plane/shmem_host_so.h")
#include "host/data_plane/shmem_host_so.h"
#endif

#include "backends/cann/vendor_abi.h"

namespace ours = hyper_parallel::shmem::cann;

// The optional attributes.
static_assert(sizeof(::aclshmem_init_optional_attr_t) ==
              sizeof(ours::aclshmem_init_optional_attr_t));
static_assert(offsetof(::aclshmem_init_optional_attr_t, version) ==
              offsetof(ours::aclshmem_init_optional_attr_t, version));
static_assert(offsetof(::aclshmem_init_optional_attr_t, data_op_engine_type) ==
              offsetof(ours::aclshmem_init_optional_attr_t, data_op_engine_type));
static_assert(offsetof(::aclshmem_init_optional_attr_t, shm_init_timeout) ==
              offsetof(ours::aclshmem_init_optional_attr_t, shm_init_timeout));
static_assert(offsetof(::aclshmem_init_optional_attr_t, shm_create_timeout) ==
              offsetof(ours::aclshmem_init_optional_attr_t, shm_create_timeout));
static_assert(offsetof(::aclshmem_init_optional_attr_t, control_operation_timeout) ==
              offsetof(ours::aclshmem_init_optional_attr_t, control_operation_timeout));
static_assert(offsetof(::aclshmem_init_optional_attr_t, sockFd) ==
              offsetof(ours::aclshmem_init_optional_attr_t, sockFd));

// The init attributes: 120 bytes from v1.5.0 on, 112 before (no instance_id).
static_assert(sizeof(::aclshmemx_init_attr_t) == sizeof(ours::aclshmemx_init_attr_t) ||
              sizeof(::aclshmemx_init_attr_t) == ours::kInitAttrSizeBeforeV15);
static_assert(offsetof(::aclshmemx_init_attr_t, my_pe) ==
              offsetof(ours::aclshmemx_init_attr_t, my_pe));
static_assert(offsetof(::aclshmemx_init_attr_t, n_pes) ==
              offsetof(ours::aclshmemx_init_attr_t, n_pes));
static_assert(offsetof(::aclshmemx_init_attr_t, ip_port) ==
              offsetof(ours::aclshmemx_init_attr_t, ip_port));
static_assert(offsetof(::aclshmemx_init_attr_t, local_mem_size) ==
              offsetof(ours::aclshmemx_init_attr_t, local_mem_size));
static_assert(offsetof(::aclshmemx_init_attr_t, option_attr) ==
              offsetof(ours::aclshmemx_init_attr_t, option_attr));
static_assert(offsetof(::aclshmemx_init_attr_t, comm_args) ==
              offsetof(ours::aclshmemx_init_attr_t, comm_args));

// The unique id.
static_assert(sizeof(::aclshmemx_uniqueid_t) == sizeof(ours::aclshmemx_uniqueid_t));
static_assert(offsetof(::aclshmemx_uniqueid_t, version) ==
              offsetof(ours::aclshmemx_uniqueid_t, version));
static_assert(offsetof(::aclshmemx_uniqueid_t, internal) ==
              offsetof(ours::aclshmemx_uniqueid_t, internal));

// Enum values the adapter passes or maps.
static_assert(static_cast<int>(::ACLSHMEMX_INIT_WITH_UNIQUEID) ==
              ours::ACLSHMEMX_INIT_WITH_UNIQUEID);
static_assert(static_cast<int>(::ACLSHMEMX_INIT_WITH_DEFAULT) == ours::ACLSHMEMX_INIT_WITH_DEFAULT);
static_assert(static_cast<int>(::ACLSHMEM_DATA_OP_MTE) == ours::ACLSHMEM_DATA_OP_MTE);
static_assert(static_cast<int>(::ACLSHMEM_SIGNAL_SET) == ours::ACLSHMEM_SIGNAL_SET);
static_assert(static_cast<int>(::ACLSHMEM_SIGNAL_ADD) == ours::ACLSHMEM_SIGNAL_ADD);
static_assert(static_cast<int>(::ACLSHMEM_TIMEOUT_ERROR) == ours::ACLSHMEM_TIMEOUT_ERROR);
static_assert(static_cast<int>(::ACLSHMEM_SMEM_ERROR) == ours::ACLSHMEM_SMEM_ERROR);
