/* Traditional include path of shmemx.h (docs/openshmem.md). */
#include "../shmemx.h"
