/* Hyper-Parallel SHMEM's OpenSHMEM extensions (docs/openshmem.md): none beyond the
 * specification yet; programs that include shmemx.h get shmem.h. */
#ifndef HPS_OPENSHMEM_SHMEMX_H
#define HPS_OPENSHMEM_SHMEMX_H
#include "shmem.h"
#endif /* HPS_OPENSHMEM_SHMEMX_H */
